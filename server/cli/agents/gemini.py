"""`dreamwell install gemini` (Gemini CLI 0.61): in `~/.gemini/settings.json` (--project DIR:
DIR/.gemini/settings.json) the MCP server `mcpServers.dreamwell` with `"trust": true`
(headless runs drop every tool that would need a confirmation), and `hooks` for SessionStart,
BeforeAgent, AfterAgent, PreCompress and SessionEnd, each dreamwell's hook command with its
timeout in milliseconds. Gemini runs hooks and servers from settings only in a folder the
user trusted."""

from __future__ import annotations

from typing import Any

from dreamwell.server.cli.agents.setup import Setup
from dreamwell.server.cli.config_files import Change, TextChange, chain, set_hook_groups, set_server
from dreamwell.server.hooks.agents.gemini import GEMINI

TIMEOUT_MS = 10_000


def handler(setup: Setup, event: str) -> dict[str, Any]:
    return {"type": "command", "command": setup.hook(GEMINI.name, event), "timeout": TIMEOUT_MS}


def plan(setup: Setup) -> list[Change | TextChange]:
    settings = setup.base(".gemini") / "settings.json"
    entries = {e: handler(setup, e) for e in GEMINI.events}
    server = set_server("mcpServers", setup.server() | {"trust": True}, setup.remove)
    return [
        Change(settings, chain([server, set_hook_groups(GEMINI.events, entries, setup.remove)]))
    ]
