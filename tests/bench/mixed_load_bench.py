"""Two `dreamwell serve` stdio processes and a dreaming third on one data directory under a
mixed load, then the exact account of tests/test_multiprocess.py's sidecar test, at any size
and with any embedder (not collected by pytest).

Run: python tests/bench/mixed_load_bench.py [--ops 10000] [--embedder none|e5|minilm]
     [--depth 8] [--aged 400] [--seed 12] [--dream-every 400]"""

from __future__ import annotations

import argparse
import os
import random
import sys
import tempfile
import time
from pathlib import Path

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.support import mixed_load


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ops", type=int, default=10_000)
    parser.add_argument("--embedder", default="none", choices=["none", "e5", "minilm"])
    parser.add_argument("--depth", type=int, default=8, help="operations in flight per server")
    parser.add_argument("--aged", type=int, default=400, help="seeds the dream decays")
    parser.add_argument("--seed", type=int, default=12)
    parser.add_argument("--dream-every", type=int, default=400, help="ops between dream cycles")
    args = parser.parse_args()
    out = sys.stdout
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "data"
        rng = random.Random(args.seed)
        seeds = mixed_load.seed(data, rng, aged=args.aged, pairs=50, harmful=200)
        load = mixed_load.Load(
            rng,
            seeds,
            total=args.ops,
            restart_at=rng.randrange(args.ops * 3 // 10, args.ops * 7 // 10),
            exact_search=args.embedder == "none",
            dream_every=args.dream_every,
        )
        anyio.run(mixed_load.run_load, data, load, args.depth, args.embedder)
        started = time.perf_counter()
        facts = mixed_load.check(data, load)
        checked = time.perf_counter() - started
    seconds = load.finished - load.started
    out.write(f"mixed load: {args.ops} ops, embedder={args.embedder}, depth={args.depth}\n")
    out.write(
        f"traffic: {seconds:.1f} s ({args.ops / seconds:.0f} ops/s); check: {checked:.1f} s\n"
    )
    for name, count in sorted({**load.counts, **facts}.items()):
        out.write(f"  {name}: {count}\n")
    out.write(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())}\n")


if __name__ == "__main__":
    main()
