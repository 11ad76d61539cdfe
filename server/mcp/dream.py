"""The dream worker at the MCP edge: the `dream` prompt, report resources, the `dreamwell
dream` command, and the opt-in timer inside `serve`.

The dream layer (and its LLM client, httpx) is imported where a dream, a report or an
enrichment runs, never at start-up: a server that is only answering tool calls does not load it."""

from __future__ import annotations

import argparse
import errno
import logging
import os
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, TYPE_CHECKING, Annotated, Any

import anyio
import anyio.to_thread
from mcp.server.mcpserver import Context, MCPServer
from mcp.shared.exceptions import MCPError
from mcp.types import INVALID_PARAMS
from pydantic import Field

from dreamwell.server.config import Settings
from dreamwell.server.dream_llm import (
    NO_LLM,
    NO_LLM_HINT,
    dream_options,
    llm_configured,
    llm_endpoint,
    llm_for,
)
from dreamwell.server.flags import parse_every
from dreamwell.server.mcp.projects import caller_project
from dreamwell.server.mcp.reports import caller_tenant, register_reports, render_scoped
from dreamwell.server.runtime import Runtime, Tenant
from dreamwell.stores import (
    DataDir,
    StoreError,
    WriteFailed,
    advice,
    read_only_mount,
)

if TYPE_CHECKING:
    from dreamwell.dream import LLM, DreamOptions

logger = logging.getLogger(__name__)


_EROFS = OSError(errno.EROFS, os.strerror(errno.EROFS))
ENRICH_PAUSE = 60.0  # seconds before enrichment asks an LLM that failed again


def dream_once(
    tenant: Tenant,
    settings: Settings,
    dry_run: bool,
    options: DreamOptions | None = None,
    client_llm: LLM | None = None,
    no_llm_reason: str = NO_LLM,
    project: str | None = None,
) -> str:
    """One cycle with the configured LLM, else `client_llm` (the invoking client's model,
    asked through MCP sampling), else the passes that need none. With `project` (the
    caller's), the report shows only that project's and global memories (reports.py)."""
    from dreamwell.dream import run_cycle

    refuse_read_only(tenant.data_dir)
    llm = llm_for(settings) or client_llm
    try:
        report = run_cycle(
            tenant.longterm, llm, dry_run=dry_run, options=options, no_llm_reason=no_llm_reason
        )
    except OSError as exc:  # a lock, a log or the report could not be written
        raise WriteFailed(
            f"cannot dream in {tenant.data_dir}: {advice(tenant.data_dir, exc)}"
        ) from exc
    hint = report.llm is None and no_llm_reason == NO_LLM  # else the caller says it
    return render_scoped(report, project) + (f"\n{NO_LLM_HINT}" if hint else "")


def refuse_read_only(data_dir: Path) -> None:
    """One line, before anything opens: even a preview takes the dream lock and reports."""
    if read_only_mount(data_dir):
        raise WriteFailed(f"cannot dream in {data_dir}: {advice(data_dir, _EROFS)}")


def register_dream(mcp: MCPServer[Runtime], runtime: Runtime) -> None:
    """The `dream` prompt and the report resources."""
    _register_prompt(mcp, runtime)
    register_reports(mcp, runtime)


def _register_prompt(mcp: MCPServer[Runtime], runtime: Runtime) -> None:
    @mcp.prompt(
        description="Refine long-term memory now: apply=no (default) shows the plan, "
        "apply=yes runs it and reports."
    )
    async def dream(
        ctx: Context,
        apply: Annotated[str, Field(description="'yes' to change memory, else a preview")] = "no",
    ) -> str:
        if apply.strip().lower() not in ("yes", "no", "y", "n", "true", "false", ""):
            raise MCPError(INVALID_PARAMS, f"apply must be yes or no; got {apply!r}")
        from dreamwell.dream import DreamBusy, DreamCancelled

        tenant = await caller_tenant(runtime)
        dry = apply.strip().lower() not in ("yes", "y", "true")
        try:  # the caller asked for it: no waiting for quiet
            client_llm, note = _client_model(ctx, runtime.settings)
            reason = f"{NO_LLM}; this client does not offer sampling" if note else NO_LLM
            project = await caller_project(runtime, ctx)
            key = project.key if project is not None else None
            text = await dream_in_thread(
                tenant, runtime.settings, dry, 0, client_llm, reason, project=key
            )
        except (DreamBusy, DreamCancelled, StoreError, ValueError) as exc:
            raise MCPError(INVALID_PARAMS, str(exc)) from exc
        return f"{text}\n\n{note}" if note else text


def _client_model(ctx: Context, settings: Settings) -> tuple[LLM | None, str]:
    """(the invoking client's model when no LLM is configured and the client offers
    sampling, a note for the caller when it does not)."""
    if llm_configured(settings):
        return None, ""
    from dreamwell.server.mcp.sampling import SamplingLLM, offers_sampling, without_sampling_note

    if offers_sampling(ctx):
        return SamplingLLM(ctx, settings.llm_max_tokens, settings.llm_timeout), ""
    return None, without_sampling_note()


async def dream_in_thread(
    tenant: Tenant,
    settings: Settings,
    dry_run: bool,
    quiet_seconds: float = 30.0,
    client_llm: LLM | None = None,
    no_llm_reason: str = NO_LLM,
    project: str | None = None,
) -> str:
    """One cycle off the event loop. Cancelling this (the server stops) tells the cycle to
    stop between steps and interrupts its LLM call."""
    options = dream_options(settings, quiet_seconds=quiet_seconds)
    try:
        return await anyio.to_thread.run_sync(
            dream_once,
            tenant,
            settings,
            dry_run,
            options,
            client_llm,
            no_llm_reason,
            project,
            abandon_on_cancel=True,
        )
    finally:
        options.cancel.set()


def tenant_names(runtime: Runtime, only: str | None = None) -> list[str]:
    """The root store and every tenant under it, or just `only`."""
    if only is not None:
        return [runtime.settings.known_tenant(only) if only else ""]
    return ["", *DataDir(runtime.settings.data_dir).tenants()]


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


def run_dream_command(args: argparse.Namespace, settings: Settings) -> int:
    """`dreamwell dream`: --once [--dry-run], --every, --report [RUN], --undo RUN; on one
    --tenant, or (--once, --every) on the root store and every tenant."""
    from dreamwell.dream import DreamBusy, render, undo
    from dreamwell.dream.report import list_reports, load_report

    runtime = Runtime(settings)
    out = sys.stdout
    try:
        names = tenant_names(runtime, args.tenant if args.tenant is not None else None)
        if args.once or args.every:
            with _stopped_by_sigterm():
                return _dream_all(runtime, names, args, out)
        tenant = runtime.open_tenant(names[0] if args.tenant else "")
        if args.report is not None:
            runs = list_reports(tenant.data_dir)
            run = args.report or (runs[0] if runs else "")
            out.write(
                (render(load_report(tenant.data_dir, run)) if run else "No dream cycles yet.")
                + "\n"
            )
        else:
            out.write(render(undo(tenant.longterm, args.undo)) + "\n")
    except (KeyError, ValueError, DreamBusy, StoreError) as exc:
        sys.stderr.write(f"dreamwell: {exc.args[0] if exc.args else exc}\n")
        return 1
    return 0


@contextmanager
def _stopped_by_sigterm() -> Iterator[None]:
    """A dream told to stop (SIGTERM: `kill`, a service manager, a session's end) unwinds as
    Ctrl-C does, so its `claude` run is stopped, its temp folder removed and its report says
    it was cut short; without this Python would exit on the spot."""
    import signal

    def interrupt(_signum: int, _frame: object) -> None:
        raise KeyboardInterrupt

    try:
        previous = signal.signal(signal.SIGTERM, interrupt)
    except ValueError:  # not the main thread: leave the signal alone
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _say_if_waiting(tenant: Tenant, label: str) -> None:
    """A cycle waits until no tool call came for DreamOptions.quiet_seconds: say so, or a
    person at the terminal sees nothing happen for up to that long."""
    import time

    from dreamwell.dream import DreamOptions

    quiet = DreamOptions().quiet_seconds
    try:
        idle = time.time() - DataDir(tenant.data_dir).activity.stat().st_mtime
    except FileNotFoundError:
        return
    if idle < quiet:
        sys.stderr.write(
            f"dreamwell: {label}: an agent used this memory {idle:.0f} s ago; waiting until it "
            f"has been quiet for {quiet:.0f} s, so the dream does not rewrite what it is saving\n"
        )
        sys.stderr.flush()


def _dream_all(runtime: Runtime, names: list[str], args: argparse.Namespace, out: IO[str]) -> int:
    """--once: one cycle per store; --every: that, every interval, for ever. A store whose
    cycle is busy or fails is reported and the others still dream."""
    from dreamwell.dream import DreamBusy
    from dreamwell.dream.cycle import PASSES
    from dreamwell.server.cli.porting import progress

    period = parse_every(args.every) if args.every else None
    failed = 0
    while True:
        for name in names:
            label = f"tenant {name}" if name else "root store"
            try:
                refuse_read_only(runtime.tenant_dir(name))
                tenant = runtime.open_tenant(name)
                _say_if_waiting(tenant, label)
                with progress(len(PASSES), f"dreaming {label}", " passes") as bar:

                    def step(pass_name: str, bar: Any = bar, label: str = label) -> None:
                        bar.set_description(f"dreaming {label}: {pass_name}")
                        bar.update(1)

                    options = dream_options(runtime.settings, progress=step)
                    text = dream_once(tenant, runtime.settings, bool(args.dry_run), options)
                out.write((f"[{label}] " if len(names) > 1 else "") + text + "\n")
            except (DreamBusy, StoreError, ValueError) as exc:
                failed += 1
                sys.stderr.write(f"dreamwell: {label}: {exc}\n")
            out.flush()
        if period is None:
            return 1 if failed else 0
        _wait_for_next(period)


def _wait_for_next(period: float) -> None:
    """Sleep until the next cycle; Ctrl-C ends the wait as KeyboardInterrupt (one line and
    exit 130 in main). Python's own handler raised it wherever the main thread was, and one
    that landed in a weakref callback (`WeakSet._remove`, seen once in a CI run) was printed
    and dropped: the process slept on for the whole interval. Here the signal only sets a
    flag, which the wait sees whatever the main thread was running."""
    import signal

    stop = threading.Event()
    previous = signal.signal(signal.SIGINT, lambda _signum, _frame: stop.set())
    try:
        if stop.wait(period):
            raise KeyboardInterrupt
    finally:
        signal.signal(signal.SIGINT, previous)
