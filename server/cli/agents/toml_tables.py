"""Our own tables of a TOML file (Codex's `config.toml`), edited as text: every table whose
header `owned` says is ours is taken out, ours are written where the first of them was (else
at the end), and every other byte of the file stays as it was. The result is read back
(tomllib, Python 3.11+) and must hold exactly what the file held besides ours, else nothing
is written: a file that defines our tables another way (dotted keys, inline tables) is
refused with a one-line error."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

from dreamwell.server.cli.config_files import InstallError

Key = tuple[str, ...]
_BARE = re.compile(r"[A-Za-z0-9_-]+")
_HEADER = re.compile(r"^\s*\[(?!\[)(.*)\]\s*(?:#.*)?$")
_ANY_HEADER = re.compile(r"^\s*\[")
_PART = re.compile(r"""\s*(?:([A-Za-z0-9_-]+)|"((?:[^"\\]|\\.)*)"|'([^']*)')\s*(\.|$)""")


def header_key(line: str) -> Key | None:
    """The dotted key of a `[table]` header line (None: not one, or not one we can read)."""
    found = _HEADER.match(line.rstrip("\r\n"))
    if found is None:
        return None
    text, parts, at = found.group(1), [], 0
    while at < len(text):
        part = _PART.match(text, at)
        if part is None:
            return None
        bare, basic, literal = part.group(1), part.group(2), part.group(3)
        parts.append(bare or (json.loads(f'"{basic}"') if basic is not None else literal or ""))
        at = part.end()
        if not part.group(4):
            break
    return tuple(parts) if at >= len(text) and parts else None


def _key(part: str) -> str:
    return part if _BARE.fullmatch(part) else json.dumps(part, ensure_ascii=False)


def value(given: Any) -> str:
    if isinstance(given, bool):
        return "true" if given else "false"
    if isinstance(given, int | float | str):
        return json.dumps(given, ensure_ascii=False)
    if isinstance(given, list):
        return "[" + ", ".join(value(v) for v in given) + "]"
    raise InstallError(f"cannot write {type(given).__name__} values back")


def render(key: Key, table: dict[str, Any]) -> str:
    """`[key]` with its values, then each sub-table as a table of its own."""
    lines = ["[" + ".".join(_key(p) for p in key) + "]"]
    lines += [f"{_key(k)} = {value(v)}" for k, v in table.items() if not isinstance(v, dict)]
    out = "\n".join(lines) + "\n"
    for name, inner in table.items():
        if isinstance(inner, dict):
            out += "\n" + render((*key, name), inner)
    return out


def _blocks(text: str) -> list[tuple[Key | None, str]]:
    """The file as (header key, text) blocks: the top (no header), then one per table."""
    blocks: list[tuple[Key | None, str]] = [(None, "")]
    for line in text.splitlines(keepends=True):
        if _ANY_HEADER.match(line):
            blocks.append((header_key(line) or ("[unread]",), line))
        else:
            blocks[-1] = (blocks[-1][0], blocks[-1][1] + line)
    return blocks


def rewrite(
    text: str, owned: Callable[[Key], bool], tables: list[tuple[Key, dict[str, Any]]]
) -> str:
    """`text` with the tables `owned` picks replaced by `tables` (none: removed)."""
    ours = "\n".join(render(k, t) for k, t in tables)
    blocks = _blocks(text)
    kept = [b for b in blocks if b[0] is None or not owned(b[0])]
    first = next((i for i, b in enumerate(blocks) if b[0] is not None and owned(b[0])), None)
    later = first is not None and any(b[0] is not None and not owned(b[0]) for b in blocks[first:])
    if later and ours:  # where ours were, with the user's tables after them
        before = sum(1 for b in blocks[:first] if b[0] is None or not owned(b[0]))
        head, tail = kept[:before], kept[before:]
        out = "".join(b[1] for b in head) + ours + "\n" + "".join(b[1] for b in tail)
    else:
        rest = "".join(b[1] for b in kept)
        if first is not None or ours:
            rest = rest.rstrip("\n") + "\n" if rest.strip() else ""
        out = rest + ("\n" if rest and ours else "") + ours
    check(text, out, owned, tables)
    return out


def _without(data: dict[str, Any], owned: Callable[[Key], bool], at: Key = ()) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, inner in data.items():
        key = (*at, name)
        if owned(key):
            continue
        out[name] = _without(inner, owned, key) if isinstance(inner, dict) else inner
    return {k: v for k, v in out.items() if v != {} or data[k] == {}}


def check(
    before: str, after: str, owned: Callable[[Key], bool], tables: list[tuple[Key, dict[str, Any]]]
) -> None:
    """The edit kept everything but ours, and ours read back as written."""
    try:
        import tomllib
    except ImportError:  # Python 3.10: nothing to read it back with
        return
    try:
        old, new = tomllib.loads(before), tomllib.loads(after)
    except tomllib.TOMLDecodeError as exc:
        raise InstallError(f"is not TOML install can edit ({exc}); fix or move it") from None
    if _without(old, owned) != _without(new, owned):
        raise InstallError("defines dreamwell's tables in a way install cannot edit")
    for key, table in tables:
        found: Any = new
        for part in key:
            found = found.get(part, {}) if isinstance(found, dict) else {}
        if found != table:
            raise InstallError("defines dreamwell's tables in a way install cannot edit")


def table_at(text: str, key: Key) -> dict[str, Any]:
    """The table at `key` as the file holds it ({} when none, or unreadable)."""
    try:
        import tomllib

        found: Any = tomllib.loads(text)
    except (ImportError, ValueError):
        return {}
    for part in key:
        found = found.get(part) if isinstance(found, dict) else None
    return dict(found) if isinstance(found, dict) else {}
