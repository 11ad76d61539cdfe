"""What client hooks read and keep, in a fresh process per event: per-session state
and the hooks' log (sessions.py), what any injecting path recalls for a message, the one
function they all call (inject.py: `recalled` over a `Ranker`), how much of each memory's
text a message shows (excerpts.py: `shown`, within RECALL_CHARS), and keyword recall from a
small SQLite snapshot of the memories plus the log since (quick_recall.py, the only module
that imports sqlite3). Nothing here imports LanceDB, numpy or onnxruntime.

May import: the stores root, stores.index (the text index), stores.longterm (the log's
records and state file).

Importing the package is cheap: each name loads its module on first use (PEP 562)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from dreamwell.stores.lazy_exports import lazy_exports

if TYPE_CHECKING:
    from dreamwell.stores.hooks.excerpts import RECALL_CHARS, shown
    from dreamwell.stores.hooks.inject import Ranker, StoreRanker, recalled
    from dreamwell.stores.hooks.quick_recall import QuickRecall, write_snapshot
    from dreamwell.stores.hooks.sessions import DAY, HookSession, HookSessions, hooks_log

_LAZY = {
    **dict.fromkeys(
        [
            "DAY",
            "HookSession",
            "HookSessions",
            "hooks_log",
        ],
        "sessions",
    ),
    **dict.fromkeys(["Ranker", "StoreRanker", "recalled"], "inject"),
    **dict.fromkeys(["RECALL_CHARS", "shown"], "excerpts"),
    **dict.fromkeys(
        [
            "QuickRecall",
            "write_snapshot",
        ],
        "quick_recall",
    ),
}

__getattr__, __dir__ = lazy_exports(__name__, _LAZY)

__all__ = [
    "DAY",
    "RECALL_CHARS",
    "HookSession",
    "HookSessions",
    "QuickRecall",
    "Ranker",
    "StoreRanker",
    "hooks_log",
    "recalled",
    "shown",
    "write_snapshot",
]
