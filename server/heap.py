"""The process's C heap (glibc only; elsewhere every call here does nothing), and when a
server's garbage collector runs its full collections (`quiet_collections`).

Three settings keep a long-running server's RSS near what it holds: few malloc arenas (each
thread that allocates gets its own otherwise, and LanceDB's, Tantivy's and onnxruntime's
thread pools then fragment the heap), a fixed size above which blocks are mapped on their
own (with glibc's moving one a server's RSS at 100,000 memories came out anywhere from 383
to 433 MiB), and handing freed pages back to the kernel after the big transient allocations
(loading every vector from LanceDB, a checkpoint's Arrow batches), which glibc otherwise
keeps mapped for reuse."""

from __future__ import annotations

import ctypes
import gc
import sys
from typing import Any

_M_ARENA_MAX = -8  # mallopt parameter numbers in glibc's malloc.h
_M_MMAP_THRESHOLD = -3
# Blocks above this are mapped on their own and unmapped when freed: the vectors' and Arrow
# batches' big transient buffers. A search's own arrays stay below it up to a million
# memories (a million float32 scores: 3.8 MiB), so it maps no fresh pages per search.
MMAP_THRESHOLD = 4 << 20


def _libc() -> Any:
    if not sys.platform.startswith("linux"):
        return None
    try:  # the process's own symbols include libc's (find_library would run ldconfig)
        libc = ctypes.CDLL(None)
        libc.mallopt  # noqa: B018 (glibc has both; musl has neither)
        libc.malloc_trim  # noqa: B018
    except (OSError, AttributeError):
        return None
    return libc


_LIBC = _libc()


def steady_malloc() -> None:
    """Two arenas instead of eight per core: with the libraries' thread pools a server reached
    ~530 MB RSS after a few hundred saves with glibc's default, ~320 MB with two.

    And a fixed mmap threshold. glibc's starts at 128 KiB and rises to the size of each mapped
    block freed (up to 32 MiB), so whether a block of a few MiB went to an arena or to a
    mapping of its own depended on the order in which the threads had freed theirs. At
    100,000 memories a server's RSS once idle then moved from one start to the next (383 to
    433 MiB over 18 starts; 384-385 over 14 starts with this threshold,
    tests/bench/rss_bench.py). Must run before the libraries' threads start."""
    if _LIBC is not None:
        _LIBC.mallopt(_M_ARENA_MAX, 2)
        _LIBC.mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD)


def give_back_freed() -> None:
    """Return the free pages of every arena to the kernel (malloc_trim). Opening a 100,000-
    memory store and loading its vectors left ~170 MiB freed but mapped. Takes milliseconds
    and holds the arenas' locks meanwhile: call it after big transient work, not per request."""
    if _LIBC is not None:
        _LIBC.malloc_trim(0)


FULL_COLLECTION_EVERY = 600.0  # seconds of requests without a pause before one runs anyway


def quiet_collections() -> None:
    """Leave the collector's full collections (the oldest generation) to the server's pauses
    (`trim_when_idle` runs one, and one every FULL_COLLECTION_EVERY seconds of requests
    without a pause). A full collection stops every thread for as long as it takes: at
    100,000 memories 88-103 ms, 8 of them in a 100,000-save run, each inside whichever save
    was running (tests/bench/save_tail_bench.py). The young generations are collected as
    before, so short-lived cycles are still freed at once."""
    young, middle, _ = gc.get_threshold()
    gc.set_threshold(young, middle, 2**31 - 1)


def tidy() -> None:
    """A full collection, then the heap handed back: what a server does in its pauses."""
    gc.collect()
    give_back_freed()
