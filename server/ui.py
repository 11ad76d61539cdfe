"""`dreamwell ui`: the memory browser (placeholder until the page lands)."""

from __future__ import annotations

from dreamwell.server.config import Settings


def ui_command(settings: Settings) -> int:
    raise NotImplementedError
