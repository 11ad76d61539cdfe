"""The relevance rule and the injection at 100,000 memories (issue 54). Not collected by
pytest; in process, on a real store (Tantivy, the log, the rows) in a temporary directory.

The store: LoCoMo dev conversation 0's turns saved one a memory, as
tests/bench/injection_bench.py saves them, among filler memories up to `--n`. Vectors are real
e5 vectors, but not computed here (e5 takes about 10 ms a text on this machine: hours for
100,000): the filler is made much as tests/bench/million_data.py makes a million memories, two real
LoCoMo texts of the other conversations joined, its vector between their cached e5 passage
vectors with the spread of one (`pairs`); a turn of conversation 0 gets its own cached e5
vector. Text the cache does not hold (the queries, the relevance rule's reference sentences)
is embedded by e5 as the store asks. Texts naming conversation 0's speakers are left out of the
filler, so its questions are answered by its turns alone.

Printed, with the load average: for conversation 0's questions (categories 1-4) the recall
(R@5, R@8) of `search_memory`'s top 8 and of what `stores/hooks/inject.py`'s `recalled`
injects through the same store (the resident's `StoreRanker`), the memories and characters
injected (as `shown` cuts them); and how many memories the everyday coding prompts
(tests/support/everyday.py) and gibberish inject: goal 2 asks median 0, at most 1.

Run: python tests/bench/relevance_scale_bench.py [--n 100000]   (the first run caches e5
vectors of the LoCoMo texts in $BENCH_TMP/dreamwell-bench, a few minutes)
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from injection_bench import SHARED, load_bench, saved_turns
from million_data import embedded

from dreamwell.server.recall_text import memory_line
from dreamwell.stores import LongTermStore, OnnxE5, new_id
from dreamwell.stores.hooks import StoreRanker, recalled, shown
from dreamwell.stores.model import FOLLOWS, MemoryEntry, utcnow

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.support.everyday import CODING_PROMPTS, GIBBERISH

CACHE = Path(os.environ.get("BENCH_TMP", "/tmp")) / "dreamwell-bench" / "e5_locomo.npz"
STREAM = 10  # filler memories per stream: each follows the one before it


def say(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


class Cached:
    """e5 by name: a text the cache holds gets its cached vector, any other (a query, a
    reference sentence) is embedded by e5."""

    name = OnnxE5.name

    def __init__(self, vectors: dict[str, list[float]]) -> None:
        self.e5 = OnnxE5()
        self.vectors = vectors
        self.dim = self.e5.dim

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        missing = [t for t in texts if t not in self.vectors]
        found = dict(zip(missing, self.e5.embed(missing), strict=True)) if missing else {}
        return [self.vectors.get(t) or found[t] for t in texts]

    def embed_query(self, text: str) -> list[float]:
        return self.e5.embed_query(text)


def pairs(
    n: int, texts: list[str], vectors: Any, seed: int = 0, single: bool = False
) -> tuple[list[str], Any]:
    """`n` memories, each two real texts joined, its vector between theirs with the spread
    of one real vector: e5's vectors share a large common part (any two texts' cosine is
    about 0.75), so the plain normalised sum of two (million_data.py's `memories`) lies
    closer to every query than a real memory does, and everyday prompts found such pairs
    relevant by meaning. Here the common part (the texts' mean) is kept once and the two
    texts' own parts are averaged at the length of one (divided by √2). `single`: one text
    each (reused), its own vector plus the same noise."""
    rng = np.random.default_rng(seed)
    centre = vectors.mean(axis=0)
    a = rng.integers(0, len(texts), n)
    b = (a + rng.integers(1, len(texts), n)) % len(texts)
    if single:
        b = a
    mixed = centre + (vectors[a] - centre + vectors[b] - centre) / (2.0 if single else np.sqrt(2.0))
    mixed += 0.005 * rng.standard_normal(mixed.shape)
    mixed /= np.linalg.norm(mixed, axis=1, keepdims=True)
    contents = [
        f"{texts[i]} (m{k})" if single else f"{texts[i]} {texts[j]} (m{k})"
        for k, (i, j) in enumerate(zip(a, b, strict=True))
    ]
    return contents, mixed.astype(np.float32)


def build(
    root: Path, n: int, turns: list[Any], speakers: set[str], single: bool = False
) -> tuple[LongTermStore, dict[str, str]]:
    texts, passages, _, _ = embedded(CACHE)
    own = {t.content for t in turns}
    pool = [k for k, t in enumerate(texts) if t not in own and not any(s in t for s in speakers)]
    contents, vectors = pairs(
        n - len(turns), [texts[k] for k in pool], passages[pool], single=single
    )
    known = {t: passages[k].tolist() for k, t in enumerate(texts) if t in own}
    known.update((c, v.tolist()) for c, v in zip(contents, vectors, strict=True))
    store = LongTermStore(root, embedder=Cached(known), min_similarity=0.7, keyword_weight=0.4)
    now, ids = utcnow(), [new_id() for _ in contents]
    for start in range(0, len(contents), 5000):
        store.apply(
            [
                MemoryEntry(
                    ids[i],
                    contents[i],
                    f"bench/{(i // STREAM) % 20}",
                    (),
                    now,
                    now,
                    now,
                    metadata={FOLLOWS: ids[i - 1]} if i % STREAM else {},
                )
                for i in range(start, min(len(contents), start + 5000))
            ]
        )
        while store.backfill(batch=5000):
            pass
        store.checkpoint()
    return store, saved_turns(store, turns)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--single", action="store_true", help="filler of one text each")
    args = parser.parse_args()
    bench = load_bench()
    data = json.loads((SHARED / "data/locomo-dev.json").read_text())
    turns, qas, _ = bench.locomo_conversation(data[0], False)
    speakers = {t.content.split(":", 1)[0] for t in turns}
    filler = "one text each" if args.single else "two texts each"
    say(
        f"relevance at {args.n:,} memories (filler of {filler}); "
        f"load average {os.getloadavg()[0]:.2f}"
    )
    started = time.monotonic()
    with tempfile.TemporaryDirectory() as tmp:
        store, key = build(Path(tmp) / "store", args.n, turns, speakers, args.single)
        say(
            f"  built in {time.monotonic() - started:.0f} s: {store.count():,} memories; "
            f"load average {os.getloadavg()[0]:.2f}"
        )
        ranker = StoreRanker(store)
        paths = ("search_memory top 8", "injected (recalled)")
        acc = {p: bench.RecallAcc((5, 8)) for p in paths}
        chars: list[int] = []
        counts: list[int] = []
        asked = time.monotonic()
        questions = [qa for qa in qas if qa["category"] != 5]
        for qa in questions:
            top = [h.entry for h in store.search(qa["question"], limit=20)][:8]
            injected = recalled(ranker, qa["question"])
            for label, entries in zip(paths, (top, injected), strict=True):
                acc[label].add([key.get(e.id) for e in entries], qa["evidence"])
            chars.append(
                sum(len(line) + 1 for line in shown(injected, qa["question"], memory_line))
            )
            counts.append(len(injected))
        per = (time.monotonic() - asked) / len(questions) / 2
        for label in paths:
            r = acc[label].report()
            say(f"  {label:20s} n={r['n']}  R@5 {r['recall@5']:.3f}  R@8 {r['recall@8']:.3f}")
        say(
            f"  injected: memories median {statistics.median(counts):.0f}, chars median "
            f"{statistics.median(chars):.0f} (max {max(chars)}); {per * 1000:.0f} ms a search"
        )
        for name, prompts in (
            ("everyday coding prompts", CODING_PROMPTS),
            ("gibberish", GIBBERISH),
        ):
            found = [len(recalled(ranker, p)) for p in prompts]
            say(
                f"  {name} ({len(found)}): memories injected median "
                f"{statistics.median(found):.0f}, max {max(found)}, prompts injecting any "
                f"{sum(1 for k in found if k)}"
            )
    say(f"{time.monotonic() - started:.0f} s; load average {os.getloadavg()[0]:.2f} at the end")


if __name__ == "__main__":
    main()
