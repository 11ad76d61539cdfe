"""build_server(): the MCP server with its tools, over stores opened lazily."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import anyio.to_thread
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.mcpserver import MCPServer
from mcp.shared.exceptions import MCPError
from mcp.types import INVALID_PARAMS

from dreamwell.server.config import Settings
from dreamwell.server.mcp import handshake, sdk
from dreamwell.server.mcp.arguments import check_prompt, tool_refusal
from dreamwell.server.mcp.dream import register_dream
from dreamwell.server.mcp.projects import register_projects
from dreamwell.server.mcp.recall import register_recall
from dreamwell.server.mcp.skills import SkillsEdge
from dreamwell.server.mcp.tools import register_tools, text_result
from dreamwell.server.runtime import CURRENT_REQUEST, Runtime

logger = logging.getLogger(__name__)

# The stores open (and the embedder loads) once the client has had an answer to a request other
# than `initialize` (its tools/list, as a rule), SETTLE seconds later so that the rest of its
# opening burst (prompts/list, resources/list) is answered first; a client that sends nothing
# gets them WARM_AFTER seconds after the session started. A tool call never waits for this: it
# opens the stores itself.
SETTLE = 0.25
WARM_AFTER = 2.0


class _Answered:
    """Set once a request other than `initialize` has been answered: the handshake is over."""

    def __init__(self) -> None:
        self.event: anyio.Event | None = None  # made by the lifespan, inside the event loop

    def note(self, ctx: ServerRequestContext[Any, Any]) -> None:
        is_request = ctx.request_id is not None  # notifications (`initialized`) do not count
        if is_request and ctx.method != "initialize" and self.event is not None:
            self.event.set()


def _edge_checks(mcp: MCPServer, answered: _Answered, runtime: Runtime) -> Any:
    """Middleware: tool and prompt arguments are checked strictly and refused in plain
    sentences before any handler runs (server/mcp/arguments.py); every handler can find the
    transport request it serves (CURRENT_REQUEST); `answered` learns the handshake is over,
    and `runtime` that a request was served."""

    async def middleware(ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        with runtime.serving_one():
            try:
                return await _checked(mcp, ctx, call_next)
            finally:
                answered.note(ctx)

    return middleware


async def _checked(
    mcp: MCPServer, ctx: ServerRequestContext[Any, Any], call_next: CallNext
) -> HandlerResult:
    """Refuse bad arguments in words, then run the handler with CURRENT_REQUEST set."""
    if ctx.method == "tools/call" and ctx.params is not None:
        refusal = tool_refusal(
            mcp, str(ctx.params.get("name", "")), ctx.params.get("arguments") or {}
        )
        if refusal is not None:
            return text_result(refusal, error=True)
    if ctx.method == "prompts/get" and ctx.params is not None:
        check_prompt(mcp, ctx.params)
    token = CURRENT_REQUEST.set(ctx.request)
    try:
        return await call_next(ctx)
    except ValueError as exc:  # the SDK's own prompt/resource refusals: same words in both eras
        if ctx.method not in ("prompts/get", "resources/read"):
            raise
        raise MCPError(INVALID_PARAMS, str(exc)) from exc
    finally:
        CURRENT_REQUEST.reset(token)


def build_server(settings: Settings, runtime: Runtime | None = None) -> MCPServer[Runtime]:
    """The MCP server. Its lifespan (entered per connection on some transports) only starts
    opening the stores; process-wide background work belongs to `serve`."""
    runtime = runtime or Runtime(settings)
    answered = _Answered()
    skills = SkillsEdge(runtime)

    @asynccontextmanager
    async def lifespan(_server: MCPServer[Runtime]) -> AsyncIterator[Runtime]:
        answered.event = anyio.Event()
        async with anyio.create_task_group() as tg:
            tg.start_soon(_warm, runtime, answered.event)
            tg.start_soon(skills.watch.run)
            yield runtime
            tg.cancel_scope.cancel()

    mcp: MCPServer[Runtime] = MCPServer(
        name=handshake.NAME,
        instructions=handshake.INSTRUCTIONS,
        version=handshake.VERSION,
        lifespan=lifespan,
        log_level=settings.log_level,
        extensions=[skills.extension()],
    )
    skills.attach(mcp)  # before _edge_checks, which refuses prompts it does not know
    sdk.lowlevel(mcp).middleware.append(_edge_checks(mcp, answered, runtime))
    register_projects(mcp, runtime)
    register_tools(mcp, runtime)
    sdk.keep_text(mcp, lambda name: name != "tags")  # a tags list may come as JSON text
    register_recall(mcp, runtime, skills)
    register_dream(mcp, runtime)
    return mcp


async def _warm(runtime: Runtime, answered: anyio.Event) -> None:
    """Open the default stores in the background so the first tool call is fast; start-up and
    tools/list never wait for it: it begins after the handshake (see SETTLE)."""
    with anyio.move_on_after(WARM_AFTER):
        await answered.wait()
    await anyio.sleep(SETTLE)
    tokens = runtime.settings.tenant_tokens()
    if not tokens or "" in tokens.values():  # the data directory itself is served
        try:
            await runtime.tenant("")
        except Exception:  # a tool call will report it in words; keep the session alive
            logger.exception("could not open the stores in %s", runtime.settings.data_dir)
    warm = getattr(runtime.embedder, "warm", None)
    if warm is not None:
        try:
            await anyio.to_thread.run_sync(warm, abandon_on_cancel=True)
        except Exception:  # recall falls back to keywords; the save path logs it too
            logger.exception("could not load the embedder")
