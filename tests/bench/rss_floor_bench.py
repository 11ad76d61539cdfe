"""Where a server's resident memory goes (not collected by pytest): the floor every store pays
before its first memory, import by import, and then what an existing store adds.

Each step runs in one fresh interpreter, in the order the server meets them: the interpreter,
numpy, the MCP SDK, dreamwell's server, pyarrow, LanceDB, Tantivy, onnxruntime, the e5
session after one query. With --data-dir it then opens that store (reading only: opening and
searching write nothing), loads its vectors and runs 200 searches. RSS is given as anonymous
and file-backed memory (shared library pages count in RSS although the kernel can drop them),
read from /proc/self/status after a garbage collection and malloc_trim, with glibc's malloc
arenas set as the server sets them.

Run: python tests/bench/rss_floor_bench.py [--data-dir STORE] [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

STEPS = """
import gc, os, sys, json
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
from dreamwell.server.heap import few_malloc_arenas, give_back_freed
few_malloc_arenas()  # as `dreamwell` does first
sys.path.insert(0, sys.argv[1])
from scale_bench import rss_mib
def rss(label):
    gc.collect()
    give_back_freed()
    pid = os.getpid()
    print(json.dumps([label, rss_mib(pid, "RssAnon"), rss_mib(pid, "RssFile")]), flush=True)
rss("interpreter")
import numpy; rss("numpy")
import mcp.server; rss("MCP SDK")
import dreamwell.server.mcp.app; rss("dreamwell server")
import pyarrow; rss("pyarrow")
import lancedb; rss("LanceDB")
import tantivy; rss("Tantivy")
import onnxruntime; rss("onnxruntime")
from dreamwell.stores import LongTermStore, OnnxE5
e5 = OnnxE5(); e5.embed_query("warm up"); rss("e5 session, one query")
if len(sys.argv) > 2:
    from pathlib import Path
    store = LongTermStore(Path(sys.argv[2]), embedder=e5)
    rss(f"store opened ({store.count()} live)")
    store.load_vectors(); rss("vectors loaded")
    for i in range(200):
        store.search(f"what does anyone think of topic {i}")
    rss("200 searches")
"""


def run_once(store: Path | None) -> list[tuple[str, float, float]]:
    bench = str(Path(__file__).resolve().parent)  # where scale_bench (rss_mib) is
    args = [sys.executable, "-c", STEPS, bench, *([str(store)] if store is not None else [])]
    out = subprocess.run(args, capture_output=True, text=True, check=True).stdout
    return [tuple(json.loads(line)) for line in out.splitlines() if line.startswith("[")]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data-dir", type=Path)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    runs = [run_once(args.data_dir) for _ in range(args.repeat)]
    out = sys.stdout.write
    out(f"load average {os.getloadavg()[0]:.2f}; medians of {args.repeat} fresh interpreters\n")
    out(f"{'step':34s} {'anon':>6s} {'file':>6s} {'RSS':>6s} {'+RSS':>6s}  MiB\n")
    before = 0.0
    for k, (label, _, _) in enumerate(runs[0]):
        anon = statistics.median(r[k][1] for r in runs)
        file = statistics.median(r[k][2] for r in runs)
        total = anon + file
        out(f"{label:34s} {anon:6.0f} {file:6.0f} {total:6.0f} {total - before:+6.0f}\n")
        before = total


if __name__ == "__main__":
    main()
