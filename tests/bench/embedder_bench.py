"""Benchmark the offline embedders (OnnxE5 default, OnnxMiniLM; int8 ONNX). Not collected by pytest.

    python tests/bench/embedder_bench.py [--model e5|minilm] [--threads 2] [--sentences 1000]
        [--queries 200]

Prints: cold start (process start -> first embedding, in a fresh subprocess), model load
time, embeddings/s for N sentences in batches of 32, single-query latency percentiles, peak
RSS, and the installed size of onnxruntime + tokenizers + numpy with everything they pull in.
Each measurement that needs a cold process runs in its own subprocess.  The embedder module is
loaded straight from stores/index/embedders.py, so the numbers are the embedder's own and do not
include importing the rest of dreamwell.stores (LanceDB, pyarrow, ...).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import random
import resource
import statistics
import subprocess
import sys
import time
from importlib import metadata
from pathlib import Path
from types import ModuleType
from typing import Any

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

EMBEDDING_PY = Path(__file__).resolve().parents[2] / "stores" / "embedding.py"
RUNTIME_PACKAGES = ["onnxruntime", "tokenizers", "numpy"]


def say(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def load_module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("embedding_under_bench", EMBEDDING_PY)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def sentences(n: int, seed: int = 0) -> list[str]:
    """Deterministic agent-memory-like sentences of 4 to ~40 words."""
    rng = random.Random(seed)
    who = ["The user", "Alice", "My manager", "The client", "Our team", "Bob's sister"]
    verbs = ["prefers", "mentioned", "asked about", "is working on", "decided against", "likes"]
    things = [
        "dark mode in every editor",
        "the quarterly budget review on Friday",
        "migrating the billing service from Python 3.9 to 3.12",
        "vegetarian food, especially Thai curries",
        "a trip to Lisbon in early June",
        "weekly one-on-ones instead of daily stand-ups",
        "the flaky integration test in the payments repository",
        "tabs over spaces",
    ]
    tails = ["", " because it is faster", " and wants a reminder next week", " — urgent"]
    out = []
    for _ in range(n):
        parts = [f"{rng.choice(who)} {rng.choice(verbs)} {rng.choice(things)}{rng.choice(tails)}."]
        while rng.random() < 0.35:
            parts.append(
                f"Also, {rng.choice(who).lower()} {rng.choice(verbs)} {rng.choice(things)}."
            )
        out.append(" ".join(parts))
    return out


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


MODELS = {"e5": ("OnnxE5", "E5_DIR"), "minilm": ("OnnxMiniLM", "MODEL_DIR")}


def child(model: str, mode: str, threads: int, n_sentences: int, n_queries: int) -> dict[str, Any]:
    t0 = time.perf_counter()
    module = load_module()
    cls, folder = MODELS[model]
    embedder = getattr(module, cls)(threads=threads)
    t_import = time.perf_counter()
    if mode == "cold":
        embedder.embed(["first query after start"])
        return {"wall_done": time.time(), "import_s": t_import - t0, "rss_mb": peak_rss_mb()}
    embedder.warm()
    t_load = time.perf_counter()
    result: dict[str, Any] = {"load_s": t_load - t_import, "rss_after_load_mb": peak_rss_mb()}
    texts = sentences(n_sentences)
    embedder.embed(texts[:32])  # warm-up run
    rates = []
    for _ in range(3):  # best and median of 3: other work on the machine only slows runs down
        t = time.perf_counter()
        embedder.embed(texts)
        rates.append(n_sentences / (time.perf_counter() - t))
    result["per_s"] = max(rates)
    result["per_s_median"] = statistics.median(rates)
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(getattr(module, folder) / "tokenizer.json"))
    tokenizer.no_padding()
    result["mean_tokens"] = statistics.mean(len(e.ids) for e in tokenizer.encode_batch(texts))
    latencies = []
    for query in sentences(n_queries, seed=1):
        t = time.perf_counter()
        embedder.embed_query(query)
        latencies.append((time.perf_counter() - t) * 1000)
    latencies.sort()
    result["p50_ms"] = statistics.median(latencies)
    result["p90_ms"] = latencies[int(0.9 * (len(latencies) - 1))]
    result["peak_rss_mb"] = peak_rss_mb()
    return result


def run_child(mode: str, args: argparse.Namespace) -> dict[str, Any]:
    cmd = [sys.executable, __file__, "--child", mode, "--threads", str(args.threads)]
    cmd += ["--model", args.model]
    cmd += ["--sentences", str(args.sentences), "--queries", str(args.queries)]
    started = time.time()
    done = subprocess.run(cmd, capture_output=True, text=True, check=True, timeout=600)
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    if "wall_done" in result:
        result["cold_start_s"] = result["wall_done"] - started
    return result


def dist_size(dist: metadata.Distribution) -> int:
    total = 0
    for f in dist.files or []:
        path = Path(str(dist.locate_file(f)))
        if path.is_file():
            total += path.stat().st_size
    return total


def closure(roots: list[str]) -> dict[str, metadata.Distribution]:
    """Installed distributions that the roots need, transitively (extras not included)."""
    found: dict[str, metadata.Distribution] = {}
    todo = list(roots)
    while todo:
        name = canonicalize_name(todo.pop())
        if name in found:
            continue
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            continue
        found[name] = dist
        for spec in dist.requires or []:
            req = Requirement(spec)
            if req.marker is None or req.marker.evaluate({"extra": ""}):
                todo.append(req.name)
    return found


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", choices=sorted(MODELS), default="e5")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--sentences", type=int, default=1000)
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--child", choices=["cold", "warm"], help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        say(json.dumps(child(args.model, args.child, args.threads, args.sentences, args.queries)))
        return

    colds = [run_child("cold", args) for _ in range(3)]
    cold = min(colds, key=lambda r: float(r["cold_start_s"]))
    warm = run_child("warm", args)
    say(f"embedder: {args.model} from {EMBEDDING_PY} ({args.threads} threads, batches of 32)")
    say(
        f"cold start (process start -> first embedding, best of 3): {cold['cold_start_s']:.3f} s"
        f"  [module import {cold['import_s'] * 1000:.0f} ms, peak RSS {cold['rss_mb']:.0f} MB]"
    )
    say(f"model load (warm()): {warm['load_s'] * 1000:.0f} ms")
    say(
        f"throughput: {warm['per_s']:.0f} embeddings/s best of 3, "
        f"{warm['per_s_median']:.0f} median ({args.sentences} sentences, "
        f"{warm['mean_tokens']:.1f} tokens on average)"
    )
    say(f"single query latency: p50 {warm['p50_ms']:.2f} ms, p90 {warm['p90_ms']:.2f} ms")
    say(
        f"RSS: {warm['rss_after_load_mb']:.0f} MB after load, "
        f"{warm['peak_rss_mb']:.0f} MB peak after the runs"
    )
    dists = closure(RUNTIME_PACKAGES)
    sizes = sorted(((dist_size(d), n, d.version) for n, d in dists.items()), reverse=True)
    total = sum(s for s, _, _ in sizes)
    say(f"install size of {' + '.join(RUNTIME_PACKAGES)} with their dependencies:")
    for size, name, version in sizes:
        say(f"  {size / 2**20:8.1f} MiB  {name} {version}")
    say(f"  {total / 2**20:8.1f} MiB  total ({len(sizes)} distributions)")


if __name__ == "__main__":
    main()
