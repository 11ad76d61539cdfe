"""A skill's record (`skills/<name>.json`, docs/data-directory.md) and its JSON form: the
files as text (or base64 when not UTF-8), `"executable": true` on an executable one (a record
without it, older ones included, holds none), the SKILL.md parsed again on reading."""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from dreamwell.stores.skills.skill_md import SKILL_MD, parse_skill_md

# a skill's bookkeeping key on export: the project it belongs to (a skill sync writes such a
# skill into that project's `.claude/skills/` only)
PROJECT_KEY = "dreamwell-project"


def declared_project(front_matter: Mapping[str, Any]) -> str | None:
    """The project a SKILL.md's front matter names in its `metadata` (`dreamwell-project`:
    an exported skill of a project, or one a user wrote for it); None: none named."""
    metadata = front_matter.get("metadata")
    found = metadata.get(PROJECT_KEY) if isinstance(metadata, Mapping) else None
    return (str(found).strip() or None) if found else None


def skill_project(skill: Skill) -> str | None:
    """The project key a skill belongs to (None: the user's, everywhere): its record's, else
    its front matter's `metadata` (a folder imported from another machine). Every door that
    serves skills (prompts, resources, recall, the hooks, the folders kept) asks this."""
    return skill.project or declared_project(skill.front_matter)


@dataclass(frozen=True)
class Skill:
    id: str
    name: str
    revision: int
    status: str
    origin: str
    pinned: bool
    created_at: str
    updated_at: str
    files: Mapping[str, bytes] = field(repr=False)
    front_matter: Mapping[str, Any] = field(repr=False)
    body: str = field(repr=False)
    see_also: tuple[str, ...] = ()  # related skills' names (the dream's consolidation fills it)
    project: str | None = None  # its project's key (docs/projects.md); None: global
    executable: frozenset[str] = frozenset()  # the paths of its executable files

    @property
    def description(self) -> str:
        return str(self.front_matter["description"])

    @property
    def skill_md(self) -> str:
        return self.files[SKILL_MD].decode("utf-8")

    def bookkeeping(self) -> dict[str, str]:
        """The `dreamwell-*` metadata keys export writes (usage keys are added by the caller,
        which has the usage log)."""
        return (
            {
                "dreamwell-id": self.id,
                "dreamwell-created": self.created_at,
                "dreamwell-origin": self.origin,
                "dreamwell-status": self.status,
                "dreamwell-pinned": "true" if self.pinned else "false",
            }
            | ({"dreamwell-see-also": " ".join(self.see_also)} if self.see_also else {})
            | ({PROJECT_KEY: self.project} if self.project else {})
        )


# ---- records -------------------------------------------------------------------------------
def _files_json(
    files: Mapping[str, bytes], executable: frozenset[str]
) -> dict[str, dict[str, str | bool]]:
    out: dict[str, dict[str, str | bool]] = {}
    for path, data in sorted(files.items()):
        try:
            out[path] = {"text": data.decode("utf-8")}
        except UnicodeDecodeError:
            out[path] = {"b64": base64.b64encode(data).decode("ascii")}
        if path in executable:
            out[path]["executable"] = True
    return out


def skill_to_json(skill: Skill) -> str:
    record = {
        "id": skill.id,
        "name": skill.name,
        "revision": skill.revision,
        "status": skill.status,
        "origin": skill.origin,
        "pinned": skill.pinned,
        "created_at": skill.created_at,
        "updated_at": skill.updated_at,
        "see_also": list(skill.see_also),
        **({"project": skill.project} if skill.project else {}),
        "files": _files_json(skill.files, skill.executable),
    }
    return json.dumps(record, ensure_ascii=False, indent=1)


def skill_from_json(text: str) -> Skill:
    data = json.loads(text)
    files = {
        path: item["text"].encode("utf-8") if "text" in item else base64.b64decode(item["b64"])
        for path, item in data["files"].items()
    }
    fm, body = parse_skill_md(files[SKILL_MD].decode("utf-8"), data["name"], data["name"])
    return Skill(
        id=str(data["id"]),
        name=str(data["name"]),
        revision=int(data["revision"]),
        status=str(data["status"]),
        origin=str(data["origin"]),
        pinned=bool(data["pinned"]),
        created_at=str(data["created_at"]),
        updated_at=str(data["updated_at"]),
        files=files,
        front_matter=fm,
        body=body,
        see_also=tuple(str(n) for n in data.get("see_also", ())),
        project=str(data["project"]) if data.get("project") else None,
        executable=frozenset(p for p, item in data["files"].items() if item.get("executable")),
    )
