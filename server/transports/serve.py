"""Run the server on the chosen transport, with the process's background loops (server/loops.py)."""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading
from collections.abc import Callable
from typing import Any

import anyio
from mcp.server.mcpserver import MCPServer

from dreamwell.server import loops
from dreamwell.server.config import Settings
from dreamwell.server.heap import quiet_collections
from dreamwell.server.mcp.app import build_server
from dreamwell.server.runtime import Runtime
from dreamwell.server.transports.early import Handover
from dreamwell.server.transports.stdio import run_stdio

logger = logging.getLogger(__name__)


STOP_GRACE = 1.0  # seconds from EOF or a signal to exit, whatever is still running


def _exit_soon(grace: float = STOP_GRACE, code: int = 0) -> None:
    """Leave within `grace` seconds even if a thread cannot be interrupted (the stdio reader
    blocked in read(), a model loading, an LLM call). Safe: every acknowledged write is in
    the fsynced log, and file locks are released with the process."""
    timer = threading.Timer(grace, os._exit, args=(code,))
    timer.daemon = True
    timer.start()


def by_hand(received: int) -> int:
    """The exit status for a stopping signal: Ctrl-C at a terminal is one line and 130, as
    for every command; a client's SIGINT (Claude Code's, stdin a pipe) or a SIGTERM, 0 and
    nothing said (a client logs stderr as errors)."""
    if received != signal.SIGINT or not sys.stdin.isatty():
        return 0
    sys.stderr.write("dreamwell: interrupted (Ctrl-C); the server is stopped\n")
    sys.stderr.flush()
    return 130


async def _stop_on_signal(
    stop: Callable[[], None] | None, said: list[int], grace: float = STOP_GRACE
) -> None:
    """SIGTERM or SIGINT: stop serving and leave within `grace` seconds (every acknowledged
    write is already in the fsynced log; file locks go with the process). Without `stop` (a
    stdio server), leave at once: its client has stopped talking to it. Claude Code sends
    SIGINT at the end of every session, SIGTERM 100 ms later, and waits for the exit before
    its SessionEnd hooks: the 30-50 ms of cancelling tasks and joining threads were on every
    `claude -p`'s path."""
    with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
        async for received in signals:
            logger.info("received %s; stopping", signal.Signals(received).name)
            said.append(by_hand(received))
            if stop is None:
                os._exit(said[0])
            _exit_soon(grace, said[0])
            stop()
            return


def _http_server(mcp: MCPServer[Runtime], settings: Settings, runtime: Runtime) -> Any:
    """uvicorn serving --transport http or sse (the HTTP stack loads only for these)."""
    from dreamwell.server.transports.http import build_asgi
    from dreamwell.server.transports.uvicorn_server import uvicorn_server

    return uvicorn_server(build_asgi(mcp, settings, runtime), settings)


def _with_token(settings: Settings) -> Settings:
    """HTTP and SSE are never open by default: a token of its own unless given some or
    `--no-token` (server/transports/bearer.py); one line on stderr says which."""
    from dreamwell.server.transports.bearer import with_token

    settings, line = with_token(settings)
    if line is not None:
        sys.stderr.write(line + "\n")
    return settings


def _forget_hook_door(settings: Settings) -> None:
    """The token file of the HTTP hook door earlier versions opened goes (the hooks are
    commands now; server/hooks/resident.py)."""
    from dreamwell.server.hooks.old_hooks import forget_door

    forget_door(settings.data_dir)


async def serve(settings: Settings, early: Handover | None = None) -> int:
    """Serve until stdin closes or a signal; `early`: the stdio frames read and answered
    before the SDK was loaded (server/transports/early.py). Returns the exit status."""
    said: list[int] = []  # the status a stopping signal asked for
    quiet_collections()  # trim_when_idle, below, runs them
    _forget_hook_door(settings)
    if settings.transport != "stdio":
        settings = _with_token(settings)
    runtime = Runtime(settings)
    mcp = build_server(settings, runtime)
    server = None if settings.transport == "stdio" else _http_server(mcp, settings, runtime)
    async with anyio.create_task_group() as tg:
        if server is None:
            tg.start_soon(_stop_on_signal, None, said)
        else:  # ask uvicorn to exit: cancelled mid-serve, its lifespan task logs a traceback
            tg.start_soon(_stop_on_signal, lambda: setattr(server, "should_exit", True), said)
        loops.start(tg, runtime)
        if server is None:
            await run_stdio(mcp, on_eof=_exit_soon, early=early)
        else:
            await server.serve()
        _exit_soon(code=said[0] if said else 0)
        tg.cancel_scope.cancel()
    return said[0] if said else 0
