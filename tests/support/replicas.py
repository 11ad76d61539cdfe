"""`dreamwell serve --transport http` replicas on one object-store location, as separate
processes with a cache directory each (as on separate machines), and an MCP client for them."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from tests.support.s3server import SeaweedS3

START_TIMEOUT = 90.0
# the replicas' bearer token: `serve` over HTTP is never open (server/transports/bearer.py)
TOKEN = "replica-token-0123456789"
SAVED = re.compile(r"(?:Saved|Reinforced) memory \[([A-Za-z0-9]{12})\]")


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class Replica:
    def __init__(self, s3: SeaweedS3, prefix: str, cache: Path, **settings: str) -> None:
        self.port = free_port()
        self.cache = cache
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = cache.with_suffix(".log")
        self.where = s3.flags(s3.uri(prefix), cache)
        serve = ["serve", "--transport", "http", "--port", str(self.port)]
        self.command = [sys.executable, "-m", "dreamwell.server", *serve, *self.where]
        self.env = {**os.environ, "DREAMWELL_EMBEDDER": "none", "DREAMWELL_LOG_LEVEL": "INFO"}
        self.env["DREAMWELL_TOKEN"] = TOKEN
        self.env.update({f"DREAMWELL_{k.upper()}": v for k, v in settings.items()})
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, wait: bool = True) -> Replica:
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen(
                self.command, env=self.env, stdin=subprocess.DEVNULL, stdout=log, stderr=log
            )
        if wait:
            self.wait_ready()
        return self

    def wait_ready(self) -> None:
        assert self.proc is not None
        deadline = time.monotonic() + START_TIMEOUT
        while not self._accepts():
            assert self.proc.poll() is None, f"replica exited:\n{self.log_tail()}"
            assert time.monotonic() < deadline, f"replica did not start:\n{self.log_tail()}"
            time.sleep(0.05)

    def _accepts(self) -> bool:
        with socket.socket() as s:
            s.settimeout(0.2)
            return s.connect_ex(("127.0.0.1", self.port)) == 0

    def log_tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def cli(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[bytes]:
        """Another `dreamwell` command on this replica's location and cache."""
        command = [sys.executable, "-m", "dreamwell.server", *args, *self.where]
        return subprocess.run(command, capture_output=True, env=self.env, timeout=timeout)

    def export(self) -> dict[str, dict[str, Any]]:
        """Every live memory this replica's cache holds once caught up (`dreamwell export`)."""
        done = self.cli("export")
        assert done.returncode == 0, (done.returncode, done.stderr.decode(errors="replace"))
        rows = [json.loads(line) for line in done.stdout.splitlines() if line.strip()]
        return {row["id"]: row for row in rows}

    def ids(self) -> set[str]:
        return set(self.export())

    def kill9(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=30)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.kill9()


async def warm(replicas: list[Replica]) -> None:
    """One search on each: a replica opens a tenant's store at its first call."""
    for r in replicas:
        async with client(r.url) as c:
            await c.call_tool("search_memory", {"query": "warm up"})


@asynccontextmanager
async def client(url: str, timeout: float = 60, roots: Any = None) -> AsyncIterator[Client]:
    """An MCP client of a replica; with `roots` (tests/support/repos.py's `Roots`) it speaks
    the handshake era, where a server may ask for them."""
    callback = roots.callback if roots is not None else None
    mode = "legacy" if roots is not None else "auto"
    bearer = {"Authorization": f"Bearer {TOKEN}"}
    async with httpx2.AsyncClient(timeout=timeout, headers=bearer) as http:
        transport = streamable_http_client(f"{url}/mcp", http_client=http)
        async with Client(transport, mode=mode, list_roots_callback=callback) as c:  # type: ignore[arg-type]
            yield c
