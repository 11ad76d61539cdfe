"""The files `dreamwell install` edits, for every client: where a client's configuration
lives (`Where`), one file's edit (`Change`: a JSON object's, or `TextChange`: a text's, as
Codex's TOML), and applying a plan — every file read first (one bad file: nothing is
written), then written atomically with the file as it was kept as `<file>.dreamwell.bak`, or
shown as a diff (`--dry-run`). An edit whose result is empty removes a file install made
(`drop_empty`). Also the hook commands install writes (`hook_runner`, `hook_command`) and
`set_hook_groups`, the hooks of a Claude-Code-shaped `hooks` object (Claude Code, Codex,
Gemini CLI)."""

from __future__ import annotations

import difflib
import json
import os
import stat
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dreamwell.server.hooks.old_hooks import (
    drop_backup,
    is_old_door,
    keep_backup,
    replace_text,
    scrub_backup,
)

NAME = "dreamwell"
Edit = Callable[[dict[str, Any]], dict[str, Any]]


class InstallError(Exception):
    """Said to the user as one line; nothing was written."""


@dataclass(frozen=True)
class Where:
    """Where a client's configuration lives on one machine."""

    platform: str  # linux | darwin | win32
    home: Path
    appdata: Path | None = None  # Windows %APPDATA%
    xdg_config: Path | None = None  # Linux $XDG_CONFIG_HOME
    codex_home: Path | None = None  # $CODEX_HOME (None: ~/.codex)

    def app_config(self, *parts: str) -> Path:
        """The per-user application folder of the platform (Claude Desktop's, VS Code's)."""
        if self.platform == "darwin":
            return self.home.joinpath("Library", "Application Support", *parts)
        if self.platform == "win32":
            return (self.appdata or self.home / "AppData" / "Roaming").joinpath(*parts)
        return (self.xdg_config or self.home / ".config").joinpath(*parts)


@dataclass(frozen=True)
class Change:
    """A JSON object file's edit (`drop_empty`: the file goes when the edit empties it)."""

    path: Path
    edit: Edit
    drop_empty: bool = False


@dataclass(frozen=True)
class TextChange:
    """A text file's edit (`rewrite` raises InstallError when it cannot edit safely)."""

    path: Path
    rewrite: Callable[[str], str]
    drop_empty: bool = False


# ---- edits ------------------------------------------------------------------------------------
def set_server(key: str, entry: dict[str, Any], remove: bool) -> Edit:
    def edit(config: dict[str, Any]) -> dict[str, Any]:
        servers = object_at(config, key)
        if remove:
            servers.pop(NAME, None)
        else:
            old = servers.get(NAME)
            servers[NAME] = {**old, **entry} if isinstance(old, dict) else entry
        return put_key(config, key, servers)

    return edit


def object_at(config: dict[str, Any], key: str) -> dict[str, Any]:
    """A copy of `config[key]`, which must be a JSON object when present."""
    found = config.get(key)
    if found is not None and not isinstance(found, dict):
        raise InstallError(f"its '{key}' is not a JSON object")
    return dict(found or {})


def put_key(config: dict[str, Any], key: str, value: Any) -> dict[str, Any]:
    """`config` with `key` set to `value`; an empty value is left out unless it was there
    empty already (what our removal emptied goes: uninstall leaves no empty key)."""
    out = dict(config)
    if value or (key in config and not config[key]):
        out[key] = value
    else:
        out.pop(key, None)
    return out


def chain(edits: list[Edit]) -> Edit:
    """Several edits of one file, one after the other."""

    def edit(config: dict[str, Any]) -> dict[str, Any]:
        for one in edits:
            config = one(config)
        return config

    return edit


def is_our_command(hook: Any) -> bool:
    """A command hook install wrote: `dreamwell hook EVENT` or the hooks' lean client."""
    if not isinstance(hook, dict):
        return False
    text = str(hook.get("command", ""))
    words = f" {text} ".replace("\\", "/")
    return "dreamwell" in text and (" hook " in words or "/hooks/client.py " in words)


def set_hook_groups(
    names: Mapping[str, str], entries: Mapping[str, dict[str, Any]], remove: bool
) -> Edit:
    """In `hooks`, for each of our events (`names`: ours -> the agent's), our hook as a
    group of its own after the user's, ours from before taken out first."""

    def edit(config: dict[str, Any]) -> dict[str, Any]:
        hooks = object_at(config, "hooks")
        for event, name in names.items():
            groups = [_without_ours(g) for g in hooks.get(name) or []]
            groups = [g for g in groups if not isinstance(g, dict) or g.get("hooks")]
            if not remove:
                groups.append({"hooks": [entries[event]]})
            if groups:
                hooks[name] = groups
            else:
                hooks.pop(name, None)
        return put_key(config, "hooks", hooks)

    return edit


def _without_ours(group: Any) -> Any:
    if not isinstance(group, dict) or not isinstance(group.get("hooks"), list):
        return group
    ours = [h for h in group["hooks"] if is_our_command(h) or is_old_door(h)]
    return {**group, "hooks": [h for h in group["hooks"] if h not in ours]}


# ---- the hook commands ---------------------------------------------------------------------
def quoted(text: str, platform: str) -> str:
    if platform == "win32":
        return f'"{text}"' if " " in text else text
    import shlex

    return shlex.quote(text)


def hook_runner(command: str, platform: str) -> list[str]:
    """What each hook command starts with. On POSIX: this interpreter running the hooks'
    lean client (server/hooks/client.py, -I -S: no site-packages to import), which hands
    the hook to a resident process and falls back to `dreamwell hook` itself; on Windows,
    which has no Unix sockets for it, `dreamwell hook`."""
    if platform == "win32":
        return [command, "hook"]
    from dreamwell.server.hooks import client

    return [sys.executable, "-I", "-S", str(Path(client.__file__))]


def hook_command(
    runner: list[str],
    event: str,
    data_dir: Path | None,
    platform: str,
    extra: tuple[str, ...] = (),
) -> str:
    parts = [*(quoted(p, platform) for p in runner), event]
    if data_dir is not None:
        parts += ["--data-dir", quoted(str(data_dir), platform)]
    return " ".join(parts + list(extra))


# ---- reading, writing -------------------------------------------------------------------------
def read_text(path: Path) -> str:
    """The file's text ("" when missing); one that is not a regular file is refused (a FIFO
    would hang the read)."""
    try:
        if not stat.S_ISREG(path.stat().st_mode):
            raise InstallError(f"{path} is not a regular file; nothing was changed")
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return ""
    except (OSError, UnicodeDecodeError) as exc:
        raise InstallError(f"cannot read {path} ({exc}); nothing was changed") from exc


def read_json(path: Path) -> tuple[str, dict[str, Any]]:
    """(text as it is, parsed object); a missing file is empty."""
    text = read_text(path)
    if not text.strip():
        return text, {}
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise InstallError(
            f"{path} is not valid JSON ({exc}); fix or move it, nothing was changed"
        ) from None
    if not isinstance(data, dict):
        raise InstallError(f"{path} is not a JSON object; nothing was changed")
    return text, data


def _planned(change: Change | TextChange) -> tuple[str, str | None] | None:
    """(before, after) of one change (after None: the file goes), None when nothing
    changes."""
    if isinstance(change, TextChange):
        before = read_text(change.path)
        try:
            after = change.rewrite(before)
        except InstallError as exc:
            raise InstallError(f"{change.path}: {exc}; nothing was changed") from None
        if after == before:
            return None
        return before, None if change.drop_empty and not after.strip() else after
    before, data = read_json(change.path)
    try:
        edited = change.edit(data)
    except InstallError as exc:
        raise InstallError(f"{change.path}: {exc}; nothing was changed") from None
    if edited == data:
        return None
    if change.drop_empty and not edited:
        return before, None
    return before, _as_kept(change.path, edited) or json.dumps(
        edited, indent=2, ensure_ascii=False
    ) + "\n"


def _as_kept(path: Path, data: dict[str, Any]) -> str | None:
    """The backup's very text when it holds `data` (an uninstall gives the file back byte
    for byte), else None."""
    try:
        kept = path.with_name(path.name + ".dreamwell.bak").read_text(encoding="utf-8")
        return kept if json.loads(kept) == data else None
    except (OSError, ValueError):
        return None


def pending(changes: list[Change | TextChange]) -> list[Path]:
    """The files `changes` would still change (none: install is done as it would do it)."""
    return [c.path for c in changes if _planned(c) is not None]


def apply(
    changes: list[Change | TextChange],
    dry_run: bool,
    out: Callable[[str], None],
    uninstall: bool = False,
) -> int:
    """Read every file first (one bad file: nothing is written), then write or show; an
    uninstall also removes the backups install kept (the files are the user's again)."""
    planned = []
    for change in changes:
        found = _planned(change)
        if found is not None:
            planned.append((change.path, *found))
    for path, before, after in planned:
        if dry_run:
            diff = difflib.unified_diff(
                before.splitlines(keepends=True),
                (after or "").splitlines(keepends=True),
                str(path),
                str(path) if after is not None else "/dev/null",
            )
            out("".join(diff))
        elif after is None:
            keep_backup(path, before)
            path.unlink()
            out(f"removed {path}\n")
        else:
            _write(path, before, after)
            out(f"updated {path}\n")
    for change in [] if dry_run else changes:  # one an earlier version left
        if uninstall:
            drop_backup(change.path)
        else:
            scrub_backup(change.path)
    if not planned:
        out("already as asked; nothing to change\n")
    return 0


def _write(path: Path, before: str, after: str) -> None:
    """Through a symlink, its target is replaced (the link stays: dotfiles kept elsewhere)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    real = Path(os.path.realpath(path))
    if before:
        keep_backup(real, before)
    replace_text(real, after, real)
