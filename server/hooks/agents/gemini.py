"""Google's Gemini CLI (0.61). Its events are SessionStart, BeforeAgent (the prompt),
AfterAgent (a turn's end), PreCompress and SessionEnd; a hook's stdout must be JSON only, the
context under `hookSpecificOutput.additionalContext` (plain text is shown to the user, not
the model). In `-p` runs it puts the session start's context into the prompt as
`<hook_context>…</hook_context>`: removed before the prompt is searched with or recorded.

Its transcript (`~/.gemini/tmp/<project>/chats/session-*.jsonl`) is one message a line,
`{"id", "timestamp", "type": "user" | "gemini" | ..., "content"}`, a user's content a list of
`{"text"}` parts (its first, the `<session_context>` block, is not the user's words), and a
model message's `toolCalls` (`{"id", "name", "args"}`; a message is written again as it
grows: a call counts once by its id). Its skill tool is `activate_skill` (`{"name"}`)."""

from __future__ import annotations

from typing import Any

from dreamwell.server.hooks.agents.core import Agent, block, nested_json
from dreamwell.server.hooks.transcript import TranscriptNews, skill_name

EVENT_NAMES = {
    "session-start": "SessionStart",
    "user-prompt": "BeforeAgent",
    "stop": "AfterAgent",
    "pre-compact": "PreCompress",
    "session-end": "SessionEnd",
}
SKILL_TOOL = "activate_skill"
MCP_PREFIX = "mcp_dreamwell_"  # Gemini's name for a dreamwell tool: mcp_<server>_<tool>


def take_gemini(record: dict[str, Any], news: TranscriptNews) -> None:
    kind, ts = record.get("type"), str(record.get("timestamp") or "")
    content = record.get("content")
    if kind == "user" and isinstance(content, list):
        text = "".join(str(p.get("text") or "") for p in content if isinstance(p, dict))
        if text.strip() and not text.lstrip().startswith("<session_context>"):
            news.user_turns.append((ts, text))
    calls = record.get("toolCalls")
    if kind != "gemini" or not isinstance(calls, list):
        return
    for call in calls:
        if not isinstance(call, dict) or not call.get("name"):
            continue
        key = str(call.get("id") or "")
        if key and key in news.seen:  # this message, written again
            continue
        news.seen.add(key)
        name = str(call["name"])
        if name.startswith(MCP_PREFIX):
            name = "mcp__dreamwell__" + name.removeprefix(MCP_PREFIX)
        news.tools[name] += 1
        args = call.get("args")
        loaded = call.get("status") in (None, "success")
        if name == SKILL_TOOL and loaded and isinstance(args, dict) and args.get("name"):
            news.skills.append(skill_name(str(args["name"])))


GEMINI = Agent(
    "gemini",
    EVENT_NAMES,
    take_gemini,
    echoed=(block("hook_context"),),
    skill_hint="(load one with activate_skill)",
    shape=nested_json,
)
