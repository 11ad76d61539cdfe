"""Claude Code: the agent dreamwell's hooks were first written for. Its hook input and output
are the core's own (plain text adds to the context); its transcript is read by
server/hooks/transcript.py's Claude Code reader."""

from __future__ import annotations

from dreamwell.server.hooks.agents.core import Agent
from dreamwell.server.hooks.transcript import take_claude

EVENT_NAMES = {
    "session-start": "SessionStart",
    "user-prompt": "UserPromptSubmit",
    "stop": "Stop",
    "pre-compact": "PreCompact",
    "session-end": "SessionEnd",
}

CLAUDE_CODE = Agent("claude-code", EVENT_NAMES, take_claude)
