"""One uvicorn server for an ASGI app: the streamable HTTP and SSE transports and the memory
browser are served by it, on the host and port of the settings or on a socket given."""

from __future__ import annotations

from typing import TYPE_CHECKING

import uvicorn

if TYPE_CHECKING:
    from starlette.types import ASGIApp

    from dreamwell.server.config import Settings


def uvicorn_server(app: ASGIApp, settings: Settings, fd: int | None = None) -> uvicorn.Server:
    config = uvicorn.Config(
        app,
        host=settings.host,
        port=settings.port,
        fd=fd,
        log_level=settings.log_level.lower(),
        access_log=False,
        lifespan="on",
    )
    return uvicorn.Server(config)
