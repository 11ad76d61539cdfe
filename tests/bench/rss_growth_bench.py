"""Does the server's memory grow under a long mixed load? (not collected by pytest)

One `dreamwell serve` over stdio on a fresh data directory, driven by the `mcp` client with
--calls mixed tool calls (saves, searches with and without filters, deletes, category
lists, working-memory saves, reads, lists and searches) in a fixed random order. The
server's RSS is sampled every --every calls; the line after the warm-up (the first
--warmup calls: model loaded, caches filled) is the baseline, and the growth after it is
printed in MiB and per 1,000 calls. Tool errors are counted by kind: a working-memory key
read after the namespace's cap evicted it is "not found", as it should be.
What may grow: the store itself (about 2 KB of
memory per live entry: its record, its vector, its row) and the bounded caches; the
figures are printed beside the number of live memories so the two can be told apart.

With --steady N the number of live memories is held at N once reached (each further save is
followed by a delete), so that what the data needs stops growing and any growth left is the
server's own. Each sample is taken once the server is idle (its checkpoint done), the least
of three readings half a second apart: a reading during a checkpoint catches its transient
batches, which moved single readings by up to 30 MiB.

Run: python tests/bench/rss_growth_bench.py [--calls 10000] [--every 1000] [--warmup 2000]
    [--steady 2000]
"""

from __future__ import annotations

import argparse
import os
import random
import re
import statistics
import sys
import tempfile
from pathlib import Path

import anyio
from mcp import Client, StdioServerParameters
from scale_bench import OBJECTS, SUBJECTS, VERBS, _server_pid, _until_idle, rss_mib, rss_split

from dreamwell.server.loops import TRIM_QUIET

ID = re.compile(r"\b[0-9a-f]{12}\b")
QUOTED = re.compile(r"'[^']*'")


async def settled_rss(pid: int) -> float:
    """RSS once the server is idle: the least of three readings half a second apart, taken
    after the heap has been handed back (the server does that within 2 x TRIM_QUIET seconds
    of its last request)."""
    await _until_idle(pid)
    await anyio.sleep(2 * TRIM_QUIET)
    readings = []
    for _ in range(3):
        readings.append(rss_mib(pid))
        await anyio.sleep(0.5)
    return min(readings)


async def run(
    data: Path, calls: int, every: int, warmup: int, seed: int, steady: int | None
) -> None:
    rng = random.Random(seed)
    params = StdioServerParameters(
        command="dreamwell", args=["serve", "--data-dir", str(data)], env=dict(os.environ)
    )
    live: list[str] = []
    keys: list[str] = []  # working-memory keys saved
    samples: list[tuple[int, float, int]] = []
    errors: dict[str, int] = {}  # what a failed call said (its first words) -> how often
    async with Client(params) as client:
        await client.call_tool("search_memory", {"query": "warm up"})
        pid = _server_pid(data)
        assert pid is not None, "cannot find the server process"
        for i in range(1, calls + 1):
            roll = rng.random()
            text = f"{rng.choice(SUBJECTS)} {rng.choice(VERBS)} {rng.choice(OBJECTS)} ({i})"
            if roll < 0.30:
                result = await client.call_tool(
                    "save_memory", {"content": text, "category": f"bench/{i % 9}"}
                )
                said = " ".join(getattr(c, "text", "") for c in result.content)
                if not result.is_error and (found := ID.search(said)):
                    live.append(found.group(0))
                if steady is not None and len(live) > steady and not result.is_error:
                    result = await client.call_tool(
                        "delete_memory", {"id": live.pop(rng.randrange(len(live)))}
                    )
            elif roll < 0.60:
                args: dict[str, object] = {"query": text}
                if roll < 0.40:
                    args["category"] = f"bench/{i % 9}"
                result = await client.call_tool("search_memory", args)
            elif roll < 0.68 and live:
                result = await client.call_tool(
                    "delete_memory", {"id": live.pop(rng.randrange(len(live)))}
                )
            elif roll < 0.72:
                result = await client.call_tool("list_memory_categories", {})
            elif roll < 0.84:
                keys.append(f"k{i % 500}")
                result = await client.call_tool(
                    "save_to_working_memory", {"key": keys[-1], "data": text, "ttl_minutes": 60}
                )
            elif roll < 0.90 and keys:
                result = await client.call_tool(
                    "get_from_working_memory", {"key": rng.choice(keys)}
                )
            elif roll < 0.95:
                result = await client.call_tool("list_working_memory", {})
            else:
                result = await client.call_tool("search_working_memory", {"query": text})
            if result.is_error:  # by kind: the quoted key or id left out
                said = " ".join(getattr(c, "text", "") for c in result.content)
                kind = QUOTED.sub("'…'", said)[:80]
                errors[kind] = errors.get(kind, 0) + 1
            if i % every == 0:
                samples.append((i, await settled_rss(pid), len(live)))
                sys.stdout.write(
                    f"calls {i:>6}: RSS {samples[-1][1]:7.1f} MiB ({rss_split(pid)} now), "
                    f"live {len(live)}\n"
                )
                sys.stdout.flush()
    base = next(s for s in samples if s[0] >= warmup)
    last = samples[-1]
    grown = last[1] - base[1]
    per_k = grown / max(1, (last[0] - base[0]) / 1000)
    after = [s for s in samples if s[0] >= warmup]
    slope = statistics.linear_regression([s[0] for s in after], [s[1] for s in after]).slope
    sys.stdout.write(
        f"after the warm-up ({base[0]} calls): RSS {base[1]:.1f} -> {last[1]:.1f} MiB over "
        f"{last[0] - base[0]} calls ({grown:+.1f} MiB, {per_k:+.2f} MiB per 1,000 calls; "
        f"least squares {slope * 1000:+.2f} MiB per 1,000 calls; range "
        f"{min(s[1] for s in after):.1f}-{max(s[1] for s in after):.1f} MiB) while live "
        f"memories went {base[2]} -> {last[2]}; tool errors {errors or 'none'}; "
        f"load {os.getloadavg()[0]:.2f}\n"
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=10_000)
    parser.add_argument("--every", type=int, default=1000)
    parser.add_argument("--warmup", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=3)
    parser.add_argument("--steady", type=int, help="hold the live memories at this many")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(dir=os.environ.get("BENCH_TMP")) as tmp:
        anyio.run(
            run, Path(tmp) / "data", args.calls, args.every, args.warmup, args.seed, args.steady
        )


if __name__ == "__main__":
    main()
