"""Every process-wide background loop, and the one place they are started (`start`): `serve`
(server/transports/serve.py) and `dreamwell ui` (server/cli/ui.py) call it, so the in-memory
test client, the server and the browser run the same loops. Per connection, the MCP
lifespan (server/mcp/app.py) only warms the stores and watches the skills' folders.

- backfill_forever: load stored vectors, then embed what has none (off the save path);
- checkpoint_forever: fold the write-ahead log into LanceDB and Tantivy;
- trim_when_idle: a full collection and the heap handed back once requests pause;
- sweep_forever: expired working memory dropped, hourly;
- dream_forever (`dream_every`), enrich_forever (`enrich` with an LLM) and, from
  server/auto_dream.py, dream_when_idle (`dream_auto`).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Coroutine
from typing import Any

import anyio
import anyio.to_thread
from anyio.abc import TaskGroup

from dreamwell.server import background
from dreamwell.server.auto_dream import dream_when_idle
from dreamwell.server.dream_llm import llm_endpoint, llm_for
from dreamwell.server.dreaming import dream_in_thread, tenant_names
from dreamwell.server.flags import parse_every
from dreamwell.server.heap import FULL_COLLECTION_EVERY, give_back_freed, tidy
from dreamwell.server.runtime import Runtime, Tenant
from dreamwell.stores import DataDir, StoreError, claimed

logger = logging.getLogger(__name__)

SWEEP_SECONDS = 3600.0
BACKFILL_BATCH = 64  # memories embedded (and logged) at a time
BACKFILL_GATHER = 0.05  # seconds that saves have to arrive before their backfill round
BACKFILL_BUSY = 0.5  # seconds between looks while another process embeds the store
TRIM_QUIET = 1.0  # seconds without a request before the heap is handed back
ENRICH_PAUSE = 60.0  # seconds before enrichment asks an LLM that failed again

Loop = Callable[[Runtime], Coroutine[Any, Any, None]]


def loops(runtime: Runtime, serving: bool = True) -> list[Loop]:
    """The loops this process runs: a server (`serving`) all that its settings ask for; the
    browser alone (`dreamwell ui`) only the two its stores need (vectors, checkpoints)."""
    if not serving:
        return [backfill_forever, checkpoint_forever]
    settings = runtime.settings
    return [
        sweep_forever,
        trim_when_idle,
        backfill_forever,
        checkpoint_forever,
        *([dream_forever] if settings.dream_every else []),
        enrich_forever,
        *([dream_when_idle] if settings.dream_auto else []),
    ]


def start(tg: TaskGroup, runtime: Runtime, serving: bool = True) -> None:
    """Start every process-wide loop in `tg` (cancelled with it)."""
    for loop in loops(runtime, serving):
        tg.start_soon(loop, runtime)


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
    with claimed(DataDir(tenant.data_dir).backfill_lock) as mine:
        return (
            tenant.longterm.backfill(BACKFILL_BATCH, background.on_lower_threads) if mine else None
        )


def _load_vectors(tenant: Tenant) -> None:
    tenant.longterm.load_vectors()
    give_back_freed()  # reading every stored vector left its Arrow batches freed, mapped


def _checkpoint(tenant: Tenant) -> None:
    if tenant.longterm.checkpoint(False):
        give_back_freed()  # the checkpoint's batches


async def dream_forever(runtime: Runtime, period: float | None = None) -> None:
    """`dream_every` inside `serve`: one cycle per interval on the root store and on every
    tenant, each under its own lock, each with its own report."""
    period = period or parse_every(runtime.settings.dream_every or "")
    while True:
        await anyio.sleep(period)
        from dreamwell.dream import DreamBusy

        for name in tenant_names(runtime):
            try:
                tenant = await runtime.tenant(name)
                logger.info("%s", await dream_in_thread(tenant, runtime.settings, False))
            except (DreamBusy, StoreError) as exc:
                logger.info("dream of %s skipped: %s", name or "the root store", exc)
            except Exception:  # the server outlives a failed cycle
                logger.exception("dream cycle of %s failed", name or "the root store")


async def enrich_forever(runtime: Runtime, period: float = 5.0) -> None:
    """With an LLM configured (and `enrich` on), expand queued saved memories in the
    background, a few at a time per store; without an LLM nothing happens. The LLM client
    loads after the first period, off the start-up path (a bad setting still fails at once)."""
    if not runtime.settings.enrich or llm_endpoint(runtime.settings) is None:
        return
    await anyio.sleep(period)
    from dreamwell.dream import render
    from dreamwell.dream.enrichment import enrich_queued

    llm = llm_for(runtime.settings)
    while llm is not None:
        busy = False  # a batch was tried: look again at once, more may be waiting
        failed = False
        for tenant in runtime.opened():
            cancel = threading.Event()
            try:
                report = await anyio.to_thread.run_sync(
                    enrich_queued, tenant.longterm, llm, 4, cancel, abandon_on_cancel=True
                )
                if report is not None and report.llm_stopped:  # kept queued; try later
                    logger.warning("enrichment paused: %s", report.llm_stopped)
                    failed = True
                busy = busy or report is not None
                if report is not None and report.changes():
                    logger.info("%s", render(report))
            except (StoreError, OSError) as exc:
                logger.warning("enrichment in %s paused: %s", tenant.data_dir, exc)
            except Exception:  # the server outlives a failed enrichment
                logger.exception("enrichment in %s failed", tenant.data_dir)
            finally:
                cancel.set()
        if failed:  # the LLM failed: its queue waits, and so does the next try
            await anyio.sleep(ENRICH_PAUSE)
        elif not busy:  # nothing waiting, or another process is working the queue
            await anyio.sleep(period)
