"""Search latency of the real server over stdio at N memories (not collected by pytest).

Builds a store of N deterministic synthetic memories in process (batched, with MiniLM vectors),
then starts `dreamwell serve` on it and times `search_memory` calls through the `mcp` client.
Run: python tests/bench/search_scale_bench.py [--n 10000] [--searches 300]
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

import anyio
from mcp import Client, StdioServerParameters

from dreamwell.stores import LongTermStore, MemoryEntry, OnnxMiniLM, new_id, utcnow

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
    return (
        f"{rng.choice(SUBJECTS)} {rng.choice(VERBS)} {rng.choice(OBJECTS)} "
        f"on day {i % 365} (note {i})"
    )


def build(data: Path, n: int) -> float:
    rng = random.Random(7)
    store = LongTermStore(data, embedder=OnnxMiniLM())
    started = time.perf_counter()
    now = utcnow()
    for start in range(0, n, 1000):
        batch = [
            MemoryEntry(
                new_id(), sentence(rng, i), f"bench/{i % 20}", (f"t{i % 7}",), now, now, now
            )
            for i in range(start, min(n, start + 1000))
        ]
        store.apply(batch)
    return time.perf_counter() - started


async def measure(data: Path, searches: int, env: dict[str, str]) -> list[float]:
    rng = random.Random(11)
    params = StdioServerParameters(
        command="dreamwell", args=["serve", "--data-dir", str(data)], env={**os.environ, **env}
    )
    times = []
    async with Client(params) as client:
        await client.call_tool("search_memory", {"query": "warm up"})
        for _ in range(searches):
            query = f"what does {rng.choice(SUBJECTS)} think of {rng.choice(OBJECTS)}"
            started = time.perf_counter()
            await client.call_tool("search_memory", {"query": query})
            times.append((time.perf_counter() - started) * 1000)
    return times


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=10_000)
    parser.add_argument("--searches", type=int, default=300)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp)
        built = build(data, args.n)
        sys.stdout.write(f"built {args.n} memories with vectors in {built:.1f}s\n")
        for mode, env in (("hybrid", {}), ("bm25-only", {"DREAMWELL_EMBEDDER": "none"})):
            times = sorted(anyio.run(measure, data, args.searches, env))
            p95 = times[int(0.95 * len(times)) - 1]
            sys.stdout.write(
                f"{mode}: search p50 {statistics.median(times):.1f} ms, "
                f"p95 {p95:.1f} ms over {len(times)} calls at N={args.n}\n"
            )


if __name__ == "__main__":
    main()
