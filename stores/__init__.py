"""Storage layer of dreamwell: long-term memory (LanceDB + Tantivy) and working memory.

Importing the package is cheap: the names that need numpy, pyarrow, LanceDB or Tantivy load
their module on first use (PEP 562), so a server can answer its handshake and tools/list before
any store library is imported, and open the stores afterwards."""

from __future__ import annotations

from typing import TYPE_CHECKING

from dreamwell.stores.errors import (
    InvalidInput,
    NotFound,
    StoreBusy,
    StoreError,
    StoreUnavailable,
    WriteFailed,
)
from dreamwell.stores.layout import DataDir, check_tenant
from dreamwell.stores.lazy import lazy_exports
from dreamwell.stores.model import (
    MAX_CONTENT_CHARS,
    MAX_QUERY_CHARS,
    MAX_TTL_MINUTES,
    MemoryEntry,
    Vector,
    VectorLike,
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
from dreamwell.stores.writable import advice, mount_point, read_only_mount

if TYPE_CHECKING:
    from dreamwell.stores.embedding import (
        CrossEncoderReranker,
        Embedder,
        EmbedderError,
        OllamaEmbedder,
        OnnxE5,
        OnnxMiniLM,
    )
    from dreamwell.stores.lease import Held, exclusive
    from dreamwell.stores.logs import (
        CONVERSATION,
        CONVERSATION_MAX_BYTES,
        ENRICH_QUEUE,
        ENRICH_QUEUE_MAX_BYTES,
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
    from dreamwell.stores.ranking import rank_hits
    from dreamwell.stores.reports import DreamReports, ReportChanged
    from dreamwell.stores.skillfmt import InvalidSkill, SkillFolder, skill_md_parts
    from dreamwell.stores.skillio import make_folder, read_skills
    from dreamwell.stores.skillport import export_skills, exported_files, import_skills
    from dreamwell.stores.skillrecord import skill_from_json, skill_to_json
    from dreamwell.stores.skills import (
        ANY_REVISION,
        NEW,
        ApplyResult,
        Conflict,
        Skill,
        SkillCatalog,
        SkillChange,
        SkillConflict,
    )
    from dreamwell.stores.skillusage import SkillUsage, UsageStats
    from dreamwell.stores.state import write_atomic
    from dreamwell.stores.stopwords import ENGLISH_STOPWORDS
    from dreamwell.stores.working import (
        TOP_SEGMENTS,
        SaveOutcome,
        WorkingMemory,
        check_own_namespace,
    )

# name -> the module that defines it, imported on first access
_LAZY = {
    **dict.fromkeys(
        [
            "CrossEncoderReranker",
            "Embedder",
            "EmbedderError",
            "OllamaEmbedder",
            "OnnxE5",
            "OnnxMiniLM",
        ],
        "embedding",
    ),
    **dict.fromkeys(
        [
            "CONVERSATION",
            "CONVERSATION_MAX_BYTES",
            "ENRICH_QUEUE",
            "ENRICH_QUEUE_MAX_BYTES",
            "FEEDBACK",
            "RECALL",
            "JsonlLog",
        ],
        "logs",
    ),
    **dict.fromkeys(
        ["ANY", "CHECKPOINT_SECONDS", "Hit", "LongTermStore", "SaveResult", "Write"], "longterm"
    ),
    "rank_hits": "ranking",
    "DreamReports": "reports",
    "ReportChanged": "reports",
    "Held": "lease",
    "exclusive": "lease",
    "InvalidSkill": "skillfmt",
    "SkillFolder": "skillfmt",
    "skill_md_parts": "skillfmt",
    "make_folder": "skillio",
    "read_skills": "skillio",
    "skill_from_json": "skillrecord",
    "skill_to_json": "skillrecord",
    "ENGLISH_STOPWORDS": "stopwords",
    **dict.fromkeys(["export_skills", "exported_files", "import_skills"], "skillport"),
    **dict.fromkeys(
        [
            "ANY_REVISION",
            "NEW",
            "ApplyResult",
            "Conflict",
            "Skill",
            "SkillCatalog",
            "SkillChange",
            "SkillConflict",
        ],
        "skills",
    ),
    **dict.fromkeys(["SkillUsage", "UsageStats"], "skillusage"),
    "write_atomic": "state",
    **dict.fromkeys(
        ["TOP_SEGMENTS", "SaveOutcome", "WorkingMemory", "check_own_namespace"], "working"
    ),
}


__getattr__, __dir__ = lazy_exports(__name__, _LAZY)


__all__ = [
    "ANY",
    "ANY_REVISION",
    "CHECKPOINT_SECONDS",
    "CONVERSATION",
    "CONVERSATION_MAX_BYTES",
    "ENGLISH_STOPWORDS",
    "ENRICH_QUEUE",
    "ENRICH_QUEUE_MAX_BYTES",
    "FEEDBACK",
    "MAX_CONTENT_CHARS",
    "MAX_QUERY_CHARS",
    "MAX_TTL_MINUTES",
    "NEW",
    "RECALL",
    "TOP_SEGMENTS",
    "ApplyResult",
    "Conflict",
    "CrossEncoderReranker",
    "DataDir",
    "DreamReports",
    "Embedder",
    "EmbedderError",
    "Held",
    "Hit",
    "InvalidInput",
    "InvalidSkill",
    "JsonlLog",
    "LongTermStore",
    "MemoryEntry",
    "NotFound",
    "OllamaEmbedder",
    "OnnxE5",
    "OnnxMiniLM",
    "ReportChanged",
    "SaveOutcome",
    "SaveResult",
    "Skill",
    "SkillCatalog",
    "SkillChange",
    "SkillConflict",
    "SkillFolder",
    "SkillUsage",
    "StoreBusy",
    "StoreError",
    "StoreUnavailable",
    "UsageStats",
    "Vector",
    "VectorLike",
    "WorkingEntry",
    "WorkingMemory",
    "Write",
    "WriteFailed",
    "advice",
    "category_prefixes",
    "check_category",
    "check_own_namespace",
    "check_tags",
    "check_tenant",
    "entry_from_dict",
    "entry_to_dict",
    "exclusive",
    "export_skills",
    "exported_files",
    "fold_text",
    "import_skills",
    "make_folder",
    "mount_point",
    "new_id",
    "rank_hits",
    "read_only_mount",
    "read_skills",
    "skill_from_json",
    "skill_md_parts",
    "skill_to_json",
    "utcnow",
    "write_atomic",
]
