"""Each agent's plan by the name `dreamwell install` takes."""

from __future__ import annotations

from collections.abc import Callable

from dreamwell.server.cli.agents import codex, copilot, gemini
from dreamwell.server.cli.agents.setup import Setup
from dreamwell.server.cli.config_files import Change, TextChange

PLANS: dict[str, Callable[[Setup], list[Change | TextChange]]] = {
    "codex": codex.plan,
    "gemini": gemini.plan,
    "copilot": copilot.plan,
}
NAMES = {"codex": "Codex", "gemini": "Gemini CLI", "copilot": "Copilot CLI"}
# what a --project install still needs: each agent reads a project's own files only in a
# folder the user trusted (checked with each binary); that trust is the user's to give
PROJECT_TRUST = {
    "codex": "Codex reads {dir}/.codex only in a project you trusted (trust it when Codex "
    'asks, or [projects."{dir}"] trust_level = "trusted" in ~/.codex/config.toml).\n',
    "gemini": "Gemini CLI runs a project's hooks and servers only in a folder you trusted "
    "(trust {dir} when it asks, or in ~/.gemini/trustedFolders.json).\n",
    "copilot": "Copilot CLI reads {dir}/.github/mcp.json and hooks only in a folder you "
    'trusted (trust {dir} when it asks, or "trusted_folders" in ~/.copilot/config.json).\n',
}
