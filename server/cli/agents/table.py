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
