"""Group commit: how a write decides against the current store and lands in the log.

A write is a plan: given a `Scratch` (the mirror as of the end of the log, plus the changes
of the plans before it in the same batch), it returns the operations to log and its result.
`GroupCommit.commit` runs plans under the log's write lock after reading the log to its end,
and appends one record per plan that changed something; plans that arrive while another
batch is being written wait and share the next write and fsync. Nothing else is on the
reply path. What the plans of a save, delete or compare-and-set are is `stores/longterm/plans.py`'s.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from dreamwell.stores.errors import StoreBusy, StoreError
from dreamwell.stores.index.view import View
from dreamwell.stores.longterm import operations as ops
from dreamwell.stores.longterm.components import Parts
from dreamwell.stores.longterm.log import LogConflict, Op
from dreamwell.stores.model import MemoryEntry, entry_from_dict

T = TypeVar("T")
_CONFLICT_RETRIES = 20
logger = logging.getLogger(__name__)


class Scratch:
    """The store as a commit's plans see it: the view plus the batch's earlier changes."""

    def __init__(self, view: View, dups: Mapping[int, str]) -> None:
        self._view = view
        self._dups = dups
        self._changed: dict[str, MemoryEntry | None] = {}
        self._dup_changes: dict[int, str | None] = {}

    def get(self, entry_id: str) -> MemoryEntry | None:
        if entry_id in self._changed:
            return self._changed[entry_id]
        return self._view.get(entry_id)

    def duplicate_of(
        self, category: str | None, content: str, project: str | None = None
    ) -> MemoryEntry | None:
        """The live memory this save repeats: the project's own, else a global one (it is
        seen in every project, so saving its text again there reinforces it)."""
        found = self._duplicate(category, content, project)
        if found is None and project is not None:
            found = self._duplicate(category, content, None)
        return found

    def _duplicate(
        self, category: str | None, content: str, project: str | None
    ) -> MemoryEntry | None:
        key = ops.dup_key(category, content, project)
        found = self._dup_changes[key] if key in self._dup_changes else self._dups.get(key)
        entry = self.get(found) if found else None
        if entry is None or not entry.live or not ops.same_text(entry, category, content, project):
            return None
        return entry

    def take(self, logged: Sequence[Op]) -> None:
        for op in logged:
            if op["op"] == "put":
                entry = entry_from_dict(op["e"])
                self._forget(entry.id)
                self._changed[entry.id] = entry
                if entry.live:
                    self._dup_changes[ops.entry_dup_key(entry)] = entry.id
            elif op["op"] == "del":
                self._forget(op["id"])
                self._changed[op["id"]] = None

    def _forget(self, entry_id: str) -> None:
        old = self.get(entry_id)
        if old is not None and old.live:
            self._dup_changes[ops.entry_dup_key(old)] = None


Plan = Callable[[Scratch], tuple[list[Op], T]]


@dataclass
class _Request:
    plan: Plan[Any]
    done: threading.Event = field(default_factory=threading.Event)
    wake: threading.Event = field(default_factory=threading.Event)  # done, or now leads
    lead: bool = False
    result: Any = None
    error: BaseException | None = None


class GroupCommit:
    def __init__(self, parts: Parts) -> None:
        self.parts = parts
        self._queue_lock = threading.Lock()
        self._queue: list[_Request] = []
        self._leading = False

    def commit(self, plan: Plan[T]) -> T:
        """Run `plan` under the write lock and log its operations; plans that arrive while
        another commit is being written share the next write and fsync (group commit)."""
        request = _Request(plan)
        with self._queue_lock:
            self._queue.append(request)
            request.lead = not self._leading
            self._leading = True
        while not request.done.is_set():
            if request.lead:
                self._lead()
            else:
                request.wake.wait()
                request.wake.clear()
        if request.error is not None:
            raise request.error
        return request.result  # type: ignore[no-any-return]

    def _lead(self) -> None:
        for _ in range(8):  # then hand over, so one caller does not serve everyone forever
            with self._queue_lock:
                batch, self._queue = self._queue, []
                if not batch:
                    self._leading = False
                    return
            self._write_batch(batch)
        with self._queue_lock:
            if self._queue:
                self._queue[0].lead = True
                self._queue[0].wake.set()
            else:
                self._leading = False

    def _write_batch(self, batch: list[_Request]) -> None:
        p = self.parts
        try:
            with p.log.locked():
                self._decide_and_append(batch)
                self._take_own_records()
        except Exception as exc:  # StoreBusy, a read-only directory, ...: every caller hears it
            for request in batch:
                if request.error is None:
                    request.error = exc
        finally:
            for request in batch:
                request.done.set()
                request.wake.set()

    def _take_own_records(self) -> None:
        """Apply what was just appended to this process's view. The batch is in the log by
        now, so its saves are acknowledged even when this read fails (an object store that
        stopped answering, a version cleaned up meanwhile): the next read takes them."""
        try:
            self.parts.follower.catch_up()
        except Exception as exc:
            logger.warning("saved, but reading the log back failed (the next read will): %s", exc)

    def _decide_and_append(self, batch: list[_Request]) -> None:
        """Read to the end, plan, append. On object storage another replica may append first
        (LogConflict): then read what it wrote and plan again, from scratch."""
        for attempt in range(_CONFLICT_RETRIES):
            self.parts.follower.catch_up()
            for request in batch:
                request.result, request.error = None, None
            try:
                self._append(self._plan(batch))
                return
            except LogConflict:
                # back off so that contending replicas spread out; what queued meanwhile
                # joins this batch, so a busier replica writes more per append
                time.sleep(random.uniform(0, min(0.2, 0.01 * 2**attempt)))
                with self._queue_lock:
                    batch += self._queue
                    self._queue = []
        raise StoreBusy("other replicas kept writing first; nothing was saved, try again.")

    def _plan(self, batch: list[_Request]) -> list[tuple[_Request, list[Op]]]:
        """Run each plan against the mirror and the batch's earlier plans; a plan's own error
        goes to its caller. Returns the requests that have something to log."""
        m = self.parts.mirror
        scratch = Scratch(m.view, m.dups)
        logged: list[tuple[_Request, list[Op]]] = []
        for request in batch:
            try:
                planned, request.result = request.plan(scratch)
            except Exception as exc:
                request.error = exc
                continue
            if planned:
                scratch.take(planned)
                logged.append((request, planned))
        return logged

    def _append(self, logged: list[tuple[_Request, list[Op]]]) -> None:
        if not logged:
            return
        m = self.parts.mirror
        with m.lock:  # this process's saves: it embeds them (see mirror.FOREIGN_GRACE)
            m.mine = {op["e"]["id"] for _, planned in logged for op in planned if op["op"] == "put"}
        try:
            last = self.parts.log.append([planned for _, planned in logged])
        except OSError as exc:
            error = StoreError(
                f"could not write to {self.parts.dirs.root} ({exc.strerror or exc}); "
                "nothing was saved. Free disk space or fix permissions, then retry."
            )
            for request, _ in logged:
                request.error = error
        else:
            m.appended = last  # the checkpoint folds this process's own writes first
