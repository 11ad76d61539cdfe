"""The input logs the dream reads: conversation, feedback, recall, skill usage, the
enrichment queue. Append-only JSON lines in the data directory (jsonl_log.py), or one object
per record on object storage (object_log.py); bounded, and taken whole by the pass that uses
them.

May import: the stores root, stores.remote.

Importing the package is cheap: each name loads its module on first use (PEP 562)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from dreamwell.stores.lazy_exports import lazy_exports

if TYPE_CHECKING:
    from dreamwell.stores.inputs.jsonl_log import (
        CONVERSATION,
        CONVERSATION_MAX_BYTES,
        ENRICH_QUEUE,
        ENRICH_QUEUE_MAX_BYTES,
        FEEDBACK,
        RECALL,
        SKILL_USAGE,
        SKILL_USAGE_MAX_BYTES,
        JsonlLog,
    )

_LAZY = {
    **dict.fromkeys(
        [
            "CONVERSATION",
            "CONVERSATION_MAX_BYTES",
            "ENRICH_QUEUE",
            "ENRICH_QUEUE_MAX_BYTES",
            "FEEDBACK",
            "RECALL",
            "SKILL_USAGE",
            "SKILL_USAGE_MAX_BYTES",
            "JsonlLog",
        ],
        "jsonl_log",
    ),
}

__getattr__, __dir__ = lazy_exports(__name__, _LAZY)

__all__ = [
    "CONVERSATION",
    "CONVERSATION_MAX_BYTES",
    "ENRICH_QUEUE",
    "ENRICH_QUEUE_MAX_BYTES",
    "FEEDBACK",
    "RECALL",
    "SKILL_USAGE",
    "SKILL_USAGE_MAX_BYTES",
    "JsonlLog",
]
