"""A scripted Anthropic Messages API on 127.0.0.1 that the test owns, for driving the real
Claude Code binary (tests/support/claude_code.py) with no network.

It answers `POST /v1/messages` (streamed as server-sent events when the request says
`"stream": true`, plain JSON otherwise), `POST /v1/messages/count_tokens`, and 404 for anything
else. Every request is recorded. What the model says is decided by the test's `brain`: a
function of the request returning a `Turn` — text, tool calls, or both. Claude Code sends small
side requests (session titles, summaries) beside the main one; `is_main` tells them apart.

    def brain(request):
        if not is_main(request):
            return Turn(text="A title")
        if not tool_results(request):
            return Turn(tools=[("ToolSearch", {"query": "select:mcp__dreamwell__save_memory"})])
        return Turn(text="Done.")

    with AnthropicAPI(brain) as api:
        run_claude(home, api, "Remember this")
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from tests.support.scripted_http import Replier, ScriptedServer

_ids = itertools.count(1)


@dataclass(frozen=True)
class Turn:
    """One model answer: optional text, then tool calls `(name, input)` in order."""

    text: str = ""
    tools: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    input_tokens: int = 100
    output_tokens: int = 20


@dataclass(frozen=True)
class Failure:
    """An API error instead of an answer: `status` with Anthropic's error body (and a
    `retry-after` header when given), or, with `hang`, no answer at all until the API stops."""

    status: int = 500
    kind: str = "api_error"  # the error body's type: rate_limit_error, overloaded_error, ...
    retry_after: str | None = None
    hang: bool = False


Brain = Callable[[dict[str, Any]], "Turn | Failure"]


def is_main(request: dict[str, Any]) -> bool:
    """The session's main request (it offers tools), not a title or summary side request."""
    return bool(request.get("tools"))


def messages_text(request: dict[str, Any]) -> str:
    """Every text the request carries (system and messages), joined: what the model 'sees'."""
    parts: list[str] = []
    system = request.get("system")
    if isinstance(system, str):
        parts.append(system)
    elif isinstance(system, list):
        parts.extend(str(b.get("text", "")) for b in system if isinstance(b, dict))
    for message in request.get("messages", []):
        content = message.get("content")
        if isinstance(content, str):
            parts.append(content)
            continue
        for block in content or []:
            if block.get("type") == "text":
                parts.append(str(block.get("text", "")))
            elif block.get("type") == "tool_result":
                parts.append(_result_text(block))
    return "\n".join(parts)


def _block_text(block: dict[str, Any]) -> str:
    if block.get("type") == "tool_reference":  # what ToolSearch answers: a loaded tool
        return f"tool_reference:{block.get('tool_name')}"
    return str(block.get("text", ""))


def _result_text(block: dict[str, Any]) -> str:
    inner = block.get("content")
    if isinstance(inner, str):
        return inner
    return "".join(_block_text(b) for b in inner or [] if isinstance(b, dict))


def tool_results(request: dict[str, Any]) -> list[str]:
    """The texts of the tool results in the request's last user message (Claude Code may put
    `system`-role messages after it). A ToolSearch result reads `tool_reference:NAME`."""
    users = [m for m in request.get("messages") or [] if m.get("role") == "user"]
    if not users or not _answers_last_turn(request, users[-1]):
        return []
    content = users[-1].get("content")
    blocks = content if isinstance(content, list) else []
    return [_result_text(b) for b in blocks if b.get("type") == "tool_result"]


def _answers_last_turn(request: dict[str, Any], user: dict[str, Any]) -> bool:
    """No assistant message after that user message."""
    messages = request.get("messages") or []
    after = messages[[id(m) for m in messages].index(id(user)) + 1 :]
    return all(m.get("role") != "assistant" for m in after)


def tool_uses(request: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """Every tool call the model made so far in this conversation, `(name, input)` in order."""
    found: list[tuple[str, dict[str, Any]]] = []
    for message in request.get("messages") or []:
        content = message.get("content")
        if message.get("role") != "assistant" or not isinstance(content, list):
            continue
        found += [
            (str(b.get("name")), b.get("input") or {})
            for b in content
            if b.get("type") == "tool_use"
        ]
    return found


def all_tool_results(request: dict[str, Any]) -> list[str]:
    """The texts of every tool result in this conversation, in order."""
    found: list[str] = []
    for message in request.get("messages") or []:
        content = message.get("content")
        if message.get("role") == "user" and isinstance(content, list):
            found += [_result_text(b) for b in content if b.get("type") == "tool_result"]
    return found


def tool_names(request: dict[str, Any]) -> list[str]:
    return [str(t.get("name")) for t in request.get("tools") or []]


STRUCTURED = "StructuredOutput"  # the tool `claude -p --json-schema` offers the schema as


def structured_schema(request: dict[str, Any]) -> dict[str, Any] | None:
    """The JSON schema of a `--json-schema` run's request (its StructuredOutput tool's
    `input_schema`), or None when the request offers no such tool."""
    for tool in request.get("tools") or []:
        if tool.get("name") == STRUCTURED:
            schema = tool.get("input_schema")
            return schema if isinstance(schema, dict) else {}
    return None


def structured(answer: dict[str, Any]) -> Turn:
    """The model's answer to a `--json-schema` run: a call of its StructuredOutput tool."""
    return Turn(tools=[(STRUCTURED, answer)])


def _blocks(turn: Turn) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    if turn.text:
        blocks.append({"type": "text", "text": turn.text})
    for name, arguments in turn.tools:
        blocks.append(
            {"type": "tool_use", "id": f"toolu_{next(_ids):06d}", "name": name, "input": arguments}
        )
    return blocks


def _message(turn: Turn, model: str) -> dict[str, Any]:
    return {
        "id": f"msg_{next(_ids):06d}",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": _blocks(turn),
        "stop_reason": "tool_use" if turn.tools else "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": turn.input_tokens, "output_tokens": turn.output_tokens},
    }


def _events(turn: Turn, model: str) -> Iterator[tuple[str, dict[str, Any]]]:
    whole = _message(turn, model)
    start = {**whole, "content": [], "stop_reason": None}
    start["usage"] = {"input_tokens": turn.input_tokens, "output_tokens": 1}
    yield "message_start", {"type": "message_start", "message": start}
    for index, block in enumerate(whole["content"]):
        if block["type"] == "text":
            empty: dict[str, Any] = {"type": "text", "text": ""}
            delta = {"type": "text_delta", "text": block["text"]}
        else:
            empty = {**block, "input": {}}
            delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
        yield (
            "content_block_start",
            {
                "type": "content_block_start",
                "index": index,
                "content_block": empty,
            },
        )
        yield "content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta}
        yield "content_block_stop", {"type": "content_block_stop", "index": index}
    yield (
        "message_delta",
        {
            "type": "message_delta",
            "delta": {"stop_reason": whole["stop_reason"], "stop_sequence": None},
            "usage": {"output_tokens": turn.output_tokens},
        },
    )
    yield "message_stop", {"type": "message_stop"}


class AnthropicAPI(ScriptedServer):
    """The fake API's server; `url` for ANTHROPIC_BASE_URL, `requests` what it was sent."""

    def __init__(self, brain: Brain) -> None:
        super().__init__()
        self.brain = brain

    def main_requests(self) -> list[dict[str, Any]]:
        with self._lock:
            return [r for r in self.requests if is_main(r)]

    def answer(self, request: dict[str, Any]) -> Turn | Failure:
        self.record(request)
        return self.brain(request)

    def respond(self, reply: Replier, path: str, request: dict[str, Any]) -> None:
        path = path.split("?")[0]
        if path == "/v1/messages/count_tokens":
            reply.send_json(200, {"input_tokens": len(json.dumps(request)) // 4})
            return
        if path != "/v1/messages":
            self.get(reply, path)
            return
        turn = self.answer(request)
        model = str(request.get("model") or "claude-fake")
        if isinstance(turn, Failure):
            self._fail(reply, turn)
        elif not request.get("stream"):
            reply.send_json(200, _message(turn, model))
        else:
            chunks = (
                f"event: {name}\ndata: {json.dumps(data)}\n\n".encode()
                for name, data in _events(turn, model)
            )
            reply.send_stream("text/event-stream", chunks)

    def _fail(self, reply: Replier, failure: Failure) -> None:
        if failure.hang:
            self.stopped.wait()
            reply.close_connection = True
            return
        body = {"type": "error", "error": {"type": failure.kind, "message": failure.kind}}
        retry = {"retry-after": failure.retry_after} if failure.retry_after is not None else {}
        reply.send_json(failure.status, body, retry)
