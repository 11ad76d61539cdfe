"""What one dream cycle costs without an LLM on N memories (not collected by pytest).

Builds N memories (BM25 only, so the build is quick), a tenth of them old enough to decay and
a hundredth exact duplicates, then times `run_cycle` pass by pass.
Run: python tests/bench/dream_cycle_bench.py [--n 10000]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path

from dreamwell.dream import DreamOptions, run_cycle
from dreamwell.stores import LongTermStore, MemoryEntry, new_id, utcnow


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=10_000)
    args = parser.parse_args()
    now = utcnow()
    with tempfile.TemporaryDirectory() as tmp:
        store = LongTermStore(Path(tmp))
        entries = []
        for i in range(args.n):
            seen = now - timedelta(days=60 if i % 10 == 0 else 1)
            if i % 100 == 1:  # the same text and category as the entry before
                prev = entries[-1]
                entries.append(
                    MemoryEntry(new_id(), prev.content.upper(), prev.category, (), seen, seen, seen)
                )
                continue
            text = f"fact {i} about project {i % 50}"
            entries.append(MemoryEntry(new_id(), text, f"bench/{i % 20}", (), seen, seen, seen))
        for start in range(0, len(entries), 2000):
            store.apply(entries[start : start + 2000])
        started = time.perf_counter()
        report = run_cycle(store, None, options=DreamOptions(quiet_seconds=0))
        total = time.perf_counter() - started
        sys.stdout.write(f"dream cycle on {args.n} memories without an LLM: {total:.2f} s\n")
        for p in report.passes:
            sys.stdout.write(f"  {p.name}: {p.status}, {len(p.changes)} change(s)\n")


if __name__ == "__main__":
    main()
