"""Storage layer of dreamwell: long-term memory (LanceDB + Tantivy) and working memory."""

from dreamwell.stores.embedding import (
    CrossEncoderReranker,
    Embedder,
    EmbedderError,
    OllamaEmbedder,
    OnnxE5,
    OnnxMiniLM,
)
from dreamwell.stores.errors import (
    InvalidInput,
    NotFound,
    StoreBusy,
    StoreError,
    StoreUnavailable,
    WriteFailed,
)
from dreamwell.stores.layout import DataDir, check_tenant
from dreamwell.stores.logs import (
    CONVERSATION,
    CONVERSATION_MAX_BYTES,
    FEEDBACK,
    RECALL,
    JsonlLog,
)
from dreamwell.stores.longterm import (
    ANY,
    CHECKPOINT_SECONDS,
    Hit,
    LongTermStore,
    SaveResult,
    Write,
)
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
    "ANY",
    "CHECKPOINT_SECONDS",
    "CONVERSATION",
    "CONVERSATION_MAX_BYTES",
    "FEEDBACK",
    "MAX_CONTENT_CHARS",
    "MAX_QUERY_CHARS",
    "RECALL",
    "TOP_SEGMENTS",
    "CrossEncoderReranker",
    "DataDir",
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
    "StoreUnavailable",
    "WorkingEntry",
    "WorkingMemory",
    "Write",
    "WriteFailed",
    "category_prefixes",
    "check_category",
    "check_own_namespace",
    "check_tags",
    "check_tenant",
    "entry_from_dict",
    "entry_to_dict",
    "fold_text",
    "new_id",
    "rank_hits",
    "utcnow",
    "write_atomic",
]
