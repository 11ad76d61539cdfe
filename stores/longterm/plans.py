"""What a save, a delete and a compare-and-set write decide, as plans for the group commit.

A save reinforces the live memory with the same folded text and category, or adds a new
one, linked to the caller's previous memory when it continues it (contextual memories); with
`embed_on_save` its vector is computed before the commit and logged with it. `write` is the
compare-and-set of background writers (the dream, undo, import): a group is written whole
only if every entry in it is still as they read it.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Final

from dreamwell.stores.errors import NotFound
from dreamwell.stores.index.embedders import Embedder, EmbedderError
from dreamwell.stores.longterm import operations as ops
from dreamwell.stores.longterm.components import Parts
from dreamwell.stores.longterm.group_commit import GroupCommit, Scratch
from dreamwell.stores.longterm.log import Op
from dreamwell.stores.model import (
    CONTEXT_SECONDS,
    FOLLOWS,
    MAX_TAGS,
    PROJECT,
    MemoryEntry,
    check_category,
    check_content,
    check_tags,
    new_id,
    utcnow,
)
from dreamwell.stores.redact import redact_memory

logger = logging.getLogger(__name__)


class _Any:
    def __repr__(self) -> str:
        return "ANY"


ANY: Final = _Any()  # Write.expect: write whatever the entry is now


@dataclass(frozen=True)
class SaveResult:
    entry: MemoryEntry
    reinforced: bool


@dataclass(frozen=True)
class Write:
    """Set entry `id` to `new` (None: delete it for good) if it still equals `expect`
    (None: it must not exist; ANY: whatever it is)."""

    id: str
    expect: MemoryEntry | _Any | None
    new: MemoryEntry | None


@dataclass(frozen=True)
class _Save:
    """One save as its plan sees it."""

    content: str
    category: str | None
    tags: tuple[str, ...]
    metadata: Mapping[str, str] | None
    now: datetime
    caller: str | None
    vector: list[float] | None


class Writer:
    def __init__(
        self,
        parts: Parts,
        commit: GroupCommit,
        embedder: Embedder | None,
        embed_on_save: bool,
        contextual: bool,
    ) -> None:
        self.parts = parts
        self.group = commit
        self.embedder = embedder
        self.embed_on_save = embed_on_save
        self.contextual = contextual
        self._last_save: dict[str, tuple[str, datetime, str | None]] = {}  # caller -> id, at, cat

    def save(
        self,
        content: str,
        category: str | None = None,
        tags: str | Iterable[str] | None = None,
        metadata: Mapping[str, str] | None = None,
        now: datetime | None = None,
        caller: str | None = None,
    ) -> SaveResult:
        content, category, redacted_tags, _ = redact_memory(content, category, tags)
        content = check_content(content)
        category = check_category(category)
        tag_list = check_tags(redacted_tags)
        now = now or utcnow()
        self.parts.follower.fresh()
        project = (metadata or {}).get(PROJECT)
        dups = self.parts.mirror.dups
        known = dups.get(ops.dup_key(category, content, project)) or (
            dups.get(ops.dup_key(category, content, None)) if project is not None else None
        )
        vector = self._embed_one(content) if known is None else None
        save = _Save(content, category, tag_list, metadata, now, caller, vector)
        return self.group.commit(lambda s: self._plan_save(s, save))

    def _plan_save(self, s: Scratch, save: _Save) -> tuple[list[Op], SaveResult]:
        old = s.duplicate_of(save.category, save.content, (save.metadata or {}).get(PROJECT))
        if old is not None:
            entry = replace(
                old,
                tags=tuple(dict.fromkeys(old.tags + save.tags))[:MAX_TAGS],
                last_seen_at=max(save.now, old.last_seen_at),
                updated_at=save.now,
                reinforcement_count=old.reinforcement_count + 1,
            )
            self._remember(save.caller, entry, save.now)
            return [ops.put_op(entry)], SaveResult(entry, reinforced=True)
        meta = dict(save.metadata or {})
        follows = self._follows(s, save.caller, save.category, save.now)
        if follows is not None:
            meta[FOLLOWS] = follows
        now = save.now
        entry = MemoryEntry(
            new_id(), save.content, save.category, save.tags, now, now, now, metadata=meta
        )
        self._remember(save.caller, entry, now)
        logged = [ops.put_op(entry)]
        if save.vector is not None and self.embedder is not None:
            logged.append(ops.vec_op(entry, self.embedder.name, save.vector))
        return logged, SaveResult(entry, reinforced=False)

    def _follows(
        self, s: Scratch, caller: str | None, category: str | None, now: datetime
    ) -> str | None:
        """The caller's previous memory, if this one continues it (the gate of contextual
        memories: same caller, same category, within CONTEXT_SECONDS, still live)."""
        if not self.contextual or caller is None or caller not in self._last_save:
            return None
        last_id, at, last_category = self._last_save[caller]
        if last_category != category or not 0 <= (now - at).total_seconds() <= CONTEXT_SECONDS:
            return None
        last = s.get(last_id)
        return last_id if last is not None and last.live else None

    def _remember(self, caller: str | None, entry: MemoryEntry, now: datetime) -> None:
        if caller is not None and self.contextual:
            if len(self._last_save) >= 10_000:  # callers come and go: keep the map bounded
                self._last_save.clear()
            self._last_save[caller] = (entry.id, now, entry.category)

    def _embed_one(self, text: str) -> list[float] | None:
        if self.embedder is None or not self.embed_on_save:
            return None
        try:
            return self.embedder.embed([text])[0]
        except EmbedderError as exc:
            logger.warning("embedding failed (%s); the vector will be backfilled", exc)
            return None

    def delete(self, entry_id: str, project: str | None = None) -> MemoryEntry:
        """Delete a memory; with `project`, only one of that project or a global one: another
        project's is not found, exactly as an unknown id (docs/projects.md)."""

        def plan(s: Scratch) -> tuple[list[Op], MemoryEntry]:
            entry = s.get(entry_id)
            owner = entry.metadata.get(PROJECT) if entry is not None else None
            if entry is None or (project is not None and owner not in (None, "", project)):
                raise NotFound(
                    f"No memory entry found with id '{entry_id}'. "
                    "Use search_memory to find the correct ID."
                )
            return [ops.del_op(entry_id)], entry

        return self.group.commit(plan)

    def write(self, groups: Sequence[Sequence[Write]]) -> list[bool]:
        """Compare-and-set: each group is written whole if every entry in it still equals its
        `expect`, else not at all. One log record per group, one fsync for all. Returns, per
        group, whether it was written."""

        def plan(s: Scratch) -> tuple[list[Op], list[bool]]:
            logged: list[Op] = []
            done: list[bool] = []
            for group in groups:
                if all(w.expect is ANY or s.get(w.id) == w.expect for w in group):
                    group_ops = [
                        ops.put_op(w.new) if w.new is not None else ops.del_op(w.id) for w in group
                    ]
                    s.take(group_ops)
                    logged += group_ops
                    done.append(True)
                else:
                    done.append(False)
            return logged, done

        return self.group.commit(plan)
