"""Search latency in one `dreamwell serve` while another saves on the same data directory as
fast as it can (not collected by pytest).

Two stdio servers on one data directory (the default embedder unless --embedder none), driven
by the official `mcp` client: the reader searches, the writer saves one at a time, back to
back. The quiet searches and those beside the writer run in alternating blocks (--blocks):
a quiet block is the block's queries once both servers are idle; a loud block starts the
writer, lets it run --warmup seconds, then searches the same queries over and over for
--seconds while it goes on saving, so the checkpoints of what it saved (every 512 saves or 5
s), its backfill embedding them and the reader picking them up all fall inside the timed
window, as they do for a user. (Blocks of 50 searches right after the writer started saw
none of that: 1.2-1.3x quiet, where a sustained writer measured from outside gave 4.3-5.8x.)
Prints the reader's search p50/p90/p99/max quiet and beside the writer, their ratio, the
writer's rate and save p50, each server's CPU seconds in each kind of block, the vector
records in the log per memory (2 would mean both processes embedded it), the load average,
and the raw limits of this machine in the same run: one e5 query embedding in process and
the same searches in a BM25-only server (DREAMWELL_EMBEDDER=none) on the quiet store. With
--burst N the reader then takes a burst of saves itself and searches beside it (its own
backfill embeds them meanwhile) and right after it, and searches once more when all is quiet
(the store has grown by then).

Run: python tests/bench/concurrent_read_bench.py [--seed 20] [--searches 300] [--blocks 3]
     [--seconds 10] [--warmup 3] [--burst 0] [--embedder e5|none] [--profile DIR]
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import random
import signal
import statistics
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TextIO

import anyio
import anyio.abc
import anyio.streams.text
from mcp import Client, StdioServerParameters
from scale_bench import OBJECTS, SUBJECTS, VERBS, _cpu_seconds, pct, serve_pids
from search_scale_bench import e5_query_ms

from dreamwell.stores.layout import DataDir


def sentence(rng: random.Random, i: int) -> str:
    return (
        f"{rng.choice(SUBJECTS)} {rng.choice(VERBS)} {rng.choice(OBJECTS)} "
        f"on day {i % 365} (note {i})"
    )


def params(data: Path, embedder: str, sample: Path | None = None) -> StdioServerParameters:
    env = {**os.environ, **sampler_env(sample)}
    if embedder == "none":
        env["DREAMWELL_EMBEDDER"] = "none"
    else:
        env.pop("DREAMWELL_EMBEDDER", None)
    return StdioServerParameters(
        command=sys.executable,
        args=["-m", "dreamwell.server", "serve", "--data-dir", str(data)],
        env=env,
    )


async def call(client: Client, tool: str, **args: object) -> tuple[float, str]:
    started = time.perf_counter()
    result = await client.call_tool(tool, args)
    took = (time.perf_counter() - started) * 1000
    text = " ".join(getattr(c, "text", "") for c in result.content)
    assert not result.is_error, text
    return took, text


def query(rng: random.Random) -> str:
    return f"what does {rng.choice(SUBJECTS)} think of {rng.choice(OBJECTS)}"


def queries(n: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    return [query(rng) for _ in range(n)]


async def searches(client: Client, n: int, seed: int) -> list[float]:
    return [(await call(client, "search_memory", query=q))[0] for q in queries(n, seed)]


async def until_idle(pids: list[int]) -> None:
    """Until every server used under 5% of a core for a whole second (backfills done)."""
    with anyio.fail_after(300):
        while True:
            before = [_cpu_seconds(p) for p in pids]
            await anyio.sleep(1.0)
            if all(_cpu_seconds(p) - b < 0.05 for p, b in zip(pids, before, strict=True)):
                return


def stats(times: list[float]) -> dict[str, float]:
    return {
        "p50": statistics.median(times),
        "p90": pct(times, 0.90),
        "p99": pct(times, 0.99),
        "max": max(times),
    }


def line(name: str, s: dict[str, float], n: int) -> str:
    return (
        f"{name:<24} p50 {s['p50']:7.1f}  p90 {s['p90']:7.1f}  p99 {s['p99']:7.1f}  "
        f"max {s['max']:7.1f} ms  ({n} searches)\n"
    )


def vector_records(data: Path) -> Counter[str]:
    """How many vector records each memory has in the log segments still on disk."""
    per_id: Counter[str] = Counter()
    for segment in sorted(DataDir(data).wal.glob("*.log")):
        for raw in segment.read_bytes().splitlines():
            try:
                ops = json.loads(raw[9:])["ops"]
            except (ValueError, KeyError):
                continue
            per_id.update(op["id"] for op in ops if op["op"] == "vec")
    return per_id


class Phase:
    def __init__(self, pids: dict[str, int]) -> None:
        self.pids = pids
        self.cpu = {k: _cpu_seconds(p) for k, p in pids.items()}
        self.started = time.perf_counter()

    def used(self) -> tuple[float, dict[str, float]]:
        """Wall seconds and each server's CPU seconds since the phase started."""
        wall = time.perf_counter() - self.started
        return wall, {k: _cpu_seconds(p) - self.cpu[k] for k, p in self.pids.items()}

    def report(self, name: str) -> str:
        return report(name, *self.used())


def report(name: str, wall: float, cpu: dict[str, float]) -> str:
    parts = ", ".join(f"{k} {v:.1f} s" for k, v in cpu.items())
    return f"  {name}: {wall:.1f} s wall; CPU {parts}; load {os.getloadavg()[0]:.2f}\n"


class Blocks:
    """Wall and CPU seconds summed over the blocks of each kind; with --profile each block is
    sampled on its own (`profile`)."""

    def __init__(self, pids: dict[str, int], where: Path | None) -> None:
        self.pids = pids
        self.where = where
        self.seconds: dict[str, Counter[str]] = {}

    @contextmanager
    def block(self, kind: str) -> Iterator[None]:
        phase = Phase(self.pids)
        profile(self.pids, self.where, signal.SIGUSR1)
        yield
        profile(self.pids, self.where, signal.SIGUSR2)
        wall, cpu = phase.used()
        self.seconds.setdefault(kind, Counter()).update({"wall": wall, **cpu})

    def report(self, blocks: int) -> str:
        return "".join(
            report(
                f"{kind} ({blocks} blocks)",
                used["wall"],
                {k: v for k, v in used.items() if k != "wall"},
            )
            for kind, used in self.seconds.items()
        )


async def alternating(
    reader: Client,
    writer: WriterProcess,
    pids: dict[str, int],
    args: argparse.Namespace,
    out: TextIO,
) -> tuple[list[float], list[float], list[float], float]:
    """(quiet searches, searches beside the foreign writer, the writer's saves, the writer's
    wall seconds): --blocks blocks of each, alternating, the same queries in a block's quiet
    and loud halves. Load that comes and goes on a shared machine then falls on both alike:
    one quiet phase before one loud phase once put the quiet p50 at 7.5 ms and the same
    searches once all was quiet again at 10.7. The quiet blocks search the store as grown by
    the writer's blocks before them."""
    quiet: list[float] = []
    loud: list[float] = []
    saves: list[float] = []
    wall = 0.0
    blocks = Blocks(pids, args.profile)
    for seed, each in block_seeds(args):
        await until_idle(list(pids.values()))
        load = os.getloadavg()[0]
        with blocks.block("quiet"):
            quiet += await searches(reader, each, seed)
        found, saved, seconds = await beside_writer(
            reader, writer, queries(each, seed), args, blocks
        )
        loud += found
        saves += saved
        wall += seconds
        out.write(
            f"  block {seed - 99}: quiet p50 {statistics.median(quiet[-each:]):.1f} ms (load "
            f"{load:.2f}); beside the writer p50 {statistics.median(found):.1f} ms over "
            f"{len(found)} searches, writer {len(saved) / seconds:.0f} saves/s (load "
            f"{os.getloadavg()[0]:.2f})\n"
        )
    out.write(blocks.report(args.blocks))
    done = {"quiet": len(quiet), "beside the writer": len(loud)}
    cpu = {k: 1000 * blocks.seconds[k]["reader"] / n for k, n in done.items()}
    out.write(
        f"  the reader's CPU per search: quiet {cpu['quiet']:.1f} ms, beside the writer "
        f"{cpu['beside the writer']:.1f} ms (its catch-up and any checkpoint it makes)\n"
    )
    return quiet, loud, saves, wall


async def beside_writer(
    reader: Client,
    writer: WriterProcess,
    asked: list[str],
    args: argparse.Namespace,
    blocks: Blocks,
) -> tuple[list[float], list[float], float]:
    """(the reader's search times, the writer's save times, the writer's wall seconds): the
    writer saves one at a time from --warmup seconds before the reader's first timed search
    to its last; the reader searches `asked` over and over for --seconds."""
    found: list[float] = []
    await writer.tell("go")
    await anyio.sleep(args.warmup)
    with blocks.block("beside the writer"):
        until = time.perf_counter() + args.seconds
        for q in itertools.cycle(asked):
            if time.perf_counter() >= until:
                break
            found.append((await call(reader, "search_memory", query=q))[0])
    await writer.tell("stop")
    report = json.loads(await writer.answer())
    return found, report["saves"], report["wall"]


class WriterProcess:
    """The writer: this script run with --writer DATA, a process of its own with its own MCP
    client and `dreamwell serve`, as a second agent on the same data directory is. (Driven
    from the reader's client process, the writer's 200 round trips a second shared one event
    loop with the reader's searches, and the searches waited behind them in the bench.) It
    is told `seed N`, `go` and `stop` on its stdin, one line each, and answers one line."""

    def __init__(self, process: anyio.abc.Process) -> None:
        self.process = process
        assert process.stdin is not None and process.stdout is not None
        self._lines = anyio.streams.text.TextReceiveStream(process.stdout)
        self._buffer = ""

    async def tell(self, command: str) -> None:
        assert self.process.stdin is not None
        await self.process.stdin.send(f"{command}\n".encode())

    async def answer(self) -> str:
        while "\n" not in self._buffer:
            self._buffer += await self._lines.receive()
        answer, self._buffer = self._buffer.split("\n", 1)
        return answer


async def writer_main(data: Path, embedder: str, profile: Path | None) -> None:
    """--writer: the writer process's side of `WriterProcess`."""
    rng = random.Random(5)
    count = itertools.count()
    commands = anyio.wrap_file(sys.stdin)
    async with Client(params(data, embedder, profile)) as writer:
        await call(writer, "list_memory_categories")
        sys.stdout.write("ready\n")
        sys.stdout.flush()
        async for command in commands:
            if command.startswith("seed "):
                for _ in range(int(command.split()[1])):
                    text = sentence(rng, next(count))
                    await call(writer, "save_memory", content=text, category="bench")
                sys.stdout.write("seeded\n")
            elif command.strip() == "go":
                saves, wall = await save_until_stop(writer, rng, count, commands)
                sys.stdout.write(json.dumps({"saves": saves, "wall": wall}) + "\n")
            sys.stdout.flush()


async def save_until_stop(
    writer: Client,
    rng: random.Random,
    count: Iterator[int],
    commands: anyio.AsyncFile[str],
) -> tuple[list[float], float]:
    """Save one at a time, back to back, until `stop` arrives on stdin."""
    saves: list[float] = []
    started = time.perf_counter()
    async with anyio.create_task_group() as tg:

        async def write() -> None:
            while True:
                text = sentence(rng, next(count))
                saves.append((await call(writer, "save_memory", content=text))[0])

        tg.start_soon(write)
        await commands.readline()
        tg.cancel_scope.cancel()
    return saves, time.perf_counter() - started


def block_seeds(args: argparse.Namespace) -> list[tuple[int, int]]:
    """(seed, searches) of each block's queries: the quiet and the loud blocks', the raw
    limits' alike."""
    return [(100 + block, max(1, args.searches // args.blocks)) for block in range(args.blocks)]


async def run(data: Path, args: argparse.Namespace) -> None:
    out = sys.stdout
    before = serve_pids(data)
    async with Client(params(data, args.embedder, args.profile)) as reader:
        await call(reader, "list_memory_categories")
        (reader_pid,) = serve_pids(data) - before
        command = [sys.executable, __file__, "--writer", str(data), "--embedder", args.embedder]
        if args.profile is not None:
            command += ["--profile", str(args.profile)]
        async with await anyio.open_process(command, stderr=None) as process:
            writer = WriterProcess(process)
            assert await writer.answer() == "ready"
            (writer_pid,) = serve_pids(data) - before - {reader_pid}
            pids = {"reader": reader_pid, "writer": writer_pid}
            await writer.tell(f"seed {args.seed}")
            assert await writer.answer() == "seeded"
            await searches(reader, 20, 1)  # the reader loads its model and vectors
            quiet, loud, saves, wall = await alternating(reader, writer, pids, args, out)
            own: list[tuple[str, list[float]]] = []
            if args.burst:
                await until_idle(list(pids.values()))
                during, right_after = await own_backfill(
                    reader, pids, args.burst, args.searches, out
                )
                after = await searches(reader, args.searches, 2)
                own = [
                    ("during own burst", during),
                    ("right after own burst", right_after),
                    ("quiet again, store grown", after),
                ]
    bm25 = await bm25_only(data, args)
    q, w = stats(quiet), stats(loud)
    out.write(line("quiet", q, len(quiet)))
    out.write(line("beside the writer", w, len(loud)))
    for name, times in own:
        out.write(line(name, stats(times), len(times)))
    out.write(
        f"ratio beside the writer / quiet: p50 {w['p50'] / q['p50']:.2f}x, p90 "
        f"{w['p90'] / q['p90']:.2f}x, max {w['max'] / q['max']:.2f}x\n"
        f"writer: {len(saves)} saves, p50 {statistics.median(saves):.1f} ms, p99 "
        f"{pct(saves, 0.99):.1f} ms ({len(saves) / wall:.0f}/s over its blocks)\n"
    )
    for name, times in own[:2]:
        out.write(f"ratio {name} / quiet: p50 {stats(times)['p50'] / q['p50']:.2f}x\n")
    out.write(line("raw: BM25-only server", stats(bm25), len(bm25)))
    if args.embedder != "none":
        texts = [q for seed, each in block_seeds(args) for q in queries(each, seed)]
        out.write(f"raw: e5 query embedding in process p50 {e5_query_ms(texts):.2f} ms\n")
    counts = Counter(vector_records(data).values())
    out.write(f"vector records per memory in the log on disk: {dict(sorted(counts.items()))}\n")


async def own_backfill(
    reader: Client, pids: dict[str, int], burst: int, n: int, out: TextIO
) -> tuple[list[float], list[float]]:
    """The reader itself takes `burst` saves from 8 concurrent callers while it searches
    (its backfill embeds them meanwhile), and searches `n` more times right after the burst;
    prints the saves' pace and how long the backfill went on after the searches."""
    rng = random.Random(9)
    texts = [sentence(rng, 100_000 + i) for i in range(burst)]
    during: list[float] = []
    saved = anyio.Event()

    async def saver(k: int) -> None:
        for text in texts[k::8]:
            await call(reader, "save_memory", content=text)

    async def burst_then_stop() -> None:
        async with anyio.create_task_group() as savers:
            for k in range(8):
                savers.start_soon(saver, k)
        saved.set()

    async def search_until_saved() -> None:
        rng = random.Random(3)
        while not saved.is_set():
            during.append((await call(reader, "search_memory", query=query(rng)))[0])

    phase = Phase(pids)
    async with anyio.create_task_group() as tg:
        tg.start_soon(burst_then_stop)
        tg.start_soon(search_until_saved)
    out.write(phase.report(f"burst of {burst} saves with searches beside it"))
    phase = Phase(pids)
    after = await searches(reader, n, 4)
    out.write(phase.report("searches right after the burst"))
    ended = time.perf_counter()
    await until_idle(list(pids.values()))
    out.write(f"  backfill went on {time.perf_counter() - ended - 1:.1f} s after the searches\n")
    return during, after


def sampler_env(where: Path | None) -> dict[str, str]:
    """With --profile DIR: the servers load tests/bench/sampler and sample their stacks."""
    if where is None:
        return {}
    where.mkdir(parents=True, exist_ok=True)
    path = [str(Path(__file__).parent / "sampler"), os.environ.get("PYTHONPATH", "")]
    return {
        "PYTHONPATH": os.pathsep.join(p for p in path if p),
        "DREAMWELL_SAMPLE": str(where / "stacks"),
    }


def profile(pids: dict[str, int], where: Path | None, sig: signal.Signals) -> None:
    """Start (SIGUSR1) or stop and write (SIGUSR2) each server's sampler: DIR/stacks.<pid>.1,
    .3, ... (the quiet blocks), .2, .4, ... (under the writer)."""
    if where is not None:
        for pid in pids.values():
            os.kill(pid, sig)


async def bm25_only(data: Path, args: argparse.Namespace) -> list[float]:
    async with Client(params(data, "none")) as client:
        await searches(client, 20, 1)
        return [t for seed, each in block_seeds(args) for t in await searches(client, each, seed)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=20, help="memories saved before timing")
    parser.add_argument("--searches", type=int, default=150, help="quiet searches in all")
    parser.add_argument(
        "--blocks", type=int, default=3, help="quiet and loud blocks of the searches, alternating"
    )
    parser.add_argument("--seconds", type=float, default=10.0, help="searching per loud block")
    parser.add_argument("--warmup", type=float, default=3.0, help="writing before it searches")
    parser.add_argument("--burst", type=int, default=0, help="saves before own backfill")
    parser.add_argument("--embedder", default="e5", choices=["e5", "none"])
    parser.add_argument("--data-dir", type=Path, help="keep the data here (must be empty)")
    parser.add_argument("--profile", type=Path, help="sample both servers' stacks under the writer")
    parser.add_argument("--writer", type=Path, help=argparse.SUPPRESS)  # the writer process
    args = parser.parse_args()
    if args.writer is not None:
        anyio.run(writer_main, args.writer, args.embedder, args.profile)
        return
    if not 1 <= args.blocks <= args.searches:
        parser.error("--blocks must be between 1 and --searches")
    sys.stdout.write(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}\n")
    with tempfile.TemporaryDirectory() as tmp:
        data = args.data_dir or Path(tmp) / "data"
        anyio.run(run, data, args)
    sys.stdout.write(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}\n")


if __name__ == "__main__":
    main()
