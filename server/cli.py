"""`dreamwell serve`: the command line."""

from __future__ import annotations

import argparse
import ctypes
import ctypes.util
import logging
import sys
from collections.abc import Sequence
from typing import Any

import anyio
from pydantic import ValidationError

from dreamwell.server.config import LOOPBACK, Settings
from dreamwell.server.dream_edge import LLM_FLAGS, add_cli, add_llm_flags, run_cli

logger = logging.getLogger("dreamwell")
_M_ARENA_MAX = -8  # mallopt parameter number in glibc's malloc.h


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="dreamwell", description="MCP memory server.")
    sub = parser.add_subparsers(dest="command", required=True)
    serve = sub.add_parser("serve", help="run the MCP server")
    # values are checked by Settings, which names the key in a one-line error
    serve.add_argument("--transport", help="stdio (default), sse or http")
    serve.add_argument("--host")
    serve.add_argument("--port")
    serve.add_argument("--data-dir")
    serve.add_argument(
        "--namespace", help="pin the working-memory namespace, e.g. patrol/heartbeat"
    )
    serve.add_argument("--token", help="bearer token required on HTTP transports")
    serve.add_argument("--tokens-file", help="JSON object of bearer token -> tenant name")
    serve.add_argument("--stateless-http", action="store_true", default=None)
    serve.add_argument("--log-level", help="DEBUG, INFO, WARNING (default) or ERROR")
    serve.add_argument("--dream-every", help="dream inside the server, e.g. 12h")
    add_llm_flags(serve)
    add_cli(sub)
    return parser


def settings_from(args: argparse.Namespace, keys: Sequence[str]) -> Settings:
    """Flags beat environment variables; a bad value is one line on stderr and exit code 2."""
    given: dict[str, Any] = {k: getattr(args, k) for k in keys if getattr(args, k) is not None}
    try:
        settings = Settings(**given)
        settings.tenant_tokens()
    except ValidationError as err:
        first = err.errors()[0]
        key = ".".join(str(p) for p in first["loc"])
        shown = "***" if "key" in key or "token" in key else repr(first.get("input"))
        sys.stderr.write(f"dreamwell: bad setting {key}={shown}: {first['msg']}\n")
        raise SystemExit(2) from None
    except (OSError, ValueError) as err:
        sys.stderr.write(f"dreamwell: bad setting tokens_file: {err}\n")
        raise SystemExit(2) from None
    return settings


def _serve(settings: Settings) -> None:
    from dreamwell.server.serve import serve

    if (
        settings.transport != "stdio"
        and settings.host not in LOOPBACK
        and not settings.tenant_tokens()
    ):
        sys.stderr.write(
            f"dreamwell: refusing to bind {settings.host}: a non-loopback address needs bearer "
            "tokens (--token or --tokens-file)\n"
        )
        raise SystemExit(2)
    anyio.run(serve, settings)


def _few_malloc_arenas() -> None:
    """glibc gives each thread that allocates its own arena; with LanceDB's, Tantivy's and
    onnxruntime's thread pools that fragmented a server to ~530 MB RSS after a few hundred
    saves, against ~320 MB with two arenas. Must run before those threads start."""
    if sys.platform.startswith("linux"):
        try:
            libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
            libc.mallopt(_M_ARENA_MAX, 2)
        except (OSError, AttributeError):  # not glibc (musl, ...): nothing to tune
            pass


def main(argv: Sequence[str] | None = None) -> None:
    _few_malloc_arenas()
    args = _parser().parse_args(argv)
    if args.command in ("dream", "log"):
        keys = (
            ["data_dir", "ollama_host", "ollama_model", *LLM_FLAGS]
            if args.command == "dream"
            else ["data_dir"]
        )
        settings = settings_from(args, keys)
        logging.basicConfig(stream=sys.stderr, level=settings.log_level)
        raise SystemExit(run_cli(args, settings))
    if args.command == "serve":
        settings = settings_from(
            args,
            [
                "transport",
                "host",
                "port",
                "data_dir",
                "namespace",
                "token",
                "tokens_file",
                "stateless_http",
                "log_level",
                "dream_every",
                *LLM_FLAGS,
            ],
        )
        logging.basicConfig(
            stream=sys.stderr,
            level=settings.log_level,
            format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        )
        _serve(settings)
