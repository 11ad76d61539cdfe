"""Records and the validation rules of docs/data-directory.md, shared by both stores."""

from __future__ import annotations

import hashlib
import re
import sys
import unicodedata
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any, TypeAlias

from dreamwell.stores.errors import InvalidInput

if TYPE_CHECKING:  # numpy is not imported before the MCP handshake (tests/test_cold_start.py)
    import numpy as np
    import numpy.typing as npt

Vector: TypeAlias = "npt.NDArray[np.float32]"
VectorLike: TypeAlias = "Sequence[float] | Vector"  # a vector as logged (list) or held (array)

MAX_CONTENT_CHARS = 32_000
MAX_CATEGORY_CHARS = 200
MAX_TAG_CHARS = 64
MAX_TAGS = 32
MAX_KEY_CHARS = 256
MAX_VALUE_BYTES = 1024 * 1024
MAX_QUERY_CHARS = 10_000
MAX_TTL_MINUTES = 10_080  # working memory: 7 days

_CATEGORY_RE = re.compile(r"^[A-Za-z0-9_-]+(/[A-Za-z0-9_-]+)*$")
_SEGMENT_RE = re.compile(r"^[A-Za-z0-9_.:-]+$")
_TAG_BAD = re.compile(r"[\x00-\x1f,]")


def utcnow() -> datetime:
    return datetime.now(timezone.utc)


def new_id() -> str:
    import uuid  # here: uuid imports platform, ~12 ms of every hook process (docs/claude-code.md)

    return uuid.uuid4().hex[:12]


# metadata key: the id of the memory the same caller saved just before this one (contextual
# memories: each is also found through its neighbours' words and meaning)
FOLLOWS = "follows"
CONTEXT_SECONDS = 300  # saved at most this long after the caller's previous memory
# metadata keys: the key and the name of the project a memory belongs to (stores/projects.py);
# a memory without PROJECT is global, seen from every project
PROJECT = "project"
PROJECT_NAME = "project_name"


class Metadata(Mapping[str, str]):
    """An entry's metadata: immutable, and small in memory. One flat tuple of (key, value)
    pairs sorted by key, keys interned. Every memory an agent saves in a stream carries
    {"follows": <id>}: 301 bytes each as a dict from json.loads (a one-key dict is 184 and
    each loads makes its own key string), 157 as this: 14 MiB less at 100,000 memories."""

    __slots__ = ("_items",)
    _items: tuple[str, ...]

    def __init__(self, items: Mapping[str, str] | Iterable[tuple[str, str]] = ()) -> None:
        pairs = dict(items)
        flat: list[str] = []
        for key in sorted(pairs):
            flat += (sys.intern(str(key)), str(pairs[key]))
        self._items = tuple(flat)

    @staticmethod
    def of(items: Mapping[str, str]) -> Metadata:
        """`items` as Metadata (itself if it is already; the shared empty one if empty)."""
        if type(items) is Metadata:
            return items
        return Metadata(items) if items else NO_METADATA

    def __getitem__(self, key: str) -> str:
        items = self._items
        for i in range(0, len(items), 2):
            if items[i] == key:
                return items[i + 1]
        raise KeyError(key)

    def __iter__(self) -> Iterator[str]:
        return iter(self._items[::2])

    def __len__(self) -> int:
        return len(self._items) // 2

    def __eq__(self, other: object) -> bool:
        if type(other) is Metadata:
            return self._items == other._items  # both sorted by key
        return super().__eq__(other)

    def __hash__(self) -> int:  # immutable, so it may be hashed (and be a field's default)
        return hash(self._items)

    def __repr__(self) -> str:
        return repr(dict(self))

    def __reduce__(self) -> tuple[Any, ...]:
        return (Metadata, (dict(self),))


NO_METADATA = Metadata()


@dataclass(frozen=True, slots=True)  # slots: 100,000 of them are held in memory
class MemoryEntry:
    id: str
    content: str
    category: str | None
    tags: tuple[str, ...]
    created_at: datetime
    updated_at: datetime
    last_seen_at: datetime
    reinforcement_count: int = 1
    importance: float = 0.5
    score: float = 0.0
    last_used_at: datetime | None = None
    decayed_at: datetime | None = None
    metadata: Mapping[str, str] = NO_METADATA  # any mapping given is held as Metadata
    archived_at: datetime | None = None

    def __post_init__(self) -> None:
        if type(self.metadata) is not Metadata:
            object.__setattr__(self, "metadata", Metadata.of(self.metadata))

    @property
    def live(self) -> bool:
        return self.archived_at is None


@dataclass(frozen=True)
class WorkingEntry:
    key: str
    value: str
    stored_at: datetime
    expires_at: datetime
    category: str | None = None
    tags: tuple[str, ...] = ()


def fold_text(text: str) -> str:
    """Case, whitespace and punctuation folded: the identity used for exact duplicates."""
    norm = unicodedata.normalize("NFKC", text).casefold()
    kept = "".join(ch if ch.isalnum() else " " for ch in norm)
    return " ".join(kept.split())


def text_hash(text: str) -> str:
    """A short digest of a text (which vector belongs to which text)."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def _encodable(text: str, what: str) -> None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InvalidInput(
            f"{what} contains an unpaired surrogate (\\u{ord(text[exc.start]):04x}); send valid "
            "Unicode text."
        ) from None


def check_content(content: str) -> str:
    _encodable(content, "content")
    if not content.strip():
        raise InvalidInput("content is empty; pass the fact to remember as text.")
    if len(content) > MAX_CONTENT_CHARS:
        raise InvalidInput(
            f"content is {len(content)} characters; the limit is {MAX_CONTENT_CHARS}. "
            "Split it into several memories."
        )
    return content.strip()


def check_category(category: str | None) -> str | None:
    """A category path such as `user-preferences/timezone`; None or '' means none."""
    if category is None or category == "":
        return None
    if len(category) > MAX_CATEGORY_CHARS:
        raise InvalidInput(
            f"category is {len(category)} characters; the limit is {MAX_CATEGORY_CHARS}."
        )
    if not _CATEGORY_RE.match(category):
        raise InvalidInput(
            f"category '{category}' is not valid: use segments of letters, digits, '_' or '-' "
            "joined by '/', such as 'user-preferences/timezone'."
        )
    return category


def check_categories(category: str | Iterable[str] | None) -> tuple[str, ...]:
    """One category path or several (a search under any of them); () means none."""
    given = [category] if category is None or isinstance(category, str) else list(category)
    return tuple(dict.fromkeys(c for c in map(check_category, given) if c is not None))


def under_any(category: str | None, prefixes: Sequence[str]) -> bool:
    """Whether `category` lies under one of `prefixes` (at a segment boundary); () is all."""
    cat = category or ""
    return not prefixes or any(cat == p or cat.startswith(p + "/") for p in prefixes)


def check_tags(tags: str | Iterable[str] | None) -> tuple[str, ...]:
    """Tags as a comma-separated string or a list; lowercased, de-duplicated, order kept."""
    if tags is None:
        return ()
    raw = tags.split(",") if isinstance(tags, str) else list(tags)
    out: list[str] = []
    for item in raw:
        if not isinstance(item, str):
            raise InvalidInput('tags must be strings: pass \'a, b\' or ["a", "b"].')
        tag = " ".join(item.split()).lower()
        if not tag:
            continue
        if len(tag) > MAX_TAG_CHARS:
            raise InvalidInput(f"tag '{tag[:20]}…' is longer than {MAX_TAG_CHARS} characters.")
        if _TAG_BAD.search(tag):
            raise InvalidInput(f"tag '{tag}' contains a control character or comma.")
        if tag not in out:
            out.append(tag)
    if len(out) > MAX_TAGS:
        raise InvalidInput(f"{len(out)} tags given; at most {MAX_TAGS} are allowed.")
    return tuple(out)


def check_query(query: str | None) -> str:
    if query is None:
        return ""
    if len(query) > MAX_QUERY_CHARS:
        raise InvalidInput(f"query is {len(query)} characters; the limit is {MAX_QUERY_CHARS}.")
    return query.strip()


def key_segments(key: str, what: str = "key") -> list[str]:
    """Split a working-memory key into validated segments (no empty, '.', '..' segments)."""
    if not key:
        raise InvalidInput(f"{what} is empty.")
    if len(key) > MAX_KEY_CHARS:
        raise InvalidInput(f"{what} is {len(key)} characters; the limit is {MAX_KEY_CHARS}.")
    segments = key.split("/")
    for seg in segments:
        if seg in ("", ".", "..") or not _SEGMENT_RE.match(seg):
            raise InvalidInput(
                f"{what} '{key}' is not valid: segments are letters, digits, '_', '.', ':' or '-', "
                "separated by single '/', with no empty, '.' or '..' segment."
            )
    return segments


def check_namespace(namespace: str) -> str:
    """A namespace: exactly two segments (`session/abc123`)."""
    if len(key_segments(namespace, "namespace")) != 2:
        raise InvalidInput(
            f"namespace '{namespace}' must have two segments, such as 'session/abc123'."
        )
    return namespace


def category_prefixes(category: str | None) -> list[str]:
    """'a/b/c' -> ['a', 'a/b', 'a/b/c']: the terms a category-prefix filter matches."""
    if not category:
        return []
    parts = category.split("/")
    return ["/".join(parts[: i + 1]) for i in range(len(parts))]


_TIME_FIELDS = (
    "created_at",
    "updated_at",
    "last_seen_at",
    "last_used_at",
    "decayed_at",
    "archived_at",
)


def entry_to_dict(entry: MemoryEntry) -> dict[str, object]:
    """A JSON-ready dict of every field (times as ISO 8601), e.g. for dream reports."""
    out: dict[str, object] = {
        "id": entry.id,
        "content": entry.content,
        "category": entry.category,
        "tags": list(entry.tags),
        "reinforcement_count": entry.reinforcement_count,
        "importance": entry.importance,
        "score": entry.score,
        "metadata": dict(entry.metadata),
    }
    for name in _TIME_FIELDS:
        value = getattr(entry, name)
        out[name] = value.isoformat() if value is not None else None
    return out


def entry_from_dict(data: Mapping[str, object]) -> MemoryEntry:
    """The inverse of entry_to_dict."""
    times = {n: datetime.fromisoformat(str(data[n])) if data.get(n) else None for n in _TIME_FIELDS}
    created = times["created_at"]
    if created is None:
        raise ValueError("an entry needs created_at")
    tags = data.get("tags") or []
    metadata = data.get("metadata") or {}
    assert isinstance(tags, list) and isinstance(metadata, dict)
    return MemoryEntry(
        id=str(data["id"]),
        content=str(data["content"]),
        category=None if data.get("category") is None else str(data["category"]),
        tags=tuple(str(t) for t in tags),
        created_at=created,
        updated_at=times["updated_at"] or created,
        last_seen_at=times["last_seen_at"] or created,
        reinforcement_count=int(str(data.get("reinforcement_count", 1))),
        importance=float(str(data.get("importance", 0.5))),
        score=float(str(data.get("score", 0.0))),
        last_used_at=times["last_used_at"],
        decayed_at=times["decayed_at"],
        metadata=Metadata.of(metadata),  # which makes keys and values strings
        archived_at=times["archived_at"],
    )


TENANT_RE = re.compile(r"[A-Za-z0-9_-]{1,64}")


def check_tenant(name: str) -> str:
    if not TENANT_RE.fullmatch(name):
        raise InvalidInput(f"tenant name {name!r} must be 1-64 letters, digits, '-' or '_'.")
    return name
