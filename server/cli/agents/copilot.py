"""`dreamwell install copilot` (Copilot CLI 1.0.102): the MCP server in
`~/.copilot/mcp-config.json` as `copilot mcp add` writes it (`type: local`, `tools: ["*"]`;
--project DIR: DIR/.github/mcp.json), and a hook file of dreamwell's own,
`~/.copilot/hooks/dreamwell.json` (--project DIR: DIR/.github/hooks/dreamwell.json), with
Claude Code's event names (which give Claude-style input), each a `bash` command with
`timeoutSec`. Uninstall removes that file."""

from __future__ import annotations

from typing import Any

from dreamwell.server.cli.agents.setup import Setup
from dreamwell.server.cli.config_files import Change, TextChange, set_server
from dreamwell.server.hooks.agents.copilot import COPILOT

TIMEOUT = 10  # seconds


def hooks_file(setup: Setup) -> dict[str, Any]:
    hooks = {
        name: [{"type": "command", "bash": setup.hook(COPILOT.name, e), "timeoutSec": TIMEOUT}]
        for e, name in COPILOT.events.items()
    }
    return {"version": 1, "hooks": hooks}


def plan(setup: Setup) -> list[Change | TextChange]:
    if setup.project is not None:
        servers = setup.project / ".github" / "mcp.json"
        hooks = setup.project / ".github" / "hooks" / "dreamwell.json"
    else:
        servers = setup.where.home / ".copilot" / "mcp-config.json"
        hooks = setup.where.home / ".copilot" / "hooks" / "dreamwell.json"
    entry = {"type": "local", **setup.server(), "tools": ["*"]}
    ours = {} if setup.remove else hooks_file(setup)
    return [
        Change(servers, set_server("mcpServers", entry, setup.remove), drop_empty=True),
        Change(hooks, lambda _: ours, drop_empty=True),
    ]
