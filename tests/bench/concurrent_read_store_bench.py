"""The store's side of reads beside a writer, without MCP or stdio (not collected by pytest).

`concurrent_read_bench.py` measures what a user runs; on a busy shared machine its writer
reaches a fraction of the rate a quiet one gives (40 saves/s against 190-231), and the round
trips hide the store's own costs. Here a writer process saves through `LongTermStore` one at a
time as fast as it can, with the server's checkpoint loop (every 0.5 s, a checkpoint when one
is due), and this process, a reader with the same loop, searches (BM25, no embedder) in
alternating blocks: quiet, then beside the writer for --seconds (after --warmup). Prints the
reader's search p50/p90/max quiet and beside the writer, their ratio, the writer's rate, the
entries pending in the reader and the checkpoints each process made, with the load average.
First, with no time in it but the searches': the reader's search p50 with 0, 250, 500 and
1,000 of another store's saves pending (read by the reader as they came, not yet folded).

Run: python tests/bench/concurrent_read_store_bench.py [--seed 3000] [--blocks 3]
     [--seconds 8] [--warmup 2]
"""

from __future__ import annotations

import argparse
import os
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import TextIO

from concurrent_read_bench import block_seeds, queries, sentence, stats

from dreamwell.stores import LongTermStore


class Folding:
    """The server's checkpoint loop (`checkpoint_forever`) on a thread: every 0.5 s, a
    checkpoint when one is due; counts the checkpoints it made."""

    def __init__(self, store: LongTermStore) -> None:
        self.store = store
        self.made = 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self.stop.wait(0.5):
            if self.store.checkpoint_due() and self.store.checkpoint(False):
                self.made += 1


def writer_main(data: Path) -> None:
    """--writer: save until SIGTERM, then print the saves and seconds and the checkpoints."""
    store = LongTermStore(data)
    folding = Folding(store)
    rng = random.Random(int(time.time()))
    stopping = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stopping.set())
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    saves, started = 0, time.perf_counter()
    while not stopping.is_set():
        store.save(sentence(rng, saves))
        saves += 1
    folding.stop.set()
    sys.stdout.write(f"{saves} {time.perf_counter() - started} {folding.made}\n")


def searches(store: LongTermStore, asked: list[str], seconds: float | None) -> list[float]:
    """Search `asked` once (seconds None), or over and over for `seconds`."""
    took: list[float] = []
    until = time.perf_counter() + (seconds or 0)
    while True:
        for q in asked:
            started = time.perf_counter()
            store.search(q)
            took.append((time.perf_counter() - started) * 1000)
            if seconds is not None and time.perf_counter() >= until:
                return took
        if seconds is None:
            return took


def pending_cost(data: Path, seed: int, out: TextIO) -> None:
    """The reader's search p50 as another store's saves pile up unfolded."""
    writer, reader = LongTermStore(data), LongTermStore(data)
    rng = random.Random(1)
    for i in range(seed):
        writer.save(sentence(rng, i))
    writer.checkpoint()
    asked = queries(100, 7)
    n = seed
    for more in (0, 250, 250, 500):
        for _ in range(more):
            writer.save(sentence(rng, n))
            n += 1
            if n % 50 == 0:
                reader.search(None)  # reads the log as a searching server does
        took = stats(searches(reader, asked, None))
        out.write(
            f"  {reader.pending():5d} pending: search p50 {took['p50']:.2f} ms, p90 "
            f"{took['p90']:.2f} ms; load {os.getloadavg()[0]:.2f}\n"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=3000, help="memories before timing")
    parser.add_argument("--searches", type=int, default=300, help="quiet searches in all")
    parser.add_argument("--blocks", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=8.0)
    parser.add_argument("--warmup", type=float, default=2.0)
    parser.add_argument("--writer", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.writer is not None:
        writer_main(args.writer)
        return
    out = sys.stdout
    out.write(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}\n")
    with tempfile.TemporaryDirectory() as tmp:
        pending_cost(Path(tmp) / "pending", args.seed, out)
        data = Path(tmp) / "data"
        seeding = LongTermStore(data)
        rng = random.Random(5)
        for i in range(args.seed):
            seeding.save(sentence(rng, i))
        seeding.checkpoint()
        reader = LongTermStore(data)
        folding = Folding(reader)
        quiet: list[float] = []
        loud: list[float] = []
        pending: list[int] = []
        saves = seconds = made = 0.0
        for seed, each in block_seeds(args):
            asked = queries(each, seed)
            time.sleep(1.0)
            quiet += searches(reader, asked, None)
            writer = subprocess.Popen(
                [sys.executable, __file__, "--writer", str(data)],
                stdout=subprocess.PIPE,
                text=True,
            )
            assert writer.stdout is not None and writer.stdout.readline() == "ready\n"
            time.sleep(args.warmup)
            found = searches(reader, asked, args.seconds)
            loud += found
            pending.append(reader.pending())
            writer.send_signal(signal.SIGTERM)
            n, wall, folds = writer.communicate(timeout=120)[0].split()
            saves, seconds, made = saves + int(n), seconds + float(wall), made + int(folds)
            out.write(
                f"  block {seed - 99}: quiet p50 {statistics.median(quiet[-each:]):.2f} ms; "
                f"beside the writer p50 {statistics.median(found):.2f} ms over {len(found)} "
                f"searches, writer {int(n) / float(wall):.0f} saves/s; load "
                f"{os.getloadavg()[0]:.2f}\n"
            )
        folding.stop.set()
    q, w = stats(quiet), stats(loud)
    for name, s, times in (("quiet", q, quiet), ("beside the writer", w, loud)):
        out.write(
            f"{name:<18} p50 {s['p50']:6.2f}  p90 {s['p90']:6.2f}  max {s['max']:7.2f} ms "
            f"({len(times)} searches)\n"
        )
    out.write(
        f"ratio p50 {w['p50'] / q['p50']:.2f}x, p90 {w['p90'] / q['p90']:.2f}x; writer "
        f"{saves / seconds:.0f} saves/s; pending in the reader at each block's end {pending}; "
        f"checkpoints: writer {made:.0f}, reader {folding.made}\n"
        f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}\n"
    )


if __name__ == "__main__":
    main()
