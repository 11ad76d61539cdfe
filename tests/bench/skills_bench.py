"""Skills: the `recall` prompt's latency with 500 skills and 10,000 memories, and what the
catalog watch costs an idle server (not collected by pytest).

Recall: 10,000 synthetic memories (BM25 only: `embedder=none`, so no model loads and the
figure is the prompt's own cost) and 500 skills whose bodies share words with the messages;
the prompt is timed through the in-memory MCP client with 0 and with 500 skills, in one
caller session (every call searches the skills; each injects those not shown before).

Idle: `dreamwell serve` over stdio on the same data, left idle; its voluntary context
switches per second (/proc/<pid>/status, every wake-up of the process), and the cost of one
watch check (`SkillsWatch.changed`, one stat per tenant) measured in process.

Run: python tests/bench/skills_bench.py [--memories 10000] [--skills 500] [--calls 200]
     [--rounds 3] [--idle-seconds 20]
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
from scale_bench import serve_pids

from dreamwell.server.config import Settings
from dreamwell.server.mcp.app import build_server
from dreamwell.server.mcp.skills_recall import InjectedSkills, skills_section
from dreamwell.server.mcp.skills_watch import SkillsWatch
from dreamwell.server.runtime import Runtime
from dreamwell.stores import (
    NEW,
    LongTermStore,
    MemoryEntry,
    SkillCatalog,
    SkillChange,
    new_id,
    utcnow,
)

TOPICS = ["billing", "deploy", "release", "invoice", "backup", "database", "kafka", "tea", "docs"]
VERBS = ["rotate", "ship", "migrate", "restore", "audit", "benchmark", "refund", "index"]


def build(data: Path, memories: int, skills: int) -> None:
    rng = random.Random(5)
    store = LongTermStore(data)
    now = utcnow()
    for start in range(0, memories, 5000):
        batch = [
            MemoryEntry(
                new_id(),
                f"{rng.choice(TOPICS)} note {i}: {rng.choice(VERBS)} the {rng.choice(TOPICS)}",
                f"bench/{i % 20}",
                (),
                now,
                now,
                now,
            )
            for i in range(start, min(memories, start + 5000))
        ]
        store.apply(batch)
        store.checkpoint()
    changes = []
    for i in range(skills):
        verb, topic = VERBS[i % len(VERBS)], TOPICS[i % len(TOPICS)]
        name = f"{verb}-{topic}-{i}"
        body = f"# {verb} {topic}\n\n" + "\n".join(
            f"{n}. {rng.choice(VERBS)} the {rng.choice(TOPICS)} with `make {verb}-{n}`"
            for n in range(12)
        )
        md = f"---\nname: {name}\ndescription: How to {verb} the {topic} ({i}).\n---\n{body}\n"
        changes.append(SkillChange(name, NEW, {"SKILL.md": md.encode()}))
    SkillCatalog(data).apply(changes)


async def recall_times(data: Path, calls: int) -> tuple[list[float], int]:
    """(milliseconds per call, calls whose answer held skills); the process's CPU time per
    call (all threads: robust to a loaded machine) goes to CPU_MS."""
    rng = random.Random(9)
    settings = Settings(data_dir=data, embedder="none", record_conversation=False)
    times, with_skills = [], 0
    async with Client(build_server(settings)) as client:
        await client.get_prompt("recall", {"message": "warm up billing"})
        for _ in range(calls):
            message = f"how do I {rng.choice(VERBS)} the {rng.choice(TOPICS)} today?"
            started, cpu = time.perf_counter(), time.process_time()
            got = await client.get_prompt("recall", {"message": message})
            times.append((time.perf_counter() - started) * 1000)
            CPU_MS.append((time.process_time() - cpu) * 1000)
            with_skills += "Skills that may apply" in str(got.messages[0].content)
    return times, with_skills


def section_cost(data: Path, calls: int) -> tuple[float, float]:
    """(wall p50, CPU p50) in ms of the skills part of recall alone: search + section."""
    catalog = SkillCatalog(data)
    rng = random.Random(9)
    catalog.search("warm up")
    wall, cpu = [], []
    for i in range(calls):
        message = f"how do I {rng.choice(VERBS)} the {rng.choice(TOPICS)} today?"
        started, started_cpu = time.perf_counter(), time.thread_time()
        skills_section(catalog, InjectedSkills(), ("", f"s{i}"), message, 4000)
        wall.append((time.perf_counter() - started) * 1000)
        cpu.append((time.thread_time() - started_cpu) * 1000)
    return statistics.median(wall), statistics.median(cpu)


CPU_MS: list[float] = []


def context_switches(pid: int) -> int:
    status = Path(f"/proc/{pid}/status").read_text()
    return int(status.split("voluntary_ctxt_switches:")[1].split()[0])


async def idle_wakeups(data: Path, seconds: float) -> float:
    params = StdioServerParameters(
        command="dreamwell",
        args=["serve", "--data-dir", str(data), "--embedder", "none"],
        env=dict(os.environ),
    )
    async with Client(params) as client:
        await client.list_prompts()
        await anyio.sleep(5)  # the stores open and settle
        (pid,) = serve_pids(data)
        before = context_switches(pid)
        await anyio.sleep(seconds)
        return (context_switches(pid) - before) / seconds


def check_cost(data: Path, n: int = 20_000) -> float:
    """Microseconds of one watch check with nothing changed."""
    watch = SkillsWatch(Runtime(Settings(data_dir=data, embedder="none")))
    watch._tenants.add("")
    watch.changed()
    started = time.perf_counter()
    for _ in range(n):
        watch.changed()
    return (time.perf_counter() - started) / n * 1e6


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--memories", type=int, default=10_000)
    parser.add_argument("--skills", type=int, default=500)
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--idle-seconds", type=float, default=20.0)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    out = sys.stdout
    out.write(f"load average before: {os.getloadavg()}\n")
    with tempfile.TemporaryDirectory() as tmp:
        bare, full = Path(tmp) / "bare", Path(tmp) / "full"
        build(bare, args.memories, 0)
        build(full, args.memories, args.skills)
        runs: dict[str, list[float]] = {}
        for _ in range(args.rounds):  # alternated: a loaded machine's drift hits both alike
            for label, data in (("0 skills", bare), (f"{args.skills} skills", full)):
                CPU_MS.clear()
                times, injected = anyio.run(recall_times, data, args.calls)
                runs.setdefault(label, []).extend(times)
                p95 = sorted(times)[int(0.95 * len(times))]
                out.write(
                    f"recall prompt, {args.memories} memories, {label}: p50 "
                    f"{statistics.median(times):.1f} ms, p95 {p95:.1f} ms, CPU p50 "
                    f"{statistics.median(CPU_MS):.1f} ms ({len(times)} calls, {injected} with "
                    "skills)\n"
                )
        for label, times in runs.items():
            out.write(f"all rounds, {label}: p50 {statistics.median(times):.1f} ms\n")
        wall, cpu = section_cost(full, args.calls)
        out.write(
            f"the skills part of recall alone (search of {args.skills} skills + section): p50 "
            f"{wall:.2f} ms wall, {cpu:.2f} ms CPU\n"
        )
        out.write(f"one watch check (stat, nothing changed): {check_cost(full):.1f} µs\n")
        rate = anyio.run(idle_wakeups, full, args.idle_seconds)
        out.write(
            f"idle `dreamwell serve` (stdio): {rate:.1f} voluntary context switches/s over "
            f"{args.idle_seconds:.0f} s (the skills watch: 2 wake-ups/s of them)\n"
        )
    out.write(f"load average after: {os.getloadavg()}\n")


if __name__ == "__main__":
    main()
