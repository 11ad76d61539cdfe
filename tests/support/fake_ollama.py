"""A small fake Ollama HTTP server on 127.0.0.1 for tests: it plays scripted answers to
/api/chat (and /api/embed), including broken JSON, HTTP 500 and answers slower than the
client's time-out. The real `ollama` client talks to it."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Script:
    """What the server answers, in order; the last answer repeats."""

    answers: list[str | int | tuple[float, str]] = field(default_factory=list)
    requests: list[dict[str, Any]] = field(default_factory=list)
    stop: threading.Event = field(default_factory=threading.Event)

    def next(self) -> str | int | tuple[float, str]:
        if len(self.answers) > 1:
            return self.answers.pop(0)
        return self.answers[0] if self.answers else "{}"


def _handler(script: Script) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:  # quiet
            pass

        def _send(self, status: int, body: dict[str, Any]) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            if self.path == "/api/tags":
                self._send(200, {"models": [{"name": "fake:latest", "model": "fake:latest"}]})
            else:
                self._send(404, {"error": "not found"})

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length", "0"))
            request = json.loads(self.rfile.read(length) or b"{}")
            script.requests.append({"path": self.path, **request})
            if self.path == "/api/embed":
                inputs = request.get("input") or []
                self._send(200, {"model": "fake", "embeddings": [[1.0, 0.0] for _ in inputs]})
                return
            answer = script.next()
            if isinstance(answer, int):
                self._send(answer, {"error": f"scripted HTTP {answer}"})
                return
            if isinstance(answer, tuple):
                delay, answer = answer
                script.stop.wait(delay)  # slower than the client's time-out
            self._send(
                200,
                {
                    "model": request.get("model", "fake"),
                    "created_at": "2026-01-01T00:00:00Z",
                    "message": {"role": "assistant", "content": answer},
                    "done": True,
                    "done_reason": "stop",
                },
            )

    return Handler


@contextmanager
def fake_ollama(*answers: str | int | tuple[float, str]) -> Iterator[tuple[str, Script]]:
    """Yields (host URL, script); the server stops when the block ends."""
    script = Script(list(answers))
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(script))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", script
    finally:
        script.stop.set()
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


def unreachable_host() -> str:
    """A loopback URL where nothing listens (the port was just released)."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), BaseHTTPRequestHandler)
    port = server.server_address[1]
    server.server_close()
    return f"http://127.0.0.1:{port}"
