"""Agent Skills folders (docs/skills.md): parse, validate and serialise `SKILL.md` and its files.

A skill is a folder `<name>/` holding `SKILL.md` (YAML front matter between `---` lines, then
a Markdown body) and optional files (`scripts/`, `references/`, `assets/`, …). dreamwell keeps
its bookkeeping in the front matter's `metadata` under keys prefixed `dreamwell-`; they are cut
out on import (`strip_bookkeeping`) and written back on export (`add_bookkeeping`) line by line,
never by re-serialising the YAML, so a folder round-trips byte for byte apart from those keys.

Every refusal is an `InvalidSkill` naming the rule that failed (`[rule: name-format]`).
Unknown front-matter keys (Claude Code's `when_to_use`, `allowed-tools`, …) are kept verbatim.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from dreamwell.stores.errors import InvalidInput

SKILL_MD = "SKILL.md"
META_PREFIX = "dreamwell-"
NAME_RE = re.compile(r"[a-z0-9]+(-[a-z0-9]+)*")
XML_TAG = re.compile(r"<\s*/?\s*[A-Za-z][A-Za-z0-9_.:-]*(\s[^<>]*)?/?\s*>")
RESERVED_WORDS = ("claude", "anthropic")
RESERVED_NAMES = ("recall", "dream")  # the server's own prompts
MAX_NAME = 64
MAX_DESCRIPTION = 1024
MAX_COMPATIBILITY = 500
MAX_FILE_BYTES = 8 * 1024 * 1024
MAX_SKILL_BYTES = 16 * 1024 * 1024  # SEP-2640: servers SHOULD stay at or under 16 MiB …
MAX_FILES = 512  # … and 512 files per skill
MAX_FRONT_MATTER = 64 * 1024  # bytes of YAML between the '---' lines
MAX_YAML_DEPTH = 32  # nested sequences and mappings
MAX_YAML_NODES = 10_000  # scalars, sequences and mappings in all
_SAFE_PART = re.compile(r"[^\x00-\x1f/\\]+")
_META_LINE = re.compile(r"""^metadata:[ \t]*(#.*)?$""")
# dreamwell's bookkeeping keys; `dreamwell-project` (the project a skill belongs to,
# docs/projects.md) is the skill's own: kept in its SKILL.md like any key the user wrote
_OWN_KEY = re.compile(r"""^[ \t]+["']?dreamwell-(?!project["' \t:])[A-Za-z0-9_-]*["']?[ \t]*:""")


class InvalidSkill(InvalidInput):
    """A skill folder broke a rule of docs/skills.md; `rule` names it, the text how to fix it."""

    def __init__(self, where: str, message: str, rule: str) -> None:
        super().__init__(f"{where}: {message} [rule: {rule}]")
        self.rule = rule


@dataclass(frozen=True)
class SkillFolder:
    """A validated skill: its files (path → bytes; `SKILL.md` without dreamwell's keys) and
    the parsed front matter. `bookkeeping` holds the `dreamwell-*` keys found on import;
    `executable` the paths of the files with the executable bit (`scripts/run.sh`)."""

    name: str
    files: Mapping[str, bytes]
    front_matter: Mapping[str, Any]
    body: str
    bookkeeping: Mapping[str, str]
    executable: frozenset[str] = frozenset()

    @property
    def description(self) -> str:
        return str(self.front_matter["description"])


# ---- SKILL.md ------------------------------------------------------------------------------
def skill_md_parts(text: str, where: str) -> tuple[str, list[str], str, str]:
    """(opening line, front-matter lines, closing line, body) of a SKILL.md, each line with
    its own ending, so that joining them gives the text back exactly."""
    lines = text.splitlines(keepends=True)
    if not lines or lines[0].rstrip("\r\n") != "---":
        raise InvalidSkill(where, "SKILL.md must start with a '---' line", "front-matter")
    for i, line in enumerate(lines[1:], start=1):
        if line.rstrip("\r\n") == "---":
            return lines[0], lines[1:i], line, "".join(lines[i + 1 :])
    raise InvalidSkill(where, "SKILL.md front matter has no closing '---' line", "front-matter")


def _check_yaml_shape(text: str, where: str) -> None:
    """Refuse, before anything is built, what could make loading the YAML cost more than its
    size: aliases (a "billion laughs" alias bomb expands nine lines into 9⁹ items), deep
    nesting and too many nodes. The events are read one at a time, so this is linear in the
    text and bounded by MAX_FRONT_MATTER."""
    if len(text.encode("utf-8")) > MAX_FRONT_MATTER:
        raise InvalidSkill(
            where, f"front matter is over {MAX_FRONT_MATTER:,} bytes", "front-matter-size"
        )
    import yaml  # only where a SKILL.md is parsed: every hook that lists skills imports this

    depth = nodes = 0
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    for event in yaml.parse(text, Loader=loader):
        if isinstance(event, yaml.AliasEvent):
            raise InvalidSkill(where, "front matter must not use YAML aliases (*name)", "yaml")
        if isinstance(event, yaml.NodeEvent):
            nodes += 1
        if isinstance(event, yaml.CollectionStartEvent):
            depth += 1
        elif isinstance(event, yaml.CollectionEndEvent):
            depth -= 1
        if depth > MAX_YAML_DEPTH or nodes > MAX_YAML_NODES:
            raise InvalidSkill(
                where,
                f"front matter is nested over {MAX_YAML_DEPTH} levels or holds over "
                f"{MAX_YAML_NODES:,} values",
                "yaml",
            )


def _load_yaml(text: str, where: str) -> dict[str, Any]:
    import yaml  # only where a SKILL.md is parsed: a hook listing skills never loads it

    try:
        _check_yaml_shape(text, where)
        data = yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    except yaml.YAMLError as exc:
        detail = " ".join(str(exc).split())[:300]
        raise InvalidSkill(where, f"front matter is not valid YAML ({detail})", "yaml") from exc
    if not isinstance(data, dict):
        raise InvalidSkill(where, "front matter must be a YAML mapping of keys", "yaml")
    return {str(k): v for k, v in data.items()}


def _short(value: Any) -> str:
    """`repr(value)` cut to 60 characters (never more work than that: a value may be big)."""
    text = repr(value) if isinstance(value, (str, int, float, bool)) else type(value).__name__
    return text if len(text) <= 60 else text[:57] + "..."


def check_name(name: Any, where: str, folder: str | None = None) -> str:
    if not isinstance(name, str) or not name:
        raise InvalidSkill(where, "front matter needs a 'name' (text)", "name-required")
    if len(name) > MAX_NAME:
        raise InvalidSkill(
            where, f"name is {len(name)} characters; at most {MAX_NAME}", "name-length"
        )
    if not NAME_RE.fullmatch(name):
        raise InvalidSkill(
            where,
            f"name {name!r} must be lowercase letters, digits and single hyphens, not starting "
            "or ending with one (^[a-z0-9]+(-[a-z0-9]+)*$)",
            "name-format",
        )
    for word in RESERVED_WORDS:
        if word in name:
            raise InvalidSkill(where, f"name {name!r} must not contain {word!r}", "name-reserved")
    if name in RESERVED_NAMES:
        raise InvalidSkill(
            where, f"name {name!r} is a prompt of dreamwell itself; choose another", "name-reserved"
        )
    if folder is not None and folder != name:
        raise InvalidSkill(
            where, f"name {name!r} must equal its folder's name {folder!r}", "name-matches-folder"
        )
    return name


def _check_text(fm: Mapping[str, Any], key: str, limit: int, where: str, required: bool) -> None:
    value = fm.get(key)
    if value is None and not required:
        return
    if not isinstance(value, str) or not value.strip():
        raise InvalidSkill(
            where, f"front matter needs a non-empty {key!r} (text)", f"{key}-required"
        )
    if len(value) > limit:
        raise InvalidSkill(
            where, f"{key} is {len(value)} characters; at most {limit}", f"{key}-length"
        )


def _check_metadata(value: Any, where: str) -> None:
    if value is None:
        return
    if not isinstance(value, dict):
        raise InvalidSkill(where, "metadata must be a mapping of text to text", "metadata")
    for key, item in value.items():
        if not isinstance(key, str) or not isinstance(item, str):
            raise InvalidSkill(
                where,
                f"metadata {_short(key)}: keys and values must be text (quote {_short(item)})",
                "metadata",
            )


def check_front_matter(fm: Mapping[str, Any], where: str, folder: str | None) -> None:
    check_name(fm.get("name"), where, folder)
    _check_text(fm, "description", MAX_DESCRIPTION, where, required=True)
    if XML_TAG.search(str(fm["description"])):
        raise InvalidSkill(where, "description must not contain XML tags", "description-no-xml")
    _check_text(fm, "compatibility", MAX_COMPATIBILITY, where, required=False)
    if "license" in fm and not isinstance(fm["license"], str):
        raise InvalidSkill(where, "license must be text", "license")
    _check_metadata(fm.get("metadata"), where)


def parse_skill_md(text: str, where: str, folder: str | None) -> tuple[dict[str, Any], str]:
    """(front matter, body) of a SKILL.md, validated per docs/skills.md (`folder`: the folder's name
    the `name` must equal, None to skip that rule)."""
    _, lines, _, body = skill_md_parts(text, where)
    fm = _load_yaml("".join(lines), where)
    check_front_matter(fm, where, folder)
    return fm, body


# ---- dreamwell's bookkeeping keys ----------------------------------------------------------
def _metadata_block(lines: list[str]) -> tuple[int, int] | None:
    """(index of the block-style `metadata:` line, index after its last child line)."""
    for i, line in enumerate(lines):
        if _META_LINE.match(line.rstrip("\r\n")):
            end = i + 1
            for j in range(i + 1, len(lines)):
                stripped = lines[j].rstrip("\r\n")
                if stripped and not stripped[0].isspace():
                    break
                if stripped.strip():
                    end = j + 1
            return i, end
    return None


def strip_bookkeeping(text: str) -> tuple[str, dict[str, str]]:
    """SKILL.md without its `dreamwell-*` metadata lines (and without a `metadata:` line left
    empty by that), plus those keys' values."""
    try:
        opening, lines, closing, body = skill_md_parts(text, "SKILL.md")
    except InvalidSkill:
        return text, {}
    block = _metadata_block(lines)
    if block is None:
        return text, {}
    start, end = block
    own = [j for j in range(start + 1, end) if _OWN_KEY.match(lines[j])]
    if not own:
        return text, {}
    found = _load_yaml("".join(lines[start:end]), "SKILL.md").get("metadata") or {}
    kept = [lines[j] for j in range(start + 1, end) if j not in own]
    head = [] if not any(line.strip() for line in kept) else [lines[start]]
    new = lines[:start] + head + kept + lines[end:]
    values = {
        str(k): str(v)
        for k, v in found.items()
        if str(k).startswith(META_PREFIX) and str(k) != "dreamwell-project"
    }
    return opening + "".join(new) + closing + body, values


def add_bookkeeping(text: str, keys: Mapping[str, str]) -> str:
    """SKILL.md with `keys` (each starting `dreamwell-`) added to its block-style `metadata`
    (made at the end of the front matter when there is none). A flow-style `metadata: {…}`
    is left as it is (nothing added)."""
    opening, lines, closing, body = skill_md_parts(text, "SKILL.md")
    ending = "\r\n" if opening.endswith("\r\n") else "\n"
    block = _metadata_block(lines)
    if block is None and any(re.match(r"^metadata:", line) for line in lines):
        return text
    indent = "  "
    if block is not None:
        for line in lines[block[0] + 1 : block[1]]:
            if line.strip():
                indent = line[: len(line) - len(line.lstrip())]
                break
    added = [f"{indent}{k}: {json.dumps(v, ensure_ascii=False)}{ending}" for k, v in keys.items()]
    if block is None:
        if lines and not lines[-1].endswith(("\n", "\r")):
            lines[-1] += ending
        new = [*lines, "metadata:" + ending, *added]
    else:
        new = lines[: block[1]] + added + lines[block[1] :]
    return opening + "".join(new) + closing + body
