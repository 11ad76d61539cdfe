"""`dreamwell ui`: the memory browser (server/ui/) on 127.0.0.1 only, behind the token it
prints, with the process's background work (server/loops.py) beside it until Ctrl-C."""

from __future__ import annotations

import signal
import sys
from typing import Any

from starlette.applications import Starlette
from starlette.types import ASGIApp

from dreamwell.server.config import Settings
from dreamwell.server.flags import UI_PORT
from dreamwell.server.runtime import Runtime
from dreamwell.server.ui.app import with_ui


def ui_command(settings: Settings) -> int:
    """Serve the browser on 127.0.0.1 only; prints the address once it accepts connections."""
    import socket

    import anyio

    from dreamwell.server.cli.stats import ensure_format
    from dreamwell.server.ui.secret import QUERY, RequireSecret, new_secret

    settings = settings.model_copy(update={"host": "127.0.0.1", "transport": "http"})
    ensure_format(settings.data_dir)
    runtime = Runtime(settings)
    # not `serve`'s port unless asked: both running side by side is the usual set-up
    wanted = settings.port if "port" in settings.model_fields_set else UI_PORT
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind(("127.0.0.1", wanted))
        except OSError as exc:
            sys.stderr.write(
                f"dreamwell: cannot listen on 127.0.0.1:{wanted} ({exc}); "
                "pick another with --port\n"
            )
            return 1
        sock.listen(128)
        port, secret = sock.getsockname()[1], new_secret()
        app = RequireSecret(with_ui(Starlette(), runtime), secret, f"dreamwell-ui-{port}")
        address = f"http://127.0.0.1:{port}/?{QUERY}={secret}"
        ready = f"dreamwell ui: {address} (open this address; Ctrl-C stops it)"
        stopped_by = anyio.run(_serve_and_backfill, app, runtime, settings, sock, ready)
    if stopped_by == signal.SIGINT:
        sys.stderr.write("dreamwell: interrupted (Ctrl-C); the browser is stopped\n")
        return 130
    return 0


async def _serve_and_backfill(
    app: ASGIApp, runtime: Runtime, settings: Settings, sock: Any, ready: str
) -> int | None:
    """Serve the page and, like `serve`, embed the memories that have no vector yet and fold
    the log into LanceDB and Tantivy now and then, until Ctrl-C or SIGTERM (returned).
    `ready` (the address) is printed once a Ctrl-C stops the server: from then on."""
    import anyio

    received: list[int] = []
    with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        # imported only now: a Ctrl-C while they load (seconds on a busy machine) stops the
        # server as one that came later does, not by cancelling its start with a traceback
        from dreamwell.server import loops
        from dreamwell.server.transports.uvicorn_server import uvicorn_server

        server = uvicorn_server(app, settings, own_signals=False)
        sys.stderr.write(f"{ready}\n")
        sys.stderr.flush()

        async def stop_on_signal() -> None:
            async for signum in signals:
                received.append(signum)
                server.should_exit = True
                return

        async with anyio.create_task_group() as tg:
            tg.start_soon(stop_on_signal)
            loops.start(tg, runtime, serving=False)
            await server.serve([sock])
            tg.cancel_scope.cancel()
    return received[0] if received else None
