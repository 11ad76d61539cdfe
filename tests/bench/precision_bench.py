"""Precision of search: how many hits a query nothing answers gets (issue 44). Not collected
by pytest; in process, on real stores in a temporary directory with the shipped embedder.

- **everyday**: 300 everyday memories (tests/support/everyday.py), then 5 gibberish queries
  and 8 questions about topics never stored: hits returned (limit 20), and for 6 answerable
  questions whether the answer is still among them.
- **LoCoMo dev** (../shared/data/locomo-dev.json read through ../shared/bench/memory_bench.py,
  as that harness saves it: every turn one memory, one caller, its session the category):
  recall@5/@10 of the evidence turns over the questions of categories 1-4 (k = 10), and the
  hits the adversarial questions (category 5) get.

Each is run under every rule of RULES: "today" returns every hit (as before issue 44),
"shipped" is `stores/index/relevance.py`'s default, the others are variants of it.
Run: python tests/bench/precision_bench.py [--embedder e5|minilm|bge|none] [--conversations 0-4]
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from dreamwell.stores import Embedder, LongTermStore, OnnxE5, OnnxMiniLM
from dreamwell.stores.index.relevance import Rule

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.bench.candidate_embedders import OnnxBge
from tests.support.everyday import (
    ANSWERABLE,
    GIBBERISH,
    UNANSWERABLE,
    everyday_memories,
)

SHARED = next(
    (p / "shared" for p in Path(__file__).resolve().parents if (p / "shared/bench").is_dir()),
    Path("../shared"),
)
MIN_SIMILARITY = {"e5": 0.7, "minilm": 0.2, "bge": 0.6}  # server/runtime.py's defaults
KEYWORD_WEIGHT = {"e5": 0.4, "minilm": 0.6, "bge": 0.4}


def say(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def load_bench() -> Any:
    spec = importlib.util.spec_from_file_location("memory_bench", SHARED / "bench/memory_bench.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules["memory_bench"] = module
    spec.loader.exec_module(module)
    return module


class QueryCache:
    """The embedder with each query embedded once (every rule searches the same queries)."""

    def __init__(self, model: Embedder) -> None:
        self.model = model
        self.name = model.name
        self.dim = model.dim
        self.queries: dict[str, list[float]] = {}

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        return self.model.embed(texts)

    def embed_query(self, text: str) -> list[float]:
        if text not in self.queries:
            self.queries[text] = self.model.embed_query(text)
        return self.queries[text]


def open_store(path: Path, name: str, embedder: Embedder | None) -> LongTermStore:
    return LongTermStore(
        path,
        embedder=embedder,
        min_similarity=MIN_SIMILARITY.get(name, 0.0),
        keyword_weight=KEYWORD_WEIGHT.get(name, 1.0),
    )


def settle(store: LongTermStore) -> None:
    while store.backfill(batch=256):
        pass
    store.checkpoint()


INF = float("inf")
RULES: dict[str, Rule | None] = {  # "today": every hit; "shipped": the default Rule()
    "today": None,
    "shipped": Rule(),
    "no ref gap": Rule(reference_gap=-INF, keep_gap=-INF),  # turn 4's rule, issue 54's refs
    "gap 0.5": Rule(reference_gap=0.5),
    "gap 1.0": Rule(reference_gap=1.0),
    "z 2.5": Rule(vector_margin=2.5),
    "keep gap 0.5": Rule(keep_gap=0.5),
    "keep gap 1.0": Rule(keep_gap=1.0),
}


def searched(store: LongTermStore, rule: Rule | None, query: str, limit: int) -> list[Any]:
    searcher = store._searcher  # the same store, under each rule
    searcher.tuning = dataclasses.replace(searcher.tuning, relevance=rule)
    return store.search(query, limit=limit)


def everyday(name: str, embedder: Embedder | None, root: Path) -> None:
    store = open_store(root / "everyday", name, embedder)
    for content, category in everyday_memories():
        store.save(content, category, caller="assistant")
    settle(store)
    say(f"  {'rule':14s} gibberish: hits per query (mean, max)  unanswerable  answered in top 5")
    for label, rule in RULES.items():
        row = []
        for queries in (GIBBERISH, UNANSWERABLE):
            counts = [len(searched(store, rule, q, 20)) for q in queries]
            row.append(f"{statistics.mean(counts):5.2f} {max(counts):2d}")
        found = 0
        for question, phrase in ANSWERABLE:
            hits = searched(store, rule, question, 20)
            found += any(phrase in h.entry.content for h in hits[:5])
        say(f"  {label:14s} {row[0]:>28s}  {row[1]:>12s}  {found}/{len(ANSWERABLE)}")


def locomo(name: str, embedder: Embedder | None, root: Path, conversations: range) -> None:
    bench = load_bench()
    data = json.loads((SHARED / "data/locomo-dev.json").read_text())
    acc = {r: bench.RecallAcc((5, 10)) for r in RULES}
    adversarial: dict[str, list[int]] = {r: [] for r in RULES}
    answered: dict[str, list[int]] = {r: [] for r in RULES}
    for conv in conversations:
        turns, qas, _ = bench.locomo_conversation(data[conv], False)
        store = open_store(root / f"locomo-{conv}", name, embedder)
        key = {}
        for t in turns:
            key[store.save(t.content, t.category, t.tags, caller="bench").entry.id] = t.dia_id
        settle(store)
        for qa in qas:
            for label, rule in RULES.items():
                hits = searched(store, rule, qa["question"], 10)
                if qa["category"] == 5:
                    adversarial[label].append(len(hits))
                else:
                    acc[label].add([key.get(h.entry.id) for h in hits], qa["evidence"])
                    answered[label].append(len(hits))
        sys.stderr.write(f"  conversation {conv}: {len(turns)} turns, {len(qas)} questions\n")
    for label in RULES:
        report = acc[label].report()
        adv = adversarial[label]
        say(
            f"  {label:14s} categories 1-4 (n={report['n']}): "
            f"R@5 {report['recall@5']:.3f}  R@10 {report['recall@10']:.3f}  "
            f"MRR {report['mrr']:.3f}, hits median {statistics.median(answered[label]):.0f};  "
            f"category 5: {statistics.mean(adv) if adv else 0:.2f} hits per question"
        )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--embedder", default="e5", choices=("e5", "minilm", "bge", "none"))
    parser.add_argument("--conversations", default="0-4")
    parser.add_argument("--skip-locomo", action="store_true")
    args = parser.parse_args()
    first, _, last = args.conversations.partition("-")
    conversations = range(int(first), int(last or first) + 1)
    embedder = {"e5": OnnxE5, "minilm": OnnxMiniLM, "bge": OnnxBge}.get(args.embedder)
    model = QueryCache(embedder()) if embedder is not None else None
    say(f"precision, embedder {args.embedder}; load average {os.getloadavg()[0]:.2f} at start")
    started = time.monotonic()
    with tempfile.TemporaryDirectory() as tmp:
        say("everyday memories (300):")
        everyday(args.embedder, model, Path(tmp))
        if not args.skip_locomo:
            say(f"LoCoMo dev, conversations {args.conversations}:")
            locomo(args.embedder, model, Path(tmp), conversations)
    say(f"{time.monotonic() - started:.0f} s; load average {os.getloadavg()[0]:.2f} at the end")


if __name__ == "__main__":
    main()
