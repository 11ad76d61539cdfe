"""The hooks earlier versions of `install claude-code` wrote as Claude Code `http` hooks: a post
to the resident's HTTP door on 127.0.0.1 with a bearer token in its headers. Every hook
is a command now (server/hooks/client.py); these are recognised so that `install` replaces
them, `uninstall` removes them, no backup it leaves keeps their token, and `doctor` names a
settings file that still holds them; `forget_door` deletes the door's own file."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import stat
from pathlib import Path
from typing import Any

# the path of the HTTP hooks earlier versions wrote (a post to 127.0.0.1 with a bearer
# token): still recognised, so that install replaces them and uninstall removes them
OLD_DOOR_PATH = "/dreamwell/hook/"


def is_old_door(hook: Any) -> bool:
    """An earlier version's HTTP hook (its URL and bearer token)."""
    return (
        isinstance(hook, dict)
        and hook.get("type") == "http"
        and OLD_DOOR_PATH in str(hook.get("url", ""))
    )


def without_old_door(config: dict[str, Any]) -> dict[str, Any]:
    """`config` (a settings.json) without an earlier version's HTTP hooks, which hold the
    door's token: what a backup keeps."""
    hooks = config.get("hooks")
    if not isinstance(hooks, dict):
        return config
    kept: dict[str, Any] = {}
    for name, groups in hooks.items():
        if not isinstance(groups, list):
            kept[name] = groups
            continue
        kept[name] = [
            {**g, "hooks": [h for h in g["hooks"] if not is_old_door(h)]}
            if isinstance(g, dict) and isinstance(g.get("hooks"), list)
            else g
            for g in groups
        ]
    return {**config, "hooks": kept}


def old_door_hooks(path: Path) -> int:
    """How many of an earlier version's HTTP hooks the settings file at `path` still holds
    (0 when it is missing, not a regular file or not JSON)."""
    try:
        if not path.is_file():
            return 0
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return 0
    return count_old_door(data) if isinstance(data, dict) else 0


def settings_holding_them(home: Path, here: Path) -> list[Path]:
    """The Claude Code settings files that still hold an earlier version's HTTP hooks: the
    user's (`home`/.claude/settings.json) and a project's, `here` or a folder above it."""
    places = [home, here, *here.parents]
    files = dict.fromkeys(p / ".claude" / "settings.json" for p in places)
    return [path for path in files if old_door_hooks(path)]


def count_old_door(config: dict[str, Any]) -> int:
    hooks = config.get("hooks")
    if not isinstance(hooks, dict):
        return 0
    groups = [g for v in hooks.values() if isinstance(v, list) for g in v if isinstance(g, dict)]
    return sum(
        is_old_door(h) for g in groups if isinstance(g.get("hooks"), list) for h in g["hooks"]
    )


def backup_of(path: Path) -> Path:
    """Where install keeps a file as it was before its change."""
    return path.with_name(path.name + ".dreamwell.bak")


def replace_text(path: Path, text: str, mode_of: Path) -> None:
    """`path` holds `text` (through a temp file renamed over it), with `mode_of`'s mode."""
    tmp = path.with_name(f".{path.name}.dreamwell.tmp")
    tmp.write_text(text, encoding="utf-8")
    if mode_of.exists():
        shutil.copymode(mode_of, tmp)
    os.replace(tmp, path)


def keep_backup(path: Path, before: str) -> None:
    """Keep the file at `path` as it was (`before`, a JSON object) beside it, without an
    earlier version's HTTP hooks and their token."""
    try:  # a TOML file (Codex's) holds no HTTP hook
        data = json.loads(before) if before.strip() else {}
    except ValueError:
        data = {}
    if isinstance(data, dict) and count_old_door(data):
        text = json.dumps(without_old_door(data), indent=2, ensure_ascii=False) + "\n"
        replace_text(backup_of(path), text, path)
    else:
        shutil.copy2(path, backup_of(path))


def scrub_backup(path: Path) -> None:
    """The backup of `path` keeps no token: an earlier version's HTTP hooks, which held the
    door's, are left out of it (everything else stays as it was)."""
    backup = backup_of(path)
    if old_door_hooks(backup) == 0:
        return
    data = json.loads(backup.read_text(encoding="utf-8"))
    text = json.dumps(without_old_door(data), indent=2, ensure_ascii=False) + "\n"
    replace_text(backup, text, backup)


def drop_backup(path: Path) -> None:
    """Remove the backup install kept of `path` (a regular file of this user's only)."""
    _remove_own(backup_of(path))


def forget_door(data_dir: Path) -> None:
    """Delete the data directory's `hook-door.json`, the port and token of the HTTP door
    earlier versions opened (a regular file of this user's only): the next `serve`, resident
    or install does."""
    from dreamwell.stores import DataDir

    _remove_own(DataDir(data_dir).hook_door)


def _remove_own(path: Path) -> None:
    with contextlib.suppress(OSError):
        found = os.lstat(path)
        if stat.S_ISREG(found.st_mode) and found.st_uid == os.getuid():
            path.unlink()
