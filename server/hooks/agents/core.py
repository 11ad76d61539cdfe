"""The Agent table and the hook event names every agent's hook command may give.

An event given as `AGENT:EVENT` (`codex:stop`) is EVENT run for AGENT; a bare EVENT is Claude
Code's, as install wrote it before there were other agents."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from dreamwell.server.hooks.transcript import Reader

EVENTS = ("session-start", "user-prompt", "stop", "pre-compact", "session-end")
CONTEXT_EVENTS = ("session-start", "user-prompt")  # the events whose text reaches the model
# how the hooks' skill list says a skill is loaded (events.SKILLS_HEADER), in Claude Code
CLAUDE_SKILL_HINT = "(load one with the Skill tool)"


def plain_text(event: str, name: str, text: str) -> str:
    """What Claude Code and Codex take: the text itself, which they add to the context."""
    return text


@dataclass(frozen=True)
class Agent:
    """What one agent needs of the hook core that differs from the others."""

    name: str  # recorded as the `client` of every turn, recall and skill use
    events: dict[str, str]  # our event -> the agent's own event name
    reader: Reader  # one transcript line (JSON object) -> what is new
    echoed: tuple[re.Pattern[str], ...] = ()  # context the agent echoed into the prompt
    shape: Callable[[str, str, str], str] = plain_text  # (event, its name, text) -> stdout
    fields: dict[str, str] = field(default_factory=dict)  # our stdin key -> the agent's
    skill_hint: str = CLAUDE_SKILL_HINT  # how this agent loads a skill the hooks list

    def prompt(self, text: str) -> str:
        """The prompt as the user typed it: the context the agent echoed into it removed."""
        for pattern in self.echoed:
            text = pattern.sub("", text)
        return text.strip() if self.echoed else text

    def payload(self, given: dict[str, Any]) -> dict[str, Any]:
        """The hook's stdin with our own keys (`prompt`, `transcript_path`, `cwd`, ...) and
        the prompt cleaned."""
        payload = dict(given)
        for ours, theirs in self.fields.items():
            if ours not in payload and theirs in payload:
                payload[ours] = payload[theirs]
        if isinstance(payload.get("prompt"), str):
            payload["prompt"] = self.prompt(payload["prompt"])
        return payload

    def output(self, event: str, text: str) -> str:
        """What the hook prints for `text` ("" prints nothing: the agent adds nothing)."""
        if not text or event not in CONTEXT_EVENTS:
            return ""
        text = text.replace(CLAUDE_SKILL_HINT, self.skill_hint)
        return self.shape(event, self.events[event], text)


def nested_json(event: str, name: str, text: str) -> str:
    """Gemini CLI's (and Claude Code's JSON) shape: the context under `hookSpecificOutput`."""
    inner = {"hookEventName": name, "additionalContext": text}
    return json.dumps({"hookSpecificOutput": inner}, ensure_ascii=False)


def top_level_json(event: str, name: str, text: str) -> str:
    """Copilot CLI's shape: `additionalContext` at the top level."""
    return json.dumps({"additionalContext": text}, ensure_ascii=False)


def block(tag: str) -> re.Pattern[str]:
    """An echoed `<tag>…</tag>` block and the blank space after it."""
    return re.compile(rf"<{tag}>.*?</{tag}>\s*", re.DOTALL)
