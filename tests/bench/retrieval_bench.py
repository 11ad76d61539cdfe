"""LoCoMo retrieval benchmark of the real server over stdio (not collected by pytest).

Drives `dreamwell serve` with ../shared/bench/memory_bench.py (the official `mcp` client, one
fresh server and data directory per conversation, every turn saved, every question searched
with k = 10) once per mode — hybrid (the default), BM25 only (DREAMWELL_EMBEDDER=none), vector
only (DREAMWELL_KEYWORD_WEIGHT=0), without contextual memories (DREAMWELL_CONTEXTUAL=false) and
with the reranker (DREAMWELL_RERANK=true) — and prints R@1/R@5/R@10/MRR over categories 1-4 (the
issue's target set), per category, and save/search latency.

Run from the repo root:  python tests/bench/retrieval_bench.py [--conversations 0-4]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

SHARED = next(  # ../shared beside the checkout, or beside the worktrees' folder
    (p / "shared" for p in Path(__file__).resolve().parents if (p / "shared/bench").is_dir()),
    Path(__file__).resolve().parents[3] / "shared",
)
MODES = {
    "hybrid": [],
    "bm25-only": ["DREAMWELL_EMBEDDER=none"],
    "vector-only": ["DREAMWELL_KEYWORD_WEIGHT=0"],
    "no-context": ["DREAMWELL_CONTEXTUAL=false"],
    "rerank": ["DREAMWELL_RERANK=true"],
}
CATS = ("1-multi-hop", "2-temporal", "3-open-domain", "4-single-hop")


def run(
    mode: str, env: list[str], conversations: str, out: Path, settle: float = 0.0
) -> dict[str, object]:
    cmd = [
        sys.executable,
        str(SHARED / "bench/memory_bench.py"),
        "--name",
        f"dreamwell-{mode}",
        "--adapter",
        "dreamwell",
        "--server-cmd",
        "dreamwell serve --data-dir {data_dir}",
        "--workload",
        "locomo",
        "--conversations",
        conversations,
        "--out",
        str(out),
        "--quiet-json",
        "--settle",
        str(settle),
    ]
    for item in env:
        cmd += ["--env", item]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    result: dict[str, object] = json.loads(out.read_text())["results"][0]["workloads"][0]
    return result


def categories_1_to_4(result: dict[str, object]) -> dict[str, float]:
    by_cat = result["recall_by_category"]
    assert isinstance(by_cat, dict)
    n = sum(by_cat[c]["n"] for c in CATS if c in by_cat)
    return {
        key: sum(by_cat[c][key] * by_cat[c]["n"] for c in CATS if c in by_cat) / n
        for key in ("recall@1", "recall@5", "recall@10", "mrr")
    } | {"n": n}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--conversations", default="0-4")
    parser.add_argument("--modes", default=",".join(MODES))
    parser.add_argument(
        "--settle",
        type=float,
        default=0.0,
        help="seconds between the saves and the questions (0: at once, racing the backfill; "
        "10: every vector computed, which separates recall from the machine's speed)",
    )
    args = parser.parse_args()
    out = sys.stdout
    out.write(
        "| mode | Q (cat 1-4) | R@1 | R@5 | R@10 | MRR | save p50/p95 ms | "
        "search p50/p95 ms | " + " | ".join(f"R@10 {c}" for c in CATS) + " |\n"
    )
    out.write("|---" * (7 + len(CATS)) + "|\n")
    with tempfile.TemporaryDirectory() as tmp:
        for mode in args.modes.split(","):
            result = run(
                mode, MODES[mode], args.conversations, Path(tmp) / f"{mode}.json", args.settle
            )
            agg = categories_1_to_4(result)
            save, search = result["save_latency"], result["search_latency"]
            assert isinstance(save, dict) and isinstance(search, dict)
            by_cat = result["recall_by_category"]
            assert isinstance(by_cat, dict)
            out.write(
                f"| {mode} | {agg['n']:.0f} | {agg['recall@1']:.3f} | {agg['recall@5']:.3f} | "
                f"{agg['recall@10']:.3f} | {agg['mrr']:.3f} | "
                f"{save['p50_ms']:.1f}/{save['p95_ms']:.1f} | "
                f"{search['p50_ms']:.1f}/{search['p95_ms']:.1f} | "
                + " | ".join(f"{by_cat[c]['recall@10']:.3f}" for c in CATS)
                + " |\n"
            )
            out.flush()


if __name__ == "__main__":
    main()
