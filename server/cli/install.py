"""`dreamwell install CLIENT`: write dreamwell into a client's own MCP config (and, for Claude
Code, its hooks), for the platform's documented locations.

claude-code     ~/.claude.json `mcpServers`, hooks in ~/.claude/settings.json `hooks`
                (--project DIR: DIR/.mcp.json and DIR/.claude/settings.json)
claude-desktop  claude_desktop_config.json `mcpServers` in ~/Library/Application Support/Claude
                (macOS), %APPDATA%\\Claude (Windows), ~/.config/Claude (Linux); no --project
cursor          ~/.cursor/mcp.json `mcpServers` (--project DIR: DIR/.cursor/mcp.json)
vscode          the user profile's mcp.json `servers`: ~/Library/Application Support/Code/User
                (macOS), %APPDATA%\\Code\\User (Windows), ~/.config/Code/User (Linux)
                (--project DIR: DIR/.vscode/mcp.json)

Files are merged, never replaced: every other key stays as it was, an existing `dreamwell`
entry keeps the keys the user added. The file as it was is kept as `<file>.dreamwell.bak`,
a second run changes nothing, a file that is not a JSON object is left untouched with a
one-line error (and then no file is written), and `--dry-run` prints the diff instead."""

from __future__ import annotations

import argparse
import difflib
import json
import os
import shutil
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dreamwell.server.hooks.events import EVENTS

if TYPE_CHECKING:
    from dreamwell.server.config import Settings

CLIENTS = ("claude-code", "claude-desktop", "cursor", "vscode")
PLATFORMS = ("linux", "darwin", "win32")
NAME = "dreamwell"
HOOK_TIMEOUT = 10  # seconds Claude Code gives a hook before it goes on without it
# Claude Code's event name for each `dreamwell hook EVENT`
HOOK_EVENTS = {
    "session-start": "SessionStart",
    "user-prompt": "UserPromptSubmit",
    "stop": "Stop",
    "pre-compact": "PreCompact",
    "session-end": "SessionEnd",
}
assert tuple(HOOK_EVENTS) == EVENTS


class InstallError(Exception):
    """Said to the user as one line; nothing was written."""


@dataclass(frozen=True)
class Where:
    """Where a client's configuration lives on one machine."""

    platform: str  # linux | darwin | win32
    home: Path
    appdata: Path | None = None  # Windows %APPDATA%
    xdg_config: Path | None = None  # Linux $XDG_CONFIG_HOME

    def app_config(self, *parts: str) -> Path:
        """The per-user application folder of the platform (Claude Desktop's, VS Code's)."""
        if self.platform == "darwin":
            return self.home.joinpath("Library", "Application Support", *parts)
        if self.platform == "win32":
            return (self.appdata or self.home / "AppData" / "Roaming").joinpath(*parts)
        return (self.xdg_config or self.home / ".config").joinpath(*parts)


@dataclass(frozen=True)
class Change:
    path: Path
    edit: Callable[[dict[str, Any]], dict[str, Any]]


def server_entry(client: str, command: str, data_dir: Path | None) -> dict[str, Any]:
    entry: dict[str, Any] = {"command": command, "args": ["serve"]}
    if client in ("claude-code", "vscode"):
        entry = {"type": "stdio", **entry}
    if data_dir is not None:
        entry["env"] = {"DREAMWELL_DATA_DIR": str(data_dir)}
    return entry


def _quoted(text: str, platform: str) -> str:
    if platform == "win32":
        return f'"{text}"' if " " in text else text
    import shlex

    return shlex.quote(text)


def hook_command(command: str, event: str, data_dir: Path | None, platform: str) -> str:
    parts = [_quoted(command, platform), "hook", event]
    if data_dir is not None:
        parts += ["--data-dir", _quoted(str(data_dir), platform)]
    return " ".join(parts)


def is_ours(hook: Any) -> bool:
    text = str(hook.get("command", "")) if isinstance(hook, dict) else ""
    return "dreamwell" in text and " hook " in f"{text} "


# ---- edits ------------------------------------------------------------------------------------
def set_server(
    key: str, entry: dict[str, Any], remove: bool
) -> Callable[[dict[str, Any]], dict[str, Any]]:
    def edit(config: dict[str, Any]) -> dict[str, Any]:
        servers = config.get(key)
        if servers is not None and not isinstance(servers, dict):
            raise InstallError(f"its '{key}' is not a JSON object")
        servers = dict(servers or {})
        if remove:
            servers.pop(NAME, None)
        else:
            old = servers.get(NAME)
            servers[NAME] = {**old, **entry} if isinstance(old, dict) else entry
        out = dict(config)
        if servers or key in config:
            out[key] = servers
        return out

    return edit


def set_hooks(commands: dict[str, str], remove: bool) -> Callable[[dict[str, Any]], dict[str, Any]]:
    def edit(config: dict[str, Any]) -> dict[str, Any]:
        hooks = config.get("hooks")
        if hooks is not None and not isinstance(hooks, dict):
            raise InstallError("its 'hooks' is not a JSON object")
        hooks = dict(hooks or {})
        for event, name in HOOK_EVENTS.items():
            groups = [_without_ours(g) for g in hooks.get(name) or []]
            groups = [g for g in groups if not isinstance(g, dict) or g.get("hooks")]
            if not remove:
                hook = {"type": "command", "command": commands[event], "timeout": HOOK_TIMEOUT}
                groups.append({"hooks": [hook]})
            if groups:
                hooks[name] = groups
            else:
                hooks.pop(name, None)
        out = dict(config)
        if hooks or "hooks" in config:
            out["hooks"] = hooks
        return out

    return edit


def _without_ours(group: Any) -> Any:
    if not isinstance(group, dict) or not isinstance(group.get("hooks"), list):
        return group
    return {**group, "hooks": [h for h in group["hooks"] if not is_ours(h)]}


# ---- planning -----------------------------------------------------------------------------------
def plan(
    client: str,
    where: Where,
    command: str,
    data_dir: Path | None,
    project: Path | None,
    remove: bool,
) -> list[Change]:
    """The files to change for `client` and how."""
    entry = server_entry(client, command, data_dir)
    if client == "claude-desktop":
        if project is not None:
            raise InstallError("claude-desktop has no per-project config; drop --project")
        path = where.app_config("Claude", "claude_desktop_config.json")
        return [Change(path, set_server("mcpServers", entry, remove))]
    if client == "cursor":
        path = (project or where.home) / ".cursor" / "mcp.json"
        return [Change(path, set_server("mcpServers", entry, remove))]
    if client == "vscode":
        path = (
            project / ".vscode" / "mcp.json"
            if project
            else where.app_config("Code", "User", "mcp.json")
        )
        return [Change(path, set_server("servers", entry, remove))]
    commands = {e: hook_command(command, e, data_dir, where.platform) for e in EVENTS}
    servers = project / ".mcp.json" if project else where.home / ".claude.json"
    settings = (project or where.home) / ".claude" / "settings.json"
    return [
        Change(servers, set_server("mcpServers", entry, remove)),
        Change(settings, set_hooks(commands, remove)),
    ]


def _read(path: Path) -> tuple[str, dict[str, Any]]:
    """(text as it is, parsed object); a missing file is empty."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return "", {}
    except (OSError, UnicodeDecodeError) as exc:
        raise InstallError(f"cannot read {path} ({exc}); nothing was changed") from exc
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


def apply(changes: list[Change], dry_run: bool, out: Callable[[str], None]) -> int:
    """Read every file first (one bad file: nothing is written), then write or show."""
    planned = []
    for change in changes:
        before, data = _read(change.path)
        try:
            after = json.dumps(change.edit(data), indent=2, ensure_ascii=False) + "\n"
        except InstallError as exc:
            raise InstallError(f"{change.path}: {exc}; nothing was changed") from None
        if json.loads(after) != data:
            planned.append((change.path, before, after))
    for path, before, after in planned:
        if dry_run:
            diff = difflib.unified_diff(
                before.splitlines(keepends=True),
                after.splitlines(keepends=True),
                str(path),
                str(path),
            )
            out("".join(diff))
        else:
            _write(path, before, after)
            out(f"updated {path}\n")
    if not planned:
        out("already as asked; nothing to change\n")
    return 0


def _write(path: Path, before: str, after: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if before:
        shutil.copy2(path, path.with_name(path.name + ".dreamwell.bak"))
    tmp = path.with_name(f".{path.name}.dreamwell.tmp")
    tmp.write_text(after, encoding="utf-8")
    if path.exists():
        shutil.copymode(path, tmp)
    os.replace(tmp, path)


# ---- the command ---------------------------------------------------------------------------------
def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("client", choices=CLIENTS)
    parser.add_argument("--project", metavar="DIR", help="the project's config, not the user's")
    parser.add_argument("--dry-run", action="store_true", help="print the diff, write nothing")
    parser.add_argument("--uninstall", action="store_true", help="remove what install wrote")


def this_command() -> str:
    """The `dreamwell` executable to write into configs: its absolute path when it can be
    found (GUI clients do not see the shell's PATH), else the bare name."""
    found = shutil.which("dreamwell")
    return str(Path(found).resolve()) if found else "dreamwell"


NAMES = {
    "claude-code": "Claude Code",
    "claude-desktop": "Claude Desktop",
    "cursor": "Cursor",
    "vscode": "VS Code",
}


def restart_line(client: str, uninstall: bool) -> str:
    """The next step: a client reads its MCP servers and hooks when it starts."""
    what = "stops using" if uninstall else "starts using"
    name = NAMES.get(client, client)
    return f"Restart {name} (quit it and open it again): it {what} dreamwell then.\n"


def _say(text: str) -> None:
    sys.stdout.write(text)


def install_command(settings: Settings, args: argparse.Namespace) -> int:
    from dreamwell.server.config import client_locations, default_data_dir

    home, appdata, xdg_config = client_locations()
    where = Where(sys.platform if sys.platform in PLATFORMS else "linux", home, appdata, xdg_config)
    data_dir = None if settings.data_dir == default_data_dir().resolve() else settings.data_dir
    project = Path(args.project).expanduser().resolve() if args.project else None
    if project is not None and not project.is_dir():
        sys.stderr.write(f"dreamwell: --project {args.project} is not a directory\n")
        return 2
    try:
        changes = plan(args.client, where, this_command(), data_dir, project, args.uninstall)
        code = apply(changes, args.dry_run, _say)
        if not args.dry_run:
            _say(restart_line(args.client, args.uninstall))
        return code
    except InstallError as exc:
        sys.stderr.write(f"dreamwell: {exc}\n")
        return 1
