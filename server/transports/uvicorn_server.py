"""One uvicorn server for an ASGI app: the streamable HTTP and SSE transports and the memory
browser are served by it, on the host and port of the settings or on a socket given."""

from __future__ import annotations

import contextlib
from collections.abc import Generator
from typing import TYPE_CHECKING

import uvicorn

if TYPE_CHECKING:
    from starlette.types import ASGIApp

    from dreamwell.server.config import Settings


class _SignalsLeftAlone(uvicorn.Server):
    """A server that leaves SIGINT and SIGTERM to its caller, which stops it by setting
    `should_exit` (uvicorn's own handlers re-raise the signal after serving, and one that
    came while the app was starting cancelled its lifespan with a traceback)."""

    @contextlib.contextmanager
    def capture_signals(self) -> Generator[None, None, None]:
        yield


def uvicorn_server(
    app: ASGIApp, settings: Settings, fd: int | None = None, own_signals: bool = True
) -> uvicorn.Server:
    """`own_signals`: uvicorn handles Ctrl-C and SIGTERM itself; without, the caller does."""
    config = uvicorn.Config(
        app,
        host=settings.host,
        port=settings.port,
        fd=fd,
        log_level=settings.log_level.lower(),
        access_log=False,
        lifespan="on",
    )
    return uvicorn.Server(config) if own_signals else _SignalsLeftAlone(config)
