"""GitHub's Copilot CLI (1.0.102), its hooks written with Claude Code's event names (which
give Claude-style snake_case input). A hook's output must be Copilot's own top-level
`{"additionalContext": …}`; its session end has no `transcript_path` (the session's stop
read the transcript). The prompt reaches the model wrapped in `<current_datetime>` and
`<system_reminder>` blocks: removed should they reach the prompt a hook is given.

Its transcript (`~/.copilot/session-state/<id>/events.jsonl`) is one event a line,
`{"type", "data", "timestamp"}`: `user.message` (`data.content`, the user's words),
`tool.execution_start` (`data.toolName`; an MCP tool's `mcpServerName`, `mcpToolName`) and
`skill.invoked` (`data.name`)."""

from __future__ import annotations

from typing import Any

from dreamwell.server.hooks.agents.claude import EVENT_NAMES
from dreamwell.server.hooks.agents.core import Agent, block, top_level_json
from dreamwell.server.hooks.transcript import TranscriptNews, skill_name


def take_copilot(record: dict[str, Any], news: TranscriptNews) -> None:
    data = record.get("data")
    if not isinstance(data, dict):
        return
    kind, ts = record.get("type"), str(record.get("timestamp") or "")
    if kind == "user.message" and isinstance(data.get("content"), str):
        if data["content"].strip():
            news.user_turns.append((ts, data["content"]))
    elif kind == "tool.execution_start" and data.get("toolName"):
        server, tool = data.get("mcpServerName"), data.get("mcpToolName")
        name = f"mcp__{server}__{tool}" if server and tool else str(data["toolName"])
        news.tools[name] += 1
    elif kind == "skill.invoked" and skill_name(str(data.get("name") or "")):
        news.skills.append(skill_name(str(data["name"])))


COPILOT = Agent(
    "copilot",
    EVENT_NAMES,
    take_copilot,
    echoed=(block("current_datetime"), block("system_reminder")),
    skill_hint="(load one with the skill tool)",
    shape=top_level_json,
)
