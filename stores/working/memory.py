"""Working memory: TTL scratch space in path namespaces, persisted per top-level segment.

Segments `working-memory/{session,patrol,subagent}.json` are rewritten atomically against
concurrent writers (read, change, write) and re-read whenever another process changed them, so
several server processes on one data directory share one working memory. Where a segment is
kept (a file under a cross-process lock, or an object in the object store replaced with
compare-and-set, so that every replica shares it) is `stores/working/segments.py`'s concern.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import TypeVar

from filelock import FileLock

from dreamwell.stores.errors import InvalidInput, NotFound, StoreError
from dreamwell.stores.model import (
    MAX_TTL_MINUTES,
    MAX_VALUE_BYTES,
    WorkingEntry,
    check_category,
    check_query,
    check_tags,
    key_segments,
    utcnow,
)
from dreamwell.stores.redact import redact_memory, refuse_secret
from dreamwell.stores.working.segments import READ_WAIT, FileSegments, segments_for

logger = logging.getLogger(__name__)

TOP_SEGMENTS = ("session", "patrol", "subagent")
Entries = dict[str, WorkingEntry]
_T = TypeVar("_T")


@dataclass(frozen=True)
class SaveOutcome:
    entry: WorkingEntry
    evicted: str | None


def check_prefix(prefix: str) -> str:
    """A namespace prefix for reads: one or more whole segments under a known top segment."""
    prefix = prefix.strip().rstrip("/")
    segments = key_segments(prefix, "namespace")
    if segments[0] not in TOP_SEGMENTS:
        raise InvalidInput(
            f"namespace '{prefix}' must start with one of: {', '.join(TOP_SEGMENTS)}."
        )
    return prefix


def check_own_namespace(namespace: str) -> str:
    segments = key_segments(namespace, "namespace")
    if len(segments) != 2 or segments[0] not in TOP_SEGMENTS:
        raise InvalidInput(
            f"namespace '{namespace}' must be two segments starting with one of "
            f"{', '.join(TOP_SEGMENTS)}, such as 'session/abc123'."
        )
    return namespace


def under(key: str, prefix: str) -> bool:
    return key == prefix or key.startswith(prefix + "/")


def _to_json(e: WorkingEntry) -> dict[str, object]:
    return {
        "key": e.key,
        "value": e.value,
        "stored_at": e.stored_at.isoformat(),
        "expires_at": e.expires_at.isoformat(),
        "category": e.category,
        "tags": list(e.tags),
    }


def _from_json(d: object, top: str) -> WorkingEntry:
    """One stored item, checked field by field (ValueError / TypeError / StoreError if bad)."""
    if not isinstance(d, dict):
        raise TypeError("an item must be a JSON object")
    key, value, tags = d["key"], d["value"], d.get("tags") or []
    if not isinstance(key, str) or key_segments(key)[0] != top or not isinstance(value, str):
        raise TypeError(f"item key {key!r} or its value is not valid here")
    value.encode("utf-8")  # UnicodeEncodeError (a ValueError) for a lone surrogate
    stored, expires = (datetime.fromisoformat(str(d[k])) for k in ("stored_at", "expires_at"))
    if stored.tzinfo is None or expires.tzinfo is None:
        raise ValueError("times must carry a UTC offset")
    if not isinstance(tags, list) or not all(isinstance(t, str) for t in tags):
        raise TypeError("tags must be a list of strings")
    category = d.get("category")
    if category is not None and not isinstance(category, str):
        raise TypeError("category must be a string")
    return WorkingEntry(key, value, stored, expires, check_category(category), tuple(tags))


class WorkingMemory:
    def __init__(
        self,
        data_dir: Path,
        default_ttl_minutes: int = 5,
        max_per_namespace: int = 50,
        lock_timeout: float = 15.0,
    ) -> None:
        self._storage = segments_for(data_dir, lock_timeout)
        self.default_ttl_minutes = default_ttl_minutes
        self.max_per_namespace = max_per_namespace
        self._mutex = threading.RLock()
        self._files: dict[str, Hashable] = {}  # the stamp of each segment as last read
        self._entries: dict[str, WorkingEntry] = {}
        self._stale: set[str] = set()
        self._damaged: dict[str, Hashable] = {}  # the stamp seen damaged, per segment

    @property
    def _flock(self) -> FileLock:
        """The cross-process lock of a local data directory's working memory."""
        assert isinstance(self._storage, FileSegments)
        return self._storage.lock

    # ---- persistence ----------------------------------------------------------------------
    def _parse(self, top: str, data: bytes | None) -> tuple[list[WorkingEntry], str | None]:
        """The entries of one segment and, if some or all of it could not be read, why."""
        if data is None:
            return [], None
        try:
            raw = json.loads(data.decode("utf-8"))
        except ValueError as exc:  # not UTF-8 or not JSON
            return [], f"cannot be parsed: {exc}"
        if not isinstance(raw, list):
            return [], "is not a JSON list of entries"
        entries: list[WorkingEntry] = []
        bad = 0
        for item in raw:
            try:
                entries.append(_from_json(item, top))
            except (KeyError, TypeError, ValueError, StoreError) as exc:
                bad += 1
                logger.warning(
                    "skipped a malformed working-memory item in %s: %s",
                    self._storage.where(top),
                    exc,
                )
        return entries, (f"{bad} of {len(raw)} items are malformed" if bad else None)

    def _load(self, top: str, now: datetime) -> None:
        try:
            if self._files.get(top) == self._storage.stamp(top):
                return
            data, stamp = self._storage.read(top)
        except StoreError as exc:
            if top not in self._files:
                raise  # nothing held to serve
            logger.warning("serving the working memory this process holds: %s", exc)
            return
        entries, damage = self._parse(top, data)
        self._show(top, {e.key: e for e in entries if e.expires_at > now}, stamp)
        if len(self._segment(top)) < len(entries):
            self._stale.add(top)  # stored still: the next sweep rewrites the segment
        if damage:
            logger.error(
                "working memory file %s %s; serving the %d readable entries, and the file "
                "will be kept aside before the next write",
                self._storage.where(top),
                damage,
                len(entries),
            )
            self._damaged[top] = stamp

    def _refresh(self, now: datetime, tops: Iterable[str] = TOP_SEGMENTS) -> dict[str, StoreError]:
        """Load what changed; a segment the store cannot give now is served as held (its
        error returned, for a read of that segment holding nothing)."""
        failed: dict[str, StoreError] = {}
        for top in tops:
            try:
                self._load(top, now)
            except StoreError as exc:
                failed[top] = exc
        return failed

    def _refreshed(self, now: datetime, top: str = "") -> dict[str, StoreError]:
        """Bring the view up to date for a read, unless a write holds it (a write waiting
        on a slow store): then the read serves the view as it is, without queueing."""
        if not self._mutex.acquire(timeout=READ_WAIT):
            return {}
        try:
            return self._refresh(now, (top,) if top in TOP_SEGMENTS else TOP_SEGMENTS)
        finally:
            self._mutex.release()

    def _show(self, top: str, entries: dict[str, WorkingEntry], stamp: Hashable) -> None:
        """Make `entries` the view of segment `top`, as of `stamp`."""
        for key in [k for k in self._entries if k.split("/", 1)[0] == top]:
            del self._entries[key]
        self._entries.update(entries)
        self._files[top] = stamp

    def _current(self, top: str, data: bytes | None, stamp: Hashable, now: datetime) -> Entries:
        """The segment as stored (`data` at `stamp`), for a write: the view when it is still
        that version; a damaged segment is kept aside first."""
        if self._files.get(top) == stamp:
            if self._damaged.get(top) == stamp:
                self._storage.keep_aside(top, data, "it could not be read back in full")
            return self._segment(top)
        entries, damage = self._parse(top, data)
        if damage:
            self._storage.keep_aside(top, data, damage)
        return {e.key: e for e in entries if e.expires_at > now}

    def _rewrite(self, top: str, now: datetime, edit: Callable[[Entries], _T]) -> _T:
        """Change one segment against concurrent writers (this and other processes or
        replicas): `edit` changes the stored entries in place (it may be called again on a
        newer version); once written, that is the view. A failed write changes nothing."""
        outcome: list[tuple[Entries, _T]] = []

        def change(data: bytes | None, stamp: Hashable) -> bytes:
            entries = dict(self._current(top, data, stamp, now))
            result = edit(entries)
            outcome[:] = [(entries, result)]
            items = [_to_json(e) for _, e in sorted(entries.items())]
            return json.dumps(items, ensure_ascii=False).encode("utf-8")

        stamp = self._storage.rewrite(top, change)
        entries, result = outcome[0]
        self._show(top, entries, stamp)
        self._damaged.pop(top, None)
        return result

    def _segment(self, top: str) -> dict[str, WorkingEntry]:
        return {k: e for k, e in self._entries.items() if k.split("/", 1)[0] == top}

    # ---- keys -----------------------------------------------------------------------------
    @staticmethod
    def resolve(key: str, namespace: str) -> str:
        """A full path stays as it is; a plain key is placed under `namespace`."""
        segments = key_segments(key.strip())
        if len(segments) >= 3 and segments[0] in TOP_SEGMENTS:
            return "/".join(segments)
        full = f"{namespace}/{'/'.join(segments)}"
        key_segments(full)
        return full

    # ---- operations -----------------------------------------------------------------------
    def _checked_entry(
        self,
        namespace: str,
        key: str,
        value: str,
        ttl_minutes: int | None,
        category: str | None,
        tags: str | Iterable[str] | None,
        now: datetime,
    ) -> WorkingEntry:
        """The entry a save writes (its value, category and tags redacted), or InvalidInput
        saying what is wrong with it."""
        full = self.resolve(refuse_secret(key, "key"), namespace)
        value, category, tags, _ = redact_memory(value, category, tags, "data")
        if not under(full, namespace) or full == namespace:
            raise InvalidInput(
                f"cannot write '{full}': writes go to your own namespace '{namespace}'. "
                "Pass a plain key such as 'notes' instead."
            )
        ttl = self.default_ttl_minutes if ttl_minutes is None else ttl_minutes
        if not 1 <= ttl <= MAX_TTL_MINUTES:
            raise InvalidInput(
                f"ttl_minutes must be between 1 and {MAX_TTL_MINUTES} (7 days); got {ttl}."
            )
        if len(value.encode("utf-8")) > MAX_VALUE_BYTES:
            raise InvalidInput("data is larger than 1 MiB; store it in smaller chunks.")
        return WorkingEntry(
            full,
            value,
            now,
            now + timedelta(minutes=ttl),
            check_category(category),
            check_tags(tags),
        )

    def save(
        self,
        namespace: str,
        key: str,
        value: str,
        ttl_minutes: int | None = None,
        category: str | None = None,
        tags: str | Iterable[str] | None = None,
        now: datetime | None = None,
    ) -> SaveOutcome:
        now = now or utcnow()
        entry = self._checked_entry(namespace, key, value, ttl_minutes, category, tags, now)
        full = entry.key
        top = full.split("/", 1)[0]

        def edit(view: Entries) -> str | None:
            evicted = None
            in_ns = [e for e in view.values() if under(e.key, namespace)]
            if full not in view and len(in_ns) >= self.max_per_namespace:
                victim = min(in_ns, key=lambda e: (e.expires_at, e.key))
                del view[victim.key]
                evicted = victim.key
            view[full] = entry
            return evicted

        with self._mutex:
            evicted = self._rewrite(top, now, edit)
        return SaveOutcome(entry, evicted)

    def get(self, key: str, namespace: str, now: datetime | None = None) -> WorkingEntry:
        now = now or utcnow()
        full = self.resolve(key, namespace)
        top = full.split("/", 1)[0]
        failed = self._refreshed(now, top)  # only the key's segment
        entry = self._entries.get(full)
        if entry is None and top in failed and top not in self._files:
            raise failed[top]
        if entry is None or entry.expires_at <= now:
            raise NotFound(f"Working memory entry '{full}' not found or has expired.")
        return entry

    def listing(self, prefix: str, now: datetime | None = None) -> list[WorkingEntry]:
        now = now or utcnow()
        prefix = check_prefix(prefix)
        wanted = prefix.split("/", 1)[0]
        failed = self._refreshed(now, wanted)
        held = list(self._entries.values())  # one step under the GIL: a consistent copy
        if wanted in failed and wanted not in self._files:
            raise failed[wanted]
        found = [e for e in held if under(e.key, prefix) and e.expires_at > now]
        return sorted(found, key=lambda e: e.key)

    def search(
        self,
        prefix: str,
        query: str | None = None,
        category: str | None = None,
        tags: str | Iterable[str] | None = None,
        limit: int = 20,
        now: datetime | None = None,
    ) -> list[WorkingEntry]:
        text = check_query(query)
        cat = check_category(category)
        tag_list = check_tags(tags)
        candidates = {e.key: e for e in self.listing(prefix, now)}
        if not text:
            chosen = [e for e in candidates.values() if _matches(e, cat, tag_list)]
            return sorted(chosen, key=lambda e: e.stored_at, reverse=True)[:limit]
        from dreamwell.stores.index.text_index import IndexDoc, TextIndex

        index = TextIndex(None)
        with index.writing() as writer:
            for e in candidates.values():
                writer.upsert(IndexDoc(e.key, e.value, e.category, e.tags))
        return [candidates[k] for k, _ in index.search(text, limit, cat, tag_list)]

    def sweep(self, now: datetime | None = None) -> int:
        """Drop expired entries from memory and from the files; returns how many."""
        now = now or utcnow()
        with self._mutex:
            self._refresh(now)
            expired = [k for k, e in self._entries.items() if e.expires_at <= now]
            for top in sorted({k.split("/", 1)[0] for k in expired} | self._stale):
                self._rewrite(top, now, lambda view: _drop_expired(view, now))
                self._stale.discard(top)
        return len(expired)


def _drop_expired(view: Entries, now: datetime) -> None:
    for key in [k for k, e in view.items() if e.expires_at <= now]:
        del view[key]


def _matches(e: WorkingEntry, category: str | None, tags: tuple[str, ...]) -> bool:
    if category is not None and not (e.category and under(e.category, category)):
        return False
    return all(t in e.tags for t in tags)
