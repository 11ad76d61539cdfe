"""OpenAI's Codex CLI (0.171): Claude Code's event names and stdin keys, plain text added to
the context as a developer message. Its transcript is a rollout file
(`~/.codex/sessions/Y/M/D/rollout-*.jsonl`), one `{"timestamp", "type", "payload"}` a line:
the user's words in an `event_msg` whose `item_completed` item is a `UserMessage` (older
versions: a `user_message` event), each tool call a `response_item` `function_call` (an MCP
server's tools under the namespace `mcp__SERVER`) or `custom_tool_call`. Codex uses a skill by
reading its `SKILL.md` (its skills list gives the path): a call whose arguments read
`…/skills/NAME/SKILL.md` counts as a use of the skill NAME."""

from __future__ import annotations

import re
from typing import Any

from dreamwell.server.hooks.agents.claude import EVENT_NAMES
from dreamwell.server.hooks.agents.core import Agent
from dreamwell.server.hooks.transcript import TranscriptNews, skill_name

_SKILL_READ = re.compile(r"skills/([A-Za-z0-9_.:-]+)/SKILL\.md")


def take_codex(record: dict[str, Any], news: TranscriptNews) -> None:
    payload = record.get("payload")
    if not isinstance(payload, dict):
        return
    kind, ts = record.get("type"), str(record.get("timestamp") or "")
    if kind == "event_msg" and payload.get("type") == "user_message":
        message = payload.get("message")
        if isinstance(message, str) and message.strip():
            news.user_turns.append((ts, message))
    elif kind == "event_msg" and payload.get("type") == "item_completed":
        item = payload.get("item")
        if isinstance(item, dict) and item.get("type") == "UserMessage":
            text = "".join(
                str(part.get("text") or "")
                for part in item.get("content") or []
                if isinstance(part, dict) and part.get("type") == "text"
            )
            if text.strip():
                news.user_turns.append((ts, text))
    elif kind == "response_item" and payload.get("type") in ("function_call", "custom_tool_call"):
        name = str(payload.get("name") or "")
        space = str(payload.get("namespace") or "")
        if name:
            news.tools[f"{space}__{name}" if space else name] += 1
        given = payload.get("arguments") or payload.get("input") or ""
        for found in dict.fromkeys(_SKILL_READ.findall(str(given))):
            news.skills.append(skill_name(found))


CODEX = Agent(
    "codex",
    EVENT_NAMES,
    take_codex,
    skill_hint="(each is in your skills list: read its SKILL.md to use it)",
)
