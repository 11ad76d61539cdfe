"""Scale of the real server over stdio: one save_memory call per memory, the way an agent saves
(not collected by pytest).

At each size it prints save p50/p95 (over the last window of saves), search p50/p95, ingest
rate, the server's RSS and the data directory's bytes per memory — the largest seen at any
sample during the ingest, not just at the end — and, measured in the same run, the raw limits
of this machine: one fsync, Tantivy top-100 and a numpy cosine top-100 over N x 384.

    python tests/bench/scale_bench.py --sizes 1000,10000,100000

With --seed S the store starts with S memories written through the batch path (each with a
vector, as search_scale_bench builds them), and the saves from S on are one call each: save
latency at 100,000 memories without a 25-minute one-at-a-time ingest
(--seed 99000 --sizes 100000). The disk figures then include the batch-built part.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

import anyio
import numpy as np
from mcp import Client, StdioServerParameters

# one word list for this bench and search_scale_bench
SUBJECTS = ["the user", "Alice", "Bob", "the team", "our CI", "the staging cluster", "Maria"]
VERBS = ["prefers", "dislikes", "deployed", "reviewed", "scheduled", "migrated", "wrote about"]
OBJECTS = [
    "dark mode",
    "green tea",
    "the billing service",
    "PostgreSQL 16",
    "a trip to Lisbon",
    "the quarterly report",
    "Rust async code",
    "weekly standups",
    "the London office",
    "vim keybindings",
    "the payments API",
    "a hiking trip",
    "TypeScript strict mode",
]


def sentence(rng: random.Random, i: int) -> str:
    """About 100 characters, like the issue's workload."""
    return (
        f"{rng.choice(SUBJECTS)} {rng.choice(VERBS)} {rng.choice(OBJECTS)} on day {i % 365}, "
        f"noted as item {i} with {rng.choice(OBJECTS)} in mind"
    )


def du(path: Path) -> int:
    total = 0
    for root, _dirs, files in os.walk(path):
        for name in files:
            with contextlib.suppress(FileNotFoundError):  # deleted while we walk
                total += os.lstat(os.path.join(root, name)).st_blocks * 512
    return total


def rss_mib(pid: int, kind: str = "VmRSS") -> float:
    """The process's resident memory in MiB: all of it (VmRSS), or its private anonymous
    part (RssAnon: the heap, arrays, models) or its file-backed part (RssFile: mostly the
    libraries' code, shared with the page cache and dropped by the kernel under pressure)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(kind + ":"):
            return int(line.split()[1]) / 1024
    return float("nan")


def rss_split(pid: int | None) -> str:
    if pid is None:
        return "RSS unknown"
    anon, file = rss_mib(pid, "RssAnon"), rss_mib(pid, "RssFile")
    return f"RSS {rss_mib(pid):.0f} MiB (anonymous {anon:.0f}, file-backed {file:.0f})"


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def raw_limits(n: int, tmp: Path) -> dict[str, float]:
    fd = os.open(tmp / "fsync-probe", os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    fsyncs = []
    for _ in range(50):
        started = time.perf_counter()
        os.write(fd, b"x" * 500)
        os.fsync(fd)
        fsyncs.append((time.perf_counter() - started) * 1000)
    os.close(fd)
    rng = np.random.default_rng(3)
    matrix = rng.standard_normal((n, 384), dtype=np.float32)
    query = rng.standard_normal(384, dtype=np.float32)
    scans = []
    for _ in range(20):
        started = time.perf_counter()
        scores = matrix @ query
        np.argpartition(-scores, 99)[:100]
        scans.append((time.perf_counter() - started) * 1000)
    return {"fsync_ms": statistics.median(fsyncs), "cosine_top100_ms": statistics.median(scans)}


def tantivy_limit(data: Path) -> float:
    """Tantivy top-100 on the server's own index (after the run), one process, no MCP."""
    from dreamwell.stores.index.text_index import TextIndex

    index = TextIndex(data / "index")
    rng = random.Random(5)
    times = []
    for _ in range(50):
        query = f"{rng.choice(SUBJECTS)} {rng.choice(OBJECTS)}"
        started = time.perf_counter()
        index.search(query, 100)
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times)


async def run(
    sizes: list[int],
    data: Path,
    window: int,
    searches: int,
    seeded: int = 0,
    trace: list[tuple[float, float]] | None = None,
) -> list[dict[str, float]]:
    params = StdioServerParameters(
        command="dreamwell", args=["serve", "--data-dir", str(data)], env=dict(os.environ)
    )
    rng = random.Random(7)
    rows = []
    async with Client(params) as client:
        await client.call_tool("search_memory", {"query": "warm up"})
        pid = _server_pid(data)
        saved = seeded
        peak_per_memory = 0.0
        started = time.perf_counter()
        for n in sizes:
            save_times: list[float] = []
            while saved < n:
                t0 = time.perf_counter()
                result = await client.call_tool("save_memory", {"content": sentence(rng, saved)})
                save_times.append((time.perf_counter() - t0) * 1000)
                if trace is not None:  # when each save ended, on the clock the log uses
                    trace.append((time.time(), save_times[-1]))
                assert not result.is_error, result
                saved += 1
                if saved % max(100, n // 50) == 0:
                    peak_per_memory = max(peak_per_memory, du(data) / saved)
            ingest_seconds = time.perf_counter() - started
            vectors_wait = await _until_idle(pid)  # the background backfill catches up first
            search_times = []
            for _ in range(searches):
                query = f"what does {rng.choice(SUBJECTS)} think of {rng.choice(OBJECTS)}"
                t0 = time.perf_counter()
                await client.call_tool("search_memory", {"query": query})
                search_times.append((time.perf_counter() - t0) * 1000)
            last = save_times[-window:]
            rows.append(
                {
                    "n": n,
                    "save_p50": statistics.median(last),
                    "save_p95": pct(last, 0.95),
                    "search_p50": statistics.median(search_times),
                    "search_p95": pct(search_times, 0.95),
                    "vectors_wait_s": vectors_wait,
                    "ingest_per_s": (saved - seeded) / ingest_seconds,
                    "rss_mib": rss_mib(pid) if pid else float("nan"),
                    "kb_per_memory_now": du(data) / n / 1000,
                    "kb_per_memory_peak": max(peak_per_memory, du(data) / n) / 1000,
                }
            )
            sys.stdout.write(_line(rows[-1]) + "\n")
            sys.stdout.flush()
    return rows


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def _until_idle(pid: int | None, limit: float = 600.0) -> float:
    """Seconds until the server used under 10% of a core for a whole second (its vectors
    are computed in the background after the saves replied)."""
    started = time.perf_counter()
    if pid is None:
        await anyio.sleep(5)
        return 5.0
    while time.perf_counter() - started < limit:
        before = _cpu_seconds(pid)
        await anyio.sleep(1.0)
        if _cpu_seconds(pid) - before < 0.1:
            break
    return time.perf_counter() - started


def serve_pids(data: Path) -> set[int]:
    """The `dreamwell serve` processes running on `data` (read from /proc)."""
    found = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cmd = (entry / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if b"serve" in cmd and str(data).encode() in cmd:
                found.add(int(entry.name))
    return found


def _server_pid(data: Path) -> int | None:
    return min(serve_pids(data), default=None)


def _line(r: dict[str, float]) -> str:
    return (
        f"N={int(r['n']):>7}: save p50 {r['save_p50']:.1f} ms p95 {r['save_p95']:.1f} | "
        f"search p50 {r['search_p50']:.1f} ms p95 {r['search_p95']:.1f} | "
        f"ingest {r['ingest_per_s']:.0f}/s (vectors {r['vectors_wait_s']:.0f} s later) | "
        f"RSS {r['rss_mib']:.0f} MiB | disk "
        f"{r['kb_per_memory_now']:.2f} KB/memory now, {r['kb_per_memory_peak']:.2f} peak"
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="1000,10000")
    parser.add_argument("--window", type=int, default=1000, help="saves timed at each size")
    parser.add_argument("--searches", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0, help="memories batch-written first")
    parser.add_argument(
        "--trace",
        type=Path,
        help="write each save's end (Unix time) and latency in ms to this file; with "
        "DREAMWELL_LOG_LEVEL=DEBUG the server's log on stderr times its checkpoints",
    )
    args = parser.parse_args()
    sizes = sorted(int(s) for s in args.sizes.split(","))
    if sizes[0] <= args.seed:
        parser.error("every size must be larger than --seed")
    sys.stdout.write(f"load average before: {os.getloadavg()}\n")
    with tempfile.TemporaryDirectory(dir=os.environ.get("BENCH_TMP")) as tmp:
        data = Path(tmp) / "data"
        if args.seed:
            from search_scale_bench import build  # it imports this module

            built = build(data, args.seed)
            sys.stdout.write(f"seeded {args.seed} memories (batch path) in {built:.1f} s\n")
        trace: list[tuple[float, float]] | None = [] if args.trace else None
        anyio.run(run, sizes, data, args.window, args.searches, args.seed, trace)
        if trace is not None:
            args.trace.write_text("".join(f"{t:.3f} {ms:.2f}\n" for t, ms in trace))
        limits = raw_limits(sizes[-1], Path(tmp))
        limits["tantivy_top100_ms"] = tantivy_limit(data)
    sys.stdout.write(
        f"raw limits at N={sizes[-1]}: fsync {limits['fsync_ms']:.2f} ms, numpy cosine top-100 "
        f"{limits['cosine_top100_ms']:.2f} ms, Tantivy top-100 {limits['tantivy_top100_ms']:.2f}"
        f" ms\nload average after: {os.getloadavg()}\n"
    )


if __name__ == "__main__":
    main()
