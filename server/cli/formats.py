"""The files `dreamwell import` reads, told apart by content, never by file name: our own
JSON Lines export (every field), the official knowledge-graph server's `memory.json`/`.jsonl`
and mcp-memory-service's JSON export. Every record is validated; a bad one becomes a message
naming its line."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Iterator
from datetime import datetime, timezone
from typing import Any

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, ValidationError

from dreamwell.stores import (
    MAX_CONTENT_CHARS,
    InvalidInput,
    MemoryEntry,
    StoreError,
    check_category,
    check_tags,
    fold_text,
    redact,
    redact_category,
    redact_content,
    redact_tags,
    utcnow,
)

MAX_TAGS = 32  # docs/data-directory.md
FOREIGN = ("knowledge-graph", "mcp-memory-service")  # metadata.source of foreign records
_OWN = {"id", "content", "created_at", "updated_at", "last_seen_at"}  # keys of our export
# keys only our export has (mcp-memory-service has content, tags, created_at, updated_at)
_OURS_ONLY = {"category", "last_seen_at", "reinforcement_count", "importance", "archived_at"}
_OUR_ID = re.compile(r"^[0-9a-f]{12}$")
_TIMES = ("created_at", "updated_at", "last_seen_at")
_NOT_CATEGORY = re.compile(r"[^A-Za-z0-9_/-]+")


class BadRecord(ValueError):
    """One record of an import file that cannot become a memory; the text says why."""


# ---- reading -------------------------------------------------------------------------------
class ExportLine(BaseModel):
    """One line of `dreamwell export`: every field of a MemoryEntry, optionally its vector."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str = Field(pattern=r"^[0-9a-f]{12}$")
    content: str = Field(min_length=1, max_length=MAX_CONTENT_CHARS)
    category: str | None = None
    tags: list[str] = Field(default_factory=list, max_length=MAX_TAGS)
    created_at: AwareDatetime
    updated_at: AwareDatetime
    last_seen_at: AwareDatetime
    reinforcement_count: int = Field(default=1, ge=1)
    importance: float = Field(default=0.5, ge=0.0, le=1.0)
    score: float = Field(default=0.0, ge=-10.0, le=10.0)
    last_used_at: AwareDatetime | None = None
    decayed_at: AwareDatetime | None = None
    metadata: dict[str, str] = Field(default_factory=dict)
    archived_at: AwareDatetime | None = None
    vector: list[float] | None = None
    vector_model: str | None = None

    def entry(self) -> MemoryEntry:
        return MemoryEntry(
            id=self.id,
            content=_content(self.content),
            category=_category(self.category),
            tags=_tags(self.tags),
            created_at=self.created_at,
            updated_at=self.updated_at,
            last_seen_at=self.last_seen_at,
            reinforcement_count=self.reinforcement_count,
            importance=self.importance,
            score=self.score,
            last_used_at=self.last_used_at,
            decayed_at=self.decayed_at,
            metadata={k: redact(v) for k, v in self.metadata.items()},
            archived_at=self.archived_at,
        )


def _content(text: object) -> str:
    if not isinstance(text, str) or not text.strip():
        raise BadRecord("content is empty or not text")
    if len(text) > MAX_CONTENT_CHARS:
        raise BadRecord(f"content is {len(text)} characters; the limit is {MAX_CONTENT_CHARS}")
    try:  # secrets never reach the store, whichever door they come through
        return redact_content(text.strip())[0].strip()
    except InvalidInput as exc:
        raise BadRecord(str(exc)) from None


def _category(value: object) -> str | None:
    if value is not None and not isinstance(value, str):
        raise BadRecord("category must be text")
    try:
        return check_category(redact_category(value)[0])
    except StoreError as exc:
        raise BadRecord(str(exc)) from exc


def _tags(value: object) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, str | list):
        raise BadRecord("tags must be a list of strings or a comma-separated string")
    try:
        return check_tags(redact_tags(value)[0])
    except StoreError as exc:
        raise BadRecord(str(exc)) from exc


def _as_category(value: object) -> str | None:
    """A foreign type name (`entityType`, `memory_type`) as a category path."""
    if not isinstance(value, str):
        return None
    cleaned = "/".join(s for s in _NOT_CATEGORY.sub("-", value.strip()).split("/") if s)
    return check_category(cleaned[:200].strip("/")) if cleaned else None


def _when(value: object) -> datetime | None:
    """An ISO 8601 string or a Unix timestamp, as an aware UTC datetime (microseconds)."""
    if value is None or value == "":
        return None
    try:
        if isinstance(value, int | float) and not isinstance(value, bool):
            return datetime.fromtimestamp(float(value), timezone.utc)
        if isinstance(value, str):
            parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
            return parsed if parsed.tzinfo else parsed.replace(tzinfo=timezone.utc)
    except (ValueError, OverflowError, OSError) as exc:
        raise BadRecord(f"time {value!r} is neither ISO 8601 nor a Unix timestamp") from exc
    raise BadRecord(f"time {value!r} is neither ISO 8601 nor a Unix timestamp")


def stable_id(category: str | None, content: str) -> str:
    """Records from other servers have no id of ours: derive one from what they say, so that
    importing the same file again finds them already there."""
    key = f"{category or ''}\0{fold_text(content) or content}"
    return hashlib.sha256(key.encode()).hexdigest()[:12]


def foreign(
    content: object,
    category: str | None,
    tags: Iterable[str] | str | None,
    created: datetime | None,
    source: str,
    now: datetime,
) -> MemoryEntry:
    text = _content(content)
    category = _category(category)
    when = created or now
    return MemoryEntry(
        id=stable_id(category, text),
        content=text,
        category=category,
        tags=_tags(list(tags) if tags is not None and not isinstance(tags, str) else tags),
        created_at=when,
        updated_at=when,
        last_seen_at=now,  # the import: decay's grace starts here, not at the old date
        metadata={"source": source},
    )


def _graph_name(value: object, what: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise BadRecord(f"a knowledge-graph {what} needs a name")
    return value.strip()


def from_graph(item: dict[str, Any], now: datetime) -> list[MemoryEntry]:
    """The official knowledge-graph server: one memory per observation of an entity (category
    = entityType, tagged with the entity's name); a relation becomes a sentence."""
    src = FOREIGN[0]
    if item.get("type") == "relation" or "relationType" in item:
        a, b = _graph_name(item.get("from"), "relation"), _graph_name(item.get("to"), "relation")
        verb = str(item.get("relationType") or "relates to").replace("_", " ").strip()
        tags = [a[:64].lower(), b[:64].lower()]
        return [foreign(f"{a} {verb} {b}", "relations", tags, None, src, now)]
    name = _graph_name(item.get("name"), "entity")
    observations = item.get("observations") or []
    if not isinstance(observations, list):
        raise BadRecord("observations must be a list of strings")
    category = _as_category(item.get("entityType"))
    return [
        foreign(f"{name}: {obs}", category, [name[:64].lower()], None, src, now)
        for obs in observations
    ]


def from_memory_service(item: dict[str, Any], now: datetime) -> list[MemoryEntry]:
    """mcp-memory-service's export: content, tags, memory_type (as category), created time."""
    created = _when(item.get("created_at_iso") or item.get("created_at"))
    category = _as_category(item.get("memory_type"))
    tags = item.get("tags")
    if isinstance(tags, list):
        tags = [t for t in tags if isinstance(t, str)]
    return [foreign(item.get("content"), category, tags, created, FOREIGN[1], now)]


def incomplete(item: object) -> list[str]:
    """The fields of our export a record of ours lacks ([] for a whole record of ours, or one
    of another server's): such a record was once read as mcp-memory-service's, and its
    category and id dropped without a word."""
    if not isinstance(item, dict) or item.keys() >= _OWN or "content" not in item:
        return []
    if item.get("type") in ("entity", "relation") or "entityType" in item:
        return []
    ours = bool(_OURS_ONLY & item.keys()) or bool(_OUR_ID.match(str(item.get("id", ""))))
    return sorted(_OWN - item.keys()) if ours else []


def from_partial(item: dict[str, Any], now: datetime) -> MemoryEntry:
    """A record of ours with some fields missing: its id (else a stable one), category, tags
    and whatever else it has are kept; a missing time is its created_at (else now)."""
    content = _content(item.get("content"))
    category = _category(item.get("category"))
    created = item.get("created_at") or now.isoformat()
    filled = item | {"created_at": created}
    if not _OUR_ID.match(str(item.get("id", ""))):  # another tool's id: one of ours instead
        filled["id"] = stable_id(category, content)
    for key in _TIMES:
        filled.setdefault(key, created)
    try:
        return ExportLine.model_validate(filled).entry()
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "record"
        raise BadRecord(f"{where}: {first['msg']}") from None


def from_item(item: object, now: datetime) -> list[MemoryEntry]:
    """Any one record, recognised by its keys. Only dreamwell's own records keep their id and
    times; records from other servers get a stable id and `metadata.source`."""
    if not isinstance(item, dict):
        raise BadRecord("expected a JSON object")
    if item.get("type") in ("entity", "relation") or {"entityType", "observations"} & item.keys():
        return from_graph(item, now)
    if item.keys() >= _OWN:
        try:
            return [ExportLine.model_validate(item).entry()]
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"]) or "record"
            raise BadRecord(f"{where}: {first['msg']}") from None
    if incomplete(item):
        return [from_partial(item, now)]
    if "content" in item:
        return from_memory_service(item, now)
    raise BadRecord("not a dreamwell, knowledge-graph or mcp-memory-service record")


def _items(text: str) -> Iterator[tuple[str, object]]:
    """(where, parsed item) for a whole JSON document or JSON Lines; parse errors as items."""
    try:
        doc = json.loads(text)
    except (json.JSONDecodeError, RecursionError):  # nested too deeply: named line by line
        doc = None
    if isinstance(doc, list):
        yield from ((f"item {i + 1}", x) for i, x in enumerate(doc))
        return
    if isinstance(doc, dict) and isinstance(doc.get("memories"), list):
        yield from ((f"memories[{i}]", x) for i, x in enumerate(doc["memories"]))
        return
    if isinstance(doc, dict) and ({"entities", "relations"} & doc.keys()):
        for key in ("entities", "relations"):
            for i, x in enumerate(doc.get(key) or []):
                yield f"{key}[{i}]", ({"type": key[:-1]} | x) if isinstance(x, dict) else x
        return
    if isinstance(doc, dict):  # one record, possibly spread over several lines
        yield "item 1", doc
        return
    for number, line in enumerate(text.splitlines(), 1):
        if line.strip():
            try:
                yield f"line {number}", json.loads(line)
            except json.JSONDecodeError as exc:
                yield f"line {number}", BadRecord(f"not JSON ({exc.msg})")
            except RecursionError:
                yield f"line {number}", BadRecord("not JSON (nested too deeply)")


def read_records(text: str, now: datetime | None = None) -> tuple[list[MemoryEntry], list[str]]:
    """Every memory the text holds, and one message per bad record (`line 7: why`)."""
    found, bad, _ = read_all(text, now)
    return found, bad


def read_all(
    text: str, now: datetime | None = None
) -> tuple[list[MemoryEntry], list[str], list[str]]:
    """`read_records`, plus one message per record of ours kept although incomplete."""
    now = now or utcnow()
    found: list[MemoryEntry] = []
    bad: list[str] = []
    notes: list[str] = []
    for where, item in _items(text):
        try:
            if isinstance(item, BadRecord):
                raise item
            found.extend(from_item(item, now))
        except (BadRecord, StoreError) as exc:
            bad.append(f"{where}: {exc}")
            continue
        if missing := incomplete(item):
            notes.append(
                f"{where}: a dreamwell record without {', '.join(missing)}; kept its id, "
                "category and tags, and took its created_at (else now) for the missing times"
            )
    return found, bad, notes
