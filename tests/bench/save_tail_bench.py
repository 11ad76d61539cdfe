"""The tail of save latency: N saves one at a time while checkpoints run beside them, as in a
server (issue 44: p50 3.9 ms but p99 367 ms, max 1.3 s over 10,000 saves). Not collected by
pytest; in process, on a real store in a temporary directory, no embedder (the backfill is
not what stalls a save).

The garbage collector runs as in a server (`heap.quiet_collections`: full collections wait
for a pause, or for 10 minutes of requests without one; this run has no pause). A thread runs
what `checkpoint_forever` runs (every 0.5 s, a checkpoint when one is due);
each phase of a checkpoint (seal, fold into LanceDB, the Tantivy commit, the snapshot, the
state file, compaction, the data files' checksums) is timed, and so is each run of the garbage
collector; each slow save (over 25 ms) is attributed to the phases it overlapped, and the five
slowest are shown with them: the timeline that says where the p99 and the max go.

Run: python tests/bench/save_tail_bench.py [--saves 10000] [--slow-ms 25]
"""

from __future__ import annotations

import argparse
import functools
import gc
import os
import statistics
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from overlaps import Span, pct, show_slowest, show_spans

from dreamwell.server.heap import quiet_collections
from dreamwell.stores import LongTermStore
from dreamwell.stores.index import text_index
from dreamwell.stores.longterm import checkpoint, lance_files, lance_table, snapshot, table_writes


def say(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def timed(spans: list[Span], name: str, owner: Any, attr: str) -> None:
    """Record each call of owner.attr as a (name, start, end) span."""
    original: Callable[..., Any] = getattr(owner, attr)

    @functools.wraps(original)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        began = time.perf_counter()
        try:
            return original(*args, **kwargs)
        finally:
            spans.append((name, began, time.perf_counter()))

    setattr(owner, attr, wrapper)


def instrument(spans: list[Span]) -> None:
    timed(spans, "seal", checkpoint.Checkpointer, "_seal")
    timed(spans, "fold", checkpoint, "fold")
    timed(spans, "lancedb upsert", lance_table.MemoryTable, "upsert")
    timed(spans, "lancedb delete", lance_table.MemoryTable, "delete")
    timed(spans, "tantivy writes", table_writes, "_index")
    timed(spans, "snapshot", checkpoint.Checkpointer, "_snapshot")
    timed(spans, "snapshot write", snapshot, "write")
    timed(spans, "compaction", lance_table.MemoryTable, "optimize")
    timed(spans, "checksums", lance_files, "record")
    timed(spans, "compact rows", checkpoint.Checkpointer, "compact_rows")
    timed(spans, "catch-up after", checkpoint.Checkpointer, "checkpoint")
    timed(spans, "tantivy reload", text_index.TextIndex, "reload")


def fsyncs(spans: list[Span]) -> None:
    """Record each fsync as a span named for its thread: a save's own ("fsync by the save")
    or the checkpoint's. On ext4 (data=ordered) a save's fsync of the log commits the journal
    with whatever data other files left dirty and allocated, such as what LanceDB and Tantivy
    wrote during a checkpoint, so a save can wait for writes that are not its own."""
    original = os.fsync
    saver = threading.get_ident()

    def fsync(fd: Any) -> None:
        began = time.perf_counter()
        try:
            original(fd)
        finally:
            who = "save" if threading.get_ident() == saver else "checkpoint"
            spans.append((f"fsync by the {who}", began, time.perf_counter()))

    os.fsync = fsync


def collections(spans: list[Span]) -> None:
    """Record each of the garbage collector's runs as a span ("gc gen2", ...)."""
    began: list[float] = []

    def note(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            began.append(time.perf_counter())
        elif began:
            spans.append((f"gc gen{info['generation']}", began.pop(), time.perf_counter()))

    gc.callbacks.append(note)


def checkpoints(store: LongTermStore, stop: threading.Event) -> None:
    while not stop.wait(0.5):
        if store.checkpoint_due():
            store.checkpoint()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--saves", type=int, default=10_000)
    parser.add_argument("--slow-ms", type=float, default=25.0)
    args = parser.parse_args()
    spans: list[Span] = []
    instrument(spans)
    collections(spans)
    fsyncs(spans)
    quiet_collections()  # as `serve` does: full collections wait for a pause in the requests
    say(f"save tail, {args.saves} saves; load average {os.getloadavg()[0]:.2f} at start")
    with tempfile.TemporaryDirectory() as tmp:
        store = LongTermStore(Path(tmp) / "d")
        stop = threading.Event()
        worker = threading.Thread(target=checkpoints, args=(store, stop), daemon=True)
        worker.start()
        saves: list[tuple[float, float]] = []
        for i in range(args.saves):
            text = f"memory {i}: the tomatoes in bed {i % 40} need water on day {i % 7}"
            began = time.perf_counter()
            store.save(text, f"garden/bed-{i % 40}", caller="bench")
            saves.append((began, time.perf_counter()))
        stop.set()
        worker.join()
    ms = [1000 * (b - a) for a, b in saves]
    say(
        f"  p50 {statistics.median(ms):.1f} ms  p99 {pct(ms, 0.99):.1f} ms  "
        f"max {max(ms):.1f} ms  mean {statistics.mean(ms):.2f} ms"
    )
    slow = [(a, b) for a, b in saves if 1000 * (b - a) > args.slow_ms]
    blame: Counter[str] = Counter()
    for a, b in slow:
        names = {n for n, s, e in spans if s < b and e > a}
        blame[" + ".join(sorted(names)) or "(no checkpoint phase)"] += 1
    say(f"  {len(slow)} saves over {args.slow_ms:.0f} ms, by the checkpoint phases they overlap:")
    for names, count in blame.most_common(8):
        say(f"    {count:5d}  {names}")
    say("  the five slowest saves, with the phases they overlapped (ms into each):")
    show_slowest(saves, spans, say, "(no checkpoint phase)")
    show_spans(spans, say, "phase")
    say(f"load average {os.getloadavg()[0]:.2f} at the end")


if __name__ == "__main__":
    main()
