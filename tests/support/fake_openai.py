"""A small fake OpenAI-compatible chat server on 127.0.0.1 for tests. It plays scripted answers
to POST /v1/chat/completions (streamed as SSE when asked), lists its models at GET /v1/models,
and can answer with an HTTP status (with Retry-After), stall past a time-out, drip an answer
slowly (to cancel it mid-way), compute an answer from the request, refuse `json_schema`
response formats with 400, or echo the Authorization header in an error body (to check the
key never leaks)."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass(frozen=True)
class Status:
    code: int
    retry_after: str | None = None
    echo_key: bool = False


@dataclass(frozen=True)
class Slow:
    """Send nothing for `delay` seconds, then the answer."""

    delay: float
    text: str


@dataclass(frozen=True)
class Drip:
    """Stream `text` one character per `every` seconds."""

    text: str
    every: float = 0.05


Reply = str | Status | Slow | Drip | Callable[[dict[str, Any]], str]


@dataclass
class Script:
    answers: list[Reply] = field(default_factory=list)
    requests: list[dict[str, Any]] = field(default_factory=list)
    headers: list[dict[str, str]] = field(default_factory=list)
    models: list[str] = field(default_factory=lambda: ["fake-model"])
    refuse_schema: bool = False
    refuse_status: int = 400  # llama-cpp-python answers 500 naming response_format
    stop: threading.Event = field(default_factory=threading.Event)
    disconnected: threading.Event = field(default_factory=threading.Event)
    streaming: threading.Event = field(default_factory=threading.Event)  # 10 chars sent
    sent_chars: int = 0

    def next(self) -> Reply:
        if len(self.answers) > 1:
            return self.answers.pop(0)
        return self.answers[0] if self.answers else "{}"


def _handler(script: Script) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def _send(self, status: int, body: Any, headers: dict[str, str] | None = None) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            for k, v in (headers or {}).items():
                self.send_header(k, v)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            if self.path == "/v1/models":
                self._send(200, {"object": "list", "data": [{"id": m} for m in script.models]})
            else:
                self._send(404, {"error": "not found"})

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length", "0"))
            request = json.loads(self.rfile.read(length) or b"{}")
            script.requests.append(request)
            script.headers.append(dict(self.headers))
            fmt = request.get("response_format") or {}
            if script.refuse_schema and fmt.get("type") == "json_schema":
                message = "body.response_format.type: Input should be 'text' or 'json_object'"
                self._send(script.refuse_status, {"error": {"message": message}})
                return
            answer = script.next()
            if callable(answer):  # answers computed from the request (a scripted "model")
                answer = answer(request)
            if isinstance(answer, Status):
                headers = {"Retry-After": answer.retry_after} if answer.retry_after else {}
                detail = self.headers.get("Authorization", "") if answer.echo_key else "scripted"
                self._send(answer.code, {"error": {"message": f"bad: {detail}"}}, headers)
                return
            if isinstance(answer, Slow):
                if script.stop.wait(answer.delay):
                    return
                answer = answer.text
            every = answer.every if isinstance(answer, Drip) else 0.0
            text = answer.text if isinstance(answer, Drip) else answer
            if not request.get("stream"):
                self._send(200, {"choices": [{"message": {"content": text}}]})
                return
            self._stream(text, every)

        def _stream(self, text: str, every: float) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Connection", "close")
            self.end_headers()
            pieces = list(text) if every else [text[i : i + 7] for i in range(0, len(text), 7)]
            try:
                for piece in pieces:
                    chunk = {"choices": [{"delta": {"content": piece}}]}
                    self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
                    self.wfile.flush()
                    script.sent_chars += len(piece)
                    if script.sent_chars >= 10:
                        script.streaming.set()
                    if every and script.stop.wait(every):
                        return
                self.wfile.write(b"data: [DONE]\n\n")
                self.wfile.flush()
            except OSError:  # the client went away: the generation stops here
                script.disconnected.set()
            self.close_connection = True

    return Handler


@contextmanager
def fake_openai(*answers: Reply, **options: Any) -> Iterator[tuple[str, Script]]:
    """Yields (base URL ending in /v1, script); the server stops when the block ends."""
    script = Script(list(answers), **options)
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(script))
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1", script
    finally:
        script.stop.set()
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)
