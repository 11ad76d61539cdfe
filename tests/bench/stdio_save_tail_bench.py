"""The save tail as a user meets it: the real `dreamwell serve` over stdio with the default
embedder (e5, embedded), N saves one at a time through the `mcp` client (issue 57: p50 2.5 ms
but p99 148-151 ms, max 397-520 ms at 10,000). Not collected by pytest.

The texts are the LoCoMo dev split's dialogue turns (read at run time from the shared data,
each numbered so that none reinforces another). The server runs with spans/sitecustomize.py
on its PYTHONPATH, which writes its timeline (each save and search as the store ran it,
backfill rounds and their embedding, saves held for the backfill, checkpoint phases, fsyncs,
garbage collections, heap hand-backs): each slow save (over --slow-ms) is attributed to the
spans that overlapped it, and the five slowest are shown with them; the saves the pacing held
(`Vectors.hold_save`) are shown apart from the others. The timeline costs the server time
(about 1.5 ms of the save p50 at 10,000): --no-spans runs it as users do, for the headline
figures and for a baseline too old to load the timeline. Then searches: the saving
server against the floor (a second server on the same data, BM25-only, that embeds each
query with e5 first: floor/sitecustomize.py), each query sent to both in alternating order.

Run: python tests/bench/stdio_save_tail_bench.py [--saves 10000] [--searches 200]
     [--slow-ms 25] [--serve PATH-TO-dreamwell] (another checkout's script: a baseline)
     [--no-spans] [--unpaced | --embedder-elsewhere]

Two variants ask where the saves' time beside the embedder goes (each implies --no-spans):
--unpaced runs the server with its saves never held for the backfill (unpaced/);
--embedder-elsewhere runs it with no embedder (DREAMWELL_EMBEDDER=none) while another process
of nice 10 embeds LoCoMo turns with e5 on two threads for as long as the saves last: the
cores the embedder takes, without its share of the server's interpreter lock.
"""

from __future__ import annotations

import argparse
import bisect
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path

import anyio
from mcp import Client, StdioServerParameters
from overlaps import Span, show_slowest, show_spans
from scale_bench import _until_idle, pct, serve_pids
from tune_hybrid import find_shared

HERE = Path(__file__).parent


def say(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def turns_and_questions() -> tuple[list[str], list[str]]:
    data = json.loads((find_shared() / "data" / "locomo-dev.json").read_text())
    turns = [
        f"{turn['speaker']}: {turn['text']}"
        for sample in data
        for key, session in sample["conversation"].items()
        if key.startswith("session_") and isinstance(session, list)
        for turn in session
    ]
    return turns, [qa["question"] for sample in data for qa in sample["qa"]]


def text(turns: list[str], i: int) -> str:
    return f"{turns[i % len(turns)]} (note {i})"


async def _client(stack: AsyncExitStack, serve: str, data: Path, env: dict[str, str]) -> Client:
    params = StdioServerParameters(
        command=serve, args=["serve", "--data-dir", str(data)], env={**os.environ, **env}
    )
    return await stack.enter_async_context(Client(params))


async def _call(client: Client, tool: str, args: dict[str, str]) -> tuple[float, float]:
    began = time.perf_counter()
    result = await client.call_tool(tool, args)
    ended = time.perf_counter()
    assert not result.is_error, result.content
    return began, ended


def server_env(args: argparse.Namespace, spans: Path) -> dict[str, str]:
    if args.unpaced:
        return {"PYTHONPATH": str(HERE / "unpaced")}
    if args.embedder_elsewhere:
        return {"DREAMWELL_EMBEDDER": "none"}
    if args.no_spans:
        return {}
    return {"PYTHONPATH": str(HERE / "spans"), "DREAMWELL_SPANS": str(spans)}


@asynccontextmanager
async def embedding_elsewhere(wanted: bool) -> AsyncIterator[None]:
    """While inside: with `wanted`, another process embeds with e5 on two threads at nice 10
    (`e5_turn_bench.py --forever`), stopped by its pid after."""
    if not wanted:
        yield
        return
    child = subprocess.Popen(
        [sys.executable, str(HERE / "e5_turn_bench.py"), "--forever"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None
        if child.stdout.readline().strip() != "embedding":
            raise SystemExit("the embedding process did not start")
        yield
    finally:
        child.kill()
        child.wait()


async def run(args: argparse.Namespace, tmp: Path) -> tuple[list[tuple[float, float]], dict]:
    turns, questions = turns_and_questions()
    data, spans = tmp / "data", tmp / "spans.tsv"
    env = server_env(args, spans)
    floor_env = {"DREAMWELL_EMBEDDER": "none", "PYTHONPATH": str(HERE / "floor")}
    searches: dict[str, list[float]] = {"right after": [], "server": [], "floor": []}
    async with AsyncExitStack() as stack:
        client = await _client(stack, args.serve, data, env)
        pid = min(serve_pids(data), default=None)
        await client.call_tool("search_memory", {"query": "warm up"})
        await _until_idle(pid)  # the model loaded, the first stores opened
        async with embedding_elsewhere(args.embedder_elsewhere):
            saves = [
                await _call(client, "save_memory", {"content": text(turns, i), "category": "chat"})
                for i in range(args.saves)
            ]
        say(f"  saves done; load average {os.getloadavg()[0]:.2f}")
        for q in questions[: args.searches]:
            b, e = await _call(client, "search_memory", {"query": q})
            searches["right after"].append(1000 * (e - b))
        idle = await _until_idle(pid, limit=args.idle_limit)
        say(f"  server idle {idle:.0f} s after the searches began")
        floor = await _client(stack, args.serve, data, floor_env)
        await floor.call_tool("search_memory", {"query": "warm up"})
        # the floor's own start-up (its model, its catch-up) is not left running beside the
        # timed searches: it took the cores the server's searches ran on
        await _until_idle(min(serve_pids(data) - {pid}, default=None))
        for i, q in enumerate(questions[args.searches : 2 * args.searches]):
            order = [("server", client), ("floor", floor)]
            for name, c in order if i % 2 else order[::-1]:
                b, e = await _call(c, "search_memory", {"query": q})
                searches[name].append(1000 * (e - b))
    return saves, searches


def read_spans(path: Path) -> list[Span]:
    if not path.exists():
        return []
    out = []
    for line in path.read_text().splitlines():
        name, s, e = line.split("\t")
        out.append((name, float(s), float(e)))
    return out


CONTAINERS = {"save (store)", "backfill round", "checkpoint", "tidy (gc + hand-back)"}


def causes(a: float, b: float, spans: list[Span]) -> list[str]:
    """The spans (other than those that only contain others) that overlapped at least a
    third of the save from `a` to `b`."""
    names = {
        n
        for n, s, e in spans
        if n not in CONTAINERS and s < b and e > a and min(b, e) - max(a, s) >= (b - a) / 3
    }
    return sorted(names)


def held_apart(saves: list[tuple[float, float]], spans: list[Span]) -> None:
    """The saves the pacing held (its span inside the save 1 ms or more) and the others apart:
    what a save costs when nothing holds it, and what the pacing adds to the ones it holds."""
    holds = sorted((s, e) for n, s, e in spans if n == "save held for the backfill")
    starts = [s for s, _ in holds]
    free: list[float] = []
    held: list[tuple[float, float]] = []  # (the save, its hold) in ms
    for a, b in saves:
        k = bisect.bisect_left(starts, a)
        wait = holds[k][1] - holds[k][0] if k < len(holds) and holds[k][0] < b else 0.0
        if wait >= 0.001:
            held.append((1000 * (b - a), 1000 * wait))
        else:
            free.append(1000 * (b - a))
    if free and held:
        say(
            f"  not held: {len(free)} saves, p50 {statistics.median(free):.2f} ms  "
            f"p99 {pct(free, 0.99):.1f}"
        )
    if held:
        took = [t for t, _ in held]
        say(
            f"  held: {len(held)} saves, p50 {statistics.median(took):.2f} ms  p99 "
            f"{pct(took, 0.99):.1f}, the hold p50 {statistics.median(w for _, w in held):.2f} ms"
        )


def attribute(saves: list[tuple[float, float]], spans: list[Span], slow_ms: float) -> None:
    ms = [1000 * (b - a) for a, b in saves]
    say(
        f"  save p50 {statistics.median(ms):.2f} ms  p90 {pct(ms, 0.90):.2f}  p99 "
        f"{pct(ms, 0.99):.1f}  max {max(ms):.1f} ms  mean {statistics.mean(ms):.2f} ms  "
        f"({len(ms) / (saves[-1][1] - saves[0][0]):.0f} saves/s)"
    )
    say("  deciles: " + "  ".join(f"{q}% {pct(ms, q / 100):.2f}" for q in range(10, 100, 10)))
    inside = [1000 * (e - s) for n, s, e in spans if n == "save (store)"]
    if inside:
        say(
            f"  of which in the store: p50 {statistics.median(inside):.2f} ms  "
            f"max {max(inside):.1f} ms"
        )
    held_apart(saves, spans)
    slow = [(a, b) for a, b in saves if 1000 * (b - a) > slow_ms]
    blame: Counter[str] = Counter()
    for a, b in slow:
        blame[" + ".join(causes(a, b, spans)) or "(nothing in the server's timeline)"] += 1
    say(
        f"  {len(slow)} saves over {slow_ms:.0f} ms, by what overlapped at least a third of "
        "each in the server:"
    )
    for names, count in blame.most_common(10):
        say(f"    {count:5d}  {names}")
    say("  the five slowest saves, with what overlapped them (ms of it inside the save):")
    show_slowest(saves, spans, say, "(nothing)")
    show_spans(spans, say, "span")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--saves", type=int, default=10_000)
    parser.add_argument("--searches", type=int, default=200)
    parser.add_argument("--slow-ms", type=float, default=25.0)
    parser.add_argument("--serve", default="dreamwell", help="the dreamwell script to run")
    parser.add_argument("--idle-limit", type=float, default=600.0)
    variant = parser.add_mutually_exclusive_group()
    variant.add_argument("--unpaced", action="store_true", help="saves never held (unpaced/)")
    variant.add_argument(
        "--embedder-elsewhere",
        action="store_true",
        help="no embedder in the server, e5 on two threads in another process of nice 10",
    )
    parser.add_argument(
        "--no-spans",
        action="store_true",
        help="run the server without the timeline (what it costs; a baseline that cannot run it)",
    )
    args = parser.parse_args()
    args.no_spans = args.no_spans or args.unpaced or args.embedder_elsewhere
    if args.saves < 1 or args.searches < 1:
        parser.error("--saves and --searches must be at least 1")
    say(f"stdio save tail, {args.saves} saves, {args.serve}; load {os.getloadavg()}")
    with tempfile.TemporaryDirectory(dir=os.environ.get("BENCH_TMP")) as tmp:
        saves, searches = anyio.run(run, args, Path(tmp))
        spans = read_spans(Path(tmp) / "spans.tsv")
    attribute(saves, spans, args.slow_ms)
    mid = {k: statistics.median(v) for k, v in searches.items()}
    say(
        f"  search p50 right after the saves {mid['right after']:.1f} ms; once idle "
        f"{mid['server']:.1f} ms against the floor {mid['floor']:.1f} ms (e5 query + BM25 in "
        f"one request, side by side): {mid['server'] - mid['floor']:+.1f} ms"
    )
    inside = [1000 * (e - b) for n, b, e in spans if n == "search (store)"][-args.searches :]
    if inside:
        say(f"  of which in the store (once idle): p50 {statistics.median(inside):.1f} ms")
    say(f"load average at the end {os.getloadavg()}")


if __name__ == "__main__":
    main()
