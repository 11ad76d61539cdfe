"""Scripted model APIs on 127.0.0.1 that a test owns, for the real Codex, Copilot CLI and
Gemini CLI binaries (tests/support/agents.py): OpenAI's Responses API (`POST /v1/responses`,
streamed as server-sent events: what Codex and Copilot's bring-your-own-key mode speak) and
Gemini's `generateContent` / `streamGenerateContent?alt=sse`. Every request is recorded; the
test's `brain` decides each answer: a `Reply` of text or one tool call.

    with ResponsesAPI(brain) as api:   # or GeminiAPI(brain)
        ...  api.url, api.requests, api.with_tools()
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
class Reply:
    """One model answer: text, or a call of the tool `tool` with `arguments`."""

    text: str = ""
    tool: str = ""
    arguments: dict[str, Any] = field(default_factory=dict)
    namespace: str = ""  # Codex offers an MCP server's tools as a namespace (`mcp__NAME`)


Brain = Callable[[dict[str, Any]], Reply]


def said(_: dict[str, Any]) -> Reply:
    return Reply(text="OK")


class ScriptedAPI(ScriptedServer):
    """The server; `url` its base, `requests` the JSON bodies it was sent (in order)."""

    def __init__(self, brain: Brain = said) -> None:
        super().__init__()
        self.brain = brain
        self.paths: list[str] = []

    def with_tools(self) -> list[dict[str, Any]]:
        """The requests that offered tools (a router or title request offers none)."""
        with self._lock:
            return [r for r in self.requests if r.get("tools")]

    def take(self, path: str, request: dict[str, Any]) -> Reply:
        with self._lock:
            self.requests.append(request)
            self.paths.append(path)
        return self.brain(request)

    def answer(self, path: str, request: dict[str, Any]) -> tuple[str, Iterator[bytes]]:
        """(content type, body chunks) for one POST."""
        raise NotImplementedError

    def respond(self, reply: Replier, path: str, request: dict[str, Any]) -> None:
        reply.send_stream(*self.answer(path, request))

    def get(self, reply: Replier, path: str) -> None:
        reply.send_json(200 if path.endswith("/models") else 404, {"object": "list", "data": []})


def _sse(name: str | None, data: dict[str, Any]) -> bytes:
    head = f"event: {name}\n" if name else ""
    return f"{head}data: {json.dumps(data)}\n\n".encode()


class ResponsesAPI(ScriptedAPI):
    """`POST /v1/responses` with `"stream": true`, as Codex and Copilot send it."""

    def answer(self, path: str, request: dict[str, Any]) -> tuple[str, Iterator[bytes]]:
        return "text/event-stream", self._events(self.take(path, request), request)

    def _events(self, reply: Reply, request: dict[str, Any]) -> Iterator[bytes]:
        rid = f"resp_{next(_ids)}"
        base = {"id": rid, "object": "response", "model": request.get("model", "gpt-fake")}
        yield _sse("response.created", {"type": "response.created", "response": base})
        iid = f"item_{next(_ids)}"
        if reply.tool:
            args = json.dumps(reply.arguments)
            item: dict[str, Any] = {
                "type": "function_call",
                "id": iid,
                "call_id": f"call_{next(_ids)}",
                "name": reply.tool,
                "arguments": args,
                "status": "completed",
            }
            if reply.namespace:
                item["namespace"] = reply.namespace
            yield _sse(
                "response.output_item.added",
                {"type": "response.output_item.added", "output_index": 0, "item": item},
            )
        else:
            content = [{"type": "output_text", "text": reply.text, "annotations": []}]
            item = {"type": "message", "id": iid, "role": "assistant", "status": "completed"}
            added = {**item, "content": [], "status": "in_progress"}
            yield _sse(
                "response.output_item.added",
                {"type": "response.output_item.added", "output_index": 0, "item": added},
            )
            delta = {"item_id": iid, "output_index": 0, "content_index": 0}
            yield _sse(
                "response.output_text.delta",
                {"type": "response.output_text.delta", **delta, "delta": reply.text},
            )
            yield _sse(
                "response.output_text.done",
                {"type": "response.output_text.done", **delta, "text": reply.text},
            )
            item = {**item, "content": content}
        yield _sse(
            "response.output_item.done",
            {"type": "response.output_item.done", "output_index": 0, "item": item},
        )
        usage = {"input_tokens": 100, "output_tokens": 10, "total_tokens": 110}
        done = {**base, "status": "completed", "output": [item], "usage": usage}
        yield _sse("response.completed", {"type": "response.completed", "response": done})


class GeminiAPI(ScriptedAPI):
    """Gemini's `models/M:generateContent` (the router's request: asked for a JSON score, it
    gets one) and `models/M:streamGenerateContent?alt=sse` (the turn)."""

    def answer(self, path: str, request: dict[str, Any]) -> tuple[str, Iterator[bytes]]:
        reply = self.take(path, request)
        schema = (request.get("generationConfig") or {}).get("responseJsonSchema")
        if schema and not request.get("tools"):  # the router: how hard the prompt is
            reply = Reply(text=json.dumps({"complexity_reasoning": "easy", "complexity_score": 1}))
        if reply.tool:
            part: dict[str, Any] = {"functionCall": {"name": reply.tool, "args": reply.arguments}}
        else:
            part = {"text": reply.text}
        body = {
            "candidates": [
                {"content": {"role": "model", "parts": [part]}, "finishReason": "STOP", "index": 0}
            ],
            "usageMetadata": {
                "promptTokenCount": 100,
                "candidatesTokenCount": 10,
                "totalTokenCount": 110,
            },
            "modelVersion": path.rsplit("/", 1)[-1].split(":")[0],
        }
        if ":streamGenerateContent" in path:
            return "text/event-stream", iter([_sse(None, body)])
        return "application/json", iter([json.dumps(body).encode()])
