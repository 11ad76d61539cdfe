"""Time `dreamwell import` of N memories into an empty data directory (issue 9: 100,000 in
under 2 minutes), then again (idempotent: nothing added), and `dreamwell export` of them.

    python tests/bench/import_bench.py [--count 100000] [--format dreamwell|memory-service]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

WORDS = [
    "alpha",
    "bravo",
    "charlie",
    "delta",
    "echo",
    "foxtrot",
    "golf",
    "hotel",
    "india",
    "juliet",
    "kilo",
    "lima",
    "mike",
]


def make(path: Path, count: int, kind: str) -> None:
    t0 = datetime(2025, 1, 1, tzinfo=timezone.utc)
    with path.open("w", encoding="utf-8") as out:
        for i in range(count):
            words = " ".join(WORDS[(i * k) % len(WORDS)] for k in range(1, 9))
            content = f"Memory {i}: {words} note {i * 7919 % 100_003}"
            when = (t0 + timedelta(seconds=i)).isoformat()
            if kind == "dreamwell":
                record: dict[str, object] = {
                    "id": f"{i:012x}",
                    "content": content,
                    "category": f"bench/c{i % 50}",
                    "tags": [f"t{i % 7}"],
                    "created_at": when,
                    "updated_at": when,
                    "last_seen_at": when,
                    "reinforcement_count": 1,
                    "importance": 0.5,
                    "score": 0.0,
                    "metadata": {},
                }
            else:
                record = {"content": content, "tags": [f"t{i % 7}"], "created_at_iso": when}
            out.write(json.dumps(record) + "\n")


def timed(*args: str) -> float:
    started = time.perf_counter()
    subprocess.run([sys.executable, "-m", "dreamwell.server", *args], check=True)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--count", type=int, default=100_000)
    parser.add_argument("--format", choices=["dreamwell", "memory-service"], default="dreamwell")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        source, data = Path(tmp) / "in.jsonl", Path(tmp) / "data"
        make(source, args.count, args.format)
        first = timed("import", str(source), "--data-dir", str(data))
        again = timed("import", str(source), "--data-dir", str(data))
        export = timed("export", "--data-dir", str(data), "-o", str(Path(tmp) / "out.jsonl"))
        size = sum(p.stat().st_size for p in data.rglob("*") if p.is_file())
        sys.stderr.write(
            f"{args.count} {args.format} memories: import {first:.1f} s, "
            f"again (adds nothing) {again:.1f} s, export {export:.1f} s, "
            f"data directory {size / 2**20:.1f} MiB\n"
        )


if __name__ == "__main__":
    main()
