"""`dreamwell export` and `dreamwell import`: JSON Lines of every field, and the formats of the
servers people come from (the official knowledge-graph server, mcp-memory-service), told
apart by content, never by file name. Import plans everything first and writes through
`LongTermStore.apply` in batches; vectors are left for the server's background backfill."""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import sys
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import IO, Any

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, ValidationError

from dreamwell.server.stats import ensure_format
from dreamwell.stores import (
    MAX_CONTENT_CHARS,
    LongTermStore,
    MemoryEntry,
    StoreError,
    check_category,
    check_tags,
    entry_to_dict,
    fold_text,
    utcnow,
)

BATCH = 5_000
SHOWN_BAD = 20
MAX_TAGS = 32  # SPEC §1
VECTOR_MODEL = "minilm-l6-v2-int8"  # OnnxMiniLM().name
IMPORTED_AS = "imported_as"  # metadata: ids of imported records reinforced into this entry
FOREIGN = ("knowledge-graph", "mcp-memory-service")  # metadata.source of foreign records
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
            metadata=dict(self.metadata),
            archived_at=self.archived_at,
        )


def _content(text: object) -> str:
    if not isinstance(text, str) or not text.strip():
        raise BadRecord("content is empty or not text")
    if len(text) > MAX_CONTENT_CHARS:
        raise BadRecord(f"content is {len(text)} characters; the limit is {MAX_CONTENT_CHARS}")
    return text.strip()


def _category(value: object) -> str | None:
    if value is not None and not isinstance(value, str):
        raise BadRecord("category must be text")
    try:
        return check_category(value)
    except StoreError as exc:
        raise BadRecord(str(exc)) from exc


def _tags(value: object) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, str | list):
        raise BadRecord("tags must be a list of strings or a comma-separated string")
    try:
        return check_tags(value)
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
        last_seen_at=when,
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


def from_item(item: object, now: datetime) -> list[MemoryEntry]:
    """Any one record, recognised by its keys. Only dreamwell's own records keep their id and
    times; records from other servers get a stable id and `metadata.source`."""
    if not isinstance(item, dict):
        raise BadRecord("expected a JSON object")
    if item.get("type") in ("entity", "relation") or {"entityType", "observations"} & item.keys():
        return from_graph(item, now)
    if "id" in item and "created_at" in item and "content" in item:
        try:
            return [ExportLine.model_validate(item).entry()]
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"]) or "record"
            raise BadRecord(f"{where}: {first['msg']}") from None
    if "content" in item:
        return from_memory_service(item, now)
    raise BadRecord("not a dreamwell, knowledge-graph or mcp-memory-service record")


def _items(text: str) -> Iterator[tuple[str, object]]:
    """(where, parsed item) for a whole JSON document or JSON Lines; parse errors as items."""
    try:
        doc = json.loads(text)
    except json.JSONDecodeError:
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
    for number, line in enumerate(text.splitlines(), 1):
        if line.strip():
            try:
                yield f"line {number}", json.loads(line)
            except json.JSONDecodeError as exc:
                yield f"line {number}", BadRecord(f"not JSON ({exc.msg})")


def read_records(text: str, now: datetime | None = None) -> tuple[list[MemoryEntry], list[str]]:
    """Every memory the text holds, and one message per bad record (`line 7: why`)."""
    now = now or utcnow()
    found: list[MemoryEntry] = []
    bad: list[str] = []
    for where, item in _items(text):
        try:
            if isinstance(item, BadRecord):
                raise item
            found.extend(from_item(item, now))
        except (BadRecord, StoreError) as exc:
            bad.append(f"{where}: {exc}")
    return found, bad


# ---- planning and writing ------------------------------------------------------------------
@dataclass
class Plan:
    upserts: dict[str, MemoryEntry] = field(default_factory=dict)
    added: int = 0
    reinforced: int = 0
    updated: int = 0
    unchanged: int = 0


def _dup_key(e: MemoryEntry) -> tuple[str, str]:
    return (e.category or "", fold_text(e.content) or e.content)


class Planner:
    """What importing records into a store holding `existing` changes (SPEC §3): a known id
    is left alone (or, for dreamwell's own records, replaced by a newer version of itself;
    foreign records carry no version); the same text live in the same category reinforces;
    anything else is added. Remembers what it planned, batch after batch."""

    def __init__(self, existing: Iterable[MemoryEntry]) -> None:
        self.by_id = {e.id: e for e in existing}
        self.seen = set(self.by_id)
        for e in self.by_id.values():
            self.seen.update(i for i in e.metadata.get(IMPORTED_AS, "").split(",") if i)
        self.dups = {_dup_key(e): e.id for e in self.by_id.values() if e.live}

    def plan(self, records: Iterable[MemoryEntry], now: datetime) -> Plan:
        plan = Plan()
        for r in records:
            self._one(plan, r, now)
        self.by_id.update(plan.upserts)
        return plan

    def _one(self, plan: Plan, r: MemoryEntry, now: datetime) -> None:
        current = plan.upserts.get(r.id) or self.by_id.get(r.id)
        if r.id in self.seen:
            own = r.metadata.get("source") not in FOREIGN
            if own and current is not None and r != current and r.updated_at > current.updated_at:
                plan.upserts[r.id] = r
                plan.updated += 1
            else:
                plan.unchanged += 1
            return
        self.seen.add(r.id)
        target_id = self.dups.get(_dup_key(r)) if r.live else None
        if target_id is None:
            plan.upserts[r.id] = r
            plan.added += 1
            if r.live:
                self.dups[_dup_key(r)] = r.id
            return
        target = plan.upserts.get(target_id) or self.by_id[target_id]
        ids = [i for i in target.metadata.get(IMPORTED_AS, "").split(",") if i]
        plan.upserts[target_id] = replace(
            target,
            tags=tuple(dict.fromkeys(target.tags + r.tags))[:MAX_TAGS],
            last_seen_at=max(target.last_seen_at, r.last_seen_at),
            updated_at=now,
            reinforcement_count=target.reinforcement_count + 1,
            metadata={**target.metadata, IMPORTED_AS: ",".join([*ids, r.id])},
        )
        plan.reinforced += 1


def _progress(total: int, what: str) -> Any:
    """A tqdm bar on a terminal; plain lines (one per batch) otherwise."""
    from tqdm import tqdm

    return tqdm(total=total, desc=what, unit=" memories", disable=not sys.stderr.isatty())


def write_batches(
    store: LongTermStore, records: Sequence[MemoryEntry], now: datetime, batch: int = BATCH
) -> Plan:
    """Plan and write batch by batch, each through one `apply` (one lock, one LanceDB write,
    one index commit). When another process wrote since our last batch, plan the next one on
    a fresh snapshot, so a server's concurrent change is not overwritten by a stale plan."""
    total = Plan()
    planner = Planner(store.entries(include_archived=True))
    seen_version = store.version()
    with _progress(len(records), "importing") as bar:
        for start in range(0, len(records), batch):
            chunk = records[start : start + batch]
            if store.version() != seen_version:
                planner = Planner(store.entries(include_archived=True))
            plan = planner.plan(chunk, now)
            store.apply(list(plan.upserts.values()))
            seen_version = store.version()
            for name in ("added", "reinforced", "updated", "unchanged"):
                setattr(total, name, getattr(total, name) + getattr(plan, name))
            bar.update(len(chunk))
            if bar.disable:
                sys.stderr.write(f"imported {start + len(chunk)}/{len(records)}\n")
    return total


def import_file(data_dir: Path, text: str, skip_bad: bool) -> tuple[Plan, list[str]]:
    """Read and validate everything, then write in batches. With bad records and no
    `skip_bad`, nothing is written."""
    now = utcnow()
    records, bad = read_records(text, now)
    if bad and not skip_bad:
        return Plan(), bad
    ensure_format(data_dir)
    store = LongTermStore(data_dir, embedder=None, embed_on_save=False)
    return write_batches(store, records, now), bad


def import_command(data_dir: Path, args: argparse.Namespace) -> int:
    try:
        text = sys.stdin.read() if args.file == "-" else Path(args.file).read_text("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        sys.stderr.write(f"dreamwell: cannot read {args.file}: {exc}\n")
        return 1
    try:
        plan, bad = import_file(data_dir, text, args.skip_bad)
    except (StoreError, ValueError) as exc:
        sys.stderr.write(f"dreamwell: {exc}\n")
        return 1
    for message in bad[:SHOWN_BAD]:
        sys.stderr.write(f"{args.file}: {message}\n")
    if len(bad) > SHOWN_BAD:
        sys.stderr.write(f"{args.file}: … and {len(bad) - SHOWN_BAD} more bad records\n")
    if bad and not args.skip_bad:
        sys.stderr.write(
            f"dreamwell: {len(bad)} bad record(s), nothing imported; fix them or pass "
            "--skip-bad to import the rest\n"
        )
        return 1
    sys.stdout.write(
        f"Imported {plan.added} new, reinforced {plan.reinforced}, updated {plan.updated}, "
        f"{plan.unchanged} already there, {len(bad)} skipped. Vectors are computed by the "
        "server in the background.\n"
    )
    return 0


# ---- export --------------------------------------------------------------------------------
def export_lines(
    entries: Sequence[MemoryEntry], vectors: dict[str, list[float]] | None = None
) -> Iterator[str]:
    for e in sorted(entries, key=lambda e: (e.created_at, e.id)):
        data = entry_to_dict(e)
        if vectors is not None and e.id in vectors:
            data["vector"] = [float(x) for x in vectors[e.id]]
            data["vector_model"] = VECTOR_MODEL
        yield json.dumps(data, ensure_ascii=False) + "\n"


def _stored_vectors(store: LongTermStore) -> dict[str, list[float]]:
    """Vectors of the embedded model as stored. LongTermStore has no public reader of raw
    vectors yet, so this reads its table (the only reach into the store's internals)."""
    found: dict[str, list[float]] = store._table.vectors(VECTOR_MODEL)
    return found


def _write_all(out: IO[str], lines: Iterable[str], total: int) -> int:
    count = 0
    with _progress(total, "exporting") as bar:
        for line in lines:
            out.write(line)
            count += 1
            if count % 1000 == 0 or count == total:
                bar.update(count - bar.n)
    return count


def export_command(data_dir: Path, args: argparse.Namespace) -> int:
    if not (data_dir / "lancedb").exists():
        sys.stderr.write(f"dreamwell: no memory at {data_dir}; check --data-dir and --tenant\n")
        return 1
    store = LongTermStore(data_dir, embedder=None, embed_on_save=False)
    vectors = _stored_vectors(store) if args.with_vectors else None
    entries = store.entries(args.include_archived)
    lines = export_lines(entries, vectors)
    if args.output:
        with Path(args.output).open("w", encoding="utf-8") as out:
            count = _write_all(out, lines, len(entries))
    else:
        count = _write_all(sys.stdout, lines, len(entries))
    sys.stderr.write(f"exported {count} memories\n")
    return 0
