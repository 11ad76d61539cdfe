"""The process's C heap (glibc only; elsewhere every call here does nothing).

Two settings keep a long-running server's RSS near what it holds: few malloc arenas (each
thread that allocates gets its own otherwise, and LanceDB's, Tantivy's and onnxruntime's
thread pools then fragment the heap), and handing freed pages back to the kernel after the
big transient allocations (loading every vector from LanceDB, a checkpoint's Arrow batches),
which glibc otherwise keeps mapped for reuse."""

from __future__ import annotations

import ctypes
import sys
from typing import Any

_M_ARENA_MAX = -8  # mallopt parameter number in glibc's malloc.h


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


def few_malloc_arenas() -> None:
    """Two arenas instead of eight per core: with the libraries' thread pools a server reached
    ~530 MB RSS after a few hundred saves with glibc's default, ~320 MB with two. Must run
    before those threads start."""
    if _LIBC is not None:
        _LIBC.mallopt(_M_ARENA_MAX, 2)


def give_back_freed() -> None:
    """Return the free pages of every arena to the kernel (malloc_trim). Opening a 100,000-
    memory store and loading its vectors left ~170 MiB freed but mapped. Takes milliseconds
    and holds the arenas' locks meanwhile: call it after big transient work, not per request."""
    if _LIBC is not None:
        _LIBC.malloc_trim(0)
