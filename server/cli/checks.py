"""`dreamwell doctor`'s findings, and its checks of what lies outside the data directory:
the settings (where each value came from, and any that could not be used and took its
default) and the clients `dreamwell install` connected (their config entry and, for Claude
Code, the hooks)."""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dreamwell.server.config import Settings, described


@dataclass(frozen=True)
class Finding:
    """One line of `dreamwell doctor`: ok, a problem (with its fix) or a warning."""

    ok: bool
    what: str
    fix: str = ""
    warn: bool = False  # ok, but something the user would want to know (and its fix)


def check_settings(settings: Settings) -> list[Finding]:
    """One line naming the settings file and every setting not at its default with where it
    came from; a warning for each setting that fell back to its default."""
    from dreamwell.server import settings_file

    where = settings_file.path()
    rows = [r for r in described(settings, {}) if r[2] != "default" and r[0] != "store_uri"]
    set_ = "; ".join(
        f"{name}={shown} ({'the file' if came.startswith('settings file') else came})"
        for name, shown, came in rows
    )
    try:
        exists = "" if Path(where).is_file() else " (none yet)"
    except OSError as exc:  # a folder this user may not enter (run as another user)
        exists = f" (cannot be read: {exc.strerror})"
    found = [
        Finding(True, f"settings file {where}{exists}; not at their default: {set_ or 'none'}")
    ]
    fix = "fix the value or remove it (`dreamwell config set NAME VALUE` / `unset NAME`)"
    found += [Finding(True, line, fix, warn=True) for line in settings.fell_back]
    return found


# the clients whose config is JSON with dreamwell under `mcpServers` (VS Code: `servers`);
# the other agents' installs (server/cli/agents/) are not checked here yet
JSON_CLIENTS = ("claude-code", "claude-desktop", "cursor", "vscode")


def check_clients(settings: Settings) -> list[Finding]:
    """Each client whose config file exists: dreamwell's entry in it, and Claude Code's five
    hooks; a client never installed is not mentioned (one line says none is)."""
    from dreamwell.server.cli.config_files import Where
    from dreamwell.server.cli.install import PLATFORMS, is_ours, plan
    from dreamwell.server.config import client_locations, codex_home, named_data_dir

    home, appdata, xdg = client_locations()
    platform = sys.platform if sys.platform in PLATFORMS else "linux"
    where = Where(platform, home, appdata, xdg, codex_home())
    found: list[Finding] = []
    for client in JSON_CLIENTS:
        changes = plan(client, where, "dreamwell", named_data_dir(settings.data_dir), None, False)
        config = _json(changes[0].path)
        if config is None:
            continue
        key = "servers" if client == "vscode" else "mcpServers"
        entry = (config.get(key) or {}).get("dreamwell") if isinstance(config, dict) else None
        fix = f"dreamwell install {client}"
        if not isinstance(entry, dict):
            found.append(Finding(False, f"{client}: no dreamwell entry in {changes[0].path}", fix))
            continue
        found.append(Finding(True, f"{client}: dreamwell is in {changes[0].path}"))
        if client == "claude-code":
            found.append(_hooks(changes[1].path, is_ours, fix))
            found += [] if platform == "win32" else [_resident()]
    found += [f for a in AGENT_CLIENTS if (f := _agent(a, where, settings)) is not None]
    return found or [
        Finding(True, "no client is connected yet", "dreamwell install <client>", warn=True)
    ]


# the agents install writes TOML or several files for (server/cli/agents/): checked by asking
# whether `dreamwell install AGENT` would still change anything
AGENT_CLIENTS = ("codex", "gemini", "copilot")


def _agent(client: str, where: Any, settings: Settings) -> Finding | None:
    """Whether `client`'s install is whole (None: none of its files names dreamwell: never
    installed there)."""
    from dreamwell.server.cli.config_files import InstallError, pending, read_text
    from dreamwell.server.cli.install import plan, this_command
    from dreamwell.server.config import named_data_dir

    fix = f"dreamwell install {client}"
    try:
        changes = plan(
            client, where, this_command(), named_data_dir(settings.data_dir), None, False
        )
        if not any("dreamwell" in read_text(c.path) for c in changes):
            return None
        left = pending(changes)
    except InstallError as exc:
        return Finding(False, f"{client}: {exc}", fix)
    if not left:
        return Finding(True, f"{client}: dreamwell's server and hooks are installed")
    files = ", ".join(str(p) for p in left)
    return Finding(
        False, f"{client}: dreamwell is not installed as this version would: {files}", fix
    )


def _hooks(path: Path, is_ours: Any, fix: str) -> Finding:
    from dreamwell.server.cli.install import HOOK_EVENTS

    data = _json(path)
    hooks = data.get("hooks") if isinstance(data, dict) else None
    hooks = hooks if isinstance(hooks, dict) else {}
    missing = [
        name
        for name in HOOK_EVENTS.values()
        if not any(
            is_ours(h)
            for group in hooks.get(name) or []
            if isinstance(group, dict)
            for h in group.get("hooks") or []
        )
    ]
    if missing:
        return Finding(False, f"claude-code: hooks missing in {path}: {', '.join(missing)}", fix)
    return Finding(True, f"claude-code: the {len(HOOK_EVENTS)} hooks are in {path}")


def _resident() -> Finding:
    """Whether a resident hook process (server/hooks/resident.py) answers on its socket; none
    is normal between sessions: the next session start starts one."""
    import os

    from dreamwell.server.hooks.client import connect, private, run_dir

    where = run_dir()
    names = sorted(n for n in os.listdir(where) if n.endswith(".sock")) if private(where) else []
    answering = 0
    for name in names:
        sock = connect(os.path.join(where, name))
        if sock is not None:
            answering += 1
            sock.close()
    if answering:
        return Finding(True, f"claude-code: the hooks' resident process answers ({where})")
    return Finding(
        True,
        f"claude-code: no hooks' resident process is running in {where}",
        "none is needed until a session starts: the next Claude Code session starts one",
        warn=True,
    )


def _json(path: Path) -> Any:
    """A client's config as JSON (None: missing, unreadable or not JSON)."""
    try:
        return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None
    except (OSError, ValueError):
        return None
