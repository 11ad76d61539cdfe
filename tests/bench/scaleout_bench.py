"""Raw limits of object storage for scale-out (not collected by pytest): what one call costs
on a local SeaweedFS (`weed mini`, started here on free ports, stopped at the end), the floor
under every replica figure.

    python tests/bench/scaleout_bench.py --rounds 3 --ops 50

Each round runs every measurement --ops times on fresh objects and tables and takes its p50
and p95; the table prints the median over the rounds of each, in milliseconds, with the load
average before and after. Measurements:

- cond_put: one `If-None-Match: *` PUT of a 200-byte object (obstore, mode="create")
- list: one LIST of a prefix holding --ops objects
- lance_add: one LanceDB `table.add` of one ~3 KB row
- cas_append: one `merge_insert("n").when_not_matched_insert_all()` of one ~3 KB row whose `n`
  is an unenforced primary key (how the shared log appends)
- checkout_idle: `checkout_latest()` + version check on a reader when nothing changed
- checkout_new: the same right after another connection appended one row

With --growth N, instead: N saves through three replicas on one location, and per block of
1,000 saves the save p50/p95, objects and bytes under the location and under the log's
tables, log*.lance/, and the resident memory of the process that runs the three replicas;
then the same census once the log has been at rest for a while, and a summary against issue
57's goals (last block's save p50 at most 1.2x the first's, at most 5 KB per memory from 1,000
saves on, objects bounded). Each block's line is printed as it ends; `kill PID` (SIGTERM)
stops the saves and keeps the blocks done.

    python tests/bench/scaleout_bench.py --growth 20000

To add one (replica figures, say): write `def measure_x(env: Env, ops: int) -> list[float]`
returning per-call milliseconds and add it to MEASUREMENTS.
"""

from __future__ import annotations

import argparse
import signal
import statistics
import string
import sys
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import obstore
import pyarrow as pa

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # tests.support.s3server
sys.path.insert(0, str(Path(__file__).resolve().parent))  # replica_figures

from tests.support.s3server import SeaweedS3

ROW_BYTES = 3000
SCHEMA = pa.schema(
    [
        pa.field(
            "n",
            pa.int64(),
            nullable=False,
            metadata={"lance-schema:unenforced-primary-key": "true"},
        ),
        pa.field("body", pa.string()),
    ]
)


@dataclass
class Env:
    """The server and a fresh prefix per round; measurements make their own objects in it."""

    s3: SeaweedS3
    prefix: str = field(default_factory=lambda: f"bench-{uuid.uuid4().hex[:8]}")

    def store(self, sub: str) -> Any:
        return self.s3.store(f"{self.prefix}/{sub}")

    def db(self) -> Any:
        import lancedb

        return lancedb.connect(self.s3.uri(self.prefix), storage_options=self.s3.storage_options)

    def table(self, name: str) -> Any:
        return self.db().create_table(name, schema=SCHEMA)


def row(n: int) -> pa.Table:
    text = (string.ascii_letters * (ROW_BYTES // len(string.ascii_letters) + 1))[:ROW_BYTES]
    return pa.table({"n": pa.array([n], pa.int64()), "body": [f"{n} {text}"]}, schema=SCHEMA)


def timed(call: Callable[[], object]) -> float:
    start = time.perf_counter()
    call()
    return (time.perf_counter() - start) * 1000


def measure_cond_put(env: Env, ops: int) -> list[float]:
    store = env.store("put")
    return [
        timed(lambda i=i: obstore.put(store, f"k{i}", b"x" * 200, mode="create"))
        for i in range(ops)
    ]


def measure_list(env: Env, ops: int) -> list[float]:
    store = env.store("list")
    for i in range(ops):
        obstore.put(store, f"k{i:05d}", b"x")
    return [timed(lambda: obstore.list(store).collect()) for _ in range(ops)]


def measure_lance_add(env: Env, ops: int) -> list[float]:
    table = env.table("add")
    return [timed(lambda i=i: table.add(row(i))) for i in range(ops)]


def measure_cas_append(env: Env, ops: int) -> list[float]:
    table = env.table("cas")

    def append(n: int) -> None:
        got = table.merge_insert("n").when_not_matched_insert_all().execute(row(n))
        assert got.num_inserted_rows == 1, got

    return [timed(lambda i=i: append(i)) for i in range(ops)]


def _checkout(reader: Any, seen: int) -> None:
    reader.checkout_latest()
    assert reader.version >= seen


def measure_checkout_idle(env: Env, ops: int) -> list[float]:
    writer = env.table("idle")
    writer.add(row(0))
    reader = env.db().open_table("idle")
    return [timed(lambda: _checkout(reader, writer.version)) for _ in range(ops)]


def measure_checkout_new(env: Env, ops: int) -> list[float]:
    writer = env.table("new")
    reader = env.db().open_table("new")
    times = []
    for i in range(ops):
        writer.add(row(i))
        times.append(timed(lambda: _checkout(reader, writer.version)))
    return times


MEASUREMENTS: dict[str, Callable[[Env, int], list[float]]] = {
    "cond_put": measure_cond_put,
    "list": measure_list,
    "lance_add": measure_lance_add,
    "cas_append": measure_cas_append,
    "checkout_idle": measure_checkout_idle,
    "checkout_new": measure_checkout_new,
}


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def print_table(results: dict[str, list[tuple[float, float]]]) -> None:
    """One line per measurement: median over rounds of p50 and of p95, and their spread."""
    say(f"{'measurement':16s} {'p50 ms':>8s} {'p95 ms':>8s}   p50 per round")
    for name, rounds in results.items():
        p50 = statistics.median(r[0] for r in rounds)
        p95 = statistics.median(r[1] for r in rounds)
        spread = " ".join(f"{r[0]:.1f}" for r in rounds)
        say(f"{name:16s} {p50:8.1f} {p95:8.1f}   {spread}")


def say(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def loadavg() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--ops", type=int, default=50, help="calls per measurement per round")
    parser.add_argument("--only", default="", help="comma-separated measurement names")
    parser.add_argument(
        "--replicas", action="store_true", help="also dreamwell's figures (replica_figures.py)"
    )
    parser.add_argument("--cold", default="10000", help="cold-start sizes, comma-separated")
    parser.add_argument("--seconds", type=float, default=15, help="per throughput run")
    parser.add_argument("--growth", type=int, default=0, help="saves of the growth run (only)")
    args = parser.parse_args()
    if args.growth:
        growth(args.growth)
        return
    names = [n for n in args.only.split(",") if n] or list(MEASUREMENTS)
    say(f"load before: {loadavg()}")
    results: dict[str, list[tuple[float, float]]] = {n: [] for n in names}
    with SeaweedS3(bucket="bench") as s3:
        for rnd in range(args.rounds):
            env = Env(s3)
            for name in names:
                times = MEASUREMENTS[name](env, args.ops)
                results[name].append((pct(times, 0.5), pct(times, 0.95)))
            if args.replicas:
                replica_round(env, args.ops, results)
            say(f"round {rnd + 1}/{args.rounds} done, load {loadavg()}")
        say(f"\nweed mini on 127.0.0.1, {args.rounds} rounds x {args.ops} calls")
        print_table(results)
        if args.replicas:
            replica_once(s3, args)
    say(f"load after: {loadavg()}")


def _stop(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def growth(total: int) -> None:
    """The growth run: objects, bytes and save latency per 1,000 saves (replica_figures.py)."""
    import replica_figures as rf

    signal.signal(signal.SIGTERM, _stop)  # `kill PID` ends the run with the blocks done
    say(f"load before: {loadavg()}")
    began = time.monotonic()
    say(f"{total:,} saves of ~450 B through 3 replicas, one thread each, on weed mini")
    say(
        "saves   | p50 ms | p95 ms | objects | bytes/memory | log objects | log MB | RSS MB"
        " | fresh-table append p50 ms"
    )

    def show(r: dict[str, Any]) -> None:
        say(
            f"{r['saves']:>7,} | {r['p50']:6.1f} | {r['p95']:6.1f} | {r['objects']:>7,} | "
            f"{r['bytes'] / r['saves']:>12,.0f} | {r['log_objects']:>17,} | "
            f"{r['log_bytes'] / 1e6:>12.2f} | {r['rss_mb']:>6.0f} | {r['probe_p50']:5.1f}"
            f"   (load {loadavg()})"
        )
        phases = "; ".join(f"{k} {n}x p50 {p50:.1f}" for k, (n, p50) in r["phases"].items())
        say(f"        phases (ms): {phases}")

    rf.time_phases()
    with SeaweedS3(bucket="bench") as s3:
        rows = rf.measure_growth(s3, f"growth-{uuid.uuid4().hex[:8]}", total, show)
    if rows:
        summarize(
            [r for r in rows if not r.get("rest")], rows[-1] if rows[-1].get("rest") else None
        )
    say(f"took {time.monotonic() - began:.0f} s; load after: {loadavg()}")


def summarize(blocks: list[dict[str, Any]], rest: dict[str, Any] | None) -> None:
    """The growth run against issue 57's goals: save p50 of the last block over the first's
    (<= 1.2x), bytes per memory from 1,000 saves on (<= 5 KB), objects bounded."""
    if not blocks:
        return
    first, last = blocks[0], blocks[-1]
    say(f"last block p50 / first block p50: {last['p50'] / first['p50']:.2f}")
    if first["probe_p50"] and last["probe_p50"]:
        say(
            "the same for the fresh-table appends beside them (the server's and machine's "
            f"drift): {last['probe_p50'] / first['probe_p50']:.2f}"
        )
    worst = max(blocks, key=lambda r: r["bytes"] / r["saves"])
    say(
        f"bytes per memory: {first['bytes'] / first['saves']:,.0f} at {first['saves']:,}, "
        f"{last['bytes'] / last['saves']:,.0f} at {last['saves']:,}, at most "
        f"{worst['bytes'] / worst['saves']:,.0f} (at {worst['saves']:,}); objects "
        f"{first['objects']:,} at {first['saves']:,}, {last['objects']:,} at {last['saves']:,}, "
        f"at most {max(r['objects'] for r in blocks):,}"
    )
    if rest:
        import replica_figures as rf

        say(
            f"at rest {rf.REST_SECONDS:.0f} s after the last save: {rest['objects']:,} objects, "
            f"{rest['bytes'] / rest['saves']:,.0f} bytes per memory ({rest['log_objects']:,} "
            f"objects, {rest['log_bytes'] / 1e6:.2f} MB under the log's tables)"
        )


def replica_round(env: Env, ops: int, results: dict[str, list[tuple[float, float]]]) -> None:
    """dreamwell's per-call figures on this round's prefix (see replica_figures.py)."""
    import replica_figures as rf

    far, near = rf.measure_search(env.s3, env.prefix, ops)
    figures = {
        "dw_save": rf.measure_save(env.s3, env.prefix, ops),
        "dw_search": far,
        "dw_search_local": near,
        "dw_visible": rf.measure_visible(env.s3, env.prefix, max(10, ops // 2)),
    }
    for name, times in figures.items():
        results.setdefault(name, []).append((pct(times, 0.5), pct(times, 0.95)))


def replica_once(s3: SeaweedS3, args: argparse.Namespace) -> None:
    """Bytes per memory, cold starts and throughput with 1-3 serve replicas (one run each)."""
    import replica_figures as rf

    prefix = f"once-{uuid.uuid4().hex[:8]}"
    say(
        f"bytes per memory (2,000 memories of ~450 B text, checkpointed): "
        f"{rf.measure_bytes_per_memory(s3, prefix, 2000):.0f}"
    )
    for size in [int(c) for c in args.cold.split(",") if c]:
        opened, filled = rf.measure_cold_start(s3, f"{prefix}-{size}", size)
        say(
            f"cold start at {size:,} memories: {opened:.1f} s to first search "
            f"(filling took {filled:.1f} s), load {loadavg()}"
        )
    for n in (1, 2, 3):
        rate = rf.measure_throughput(s3, prefix, n, args.seconds)
        say(f"saves/s with {n} replica(s), 16 clients over HTTP: {rate:.1f}, load {loadavg()}")


if __name__ == "__main__":
    main()
