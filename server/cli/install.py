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
codex, gemini,  the MCP server and the hooks in each agent's own files, with what each needs
copilot         to run them (server/cli/agents/)

Files are merged, never replaced: every other key stays as it was, an existing `dreamwell`
entry keeps the keys the user added. The file as it was is kept as `<file>.dreamwell.bak`,
a second run changes nothing, `--uninstall` removes exactly what install added (and a key
it left empty), a file that is not a JSON object is left untouched with a
one-line error (and then no file is written), and `--dry-run` prints the diff instead."""

from __future__ import annotations

import argparse
import shutil
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dreamwell.server.cli.agents.setup import Setup
from dreamwell.server.cli.agents.table import NAMES as AGENT_NAMES
from dreamwell.server.cli.agents.table import PLANS as AGENT_PLANS
from dreamwell.server.cli.agents.table import PROJECT_TRUST
from dreamwell.server.cli.config_files import (
    NAME,
    Change,
    InstallError,
    TextChange,
    Where,
    apply,
    chain,
    hook_runner,
    is_our_command,
    set_hook_groups,
    set_server,
)
from dreamwell.server.cli.config_files import object_at as _object
from dreamwell.server.cli.config_files import put_key as _put
from dreamwell.server.cli.config_files import quoted as _quoted
from dreamwell.server.hooks.events import EVENTS
from dreamwell.server.hooks.old_hooks import forget_door, is_old_door

if TYPE_CHECKING:
    from dreamwell.server.config import Settings

CLIENTS = ("claude-code", "claude-desktop", "cursor", "vscode", "codex", "gemini", "copilot")
PLATFORMS = ("linux", "darwin", "win32")
HOOK_TIMEOUT = 10  # seconds Claude Code gives a hook before it goes on without it
# Claude Code's permission rule for every tool of the `dreamwell` server (`mcp__<server>`)
ALLOW_RULE = f"mcp__{NAME}"
# Claude Code's event name for each `dreamwell hook EVENT`
HOOK_EVENTS = {
    "session-start": "SessionStart",
    "user-prompt": "UserPromptSubmit",
    "stop": "Stop",
    "pre-compact": "PreCompact",
    "session-end": "SessionEnd",
}
assert tuple(HOOK_EVENTS) == EVENTS
# the hooks Claude Code runs in the background ("async"), without waiting for them: before a
# compaction and the session end (the resident answers them before their work anyway). Not
# the stop: a `claude -p` run that ends while an async stop is in flight cancels it and then
# waited ~1.4 s before its session end, in 4 of 10 runs (2.0 s against 0.6 s); the stop runs
# in the foreground, where the resident's answer, given before the work, takes 1-3 ms
BACKGROUND = frozenset({"pre-compact", "session-end"})


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


def hook_command(
    runner: list[str], event: str, data_dir: Path | None, platform: str, dream: bool = False
) -> str:
    parts = [*(_quoted(p, platform) for p in runner), event]
    if data_dir is not None:
        parts += ["--data-dir", _quoted(str(data_dir), platform)]
    if dream and event == "session-end":  # the hook that starts the dream
        parts += list(DREAM_FLAGS)
    return " ".join(parts)


def hook_entry(command: str, event: str) -> dict[str, Any]:
    """The hook install writes for `event`: always a command (server/hooks/client.py on
    POSIX), never an HTTP hook: Claude Code cannot tell who listens on a loopback port."""
    entry: dict[str, Any] = {"type": "command", "command": command, "timeout": HOOK_TIMEOUT}
    if event in BACKGROUND:
        entry["async"] = True
    return entry


def is_ours(hook: Any) -> bool:
    """A hook install wrote: `dreamwell hook EVENT` (as written before the client, and on
    Windows), the client, or an earlier version's post to the HTTP door."""
    return is_old_door(hook) or is_our_command(hook)


def set_hooks(
    entries: dict[str, dict[str, Any]], remove: bool
) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """Claude Code's hooks: ours (and an earlier version's HTTP ones) replaced or removed."""
    return set_hook_groups(HOOK_EVENTS, entries, remove)


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
) -> list[Change | TextChange]:
    """The files to change for `client` and how (`allow`: Claude Code's permission rule
    too; an uninstall removes it whatever `allow` says)."""
    if dream and client != "claude-code":
        raise InstallError("--dream runs the dream with Claude Code's login: claude-code only")
    if client in AGENT_PLANS:  # Codex, Gemini CLI, Copilot CLI: server/cli/agents/
        return AGENT_PLANS[client](Setup(where, command, data_dir, project, remove))
    entry = server_entry(client, command, data_dir, dream)
    if client == "claude-desktop":
        if project is not None:
            raise InstallError("claude-desktop has no per-project config; drop --project")
        path = where.app_config("Claude", "claude_desktop_config.json")
        return [Change(path, set_server("mcpServers", entry, remove), drop_empty=True)]
    if client == "cursor":
        path = (project or where.home) / ".cursor" / "mcp.json"
        return [Change(path, set_server("mcpServers", entry, remove), drop_empty=True)]
    if client == "vscode":
        path = (
            project / ".vscode" / "mcp.json"
            if project
            else where.app_config("Code", "User", "mcp.json")
        )
        return [Change(path, set_server("servers", entry, remove), drop_empty=True)]
    runner = hook_runner(command, where.platform)
    entries = {
        e: hook_entry(hook_command(runner, e, data_dir, where.platform, dream), e) for e in EVENTS
    }
    servers = project / ".mcp.json" if project else where.home / ".claude.json"
    settings = (project or where.home) / ".claude" / "settings.json"
    edits = [set_hooks(entries, remove)] + ([set_allow(remove)] if allow or remove else [])
    return [
        Change(servers, set_server("mcpServers", entry, remove), drop_empty=True),
        Change(settings, chain(edits), drop_empty=True),  # uninstall leaves no `{}` file
    ]


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
    # accepted, with a line saying so, for scripts written for earlier versions: every hook
    # is a command now
    parser.add_argument("--command-hooks", action="store_true", help=argparse.SUPPRESS)
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
    **AGENT_NAMES,
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
    from dreamwell.server.config import client_locations, codex_home, named_data_dir

    home, appdata, xdg_config = client_locations()
    platform = sys.platform if sys.platform in PLATFORMS else "linux"
    where = Where(platform, home, appdata, xdg_config, codex_home())
    data_dir = named_data_dir(settings.data_dir)
    project = Path(args.project).expanduser().resolve() if args.project else None
    if project is not None and not project.is_dir():
        sys.stderr.write(f"dreamwell: --project {args.project} is not a directory\n")
        return 2
    try:
        dream = bool(args.dream) and not args.uninstall
        if args.command_hooks:
            sys.stderr.write(
                "dreamwell: --command-hooks is no longer needed: every hook is a command now\n"
            )
        changes = plan(
            args.client,
            where,
            this_command(),
            data_dir,
            project,
            args.uninstall,
            dream,
            args.allow,
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
    if args.client in AGENT_PLANS and project is not None and not args.uninstall:
        _say(PROJECT_TRUST[args.client].format(dir=project))
    if args.client in AGENT_PLANS:  # Codex, Gemini CLI and Copilot CLI load `.agents/skills`
        target = where.home / ".agents" / "skills"
        code = skill_folders(settings.data_dir, target, args.uninstall, ".agents/skills")
    if args.client == "codex" and not args.uninstall:  # it waits for tools/list (required)
        prime_lists(server_entry(args.client, this_command(), data_dir), where.home, True)
    if args.client == "claude-code":
        forget_door(settings.data_dir)  # an earlier version's token
        code = skill_folders(settings.data_dir, where.home / ".claude" / "skills", args.uninstall)
        if not args.uninstall:
            prime_lists(server_entry(args.client, this_command(), data_dir, dream), where.home)
    _say(restart_line(args.client, args.uninstall))
    return code


def prime_lists(entry: dict[str, Any], home: Path, codex: bool = False) -> None:
    """The server, started as Claude Code (`codex`: Codex) will start it, answers its lists
    once, so that the first session gets them while the server loads
    (server/transports/early_lists.py)."""
    from dreamwell.server.transports.early_lists import prime

    if prime(entry["args"], entry.get("env") or {}, home, legacy=codex, inherit=not codex):
        lists = "tools" if codex else "tools, prompts and resources"
        _say(f"the server answered its {lists} once (kept for a fast start)\n")


def skill_folders(
    data_dir: Path, target: Path, remove: bool, project_folder: str = ".claude/skills"
) -> int:
    """Claude Code's `Skill` tool loads only skill folders: keep the active skills there
    (stores/skills/sync.py; the servers and hooks keep them in step from now on), or, on
    uninstall, stop and remove the folders dreamwell wrote that nobody edited."""
    from dreamwell.stores import DataDir, SkillCatalog, StoreError
    from dreamwell.stores.skills import disable_sync, enable_sync, sync_skills

    dirs = DataDir(data_dir)
    try:
        if remove:
            gone = disable_sync(dirs, target, project_folder)
            _say(f"removed {len(gone)} skill folders dreamwell wrote in {target}\n" if gone else "")
            return 0
        enable_sync(dirs, target, project_folder)
        reports = sync_skills(SkillCatalog(dirs))
        report = next(r for r in reports if r.target == target)
    except (StoreError, OSError) as exc:
        sys.stderr.write(f"dreamwell: the skills were not kept as folders in {target}: {exc}\n")
        return 1
    kept = len(report.written) + len(report.revised)
    _say(f"kept the active skills as folders in {target} ({kept} written)\n")
    for name, why in sorted(report.clashes.items()):
        _say(f"not written: {target / name}: {why}\n")
    return 0
