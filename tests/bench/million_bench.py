"""A million memories (not collected by pytest): the vector search with and without the
inverted file (stores/index/ivf.py), and the real server's hybrid search over stdio.

The data (tests/bench/million_data.py): real texts and real e5 vectors of the LoCoMo dev split
(~4,500 turns, observations and event summaries), each memory two of them joined, its vector
the normalised sum of theirs plus a little noise; the queries are the split's 999 questions
embedded by e5 as queries. Memories are saved in streams of ten (each follows the one before
it), so every search also ranks contextual vectors. Embedding a million texts with e5 would
take days on this machine (the summed vectors are not checked against e5 of the joined text).

`--stage rows` (in process, one BLAS thread as the server runs): `Rows` filled with every
vector at once (held as the server holds them: int8 steps from a centre); per query the
probed search (the lists) and the scan of every row's sign bits, recall@10 of each against
an exact scan (every held vector's cosine, every contextual vector's), plain and contextual,
p50/p95, the time the lists took, RSS. `--stage server`: the store built through the batch
path with those vectors, `dreamwell serve` over stdio with the `mcp` client, hybrid search
p50/p95 (e5 query, BM25, both vector rankings) with the raw limits of the same run, and
the server's RSS. Prints /proc/loadavg.

Run: python tests/bench/million_bench.py [--n 1000000] [--stage rows|server|both|build]
     [--data-dir DIR]   (--stage build: only build the store in DIR, for a later server stage)
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import numpy as np
import numpy.typing as npt
from mcp import Client, StdioServerParameters
from million_data import embedded, memories, texts_and_questions
from scale_bench import _until_idle, pct, rss_split, serve_pids, tantivy_limit
from search_scale_bench import PROBE, StandIn, e5_query_ms

from dreamwell.server.loops import TRIM_QUIET
from dreamwell.stores import LongTermStore, new_id
from dreamwell.stores.index.held_vectors import Held
from dreamwell.stores.index.row_columns import RADIUS
from dreamwell.stores.index.rows import Rows
from dreamwell.stores.layout import DataDir
from dreamwell.stores.model import FOLLOWS, MemoryEntry, utcnow

STREAM = 10  # memories per stream: each follows the one before it within its stream
CACHE = Path(os.environ.get("BENCH_TMP", "/tmp")) / "dreamwell-bench" / "e5_locomo.npz"


def loadavg() -> str:
    return Path("/proc/loadavg").read_text().strip()


def rss_mib() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def fill(vectors: npt.NDArray[np.float32]) -> tuple[Rows, float, float]:
    """Rows for the memories, then their vectors at once (`Rows.take_vectors`: the centre,
    the int8 steps, the sign bits, the contextual norms and the lists). Returns the rows,
    the seconds taking the vectors took and the seconds of those the lists took."""
    rows = Rows(len(vectors) + 1)
    now = utcnow()
    for i in range(len(vectors)):
        meta = {FOLLOWS: f"m{i - 1}"} if i % STREAM else {}
        rows.put(MemoryEntry(f"m{i}", "", f"c/{i % 20}", (), now, now, now, metadata=meta))
    held = Held.empty(len(vectors) + 1, vectors.shape[1])
    held.matrix[: len(vectors)] = vectors
    index = rows._index
    spent = [0.0]

    def timed(*args: Any) -> None:
        started = time.perf_counter()
        index(*args)
        spent[0] += time.perf_counter() - started

    rows._index = timed  # type: ignore[method-assign]
    started = time.perf_counter()
    rows.take_vectors("bench", held, np.arange(len(vectors)))
    took = time.perf_counter() - started
    rows._index = index  # type: ignore[method-assign]
    return rows, took, spent[0]


def stream_neighbours(start: int, stop: int, n: int) -> Iterator[tuple[Any, Any]]:
    """For rows start..stop-1 of n, per neighbour up to RADIUS away within its stream: which
    of the rows have it, and its row number for those."""
    pos = np.arange(n) % STREAM
    at = np.arange(start, stop)
    for d in range(1, RADIUS + 1):
        for sign in (-1, 1):
            j = at + sign * d
            ok = (j >= 0) & (j < n) & (np.abs(pos[np.clip(j, 0, n - 1)] - pos[start:stop]) == d)
            yield ok, j[ok]


def stream_sums(values: npt.NDArray[Any]) -> npt.NDArray[Any]:
    """Per row, its value plus those of the rows up to RADIUS away within its stream."""
    out = values.copy()
    for ok, near in stream_neighbours(0, len(values), len(values)):
        out[ok] += values[near]
    return out


def context_norms(held: Held, n: int) -> npt.NDArray[np.float32]:
    """Norms of each row's contextual vector (its own and its stream neighbours' summed)."""
    norms = np.empty(n, dtype=np.float32)
    for start in range(0, n, 65536):
        stop = min(n, start + 65536)
        total = held.rows(slice(start, stop))
        for ok, near in stream_neighbours(start, stop, n):
            total[ok] += held.rows(near)
        norms[start:stop] = np.linalg.norm(total, axis=1)
    return norms


def truth(held: Held, n: int, norms: Any, q: Any, k: int) -> tuple[set[str], set[str]]:
    """The exact scan: the k best rows by cosine, and by contextual cosine."""
    plain = held.dot(slice(0, n), q)
    ctx = stream_sums(plain) / norms
    top = np.argpartition(-plain, k)[:k]
    top_ctx = np.argpartition(-ctx, k)[:k]
    return {f"m{i}" for i in top}, {f"m{i}" for i in top_ctx}


def stage_rows(n: int, searches: int) -> None:
    texts, passages, _, asked = embedded(CACHE)
    _, vectors = memories(n, texts, passages)
    sys.stdout.write(f"rows: N={n:,}; load before {loadavg()}\n")
    rows, took, listing = fill(vectors)
    del vectors
    assert rows.vec is not None
    norms = context_norms(rows.vec, n)
    everything = rows.mask(None, ())
    sys.stdout.write(
        f"  vectors taken in {took:.1f} s, of which the lists {listing:.1f} s "
        f"({'made' if rows.index is not None else 'none: below INDEX_AT'}); "
        f"RSS {rss_mib():.0f} MiB\n"
    )
    # the exact answers first: a scan of every row's float32 cosine between two timed
    # searches evicted their caches and doubled their times
    truths = [truth(rows.vec, n, norms, q, 10) for q in asked[:searches]]
    index = rows.index
    for name, used in (("probed (lists)", index), ("every row's sign bits", None)) * 2:
        rows.index = used
        times, recall, recall_ctx = [], [], []
        for q, (want, want_ctx) in zip(asked[:searches], truths, strict=True):
            started = time.perf_counter()
            plain, ctx = rows.vector_top(list(q), 10, everything, contextual=True)
            times.append((time.perf_counter() - started) * 1000)
            recall.append(len({i for i, _ in plain} & want) / 10)
            recall_ctx.append(len({i for i, _ in ctx} & want_ctx) / 10)
        sys.stdout.write(
            f"  {name}: vector_top (plain + contextual) p50 {statistics.median(times):.2f} ms "
            f"p95 {pct(times, 0.95):.2f} ms; recall@10 against the exact scan: plain "
            f"{np.mean(recall):.3f}, contextual {np.mean(recall_ctx):.3f} (min "
            f"{min(recall):.1f} / {min(recall_ctx):.1f}) over {len(times)} questions; "
            f"load {loadavg()}\n"
        )
    rows.index = index
    sys.stdout.write(f"  RSS {rss_mib():.0f} MiB; load after {loadavg()}\n")


def build(data: Path, n: int) -> float:
    """The store through the batch path, 5,000 memories at a time, each stream of STREAM
    linked as one caller's saves are."""
    texts, passages, _, _ = embedded(CACHE)
    contents, vectors = memories(n, texts, passages)

    def vector_of(text: str) -> list[float]:  # the memory's number is in its text
        return vectors[int(text.rsplit("(m", 1)[1][:-1])].tolist()  # type: ignore[no-any-return]

    store = LongTermStore(data, embedder=StandIn(vector_of))  # type: ignore[arg-type]
    started = time.perf_counter()
    now = utcnow()
    ids = [new_id() for _ in range(n)]
    for start in range(0, n, 5000):
        batch = [
            MemoryEntry(
                ids[i],
                PROBE if i == 0 else contents[i],
                f"bench/{(i // STREAM) % 20}",
                (),
                now,
                now,
                now,
                metadata={FOLLOWS: ids[i - 1]} if i % STREAM else {},
            )
            for i in range(start, min(n, start + 5000))
        ]
        store.apply(batch)
        while store.backfill(batch=5000):
            pass
        store.checkpoint()
        if start % 100_000 == 0:
            sys.stdout.write(
                f"  {start + len(batch):,} saved, {time.perf_counter() - started:.0f} s\n"
            )
    return time.perf_counter() - started


async def serve(data: Path, questions: list[str]) -> tuple[list[float], str]:
    params = StdioServerParameters(
        command="dreamwell", args=["serve", "--data-dir", str(data)], env=dict(os.environ)
    )
    times = []
    async with Client(params) as client:
        await client.call_tool("search_memory", {"query": "warm up"})
        pid = min(serve_pids(data))
        # loading a million vectors keeps the server busy: idle means they are in use
        ready = await _until_idle(pid)
        sys.stdout.write(f"  idle {ready:.1f} s after the first call\n")
        for question in questions[:10]:
            await client.call_tool("search_memory", {"query": question})
        for question in questions:
            started = time.perf_counter()
            result = await client.call_tool("search_memory", {"query": question})
            times.append((time.perf_counter() - started) * 1000)
            assert not result.is_error, result
        rss = rss_split(pid)
        await anyio.sleep(TRIM_QUIET + 1.5)  # the server hands its heap back once idle
        rss += f", {rss_split(pid)} once idle"
    return times, rss


def stage_server(n: int, searches: int, data: Path) -> None:
    sys.stdout.write(f"server: N={n:,}; load before {loadavg()}\n")
    if not DataDir(data).lancedb.exists():
        sys.stdout.write(f"  built in {build(data, n):.0f} s\n")
    _, questions = texts_and_questions()
    asked = questions[:searches]
    times, rss = anyio.run(serve, data, asked)
    sys.stdout.write(
        f"  hybrid search over stdio (e5 query, BM25, vectors, contextual): p50 "
        f"{statistics.median(times):.1f} ms p95 {pct(times, 0.95):.1f} ms over {len(times)} "
        f"questions; server {rss}; load {loadavg()}\n"
        f"  raw limits: e5 query embedding {e5_query_ms(asked):.2f} ms, Tantivy top-100 "
        f"{tantivy_limit(data):.2f} ms; load after {loadavg()}\n"
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=1_000_000)
    parser.add_argument("--searches", type=int, default=200)
    parser.add_argument("--stage", choices=("rows", "server", "both", "build"), default="both")
    parser.add_argument("--data-dir", type=Path, help="build the store here once, then reuse it")
    args = parser.parse_args()
    if args.stage == "build":  # only the store, for a later --stage server
        assert args.data_dir is not None, "--stage build needs --data-dir"
        sys.stdout.write(f"  built in {build(args.data_dir, args.n):.0f} s\n")
        return
    if args.stage in ("rows", "both"):
        stage_rows(args.n, args.searches)
    if args.stage in ("server", "both"):
        with tempfile.TemporaryDirectory(dir=os.environ.get("BENCH_TMP")) as tmp:
            stage_server(args.n, args.searches, args.data_dir or Path(tmp) / "data")


if __name__ == "__main__":
    main()
