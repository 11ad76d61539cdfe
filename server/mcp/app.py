"""build_server(): the MCP server with its tools, over stores opened lazily."""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import anyio.to_thread
from filelock import FileLock, Timeout
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.mcpserver import MCPServer
from mcp.shared.exceptions import MCPError
from mcp.types import INVALID_PARAMS

from dreamwell.server import background
from dreamwell.server.config import Settings
from dreamwell.server.heap import FULL_COLLECTION_EVERY, give_back_freed, tidy
from dreamwell.server.mcp import handshake, sdk
from dreamwell.server.mcp.arguments import check_prompt, tool_refusal
from dreamwell.server.mcp.dream import register_dream
from dreamwell.server.mcp.projects import register_projects
from dreamwell.server.mcp.recall import register_recall
from dreamwell.server.mcp.skills import SkillsEdge
from dreamwell.server.mcp.tools import register_tools, text_result
from dreamwell.server.runtime import CURRENT_REQUEST, Runtime, Tenant
from dreamwell.stores import DataDir, StoreError

logger = logging.getLogger(__name__)

SWEEP_SECONDS = 3600.0
# The stores open (and the embedder loads) once the client has had an answer to a request other
# than `initialize` (its tools/list, as a rule), SETTLE seconds later so that the rest of its
# opening burst (prompts/list, resources/list) is answered first; a client that sends nothing
# gets them WARM_AFTER seconds after the session started. A tool call never waits for this: it
# opens the stores itself.
SETTLE = 0.25
WARM_AFTER = 2.0
BACKFILL_BATCH = 64  # memories embedded (and logged) at a time
BACKFILL_GATHER = 0.05  # seconds that saves have to arrive before their backfill round
BACKFILL_BUSY = 0.5  # seconds between looks while another process embeds the store
TRIM_QUIET = 1.0  # seconds without a request before the heap is handed back


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


async def backfill_forever(
    runtime: Runtime, idle: float = 30.0, gather: float = BACKFILL_GATHER
) -> None:
    """Load stored vectors after start-up, then embed entries that have none yet (every new
    save: embedding is kept off the reply path; a switched embedder; Ollama being down).
    Keyword search covers them meanwhile. Unless a full batch is waiting, a round starts
    `gather` seconds after the saves that call for it, so that a stream of saves is embedded
    and logged a batch at a time: woken by each save, the rounds embedded one memory each,
    every one with its own log write and fsync, and an ingest of 100 saves a second kept
    both cores busy. When a run of rounds ends, the heap is handed back: the model's
    activations for 64 memories of 2.8 KB left 199 MiB freed but mapped (issue 24)."""
    untrimmed = 0  # memories embedded since the heap was last handed back
    while True:
        done, full, failed, busy = 0, False, False, False
        for tenant in runtime.opened():
            try:
                # at normal priority: the embedding alone runs on threads of lower priority
                found = await anyio.to_thread.run_sync(_backfill, tenant, abandon_on_cancel=True)
                busy = busy or found is None
                done, full = done + (found or 0), full or (found or 0) >= BACKFILL_BATCH
            except (StoreError, OSError) as exc:  # e.g. the store is busy: later
                failed = True
                logger.warning("backfill in %s paused: %s", tenant.data_dir, exc)
            except Exception:  # never take the server down: keyword search still works
                failed = True
                logger.exception("backfill in %s failed; will retry", tenant.data_dir)
        untrimmed += done
        if untrimmed and not done:  # a run of rounds is over: its activations are freed
            await background.run(give_back_freed)
            untrimmed = 0
        if failed:
            await anyio.sleep(idle)  # not at once: that would spin on a lasting failure
        elif busy and not done:  # another process is embedding: look again after it
            await anyio.sleep(BACKFILL_BUSY)
        elif not done:
            await _wait_for_vectors_wanted(runtime, _until_unclaimed(runtime, idle))
        if not full:
            await anyio.sleep(gather)


async def _wait_for_vectors_wanted(runtime: Runtime, timeout: float) -> None:
    """Until a store wants vectors (`timeout` at most); asleep meanwhile, not polling."""
    runtime.vectors_wanted.clear()  # then look: a nudge after the look is kept for the wait
    if not any(_vectors_wanted(t) for t in runtime.opened()):
        await runtime.vectors_wanted.wait(timeout)


def _until_unclaimed(runtime: Runtime, idle: float) -> float:
    """`idle`, or less when another process's memories become this one's to embed sooner
    (that process never logged their vectors)."""
    waits = [idle]
    for tenant in runtime.opened():
        store = tenant.opened_longterm
        soon = store.vectors_claimed_for() if store is not None else None
        if soon is not None:
            waits.append(soon + 0.05)
    return min(waits)


def _vectors_wanted(tenant: Tenant) -> bool:
    """A store opened since the last round (its stored vectors are still to load: searches
    are keyword-only until then), or one with memories to embed. Never opens a store: this
    runs on the event loop."""
    store = tenant.opened_longterm
    return store is not None and (not store.vectors_loaded or store.vectors_wanted.is_set())


async def checkpoint_forever(
    runtime: Runtime, period: float = 0.5, max_age: float | None = None
) -> None:
    """Fold each store's write-ahead log into LanceDB and Tantivy when enough has piled up
    (or it has waited long enough, CHECKPOINT_SECONDS by default); saves never wait for this."""
    while True:
        await anyio.sleep(period)
        for tenant in runtime.opened():
            from dreamwell.stores import CHECKPOINT_SECONDS  # loaded: a store is open

            try:
                due = CHECKPOINT_SECONDS if max_age is None else max_age
                if not tenant.longterm.checkpoint_due(due):
                    continue
                await anyio.to_thread.run_sync(_checkpoint, tenant, abandon_on_cancel=True)
            except (StoreError, OSError) as exc:  # a full or read-only disk: try again later
                logger.warning("checkpoint of %s skipped: %s", tenant.data_dir, exc)
            except Exception:  # never take the server down: the log keeps every write
                logger.exception("checkpoint of %s failed; will retry", tenant.data_dir)


async def trim_when_idle(
    runtime: Runtime, quiet: float = TRIM_QUIET, every: float = FULL_COLLECTION_EVERY
) -> None:
    """Once requests have stopped for `quiet` seconds, once per pause: a full garbage
    collection (`heap.quiet_collections` keeps them out of the requests), then hand the heap
    back. A search's temporaries (its sign-bit scan and rescored rows: megabytes at 100,000
    memories) are freed into the heap, which glibc keeps mapped: 300 searches left the server
    9 MiB above what it held (issue 24). Never between requests of a stream (a trim holds
    the heap's locks for up to a millisecond) unless a stream has gone on for `every`
    seconds: garbage in cycles is not left to pile up for good."""
    trimmed, tidied = runtime.served, time.monotonic()
    while True:
        await anyio.sleep(quiet)
        now = time.monotonic()
        paused = not runtime.serving and now - runtime.last_served >= quiet
        if runtime.served != trimmed and (paused or now - tidied >= every):
            trimmed, tidied = runtime.served, now
            await background.run(tidy)


async def sweep_forever(runtime: Runtime, period: float = SWEEP_SECONDS) -> None:
    """Hourly: drop expired working memory (long-term storage is compacted by checkpoints)."""
    while True:
        await anyio.sleep(period)
        for tenant in runtime.opened():
            key = str(tenant.data_dir)
            try:
                removed = await anyio.to_thread.run_sync(tenant.working.sweep)
                logger.info("swept %d expired working-memory entries", removed)
            except (StoreError, OSError) as exc:
                logger.warning("working-memory sweep of %s skipped: %s", key, exc)


def _backfill(tenant: Tenant) -> int | None:
    """How many memories this round embedded; None when another process (a second server on
    this data directory) holds `backfill.lock`: its vectors reach this one through the log,
    so the same memories are not embedded twice."""
    if not tenant.longterm.vectors_loaded:  # this process's own copy, even on a read-only disk
        background.lowered(_load_vectors, tenant)
    claim = FileLock(str(DataDir(tenant.data_dir).backfill_lock), timeout=0)
    try:
        claim.acquire()
    except Timeout:
        return None
    try:
        return tenant.longterm.backfill(BACKFILL_BATCH, background.on_lower_threads)
    finally:
        claim.release()


def _load_vectors(tenant: Tenant) -> None:
    tenant.longterm.load_vectors()
    give_back_freed()  # reading every stored vector left its Arrow batches freed, mapped


def _checkpoint(tenant: Tenant) -> None:
    if tenant.longterm.checkpoint(False):
        give_back_freed()  # the checkpoint's batches
