"""Start the real ASGI server (uvicorn, our build_asgi) on 127.0.0.1 with a random port."""

from __future__ import annotations

import json
import os
import socket
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx2
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

from dreamwell.server.config import Settings
from dreamwell.server.mcp.app import build_server
from dreamwell.server.runtime import Runtime
from dreamwell.server.transports.http import build_asgi
from dreamwell.server.transports.uvicorn_server import uvicorn_server
from tests.support import ROOT


@asynccontextmanager
async def http_server(settings: Settings, runtime: Runtime | None = None) -> AsyncIterator[str]:
    """Yields the base URL (http://127.0.0.1:PORT) while the server runs; stops it after."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    app = build_asgi(build_server(settings, runtime), settings, runtime)
    server = uvicorn_server(app, settings)
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(server.serve, [sock])
            with anyio.fail_after(30):
                while not server.started:
                    await anyio.sleep(0.01)
            yield f"http://127.0.0.1:{port}"
            server.should_exit = True
    finally:
        sock.close()


@asynccontextmanager
async def http(
    url: str, headers: dict[str, str] | None = None, mode: str = "auto", roots: Any = None
) -> AsyncIterator[Client]:
    """A client of the streamable HTTP server at `url`; `roots` (tests/support/repos.py's
    `Roots`) answers its `roots/list`."""
    callback = roots.callback if roots is not None else None
    async with httpx2.AsyncClient(headers=headers or {}, timeout=30) as client:
        transport = streamable_http_client(f"{url}/mcp", http_client=client)
        async with Client(transport, mode=mode, list_roots_callback=callback) as c:  # type: ignore[arg-type]
            yield c


def stdio_params(data_dir: Path) -> StdioServerParameters:
    return StdioServerParameters(
        command=sys.executable,
        args=["-m", "dreamwell.server", "serve", "--data-dir", str(data_dir)],
        env={**os.environ, "DREAMWELL_EMBEDDER": "none"},
    )


def from_mcp_json(data_dir: Path) -> StdioServerParameters:
    entry = json.loads((ROOT / "mcp.json").read_text())["mcpServers"]["dreamwell"]
    return StdioServerParameters(
        command=entry["command"],
        args=[*entry["args"], "--data-dir", str(data_dir)],
        env={**os.environ, "DREAMWELL_EMBEDDER": "none"},
    )
