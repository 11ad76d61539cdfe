"""The server's resident memory at 0, 10,000 and 100,000 memories with the default embedder,
and its growth over a long mixed load (not collected by pytest).

For each size a store is built in process through the batch path with a vector for every
memory (`search_scale_bench.build`: random unit vectors filed under e5's name, what RSS does
not depend on), then `dreamwell serve` is started on it over stdio, the `mcp` client searches
until the vectors are in use (the store's one real e5 memory is found by meaning), waits
until the server is idle, runs --searches hybrid searches and reads the server's RSS once
idle again (the least of three readings half a second apart: anonymous and file-backed
from /proc/PID/status). Size 0 is the floor: an empty data directory, its model loaded by
the same searches. With --growth-calls N it then runs `rss_growth_bench` (all eight tools,
the live memories held at --steady) for N calls and prints its samples and trend.

Run: python tests/bench/rss_bench.py [--sizes 0,10000,100000] [--searches 200]
    [--store-dir DIR] [--growth-calls 150000 --every 10000 --warmup 10000 --steady 1500]

With --store-dir each size's store is built there once (n10000/, n100000/) and reused.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

import anyio
from mcp import Client, StdioServerParameters
from rss_growth_bench import run as growth_run
from rss_growth_bench import settled_rss
from scale_bench import OBJECTS, SUBJECTS, _server_pid, _until_idle, rss_mib
from search_scale_bench import build, reusable, until_vectors


async def serve_rss(data: Path, n: int, searches: int) -> tuple[float, float, float, float]:
    """(RSS, anonymous, file-backed, search p50 ms) of a server on `data` after `searches`."""
    import time

    rng = random.Random(5)
    params = StdioServerParameters(
        command="dreamwell", args=["serve", "--data-dir", str(data)], env=dict(os.environ)
    )
    times = []
    async with Client(params) as client:
        await client.call_tool("search_memory", {"query": "warm up"})
        pid = _server_pid(data)
        assert pid is not None, "cannot find the server process"
        if n > 0:
            await until_vectors(client, hybrid=True)
        await _until_idle(pid)
        for _ in range(searches):
            query = f"what does {rng.choice(SUBJECTS)} think of {rng.choice(OBJECTS)}"
            started = time.perf_counter()
            result = await client.call_tool("search_memory", {"query": query})
            times.append((time.perf_counter() - started) * 1000)
            assert not result.is_error, result
        total = await settled_rss(pid)
        anon, file = rss_mib(pid, "RssAnon"), rss_mib(pid, "RssFile")
        sys.stdout.write(f"  by mapping (MiB): {by_mapping(pid)}\n")
    return total, anon, file, statistics.median(times)


def by_mapping(pid: int, top: int = 8) -> str:
    """The largest parts of the process's RSS by what is mapped (/proc/PID/smaps): anonymous
    memory, and each library package's files (their code, shared with the page cache)."""
    sizes: dict[str, int] = {}
    name = "anonymous"
    for line in Path(f"/proc/{pid}/smaps").read_text().splitlines():
        head = line.split()
        if "-" in head[0] and len(head) >= 5 and not head[0].endswith(":"):
            path = head[5] if len(head) > 5 else ""
            name = "anonymous" if not path.startswith("/") else path
            if "/site-packages/" in name:
                name = name.split("/site-packages/")[1].split("/")[0]
            elif name != "anonymous":
                name = "other files"
        elif head[0] == "Rss:":
            sizes[name] = sizes.get(name, 0) + int(head[1])
    ordered = sorted(sizes.items(), key=lambda kv: -kv[1])[:top]
    return ", ".join(f"{k} {v / 1024:.0f}" for k, v in ordered)


def store_for(root: Path, n: int) -> Path:
    data = root / f"n{n}"
    if n == 0:
        shutil.rmtree(data, ignore_errors=True)  # a fresh empty store each run
        return data
    if reusable(data, n):
        sys.stdout.write(f"reusing the {n} memories in {data}\n")
    else:
        sys.stdout.write(f"built {n} memories in {build(data, n):.0f} s\n")
    return data


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="0,10000,100000")
    ap.add_argument("--searches", type=int, default=200)
    ap.add_argument("--store-dir", type=Path, help="build the stores here once, then reuse")
    ap.add_argument("--growth-calls", type=int, default=0, help="0: no growth run")
    ap.add_argument("--every", type=int, default=10_000)
    ap.add_argument("--warmup", type=int, default=10_000)
    ap.add_argument("--steady", type=int, default=1500)
    args = ap.parse_args()
    out = sys.stdout.write
    out(f"load average before: {os.getloadavg()}\n")
    with tempfile.TemporaryDirectory(dir=os.environ.get("BENCH_TMP")) as tmp:
        root = args.store_dir or Path(tmp)
        floor = None
        for n in [int(s) for s in args.sizes.split(",")]:
            data = store_for(root, n)
            total, anon, file, p50 = anyio.run(serve_rss, data, n, args.searches)
            floor = total if n == 0 else floor
            above = f", {total - floor:+.0f} MiB above the empty server" if floor else ""
            out(
                f"N={n:>7}: RSS {total:.0f} MiB (anonymous {anon:.0f}, file-backed {file:.0f})"
                f"{above}; search p50 {p50:.1f} ms; load {os.getloadavg()[0]:.2f}\n"
            )
            sys.stdout.flush()
        if args.growth_calls:
            out(f"growth over {args.growth_calls} mixed calls (rss_growth_bench):\n")
            anyio.run(
                growth_run,
                Path(tmp) / "growth",
                args.growth_calls,
                args.every,
                args.warmup,
                3,
                args.steady,
            )
    out(f"load average after: {os.getloadavg()}\n")


if __name__ == "__main__":
    main()
