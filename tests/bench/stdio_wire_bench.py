"""What the stdio wire costs a request: the server reading and writing its pipes from the
event loop (server/transports/wire.py) against the MCP SDK's worker threads (not collected by
pytest).

Four `dreamwell serve` processes run at once on one store: hybrid and BM25-only, each with
either wire (sdk_wire/sitecustomize.py gives the SDK's). Each query goes to all four, in an
order that reverses every query, so load that comes and goes falls on them alike. Prints the
p50 and p95 of each with the load average.

Run: python tests/bench/stdio_wire_bench.py [--n 10000] [--searches 300] [--data-dir DIR]
(--data-dir: a store search_scale_bench.py built, or one is built there for --n.)
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
from contextlib import AsyncExitStack
from pathlib import Path

import anyio
from mcp import Client
from scale_bench import pct
from search_scale_bench import _started, _timed, build, queries, reusable

SERVERS = {
    "hybrid, the SDK's wire": {"PYTHONPATH": str(Path(__file__).parent / "sdk_wire")},
    "hybrid, from the loop": {},
    "BM25-only, the SDK's wire": {
        "DREAMWELL_EMBEDDER": "none",
        "PYTHONPATH": str(Path(__file__).parent / "sdk_wire"),
    },
    "BM25-only, from the loop": {"DREAMWELL_EMBEDDER": "none"},
}


async def measure(data: Path, searches: int) -> dict[str, list[float]]:
    times: dict[str, list[float]] = {name: [] for name in SERVERS}
    async with AsyncExitStack() as stack:
        clients: dict[str, Client] = {}
        for name, env in SERVERS.items():
            clients[name] = (await _started(stack, data, env))[0]
        for i, query in enumerate(queries(searches)):
            order = list(clients.items())
            for name, client in order if i % 2 else order[::-1]:
                times[name].append(await _timed(client, query))
    return times


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=10_000)
    parser.add_argument("--searches", type=int, default=300)
    parser.add_argument("--data-dir", type=Path)
    args = parser.parse_args()
    if args.n < 1 or args.searches < 1:
        parser.error("--n and --searches must be at least 1")
    sys.stdout.write(f"load average before: {os.getloadavg()}\n")
    with tempfile.TemporaryDirectory(dir=os.environ.get("BENCH_TMP")) as tmp:
        data = args.data_dir or Path(tmp) / "data"
        if not reusable(data, args.n):
            sys.stdout.write(f"built {args.n} memories in {build(data, args.n):.1f} s\n")
        times = anyio.run(measure, data, args.searches)
    for name, values in times.items():
        sys.stdout.write(
            f"{name}: search p50 {statistics.median(values):.2f} ms, p95 "
            f"{pct(values, 0.95):.2f} ms over {len(values)} calls\n"
        )
    sys.stdout.write(f"load average after: {os.getloadavg()}\n")


if __name__ == "__main__":
    main()
