"""`dreamwell install codex` (Codex CLI 0.171): in `~/.codex/config.toml` (`$CODEX_HOME/`
when set, as Codex reads it; --project DIR: DIR/.codex/config.toml) the MCP server
`[mcp_servers.dreamwell]`, with `default_tools_approval_mode = "approve"` (`codex exec`
refuses every other MCP tool call) and `required = true`: Codex's first request waits for
dreamwell's tools (without it, none of 6 runs offered them: Codex does not wait for an
optional server); the server answers that `tools/list` at once from its kept lists
(server/transports/early_lists.py), and one that cannot start stops Codex with its cause.
In `hooks.json` beside it Codex's events (Claude Code's names) with dreamwell's hook
commands, 10 s each but the session end's 3 (Codex clamps it to 1-3 s and warns on every run
otherwise); and, in the user's `config.toml` always, a `trusted_hash` under
`[hooks.state."<hooks.json>:<event>:<group>:<handler>"]` for each (Codex runs no hook
without one, silently): the SHA-256 of the group as compact key-sorted JSON."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from dreamwell.server.cli.agents.setup import Setup
from dreamwell.server.cli.agents.toml_tables import Key, rewrite, table_at
from dreamwell.server.cli.config_files import (
    Change,
    TextChange,
    is_our_command,
    read_json,
    set_hook_groups,
)
from dreamwell.server.hooks.agents.codex import CODEX

SERVER: Key = ("mcp_servers", "dreamwell")
# the event labels of Codex's trust keys and hashes
LABELS = {
    "session-start": "session_start",
    "user-prompt": "user_prompt_submit",
    "stop": "stop",
    "pre-compact": "pre_compact",
    "session-end": "session_end",
}
TIMEOUT, SESSION_END_TIMEOUT = 10, 3  # seconds


def handler(setup: Setup, event: str) -> dict[str, Any]:
    timeout = SESSION_END_TIMEOUT if event == "session-end" else TIMEOUT
    return {"type": "command", "command": setup.hook(CODEX.name, event), "timeout": timeout}


def trusted_hash(label: str, hook: dict[str, Any]) -> str:
    """Codex's hash of one hook group with one command handler (and no matcher)."""
    normal = {
        "async": False,
        "command": hook["command"],
        "timeout": hook["timeout"],
        "type": "command",
    }
    group = {"event_name": label, "hooks": [normal]}
    text = json.dumps(group, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()


def our_groups(hooks: dict[str, Any], path: Path) -> dict[str, dict[str, Any]]:
    """trust key -> our handler, for each of our handlers in a hooks.json object."""
    found: dict[str, dict[str, Any]] = {}
    events = hooks.get("hooks")
    events = events if isinstance(events, dict) else {}
    for event, name in CODEX.events.items():
        groups = events.get(name)
        for g, group in enumerate(groups if isinstance(groups, list) else []):
            handlers = group.get("hooks") if isinstance(group, dict) else None
            for h, hook in enumerate(handlers if isinstance(handlers, list) else []):
                if is_our_command(hook):
                    found[f"{path}:{LABELS[event]}:{g}:{h}"] = hook
    return found


def plan(setup: Setup) -> list[Change | TextChange]:
    user_folder = setup.where.codex_home or setup.where.home / ".codex"
    folder = setup.project / ".codex" if setup.project is not None else user_folder
    hooks_path, config = folder / "hooks.json", folder / "config.toml"
    user_config = user_folder / "config.toml"
    entries = {e: handler(setup, e) for e in CODEX.events}
    edit = set_hook_groups(CODEX.events, entries, setup.remove)
    _, current = read_json(hooks_path)
    before, after = our_groups(current, hooks_path), our_groups(edit(current), hooks_path)
    trust: list[tuple[Key, dict[str, Any]]] = [
        (("hooks", "state", key), {"trusted_hash": trusted_hash(key.split(":")[-3], hook)})
        for key, hook in after.items()
    ]
    stale = set(before) | set(after)

    def is_trust(key: Key) -> bool:
        return len(key) == 3 and key[:2] == ("hooks", "state") and key[2] in stale

    def server(text: str) -> list[tuple[Key, dict[str, Any]]]:
        if setup.remove:
            return []
        ours = setup.server() | {"default_tools_approval_mode": "approve", "required": True}
        return [(SERVER, {**table_at(text, SERVER), **ours})]

    def is_server(key: Key) -> bool:
        return key[:2] == SERVER

    changes: list[Change | TextChange] = [Change(hooks_path, edit, drop_empty=True)]
    if config == user_config:

        def both(key: Key) -> bool:
            return is_server(key) or is_trust(key)

        changes.append(
            TextChange(config, lambda t: rewrite(t, both, server(t) + trust), drop_empty=True)
        )
    else:
        changes.append(TextChange(config, lambda t: rewrite(t, is_server, server(t)), True))
        changes.append(TextChange(user_config, lambda t: rewrite(t, is_trust, trust), True))
    return changes
