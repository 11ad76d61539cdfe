"""What every scripted model API a test owns shares (tests/support/anthropic_api.py for Claude
Code, tests/support/agent_apis.py for Codex, Gemini CLI and Copilot CLI): an HTTP server on
127.0.0.1 in a thread, every JSON body POSTed to it recorded in order, and the answer left to
the subclass (`respond`), written with `send_json` or `send_stream`.

    class MyAPI(ScriptedServer):
        def respond(self, reply: Replier, path: str, request: dict[str, Any]) -> None:
            reply.send_json(200, {"ok": True})
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self


class Replier(BaseHTTPRequestHandler):
    """One request's handler: its answer goes to its `server`'s `ScriptedServer`."""

    protocol_version = "HTTP/1.1"
    api: ScriptedServer  # set on the subclass each server makes

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def send_json(self, status: int, body: Any, headers: dict[str, str] | None = None) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    def send_stream(self, kind: str, chunks: Iterable[bytes]) -> None:
        """A 200 answer of `kind` written chunk by chunk, then the connection closed."""
        self.send_response(200)
        self.send_header("content-type", kind)
        self.send_header("cache-control", "no-cache")
        self.send_header("connection", "close")
        self.end_headers()
        for chunk in chunks:
            self.wfile.write(chunk)
        self.wfile.flush()
        self.close_connection = True

    def do_POST(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        try:
            request = json.loads(self.rfile.read(length) or b"{}")
        except ValueError:
            request = {}
        self.api.respond(self, self.path, request)

    def do_GET(self) -> None:
        self.api.get(self, self.path)


class ScriptedServer:
    """The server; `url` its base, `requests` the JSON bodies it was sent (in order), `stopped`
    set when it stops (an answer made to hang ends then)."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.stopped = threading.Event()
        self._lock = threading.Lock()
        handler = type("Handler", (Replier,), {"api": self})
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def record(self, request: dict[str, Any]) -> None:
        with self._lock:
            self.requests.append(request)

    def respond(self, reply: Replier, path: str, request: dict[str, Any]) -> None:
        raise NotImplementedError

    def get(self, reply: Replier, path: str) -> None:
        reply.send_json(404, {"type": "error", "error": {"type": "not_found_error"}})

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.stopped.set()
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)
