"""Run the server on the chosen transport, with process-level background work."""

from __future__ import annotations

import logging

import anyio

from dreamwell.server.app import backfill_forever, build_server, sweep_forever
from dreamwell.server.config import Settings
from dreamwell.server.dream_edge import dream_forever
from dreamwell.server.http import build_asgi, uvicorn_server
from dreamwell.server.runtime import Runtime

logger = logging.getLogger(__name__)


async def serve(settings: Settings) -> None:
    runtime = Runtime(settings)
    mcp = build_server(settings, runtime)
    async with anyio.create_task_group() as tg:
        tg.start_soon(sweep_forever, runtime)
        tg.start_soon(backfill_forever, runtime)
        if settings.dream_every:
            tg.start_soon(dream_forever, runtime)
        if settings.transport == "stdio":
            await mcp.run_stdio_async()
        else:
            server = uvicorn_server(build_asgi(mcp, settings, runtime), settings)
            await server.serve()
        tg.cancel_scope.cancel()
