"""What e5 costs a LoCoMo turn, the text a save in stdio_save_tail_bench.py brings (not
collected by pytest): one turn at a time on one ORT thread, on two, and two turns at once on
two threads of one session (the backfill's way). Prints the per-text percentiles and the wall
time a text when two run at once, with the load average.

With --forever it times nothing: at nice 10, two threads embed every LoCoMo turn over and over
until its standard input closes (stdio_save_tail_bench.py --embedder-elsewhere runs it so,
and waits for its "embedding" line).

Run: python tests/bench/e5_turn_bench.py [--turns 400] [--forever]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import threading
import time

from scale_bench import pct
from stdio_save_tail_bench import say, turns_and_questions

from dreamwell.stores.index.embedders import E5_DIR, OnnxE5


def warm(threads: int) -> OnnxE5:
    e5 = OnnxE5(E5_DIR, threads=threads)
    e5.embed(["warm up"])
    return e5


def halves(e5: OnnxE5, turns: list[str], forever: bool) -> list[threading.Thread]:
    """Two threads started, each embedding every other turn one at a time: once, or over
    and over (`forever`)."""

    def embed_half(half: list[str]) -> None:
        while True:
            for turn in half:
                e5.embed([turn])
            if not forever:
                return

    workers = [
        threading.Thread(target=embed_half, args=(turns[k::2],), daemon=True) for k in (0, 1)
    ]
    for w in workers:
        w.start()
    return workers


def one_at_a_time(turns: list[str], threads: int) -> None:
    e5 = warm(threads)
    ms = []
    for turn in turns:
        began = time.perf_counter()
        e5.embed([turn])
        ms.append(1000 * (time.perf_counter() - began))
    say(
        f"  one turn at a time, {threads} ORT thread(s): p50 {statistics.median(ms):.2f} ms  "
        f"mean {statistics.mean(ms):.2f}  p90 {pct(ms, 0.9):.2f}  p99 {pct(ms, 0.99):.2f}  "
        f"max {max(ms):.2f}"
    )


def two_at_once(turns: list[str]) -> None:
    e5 = warm(1)
    began = time.perf_counter()
    for w in halves(e5, turns, forever=False):
        w.join()
    wall = 1000 * (time.perf_counter() - began) / len(turns)
    say(f"  two at once on two threads: {wall:.2f} ms of wall time a turn")


def embed_forever() -> None:
    os.nice(10)
    halves(warm(1), turns_and_questions()[0], forever=True)
    say("embedding")
    sys.stdin.read()  # the daemon threads end with the process


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--turns", type=int, default=400)
    parser.add_argument("--forever", action="store_true", help="embed at nice 10, time nothing")
    args = parser.parse_args()
    if args.forever:
        embed_forever()
        return
    if args.turns < 1:
        parser.error("--turns must be at least 1")
    turns = [f"{t} (note {i})" for i, t in enumerate(turns_and_questions()[0][: args.turns])]
    lengths = [len(t) for t in turns]
    say(
        f"e5 per LoCoMo turn, {len(turns)} turns ({statistics.mean(lengths):.0f} characters on "
        f"average, {max(lengths)} at most); load {os.getloadavg()}"
    )
    one_at_a_time(turns, 1)
    one_at_a_time(turns, 2)
    two_at_once(turns)
    say(f"load average at the end {os.getloadavg()}")


if __name__ == "__main__":
    main()
