"""Every agent by name, and which agent and event a hook command's event names."""

from __future__ import annotations

from dreamwell.server.hooks.agents.claude import CLAUDE_CODE
from dreamwell.server.hooks.agents.codex import CODEX
from dreamwell.server.hooks.agents.copilot import COPILOT
from dreamwell.server.hooks.agents.core import EVENTS, Agent
from dreamwell.server.hooks.agents.gemini import GEMINI

AGENTS = {a.name: a for a in (CLAUDE_CODE, CODEX, GEMINI, COPILOT)}
# what a hook command may name: `EVENT` (Claude Code's), or `AGENT:EVENT` for another agent
HOOK_EVENTS = EVENTS + tuple(f"{a}:{e}" for a in AGENTS if a != CLAUDE_CODE.name for e in EVENTS)


def hook_event(agent: str, event: str) -> str:
    """The event as `agent`'s hook command names it."""
    return event if agent == CLAUDE_CODE.name else f"{agent}:{event}"


def agent_of(named: str) -> tuple[Agent, str]:
    """(the agent, our event) of a hook command's event; ValueError for an unknown one."""
    if named not in HOOK_EVENTS:
        raise ValueError(f"unknown hook event {named!r}")
    agent, _, event = named.rpartition(":")
    return AGENTS[agent or CLAUDE_CODE.name], event
