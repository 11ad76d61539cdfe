"""What e5 costs a LoCoMo turn, the text a save in stdio_save_tail_bench.py brings (not
collected by pytest): one turn at a time on one ORT thread, on two, and two turns at once on
two threads of one session (the backfill's way). Prints the per-text percentiles and the wall
time a text when two run at once, with the load average.

Run: python tests/bench/e5_turn_bench.py [--turns 400]
"""

from __future__ import annotations

import argparse
import os
import statistics
import threading
import time

from scale_bench import pct
from stdio_save_tail_bench import say, turns_and_questions

from dreamwell.stores.index.embedders import E5_DIR, OnnxE5


def one_at_a_time(turns: list[str], threads: int) -> None:
    e5 = OnnxE5(E5_DIR, threads=threads)
    e5.embed(["warm up"])
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
    e5 = OnnxE5(E5_DIR, threads=1)
    e5.embed(["warm up"])

    def embed_half(half: list[str]) -> None:
        for turn in half:
            e5.embed([turn])

    began = time.perf_counter()
    workers = [threading.Thread(target=embed_half, args=(turns[k::2],)) for k in (0, 1)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    wall = 1000 * (time.perf_counter() - began) / len(turns)
    say(f"  two at once on two threads: {wall:.2f} ms of wall time a turn")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--turns", type=int, default=400)
    args = parser.parse_args()
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
