"""Threads of lower CPU priority for the server's background work (embedding backfills).

Embedding the memories a burst of saves left without vectors takes whole cores for seconds;
a search (the query's embedding, the ranking) wants a core for a few milliseconds. Run at the
same priority, a backfill in this process or in another on the same machine made every search
wait its turn for the CPU (issue 24: search p99 109 ms beside a writer saving 78/s). The
backfill runs here instead, on threads whose nice value is raised by NICENESS, so that the
scheduler gives a search the core at once and the backfill the rest. The threads are this
module's own: a thread's priority can be lowered but not raised again without privileges, so
it must never run anything else (anyio's worker threads are shared with the tools).

Linux sets a nice value per thread; elsewhere the work runs on the thread unchanged.
"""

from __future__ import annotations

import logging
import os
import queue
import sys
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from typing import Any, TypeVar

import anyio.to_thread

logger = logging.getLogger(__name__)

NICENESS = 10  # CFS weight 110 against 1024 at 0: a search gets ~90% of a shared core
THREADS = 4  # at most this many at once (one per data directory being embedded, as a rule)
T = TypeVar("T")
Job = tuple[Callable[..., Any], tuple[Any, ...], "Future[Any]"]


def lower_this_thread(niceness: int = NICENESS) -> bool:
    """Make the calling thread's nice value `niceness` above the main thread's (Linux: per
    thread; a thread starts with its creator's, which may be lowered already). False where
    the platform has no per-thread priority or refuses it."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        main = os.getpriority(os.PRIO_PROCESS, os.getpid())  # the main thread's id is the pid
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), min(main + niceness, 19))
    except OSError as exc:
        logger.info("background work runs at normal priority: %s", exc)
        return False
    return True


class _Pool:
    """Threads started as work arrives while none is idle (THREADS at most), never ended."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._jobs: queue.SimpleQueue[Job] = queue.SimpleQueue()
        self._threads = 0
        self._idle = 0

    def submit(self, job: Job) -> None:
        with self._lock:
            if self._idle:
                self._idle -= 1  # that thread takes this job
            elif self._threads < THREADS:
                self._threads += 1
                # daemons: a backfill batch in flight never holds up the process's exit (its
                # vectors are logged whole or not at all; the next start embeds what is left)
                threading.Thread(
                    target=self._work, name="dreamwell-background", daemon=True
                ).start()
            self._jobs.put(job)

    def _work(self) -> None:
        lower_this_thread()
        while True:
            fn, args, future = self._jobs.get()
            if future.set_running_or_notify_cancel():
                try:
                    future.set_result(fn(*args))
                except BaseException as exc:  # handed to the awaiting task, which raises it
                    future.set_exception(exc)
            with self._lock:
                self._idle += 1


_pool = _Pool()
_halves = _Pool()  # their own: a job here never waits on another, so none can deadlock

SPLIT_AT = 16  # texts: fewer are embedded on the calling thread alone


def on_two_threads(
    embed: Callable[[Sequence[str]], list[list[float]]], texts: Sequence[str]
) -> list[list[float]]:
    """`embed(texts)` as two halves at once, one on the calling thread and one on a thread of
    lower priority: the embedders run each call on one core (stores/index/embedders.py), and a
    backfill on one core took 1.8x as long as on two, which a search right after an ingest
    spends ranking by keywords alone. Halves alternate through the texts by length, so that
    each gets as much to do."""
    if len(texts) < SPLIT_AT:
        return embed(texts)
    order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
    mine, theirs = order[0::2], order[1::2]
    future: Future[list[list[float]]] = Future()
    _halves.submit((embed, ([texts[i] for i in theirs],), future))
    out: list[list[float]] = [[] for _ in texts]
    for i, vector in zip(mine, embed([texts[i] for i in mine]), strict=True):
        out[i] = vector
    for i, vector in zip(theirs, future.result(), strict=True):
        out[i] = vector
    return out


def lowered(fn: Callable[..., T], *args: Any) -> T:
    """`fn(*args)` on a background thread, the calling thread waiting for it."""
    future: Future[T] = Future()
    _pool.submit((fn, args, future))
    return future.result()


def on_lower_threads(
    embed: Callable[[Sequence[str]], list[list[float]]], texts: Sequence[str]
) -> list[list[float]]:
    """`on_two_threads`, both halves on threads of lower priority, for a caller at normal
    priority: the backfill embeds at low priority but logs the vectors (under the store's
    write lock, which saves queue behind) from its caller's thread. Logged from a thread of
    lower priority, the scheduler on a busy machine left the lock's holder waiting for a core
    while saves waited for the lock (issue 57)."""
    return lowered(on_two_threads, embed, texts)


async def run(fn: Callable[..., T], *args: Any) -> T:
    """`fn(*args)` on a background thread. Cancelling the caller abandons the wait, not the
    work (as anyio's `abandon_on_cancel`)."""
    future: Future[T] = Future()
    _pool.submit((fn, args, future))
    return await anyio.to_thread.run_sync(future.result, abandon_on_cancel=True)
