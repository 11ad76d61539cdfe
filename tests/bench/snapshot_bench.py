"""Cost of the rolling snapshot and of checking LanceDB's data files, at N memories.

    python tests/bench/snapshot_bench.py 10000 100000

For each N: a LanceDB table of N rows (384-d vectors, as e5/minilm make) written in one go,
then (median of 3) writing the snapshot of its records (what a checkpoint that is due
pays, every max(1024, N/4) records), reading the snapshot back (what a repair pays), and
the CRC-32 check of the data files (what every start pays); and the snapshot's size on
disk per memory.
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from dreamwell.stores.longterm import lance_files as lancefiles
from dreamwell.stores.longterm import snapshot
from dreamwell.stores.longterm.lance_table import MemoryTable, StoredVector
from dreamwell.stores.model import MemoryEntry, new_id, utcnow


def _rows(n: int) -> list[tuple[MemoryEntry, StoredVector | None]]:
    rng = np.random.default_rng(1)
    now = utcnow()
    # text that compresses like prose: 12-30 words from a vocabulary of 5,000 made-up ones
    vocab = [
        "".join(rng.choice(list("abcdefghijklmnopqrstuvwxyz"), int(k)))
        for k in rng.integers(3, 10, 5000)
    ]
    out: list[tuple[MemoryEntry, StoredVector | None]] = []
    for _ in range(n):
        text = " ".join(rng.choice(vocab, int(rng.integers(12, 30))))
        entry = MemoryEntry(
            id=new_id(),
            content=text,
            category="ops",
            tags=("deploy",),
            created_at=now,
            updated_at=now,
            last_seen_at=now,
        )
        out.append((entry, StoredVector("e5", rng.standard_normal(384).astype(np.float32), "h")))
    return out


def _median(fn: object, runs: int = 3) -> float:
    times = []
    for _ in range(runs):
        began = time.perf_counter()
        fn()  # type: ignore[operator]
        times.append(time.perf_counter() - began)
    return statistics.median(times)


def bench(n: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        table = MemoryTable(root / "lancedb")
        rows = _rows(n)
        for start in range(0, n, 20_000):
            table.upsert(rows[start : start + 20_000])
        path = root / "snap.gz"
        entries = table.entries()  # a checkpoint encodes its process's view: no read
        take = _median(lambda: snapshot.write(path, n, entries))
        read = _median(lambda: snapshot.read(path))
        files = lancefiles.data_files(root / "lancedb")
        check = _median(lambda: [lancefiles.crc(f) for f in files])
        lance = sum(f.stat().st_size for f in files)
        size = path.stat().st_size
        sys.stdout.write(
            f"N={n}: snapshot {size / 1e6:.2f} MB ({size / n:.0f} B/memory; LanceDB data "
            f"{lance / 1e6:.1f} MB), write snapshot {take * 1000:.0f} ms, "
            f"read snapshot {read * 1000:.0f} ms, CRC check of data files {check * 1000:.0f} ms\n"
        )


if __name__ == "__main__":
    for arg in sys.argv[1:] or ["10000"]:
        bench(int(arg))
