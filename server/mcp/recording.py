"""What a read records, off the read's path: the recall log a search or recall appends to,
the conversation turn the recall prompt keeps, a skill's use. On an object store each append
is a PUT, and a hung store held every search that found something for the PUT's time-out
(10 s, issue 53); a read now answers at once and its record follows from a background thread.

On a local data directory the append is made in the caller's thread, as before (a few
milliseconds; the dream and the tests read it right after). On an object store it is queued
for one daemon thread; a record that fails is logged, and past MAX_WAITING queued records
(a store that has not answered for minutes) new ones are dropped, and counted in the log, so
memory stays bounded. A record is what the dream learns from, never what a user saved:
dropping one loses a hint, not a memory."""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable

from dreamwell.stores import StoreError

logger = logging.getLogger(__name__)

MAX_WAITING = 512  # records queued for a store that does not answer, before new ones drop

Append = Callable[[], None]


class _Background:
    def __init__(self) -> None:
        self.waiting: queue.Queue[tuple[str, Append]] = queue.Queue(MAX_WAITING)
        self.dropped = 0
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def put(self, what: str, append: Append) -> None:
        with self._lock:
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(
                    target=self._run, name="dreamwell-record", daemon=True
                )
                self._thread.start()
        try:
            self.waiting.put_nowait((what, append))
        except queue.Full:
            self.dropped += 1
            if self.dropped == 1 or self.dropped % 100 == 0:
                logger.warning(
                    "%s: %d records already wait for the object store (%d dropped so far)",
                    what,
                    MAX_WAITING,
                    self.dropped,
                )

    def _run(self) -> None:
        while True:
            what, append = self.waiting.get()
            _append(what, append)
            self.waiting.task_done()


_background = _Background()


def _append(what: str, append: Append) -> None:
    try:
        append()
    except StoreError as exc:  # a full disk or a store away must not fail a read
        logger.warning("%s: %s", what, exc)


def record(blocking: bool, what: str, append: Append) -> None:
    """Make `append` (one log append; `what` is the log line if it fails): in this
    thread when the log is local, else in the background, never waiting for the store.
    `append` must carry its own timestamp (it may run later)."""
    if blocking:
        _background.put(what, append)
    else:
        _append(what, append)
