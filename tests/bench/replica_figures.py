"""The replica figures of `scaleout_bench.py`: dreamwell's long-term store on a location in the
local SeaweedFS, against the raw limits measured in the same run.

- save: `LongTermStore.save` of a ~3 KB memory on an object-store location (its own cache)
- search / search_local: the same 20 queries over the same 2,000 memories on the remote store
  and on a local one (the remote store searches its in-memory view: it should not differ)
- visible: a save on replica A until `get` on replica B (another store, own cache, same
  process) returns it
- bytes_per_memory: bytes under the location after the saves, a checkpoint and a snapshot
- cold_start: a new replica (empty cache) opening a location of --cold memories, to its first
  search (snapshot + log replayed into its cache)
- throughput_N: saves per second with N `serve --transport http` replicas under 16 clients
"""

from __future__ import annotations

import atexit
import random
import re
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from dreamwell.stores.errors import StoreError
from dreamwell.stores.longterm.store import ANY, LongTermStore, Write
from dreamwell.stores.model import MemoryEntry, new_id, utcnow
from dreamwell.stores.remote import location as remote
from dreamwell.stores.remote.blobs import attach

WORDS = [
    "deploy",
    "staging",
    "cluster",
    "heron",
    "timezone",
    "berlin",
    "review",
    "pull",
    "request",
    "tests",
    "flaky",
    "cache",
    "database",
    "migration",
    "coffee",
    "tea",
    "morning",
    "standup",
    "release",
    "notes",
    "python",
    "rust",
    "typescript",
    "kubernetes",
    "helm",
    "chart",
    "secret",
    "rotation",
    "incident",
    "postmortem",
    "latency",
    "budget",
    "dashboard",
]


def text(rng: random.Random, size: int = 2800) -> str:
    out: list[str] = []
    while sum(len(w) + 1 for w in out) < size:
        out.append(rng.choice(WORDS))
    return " ".join(out)


def scratch(prefix: str) -> Path:
    """A temporary directory removed when the bench exits."""
    path = Path(tempfile.mkdtemp(prefix=prefix))
    atexit.register(shutil.rmtree, path, True)
    return path


def open_replica(s3: Any, prefix: str) -> LongTermStore:
    cache = scratch("dw-replica-")
    attach(cache, remote.Remote.of(s3.uri(prefix), s3.storage_options))
    return LongTermStore(cache)


def fill(store: LongTermStore, count: int, seed: int = 7) -> None:
    """`count` memories written in batches of 500 (one log append each)."""
    rng = random.Random(seed)
    now = utcnow()
    for start in range(0, count, 500):
        groups = []
        for i in range(start, min(count, start + 500)):
            entry = MemoryEntry(
                id=new_id(),
                content=f"memory {i}: {text(rng, 400)}",
                category=f"topic/{i % 20}",
                tags=(),
                created_at=now,
                last_seen_at=now,
                updated_at=now,
            )
            groups.append([Write(entry.id, ANY, entry)])
        store.write(groups)


def timed(call: Any) -> float:
    start = time.perf_counter()
    call()
    return (time.perf_counter() - start) * 1000


def measure_save(s3: Any, prefix: str, ops: int) -> list[float]:
    store = open_replica(s3, prefix + "/save")
    rng = random.Random(1)
    store.save("warm up", "bench")
    return [timed(lambda: store.save(text(rng), "bench/save")) for _ in range(ops)]


def measure_search(s3: Any, prefix: str, ops: int) -> tuple[list[float], list[float]]:
    """(remote, local) per-query ms over the same memories."""
    far = open_replica(s3, prefix + "/search")
    near = LongTermStore(scratch("dw-local-"))
    for store in (far, near):
        fill(store, 2000)
        store.checkpoint()
    rng = random.Random(3)
    queries = [" ".join(rng.sample(WORDS, 3)) for _ in range(ops)]
    out = []
    for store in (far, near):
        for q in queries[:5]:
            store.search(q)
        out.append([timed(lambda q=q, s=store: s.search(q, limit=10)) for q in queries])
    return out[0], out[1]


def measure_visible(s3: Any, prefix: str, ops: int) -> list[float]:
    a, b = open_replica(s3, prefix + "/vis"), open_replica(s3, prefix + "/vis")
    b.search("warm")
    times = []
    for i in range(ops):
        began = time.perf_counter()
        saved = a.save(f"visibility probe {i} {random.random()}", "bench/vis")
        while b.get(saved.entry.id) is None:
            time.sleep(0.005)
        times.append((time.perf_counter() - began) * 1000)
    return times


def bytes_under(s3: Any, prefix: str) -> int:
    import obstore

    return sum(int(m["size"]) for m in obstore.list(s3.store(prefix)).collect())


def measure_bytes_per_memory(s3: Any, prefix: str, count: int) -> float:
    store = open_replica(s3, prefix + "/bytes")
    fill(store, count)
    store.checkpoint()
    return bytes_under(s3, prefix + "/bytes") / count


def measure_cold_start(s3: Any, prefix: str, count: int) -> tuple[float, float]:
    """(seconds to open a new replica and answer its first search, seconds to fill)."""
    began = time.perf_counter()
    writer = open_replica(s3, prefix + "/cold")
    fill(writer, count)
    writer.checkpoint()
    filled = time.perf_counter() - began
    began = time.perf_counter()
    fresh = open_replica(s3, prefix + "/cold")
    assert fresh.count() == count, fresh.count()
    fresh.search("deploy staging")
    return time.perf_counter() - began, filled


def measure_throughput(s3: Any, prefix: str, replicas: int, seconds: float) -> float:
    """Saves per second, 16 client threads spread over `replicas` serve processes."""
    import anyio

    from tests.support.replicas import Replica, client

    base = scratch("dw-serve-")
    started = [Replica(s3, f"{prefix}/tp{replicas}", base / f"r{i}") for i in range(replicas)]
    for r in started:
        r.start(wait=False)
    try:
        for r in started:
            r.wait_ready()
        done = [0]
        lock = threading.Lock()

        async def worker(k: int, until: float) -> None:
            async with client(started[k % replicas].url) as c:
                rng = random.Random(k)
                while time.monotonic() < until:
                    await c.call_tool("save_memory", {"content": text(rng, 600)})
                    with lock:
                        done[0] += 1

        async def run() -> None:
            for r in started:  # warm: each opens its store at the first call
                async with client(r.url) as c:
                    await c.call_tool("search_memory", {"query": "warm"})
            until = time.monotonic() + seconds
            async with anyio.create_task_group() as tg:
                for k in range(16):
                    tg.start_soon(worker, k, until)

        anyio.run(run)
        return done[0] / seconds
    finally:
        for r in started:
            r.stop()


def census(s3: Any, prefix: str) -> tuple[int, int, int, int]:
    """(objects, bytes) under the location and (objects, bytes) under its log's tables
    (log.lance/, log-1.lance/, ...: one per generation, stores/longterm/shared/tables.py)."""
    import obstore

    found = obstore.list(s3.store(prefix)).collect()
    log = [m for m in found if re.search(r"(^|/)log(-\d+)?\.lance/", m["path"])]
    return (
        len(found),
        sum(int(m["size"]) for m in found),
        len(log),
        sum(int(m["size"]) for m in log),
    )


def measure_growth(
    s3: Any,
    prefix: str,
    total: int,
    on_row: Callable[[dict[str, Any]], None],
    replicas: int = 3,
    block: int = 1000,
) -> list[dict[str, Any]]:
    """`total` saves of ~450 B through `replicas` stores on one location (one thread each,
    each checkpointing every `block` of its own saves, as `serve` does every few seconds);
    per block of `block` saves: save p50/p95 (ms), objects and bytes under the location and
    under log.lance/, handed to `on_row` as each block ends. A KeyboardInterrupt (Ctrl-C, or
    SIGTERM as scaleout_bench maps it) stops the saves and returns the blocks completed."""
    stores = [open_replica(s3, prefix) for _ in range(replicas)]
    times: list[float] = []
    lock = threading.Lock()
    rows: list[dict[str, Any]] = []
    counter = [0]
    failed: list[str] = []

    def work(k: int) -> None:
        rng = random.Random(k)
        mine = 0
        while True:
            with lock:
                if counter[0] >= total:
                    return
                counter[0] += 1
            try:
                took = timed(lambda m=mine: stores[k].save(text(rng, 450), f"growth/{m % 20}"))
            except StoreError as exc:  # counted and printed: the run goes on
                with lock:
                    failed.append(str(exc))
                continue
            mine += 1
            if mine % block == 0:
                stores[k].checkpoint()
            with lock:
                times.append(took)
                if len(times) % block == 0:
                    rows.append(_block_row(s3, prefix, times[-block:], len(times)))
                    on_row(rows[-1])

    threads = [threading.Thread(target=work, args=(k,)) for k in range(replicas)]
    stop_probe = threading.Event()
    probe = threading.Thread(target=_probe, args=(s3, prefix, stop_probe, counter), daemon=True)
    for t in [*threads, probe]:
        t.start()
    try:
        for t in threads:
            t.join()
    except KeyboardInterrupt:  # stopped early: no more saves, keep the blocks done
        with lock:
            counter[0] = total
        for t in threads:
            t.join()
    stop_probe.set()
    for line in sorted(set(failed)):
        sys.stdout.write(f"{failed.count(line)} saves failed: {line}\n")
    if rows:  # at rest: the replicas' pollers tidy a quiet log (stores/longterm/shared/tidy.py)
        time.sleep(REST_SECONDS)
        rows.append({**_block_row(s3, prefix, times[-block:], len(times)), "rest": True})
    return rows


REST_SECONDS = 15.0  # after the saves, before the last census: longer than tidy's waits


# what a save on object storage spends its time in, per block of the growth run: each call of
# the shared log's steps, as (step, start, end), on whichever thread made it (the savers' and
# the log pollers'); save_tail_bench.py's `timed` records them
SPANS: list[tuple[str, float, float]] = []


def time_phases() -> None:
    """Time the shared log's steps into SPANS, for the growth run."""
    from save_tail_bench import timed

    from dreamwell.stores.longterm.lance_table import LogTable
    from dreamwell.stores.longterm.shared import log as shared_log

    timed(SPANS, "append (merge_insert)", LogTable, "insert_if_absent")
    timed(SPANS, "check out latest", LogTable, "latest")
    timed(SPANS, "read rows", LogTable, "rows")
    timed(SPANS, "compact + clean up", LogTable, "compact")
    timed(SPANS, "catch-up read", shared_log.LanceLog, "read_new")


def _phases_since_last() -> dict[str, tuple[int, float]]:
    """(calls, p50 ms) of each step since the last block; those spans are dropped (spans
    recorded meanwhile go after them)."""
    taken = SPANS[:]
    del SPANS[: len(taken)]
    by_step: dict[str, list[float]] = {}
    for name, began, ended in taken:
        by_step.setdefault(name, []).append(1000 * (ended - began))
    return {k: (len(v), sorted(v)[len(v) // 2]) for k, v in by_step.items()}


# the baseline of the growth run: appends to a brand-new table, beside the saves, as
# (saves done when it was made, seconds); a new table (at a new prefix) every 20 appends
PROBE: list[tuple[int, float]] = []


def _probe(s3: Any, prefix: str, stop: threading.Event, counter: list[int]) -> None:
    """What an append costs on this server and machine right now, on a table that has no
    history: one append every 0.2 s to a fresh table. Whatever makes these slower over the
    run (the server's own state, the machine's load) is not the shared log's age."""
    import pyarrow as pa

    from dreamwell.stores.longterm.lance_table import _LOG_SCHEMA, connect

    k = 0
    while not stop.is_set():
        k += 1
        db = connect(s3.uri(f"{prefix}-probe/{k}"), s3.storage_options)
        table = db.create_table("probe", schema=_LOG_SCHEMA)
        for n in range(1, 21):
            row = {"n": n, "first": n, "last": n, "at": time.time(), "body": "x" * 450}
            data = pa.Table.from_pylist([row], schema=_LOG_SCHEMA)
            began = time.perf_counter()
            table.merge_insert("n").when_not_matched_insert_all().execute(data)
            PROBE.append((counter[0], time.perf_counter() - began))
            if stop.wait(0.2):
                return
        db.drop_table("probe")


def _probe_p50(since: int) -> float:
    """The probe's append p50 (ms) over the appends made after `since` saves."""
    taken = sorted(took for done, took in PROBE if done > since)
    return 1000 * taken[len(taken) // 2] if taken else 0.0


def _block_row(s3: Any, prefix: str, block: list[float], done: int) -> dict[str, Any]:
    objects, size, log_objects, log_size = census(s3, prefix)
    ordered = sorted(block)
    return {
        "probe_p50": _probe_p50(done - len(block)),
        "phases": _phases_since_last(),
        "saves": done,
        "p50": ordered[len(ordered) // 2],
        "p95": ordered[int(len(ordered) * 0.95)],
        "objects": objects,
        "bytes": size,
        "log_objects": log_objects,
        "log_bytes": log_size,
        "rss_mb": _rss_mb(),
    }


def _rss_mb() -> float:
    """This process's resident memory (the three replicas'), MB; 0 where /proc is not."""
    try:
        with open("/proc/self/status") as status:
            found = [line.split()[1] for line in status if line.startswith("VmRSS:")]
    except OSError:
        return 0.0
    return int(found[0]) / 1024 if found else 0.0
