"""For the replica tests: writers racing from every replica (threads with names, errors kept;
saves through stores), and waiting until another replica sees a write."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

T = TypeVar("T")


def race(
    replicas: Sequence[T], work: Callable[[T, str], None], threads: int = 3
) -> list[BaseException]:
    """Run `work(replica, "r<k>t<t>")` in `threads` threads per replica, all at once; returns
    what any of them raised (a thread stops at its first error)."""
    errors: list[BaseException] = []

    def run(replica: T, who: str) -> None:
        try:
            work(replica, who)
        except BaseException as exc:
            errors.append(exc)

    started = [
        threading.Thread(target=run, args=(r, f"r{k}t{t}"))
        for k, r in enumerate(replicas)
        for t in range(threads)
    ]
    for thread in started:
        thread.start()
    for thread in started:
        thread.join()
    return errors


def race_saves(
    stores: Sequence[Any],
    saves: int,
    threads: int = 3,
    text: str = "note {i} written by {who}",
    category: str = "race/{who}",
) -> tuple[list[str], list[BaseException]]:
    """`saves` saves from each of `threads` threads per store, all at once (`text` and
    `category` formatted with the save's `i` and the thread's `who`): the ids of the
    acknowledged saves, and what any thread raised (a thread stops at its first error)."""
    acknowledged: list[str] = []
    lock = threading.Lock()

    def saver(store: Any, who: str) -> None:
        for i in range(saves):
            result = store.save(text.format(i=i, who=who), category.format(who=who))
            with lock:
                acknowledged.append(result.entry.id)

    errors = race(stores, saver, threads)
    return acknowledged, errors


def eventually(check: Callable[[], bool], within: float = 2.0) -> float:
    """Seconds until `check()` held (polled every 20 ms); fails when it did not within
    `within` seconds."""
    began = time.monotonic()
    while not check():
        assert time.monotonic() - began < within, "not seen in time"
        time.sleep(0.02)
    return time.monotonic() - began
