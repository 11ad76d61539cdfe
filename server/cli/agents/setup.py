"""What every agent's plan is given, and the pieces every agent's config shares."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dreamwell.server.cli.config_files import Where, hook_command, hook_runner
from dreamwell.server.hooks.agents.table import hook_event


@dataclass(frozen=True)
class Setup:
    where: Where
    command: str  # the `dreamwell` executable
    data_dir: Path | None
    project: Path | None
    remove: bool

    def server(self) -> dict[str, Any]:
        """`dreamwell serve` as an MCP server entry (command, args, env)."""
        entry: dict[str, Any] = {"command": self.command, "args": ["serve"]}
        if self.data_dir is not None:
            entry["env"] = {"DREAMWELL_DATA_DIR": str(self.data_dir)}
        return entry

    def hook(self, agent: str, event: str) -> str:
        """The command of `agent`'s hook for our `event`."""
        runner = hook_runner(self.command, self.where.platform)
        named = hook_event(agent, event)
        return hook_command(runner, named, self.data_dir, self.where.platform)

    def base(self, folder: str) -> Path:
        """The agent's folder (`.codex`, `.gemini`, …) of the project, else of the user."""
        return (self.project or self.where.home) / folder
