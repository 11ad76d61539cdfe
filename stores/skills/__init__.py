"""The skills store (docs/skills.md): Agent Skills folders, one record per skill, per tenant.

Owns SKILL.md and its folder (skill_md.py: parse, validate, serialise; folders.py: read and
write folders, trees and .zip files), a skill's record (record.py), the catalog with its
compare-and-set writes (catalog.py) over a local or object-store storage (storage.py,
object_storage.py), search over skills (search.py), their uses (usage.py), import and
export (porting.py), and the skills kept as folders a client loads (sync.py).

May import: the stores root, stores.index (text index, embedders, ranking), stores.remote,
stores.inputs (the usage log).

Importing the package is cheap: each name loads its module on first use (PEP 562)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from dreamwell.stores.lazy_exports import lazy_exports

if TYPE_CHECKING:
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
    from dreamwell.stores.skills.record import skill_from_json, skill_project, skill_to_json
    from dreamwell.stores.skills.skill_md import SKILL_MD, InvalidSkill, SkillFolder, skill_md_parts
    from dreamwell.stores.skills.sync import (
        SyncReport,
        disable_sync,
        enable_sync,
        in_step,
        loadable,
        sync_clashes,
        sync_skills,
        sync_target,
    )
    from dreamwell.stores.skills.usage import SkillUsage, UsageStats

_LAZY = {
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
        "catalog",
    ),
    **dict.fromkeys(
        [
            "make_folder",
            "read_skills",
        ],
        "folders",
    ),
    **dict.fromkeys(
        [
            "export_skills",
            "exported_files",
            "import_skills",
        ],
        "porting",
    ),
    **dict.fromkeys(
        [
            "skill_from_json",
            "skill_project",
            "skill_to_json",
        ],
        "record",
    ),
    **dict.fromkeys(
        [
            "SKILL_MD",
            "InvalidSkill",
            "SkillFolder",
            "skill_md_parts",
        ],
        "skill_md",
    ),
    **dict.fromkeys(
        [
            "SkillUsage",
            "UsageStats",
        ],
        "usage",
    ),
    **dict.fromkeys(
        [
            "SyncReport",
            "disable_sync",
            "enable_sync",
            "in_step",
            "loadable",
            "sync_clashes",
            "sync_skills",
            "sync_target",
        ],
        "sync",
    ),
}

__getattr__, __dir__ = lazy_exports(__name__, _LAZY)

__all__ = [
    "ANY_REVISION",
    "NEW",
    "SKILL_MD",
    "ApplyResult",
    "Conflict",
    "InvalidSkill",
    "Skill",
    "SkillCatalog",
    "SkillChange",
    "SkillConflict",
    "SkillFolder",
    "SkillUsage",
    "SyncReport",
    "UsageStats",
    "disable_sync",
    "enable_sync",
    "export_skills",
    "exported_files",
    "import_skills",
    "in_step",
    "loadable",
    "make_folder",
    "read_skills",
    "skill_from_json",
    "skill_md_parts",
    "skill_project",
    "skill_to_json",
    "sync_clashes",
    "sync_skills",
    "sync_target",
]
