"""Working memory: TTL scratch space in path namespaces (memory.py), persisted per
top-level segment as files or objects (segments.py).

May import: the stores root, stores.remote.

Importing the package is cheap: each name loads its module on first use (PEP 562)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from dreamwell.stores.lazy_exports import lazy_exports

if TYPE_CHECKING:
    from dreamwell.stores.working.memory import (
        TOP_SEGMENTS,
        SaveOutcome,
        WorkingMemory,
        check_own_namespace,
        check_prefix,
    )

_LAZY = {
    **dict.fromkeys(
        [
            "TOP_SEGMENTS",
            "SaveOutcome",
            "WorkingMemory",
            "check_own_namespace",
            "check_prefix",
        ],
        "memory",
    ),
}

__getattr__, __dir__ = lazy_exports(__name__, _LAZY)

__all__ = [
    "TOP_SEGMENTS",
    "SaveOutcome",
    "WorkingMemory",
    "check_own_namespace",
    "check_prefix",
]
