"""`dreamwell dream`: --once [--dry-run], --every, --report [RUN], --undo RUN, printed for a
person at a terminal (a progress bar per store, a line when the store was used a moment ago),
stopped by Ctrl-C or SIGTERM as a person expects. The cycle itself is server/dreaming.py's."""

from __future__ import annotations

import argparse
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import IO, Any

from dreamwell.server.config import Settings
from dreamwell.server.dream_llm import dream_options
from dreamwell.server.dreaming import dream_once, refuse_read_only, tenant_names
from dreamwell.server.flags import parse_every
from dreamwell.server.runtime import Runtime, Tenant
from dreamwell.stores import DataDir, StoreError


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
