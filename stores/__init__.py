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
from dreamwell.stores.layout import FORMAT, DataDir, newer_format
from dreamwell.stores.lazy_exports import lazy_exports
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
    check_tenant,
    entry_from_dict,
    entry_to_dict,
    fold_text,
    new_id,
    utcnow,
)
from dreamwell.stores.projects import (
    GLOBAL_CATEGORIES,
    PROJECT,
    PROJECT_NAME,
    Project,
    entry_project,
    forget_projects,
    is_global,
    normalise_remote,
    pinned_project,
    project_of,
    project_of_uri,
)

# eager, not lazy: a name the same as its module's would be the module itself once anything
# imported `dreamwell.stores.redact` (the package's attribute is set to the submodule)
from dreamwell.stores.redact import (
    redact,
    redact_category,
    redact_content,
    redact_counted,
    redact_memory,
    redact_record,
    redact_tags,
    refuse_secret,
)
from dreamwell.stores.writable import advice, mount_point, read_only_mount

if TYPE_CHECKING:
    from dreamwell.stores.dream_reports import DreamReports, ReportChanged
    from dreamwell.stores.files import NotWritable, user_output, write_atomic
    from dreamwell.stores.index.embedders import (
        CrossEncoderReranker,
        Embedder,
        EmbedderError,
        OllamaEmbedder,
        OnnxE5,
        OnnxMiniLM,
    )
    from dreamwell.stores.index.hybrid_rank import rank_hits
    from dreamwell.stores.index.stopwords import ENGLISH_STOPWORDS
    from dreamwell.stores.index.temporal import MONTHS
    from dreamwell.stores.inputs.jsonl_log import (
        CONVERSATION,
        CONVERSATION_MAX_BYTES,
        ENRICH_QUEUE,
        ENRICH_QUEUE_MAX_BYTES,
        FEEDBACK,
        RECALL,
        JsonlLog,
    )
    from dreamwell.stores.lease import Held, LeaseLost, claimed, exclusive
    from dreamwell.stores.longterm.store import (
        ANY,
        CHECKPOINT_SECONDS,
        Hit,
        LongTermStore,
        SaveResult,
        Write,
    )
    from dreamwell.stores.progress import ProgressReport, progress_of, report_progress
    from dreamwell.stores.skills.catalog import (
        ANY_REVISION,
        NEW,
        ApplyResult,
        Conflict,
        Skill,
        SkillCatalog,
        SkillChange,
        SkillConflict,
    )
    from dreamwell.stores.skills.folders import make_folder, read_skills
    from dreamwell.stores.skills.porting import export_skills, exported_files, import_skills
    from dreamwell.stores.skills.record import skill_from_json, skill_to_json
    from dreamwell.stores.skills.skill_md import InvalidSkill, SkillFolder, skill_md_parts
    from dreamwell.stores.skills.usage import SkillUsage, UsageStats
    from dreamwell.stores.working.memory import (
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
        "index.embedders",
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
        "inputs.jsonl_log",
    ),
    **dict.fromkeys(
        [
            "ANY",
            "CHECKPOINT_SECONDS",
            "Hit",
            "LongTermStore",
            "SaveResult",
            "Write",
        ],
        "longterm.store",
    ),
    "rank_hits": "index.hybrid_rank",
    "DreamReports": "dream_reports",
    "ReportChanged": "dream_reports",
    "Held": "lease",
    "LeaseLost": "lease",
    "claimed": "lease",
    "exclusive": "lease",
    "InvalidSkill": "skills.skill_md",
    "SkillFolder": "skills.skill_md",
    "skill_md_parts": "skills.skill_md",
    "make_folder": "skills.folders",
    "read_skills": "skills.folders",
    "skill_from_json": "skills.record",
    "skill_to_json": "skills.record",
    "ENGLISH_STOPWORDS": "index.stopwords",
    "MONTHS": "index.temporal",
    **dict.fromkeys(
        [
            "export_skills",
            "exported_files",
            "import_skills",
        ],
        "skills.porting",
    ),
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
        "skills.catalog",
    ),
    **dict.fromkeys(
        [
            "SkillUsage",
            "UsageStats",
        ],
        "skills.usage",
    ),
    **dict.fromkeys(["NotWritable", "user_output", "write_atomic"], "files"),
    **dict.fromkeys(["ProgressReport", "progress_of", "report_progress"], "progress"),
    **dict.fromkeys(
        [
            "TOP_SEGMENTS",
            "SaveOutcome",
            "WorkingMemory",
            "check_own_namespace",
        ],
        "working.memory",
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
    "FORMAT",
    "GLOBAL_CATEGORIES",
    "MAX_CONTENT_CHARS",
    "MAX_QUERY_CHARS",
    "MAX_TTL_MINUTES",
    "MONTHS",
    "NEW",
    "PROJECT",
    "PROJECT_NAME",
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
    "LeaseLost",
    "LongTermStore",
    "MemoryEntry",
    "NotFound",
    "NotWritable",
    "OllamaEmbedder",
    "OnnxE5",
    "OnnxMiniLM",
    "ProgressReport",
    "Project",
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
    "claimed",
    "entry_from_dict",
    "entry_project",
    "entry_to_dict",
    "exclusive",
    "export_skills",
    "exported_files",
    "fold_text",
    "forget_projects",
    "import_skills",
    "is_global",
    "make_folder",
    "mount_point",
    "new_id",
    "newer_format",
    "normalise_remote",
    "pinned_project",
    "progress_of",
    "project_of",
    "project_of_uri",
    "rank_hits",
    "read_only_mount",
    "read_skills",
    "redact",
    "redact_category",
    "redact_content",
    "redact_counted",
    "redact_memory",
    "redact_record",
    "redact_tags",
    "refuse_secret",
    "report_progress",
    "skill_from_json",
    "skill_md_parts",
    "skill_to_json",
    "user_output",
    "utcnow",
    "write_atomic",
]
