"""`dreamwell install CLIENT`: write dreamwell into a client's own MCP config (and, for Claude
Code, its hooks), for the platform's documented locations.

claude-code     ~/.claude.json `mcpServers`; in ~/.claude/settings.json the `hooks` and the
                permission rule `mcp__dreamwell` in `permissions.allow` (--no-allow: no rule)
                (--project DIR: DIR/.mcp.json and DIR/.claude/settings.json); and the
                active skills kept as folders in ~/.claude/skills/ (stores/skills/sync.py)
claude-desktop  claude_desktop_config.json `mcpServers` in ~/Library/Application Support/Claude
                (macOS), %APPDATA%\\Claude (Windows), ~/.config/Claude (Linux); no --project
cursor          ~/.cursor/mcp.json `mcpServers` (--project DIR: DIR/.cursor/mcp.json)
vscode          the user profile's mcp.json `servers`: ~/Library/Application Support/Code/User
                (macOS), %APPDATA%\\Code\\User (Windows), ~/.config/Code/User (Linux)
                (--project DIR: DIR/.vscode/mcp.json)

Files are merged, never replaced: every other key stays as it was, an existing `dreamwell`
entry keeps the keys the user added. The file as it was is kept as `<file>.dreamwell.bak`,
a second run changes nothing, `--uninstall` removes exactly what install added (and a key
it left empty, a file it left as `{}`, and the backups, writing none), a file that is not a
JSON object is left untouched with a one-line error (and then no file is written), and
`--dry-run` prints the diff instead."""

from __future__ import annotations

import argparse
import difflib
import json
import os
import shutil
import stat
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dreamwell.server.hooks.door import CLAUDE_EVENT, Door
from dreamwell.server.hooks.door import HOST as DOOR_HOST
from dreamwell.server.hooks.door import PREFIX as DOOR_PREFIX
from dreamwell.server.hooks.events import EVENTS

if TYPE_CHECKING:
    from dreamwell.server.config import Settings

CLIENTS = ("claude-code", "claude-desktop", "cursor", "vscode")
PLATFORMS = ("linux", "darwin", "win32")
NAME = "dreamwell"
HOOK_TIMEOUT = 10  # seconds Claude Code gives a hook before it goes on without it
# Claude Code's permission rule for every tool of the `dreamwell` server (`mcp__<server>`)
ALLOW_RULE = f"mcp__{NAME}"
HOOK_EVENTS = CLAUDE_EVENT  # Claude Code's event name for each `dreamwell hook EVENT`
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


# `--dream`: the dream's LLM is the user's own Claude Code, written as `llm_provider` into the
# settings file every command reads (server/settings_file.py), so that a `dreamwell dream
# --once` run by hand dreams with it too; no flags in the commands install writes (a later
# `install claude-code` without --dream takes the setting out of the file again).
DREAM_FLAGS: tuple[str, ...] = ()


def server_entry(
    client: str, command: str, data_dir: Path | None, dream: bool = False
) -> dict[str, Any]:
    entry: dict[str, Any] = {"command": command, "args": ["serve", *(DREAM_FLAGS if dream else ())]}
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
    runner: list[str], event: str, data_dir: Path | None, platform: str, dream: bool = False
) -> str:
    parts = [*(_quoted(p, platform) for p in runner), event]
    if data_dir is not None:
        parts += ["--data-dir", _quoted(str(data_dir), platform)]
    if dream and event == "session-end":  # the hook that starts the dream
        parts += list(DREAM_FLAGS)
    return " ".join(parts)


def hook_entry(command: str, door: Door | None, event: str, dream: bool) -> dict[str, Any]:
    """The hook install writes for `event`: through the HTTP door when there is one (every
    event but the session start, whose command starts the resident the others reach;
    server/hooks/door.py), else the command."""
    if door is None or event == "session-start":
        return {"type": "command", "command": command, "timeout": HOOK_TIMEOUT}
    extra = DREAM_FLAGS if dream and event == "session-end" else ()
    return {
        "type": "http",
        "url": door.url(event, extra),
        "headers": {"Authorization": f"Bearer {door.token}"},
        "timeout": HOOK_TIMEOUT,
    }


def is_ours(hook: Any) -> bool:
    """A hook install wrote: `dreamwell hook EVENT` (as written before the client, and on
    Windows), the client, or a post to the HTTP door."""
    if not isinstance(hook, dict):
        return False
    url = str(hook.get("url", ""))
    if hook.get("type") == "http":
        return url.startswith(f"http://{DOOR_HOST}:") and DOOR_PREFIX in url
    text = str(hook.get("command", ""))
    words = f" {text} ".replace("\\", "/")
    return "dreamwell" in text and (" hook " in words or "/hooks/client.py " in words)


# ---- edits ------------------------------------------------------------------------------------
def set_server(
    key: str, entry: dict[str, Any], remove: bool
) -> Callable[[dict[str, Any]], dict[str, Any]]:
    def edit(config: dict[str, Any]) -> dict[str, Any]:
        servers = _object(config, key)
        if remove:
            servers.pop(NAME, None)
        else:
            old = servers.get(NAME)
            servers[NAME] = {**old, **entry} if isinstance(old, dict) else entry
        return _put(config, key, servers)

    return edit


def _object(config: dict[str, Any], key: str) -> dict[str, Any]:
    """A copy of `config[key]`, which must be a JSON object when present."""
    found = config.get(key)
    if found is not None and not isinstance(found, dict):
        raise InstallError(f"its '{key}' is not a JSON object")
    return dict(found or {})


def _put(config: dict[str, Any], key: str, value: Any) -> dict[str, Any]:
    """`config` with `key` set to `value`; an empty value is left out unless it was there
    empty already (what our removal emptied goes: uninstall leaves no empty key)."""
    out = dict(config)
    if value or (key in config and not config[key]):
        out[key] = value
    else:
        out.pop(key, None)
    return out


def set_hooks(
    entries: dict[str, dict[str, Any]], remove: bool
) -> Callable[[dict[str, Any]], dict[str, Any]]:
    def edit(config: dict[str, Any]) -> dict[str, Any]:
        hooks = _object(config, "hooks")
        for event, name in HOOK_EVENTS.items():
            groups = [_without_ours(g) for g in hooks.get(name) or []]
            groups = [g for g in groups if not isinstance(g, dict) or g.get("hooks")]
            if not remove:
                groups.append({"hooks": [entries[event]]})
            if groups:
                hooks[name] = groups
            else:
                hooks.pop(name, None)
        return _put(config, "hooks", hooks)

    return edit


def set_allow(remove: bool) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """Claude Code's permission rule for dreamwell's tools in `permissions.allow`, so neither
    `-p` runs (which deny a tool no rule allows) nor interactive users are asked per tool."""

    def edit(config: dict[str, Any]) -> dict[str, Any]:
        permissions = _object(config, "permissions")
        allow = permissions.get("allow")
        if allow is not None and not isinstance(allow, list):
            raise InstallError("its 'permissions.allow' is not a JSON array")
        rules = [r for r in allow or [] if r != ALLOW_RULE]
        if not remove:
            rules = list(allow or []) if ALLOW_RULE in (allow or []) else [*rules, ALLOW_RULE]
        return _put(config, "permissions", _put(permissions, "allow", rules))

    return edit


def chain(
    edits: list[Callable[[dict[str, Any]], dict[str, Any]]],
) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """Several edits of one file, one after the other."""

    def edit(config: dict[str, Any]) -> dict[str, Any]:
        for one in edits:
            config = one(config)
        return config

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
    dream: bool = False,
    allow: bool = True,
    door: Door | None = None,
) -> list[Change]:
    """The files to change for `client` and how (`allow`: Claude Code's permission rule
    too; an uninstall removes it whatever `allow` says; `door`: Claude Code's hooks but the
    session start's reach the resident through it)."""
    if dream and client != "claude-code":
        raise InstallError("--dream runs the dream with Claude Code's login: claude-code only")
    entry = server_entry(client, command, data_dir, dream)
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
    runner = hook_runner(command, where.platform)
    entries = {
        e: hook_entry(hook_command(runner, e, data_dir, where.platform, dream), door, e, dream)
        for e in EVENTS
    }
    servers = project / ".mcp.json" if project else where.home / ".claude.json"
    settings = (project or where.home) / ".claude" / "settings.json"
    edits = [set_hooks(entries, remove)] + ([set_allow(remove)] if allow or remove else [])
    return [
        Change(servers, set_server("mcpServers", entry, remove)),
        Change(settings, chain(edits)),
    ]


def _read(path: Path) -> tuple[str, dict[str, Any]]:
    """(text as it is, parsed object); a missing file is empty."""
    try:
        if not stat.S_ISREG(path.stat().st_mode):  # a FIFO would hang the read
            raise InstallError(f"{path} is not a regular file; nothing was changed")
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


def apply(
    changes: list[Change], dry_run: bool, out: Callable[[str], None], remove: bool = False
) -> int:
    """Read every file first (one bad file: nothing is written), then write or show. An
    uninstall leaves no debris: a file left as `{}` is removed, and so is our backup."""
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
        elif remove:
            out(_unwrite(path, before, after))
        else:
            _write(path, before, after)
            out(f"updated {path}\n")
    if not planned:
        out("already as asked; nothing to change\n")
    return 0


def _write(path: Path, before: str, after: str, backup: bool = True) -> None:
    """Replace the config file whole (through a symlink: its target, as the user keeps
    dotfiles elsewhere); never rename over what is not a regular file."""
    from dreamwell.stores import user_output

    path.parent.mkdir(parents=True, exist_ok=True)
    real = Path(os.path.realpath(path))
    if real.exists() and not real.is_file():
        raise InstallError(f"{path} is not a regular file; nothing was changed")
    if before and backup:
        shutil.copy2(real, real.with_name(path.name + ".dreamwell.bak"))
    with user_output(path) as out:
        out.write(after)


def _unwrite(path: Path, before: str, after: str) -> str:
    """Uninstall's write: what is left, without a backup (it would hold what was removed,
    the hooks' token included), and the file itself gone when nothing else is in it."""
    real = Path(os.path.realpath(path))
    real.with_name(path.name + ".dreamwell.bak").unlink(missing_ok=True)
    if json.loads(after) == {} and real.is_file():
        real.unlink()
        return f"removed {path} (nothing else was in it)\n"
    _write(path, before, after, backup=False)
    return f"updated {path}\n"


# ---- the command ---------------------------------------------------------------------------------
def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("client", choices=CLIENTS)
    parser.add_argument("--project", metavar="DIR", help="the project's config, not the user's")
    parser.add_argument("--dry-run", action="store_true", help="print the diff, write nothing")
    parser.add_argument("--uninstall", action="store_true", help="remove what install wrote")
    parser.add_argument(
        "--dream",
        action="store_true",
        help="claude-code: the dream runs by itself with your Claude Code login "
        "(llm_provider=claude-code); it spends your Claude usage",
    )
    parser.add_argument(
        "--command-hooks",
        action="store_true",
        help="claude-code: every hook a command, none a post to the resident hook process on "
        "127.0.0.1 (slower; for a machine shared with users you do not trust)",
    )
    parser.add_argument(
        "--no-allow",
        dest="allow",
        action="store_false",
        help="claude-code: add no permission rule for dreamwell's tools (each use is asked; "
        "without it: the rule is added)",
    )


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


def dream_notice(settings: Settings) -> str:
    """What `--dream` turns on, said every time: it spends the user's Claude usage."""
    model = settings.llm_model or "haiku"
    when = (
        f"It starts by itself after a session ends, at most once per "
        f"{settings.dream_auto_after}, once {settings.dream_auto_sessions} sessions were "
        "recorded (dream_auto_after, dream_auto_sessions)."
        if settings.dream_auto
        else "dream_auto is off: it runs when you run `dreamwell dream --once`."
    )
    return (
        f"dream: on, with llm_provider=claude-code (model {model}): a dream cycle asks your "
        f"Claude Code login, one `claude -p` per question, at most "
        f"{settings.dream_budget_tokens:,} tokens a cycle (dream_budget_tokens). {when} "
        "This spends your Claude usage; to turn it off run "
        "`dreamwell install claude-code` again without --dream.\n"
    )


def dream_setting(on: bool) -> str:
    """`--dream`: llm_provider=claude-code in the settings file; without it, taken out again
    if install put it there. What changed, in a line ("" when nothing did)."""
    from dreamwell.server import settings_file

    current = settings_file.read().values.get("llm_provider")
    if on and current != "claude-code":
        where = settings_file.set_value("llm_provider", "claude-code")
        return f'updated {where}: llm_provider = "claude-code"\n'
    if not on and current == "claude-code":
        where = settings_file.set_value("llm_provider", None)
        return f"updated {where}: llm_provider removed (the dream has no LLM unless set)\n"
    return ""


def install_command(settings: Settings, args: argparse.Namespace) -> int:
    from dreamwell.server.config import client_locations, named_data_dir

    home, appdata, xdg_config = client_locations()
    where = Where(sys.platform if sys.platform in PLATFORMS else "linux", home, appdata, xdg_config)
    data_dir = named_data_dir(settings.data_dir)
    project = Path(args.project).expanduser().resolve() if args.project else None
    if project is not None and not project.is_dir():
        sys.stderr.write(f"dreamwell: --project {args.project} is not a directory\n")
        return 2
    try:
        dream = bool(args.dream) and not args.uninstall
        door = _door(settings, args, where)
        changes = plan(
            args.client,
            where,
            this_command(),
            data_dir,
            project,
            args.uninstall,
            dream,
            args.allow,
            door,
        )
        code = apply(changes, args.dry_run, _say, args.uninstall)
        if args.client == "claude-code" and not args.dry_run and not code:
            _say(dream_setting(dream))
        if dream:
            _say(dream_notice(settings))
    except InstallError as exc:
        sys.stderr.write(f"dreamwell: {exc}\n")
        return 1
    if code or args.dry_run:
        return code
    if args.client == "claude-code":
        code = skill_folders(settings.data_dir, where.home / ".claude" / "skills", args.uninstall)
        if not args.uninstall:
            prime_lists(server_entry(args.client, this_command(), data_dir, dream), where.home)
    _say(restart_line(args.client, args.uninstall))
    return code


def _door(settings: Settings, args: argparse.Namespace, where: Where) -> Door | None:
    """Claude Code's HTTP door to the resident hook process (server/hooks/door.py): made
    once per data directory and kept (a dry run makes none: it shows the one it would)."""
    if args.client != "claude-code" or args.uninstall or args.command_hooks:
        return None
    if where.platform == "win32":  # no resident there (client.py needs Unix sockets)
        return None
    from dreamwell.server.hooks import door
    from dreamwell.stores import DataDir

    path = DataDir(settings.data_dir).hook_door
    if args.dry_run:
        return door.read(path) or Door(door.PORTS[0], "<a new token>")
    return door.ensure(path)


def prime_lists(entry: dict[str, Any], home: Path) -> None:
    """The server, started as Claude Code will start it, answers its lists once, so that the
    first session gets them while the server loads (server/transports/early_lists.py)."""
    from dreamwell.server.transports.early_lists import prime

    if prime(entry["args"], entry.get("env") or {}, home):
        _say("the server answered its tools, prompts and resources once (kept for a fast start)\n")


def skill_folders(data_dir: Path, target: Path, remove: bool) -> int:
    """Claude Code's `Skill` tool loads only skill folders: keep the active skills there
    (stores/skills/sync.py; the servers and hooks keep them in step from now on), or, on
    uninstall, stop and remove the folders dreamwell wrote that nobody edited."""
    from dreamwell.stores import DataDir, SkillCatalog, StoreError
    from dreamwell.stores.skills import disable_sync, enable_sync, sync_skills

    dirs = DataDir(data_dir)
    try:
        if remove:
            gone = disable_sync(dirs)
            _say(f"removed {len(gone)} skill folders dreamwell wrote in {target}\n" if gone else "")
            return 0
        enable_sync(dirs, target)
        [report] = sync_skills(SkillCatalog(dirs))
    except (StoreError, OSError) as exc:
        sys.stderr.write(f"dreamwell: the skills were not kept as folders in {target}: {exc}\n")
        return 1
    kept = len(report.written) + len(report.revised)
    _say(f"kept the active skills as folders in {target} ({kept} written)\n")
    for name, why in sorted(report.clashes.items()):
        _say(f"not written: {target / name}: {why}\n")
    return 0
