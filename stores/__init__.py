"""Storage layer of dreamwell: long-term memory (LanceDB + Tantivy) and working memory."""

from dreamwell.stores.embedding import (
    CrossEncoderReranker,
    Embedder,
    EmbedderError,
    OllamaEmbedder,
    OnnxE5,
    OnnxMiniLM,
)
from dreamwell.stores.errors import InvalidInput, NotFound, StoreBusy, StoreError
from dreamwell.stores.logs import CONVERSATION, FEEDBACK, RECALL, JsonlLog
from dreamwell.stores.longterm import Hit, LongTermStore, SaveResult
from dreamwell.stores.model import (
    MAX_CONTENT_CHARS,
    MAX_QUERY_CHARS,
    MemoryEntry,
    WorkingEntry,
    category_prefixes,
    check_category,
    check_tags,
    entry_from_dict,
    entry_to_dict,
    fold_text,
    new_id,
    utcnow,
)
from dreamwell.stores.ranking import rank_hits
from dreamwell.stores.state import write_atomic
from dreamwell.stores.working import TOP_SEGMENTS, SaveOutcome, WorkingMemory, check_own_namespace

__all__ = [
    "CONVERSATION",
    "FEEDBACK",
    "MAX_CONTENT_CHARS",
    "MAX_QUERY_CHARS",
    "RECALL",
    "TOP_SEGMENTS",
    "CrossEncoderReranker",
    "Embedder",
    "EmbedderError",
    "Hit",
    "InvalidInput",
    "JsonlLog",
    "LongTermStore",
    "MemoryEntry",
    "NotFound",
    "OllamaEmbedder",
    "OnnxE5",
    "OnnxMiniLM",
    "SaveOutcome",
    "SaveResult",
    "StoreBusy",
    "StoreError",
    "WorkingEntry",
    "WorkingMemory",
    "category_prefixes",
    "check_category",
    "check_own_namespace",
    "check_tags",
    "entry_from_dict",
    "entry_to_dict",
    "fold_text",
    "new_id",
    "rank_hits",
    "utcnow",
    "write_atomic",
]
