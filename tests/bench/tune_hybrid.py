"""Tune hybrid recall on the LoCoMo dev split (conversations 0-4), in process.

Not collected by pytest. A replica of the server's search built from dreamwell's own pieces
(TextIndex and its analyser, the shipped embedders, rank_hits, the reranker) with exact
numpy cosine; no LongTermStore internals. For each conversation every turn is one memory
(exactly what ../shared/bench/memory_bench.py saves over MCP); each question of categories
1-4 gets its BM25 and cosine candidates once and the variants are scored offline:

- today: BM25 keeping stop-words + MiniLM, min-max 0.6/0.4, min_similarity 0.2
- BM25 with query stop-words dropped (+ MiniLM, + e5-small-v2)
- contextual: each memory also gets the vector of (previous memory of the same session +
  itself) and a second BM25 field with the previous memory's text at a lower boost
- the cross-encoder reranker over the top --rerank-depth of the best contextual variant

Prints R@1/5/10, MRR (first evidence within the top 20) and per-category R@10 (multi-hop,
temporal, open-domain, single-hop). Vectors are cached in --cache between runs.
--unrelated-context gives each memory an unrelated one as context (the cost of bad gating).
Run: python tests/bench/tune_hybrid.py [--conversations 0-4] [--no-rerank] [--grid]
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import itertools
import json
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from dreamwell.stores import CrossEncoderReranker, Embedder, OnnxE5, OnnxMiniLM, rank_hits
from dreamwell.stores.text_index import IndexDoc, TextIndex, _prepare

Hits = list[tuple[str, float]]
CATEGORIES = {1: "mh", 2: "temp", 3: "open", 4: "single"}


def find_shared() -> Path:
    for parent in Path(__file__).resolve().parents:
        if (parent / "shared" / "bench" / "memory_bench.py").exists():
            return parent / "shared"
    raise SystemExit("cannot find shared/bench/memory_bench.py above this script")


def load_bench(shared: Path) -> Any:
    spec = importlib.util.spec_from_file_location("memory_bench", shared / "bench/memory_bench.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules["memory_bench"] = module
    spec.loader.exec_module(module)
    return module


class KeepStopwords(TextIndex):
    """The analyser as it was before query stop-words were dropped (for 'today')."""

    def terms(self, text: str) -> list[str]:
        return self._distinct(self._analyzer, _prepare(text))


@dataclass
class Question:
    category: int
    evidence: set[str]
    bm25_all: Hits  # stop-words kept
    bm25: Hits  # stop-words dropped
    bm25_ctx: Hits  # the contextual field (previous memory's text)
    bm25_around: Hits = field(default_factory=list)  # previous and next memories' text
    cos: dict[str, Hits] = field(default_factory=dict)  # per embedder / contextual
    rerank: dict[str, float] = field(default_factory=dict)
    text: str = ""
    contents: dict[str, str] = field(default_factory=dict)  # dia ids repeat across conversations


def index(cls: type[TextIndex], docs: Sequence[IndexDoc]) -> TextIndex:
    idx = cls(None)
    with idx.writing() as writer:
        for doc in docs:
            writer.upsert(doc)
    return idx


def vectors(cache: Path, tag: str, model: Embedder, texts: list[str]) -> np.ndarray:
    digest = hashlib.sha256("\0".join([model.name, *texts]).encode()).hexdigest()[:16]
    path = cache / f"{tag}-{model.name}-{digest}.npy"
    if path.exists():
        return np.load(path)
    started = time.perf_counter()
    matrix = np.asarray(model.embed(texts), dtype=np.float32)
    sys.stderr.write(
        f"  {model.name} {tag}: {len(texts)} in {time.perf_counter() - started:.0f}s\n"
    )
    cache.mkdir(parents=True, exist_ok=True)
    np.save(path, matrix)
    return matrix


def top(matrix: np.ndarray, ids: list[str], query: list[float], depth: int) -> Hits:
    sims = matrix @ np.asarray(query, dtype=np.float32)
    order = np.argsort(-sims)[:depth]
    return [(ids[i], float(sims[i])) for i in order]


def conversation(sample: dict[str, Any], bench: Any, args: argparse.Namespace) -> list[Question]:
    turns, qas, _ = bench.locomo_conversation(sample, False)
    ids = [t.dia_id for t in turns]
    prev_id = {  # the turn before, in the same conversation session
        b.dia_id: a.dia_id for a, b in itertools.pairwise(turns) if a.category == b.category
    }
    text_of = {t.dia_id: t.content for t in turns}
    prev = {i: text_of[p] for i, p in prev_id.items()}
    if args.unrelated_context:  # what context costs when the gate lets a wrong one through
        prev = {i: unrelated(turns, i) for i in prev}
    ctx_tag = "ctx-unrelated" if args.unrelated_context else "ctx"
    docs = [IndexDoc(t.dia_id, t.content, t.category, tuple(t.tags)) for t in turns]
    main, keep = index(TextIndex, docs), index(KeepStopwords, docs)
    ctx = index(TextIndex, [IndexDoc(i, text, None, ()) for i, text in prev.items()])
    minilm, e5 = args.models
    contents = [t.content for t in turns]
    by_id = dict(zip(ids, contents, strict=True))
    joined = [f"{prev[i]}\n{c}" if i in prev else c for i, c in zip(ids, contents, strict=True)]
    mats = {
        "minilm": vectors(args.cache, "plain", minilm, contents),
        "e5": vectors(args.cache, "plain", e5, contents),
        "e5-ctx": vectors(args.cache, ctx_tag, e5, joined),
        "minilm-ctx": vectors(args.cache, ctx_tag, minilm, joined),
    }
    # the cheap alternative: the mean of this memory's vector and the previous one's (no
    # second embedding, no second stored vector)
    row = {i: n for n, i in enumerate(ids)}
    plain = mats["e5"]
    mean = plain.copy()
    for i, n in row.items():
        if i in prev:
            mean[n] = plain[n] + plain[row[prev_id[i]]]
    mats["e5-mean"] = mean / np.linalg.norm(mean, axis=1, keepdims=True)
    next_id = {a: b for b, a in prev_id.items()}
    window, half = plain.copy(), plain.copy()
    for i, n in row.items():
        if i in prev_id:
            window[n] += plain[row[prev_id[i]]]
            half[n] += 0.5 * plain[row[prev_id[i]]]
        if i in next_id:
            window[n] += plain[row[next_id[i]]]
    mats["e5-window"] = window / np.linalg.norm(window, axis=1, keepdims=True)
    mats["e5-half"] = half / np.linalg.norm(half, axis=1, keepdims=True)
    around = {
        i: " ".join(by_id[j] for j in (prev_id.get(i), next_id.get(i)) if j is not None)
        for i in ids
    }
    ctx2 = index(TextIndex, [IndexDoc(i, text, None, ()) for i, text in around.items() if text])
    out = []
    for qa in qas:
        if qa["category"] not in CATEGORIES:
            continue
        text, depth = qa["question"], args.depth
        q = Question(
            qa["category"],
            set(qa["evidence"]),
            keep.search(text, depth),
            main.search(text, depth),
            ctx.search(text, depth),
            text=text,
            contents=by_id,
        )
        started = time.perf_counter()
        qv = e5.embed_query(text)
        args.costs["e5 query"].append(time.perf_counter() - started)
        mv = minilm.embed_query(text)
        q.cos = {
            "minilm": top(mats["minilm"], ids, mv, depth),
            "minilm-ctx": top(mats["minilm-ctx"], ids, mv, depth),
            "e5": top(mats["e5"], ids, qv, depth),
            "e5-ctx": top(mats["e5-ctx"], ids, qv, depth),
            "e5-mean-ctx": top(mats["e5-mean"], ids, qv, depth),
            "e5-window-ctx": top(mats["e5-window"], ids, qv, depth),
            "e5-half-ctx": top(mats["e5-half"], ids, qv, depth),
        }
        q.bm25_around = ctx2.search(text, depth)
        out.append(q)
    return out


def unrelated(turns: Sequence[Any], dia_id: str) -> str:
    """A memory from another session of the conversation, picked deterministically."""
    (session,) = {t.category for t in turns if t.dia_id == dia_id}
    others = [t.content for t in turns if t.category != session]
    return str(others[int(hashlib.sha256(dia_id.encode()).hexdigest(), 16) % len(others)])


def with_context(bm25: Hits, ctx: Hits, boost: float) -> Hits:
    """One query over both fields: Tantivy sums the clause scores, the context one boosted."""
    score = dict(bm25)
    for i, s in ctx:
        score[i] = score.get(i, 0.0) + boost * s
    return sorted(score.items(), key=lambda kv: -kv[1])


Ranker = Callable[[Question], list[str]]


def hybrid(
    emb: str,
    wk: float,
    m: float,
    *,
    ctx: float = 0.0,
    boost: float = 0.0,
    how: str = "ctx",
    around: bool = False,
) -> Ranker:
    def rank(q: Question) -> list[str]:
        field = q.bm25_around if around else q.bm25_ctx
        bm25 = with_context(q.bm25, field, boost) if boost else q.bm25
        contextual = q.cos[f"{emb}-{how}"] if ctx else []
        ranked = rank_hits(bm25, q.cos[emb], {}, m, wk, contextual=contextual, context_weight=ctx)
        return [i for i, _ in ranked]

    return rank


def today(q: Question) -> list[str]:
    return [i for i, _ in rank_hits(q.bm25_all, q.cos["minilm"], {}, 0.2, 0.6)]


def score(questions: list[Question], rank: Ranker) -> dict[str, float]:
    r = {1: 0.0, 5: 0.0, 10: 0.0}
    rr = 0.0
    per: dict[int, list[float]] = {c: [] for c in CATEGORIES}
    for q in questions:
        ranked = rank(q)[:20]
        for k in r:
            r[k] += len(q.evidence & set(ranked[:k])) / len(q.evidence)
        per[q.category].append(len(q.evidence & set(ranked[:10])) / len(q.evidence))
        rr += next((1 / (n + 1) for n, i in enumerate(ranked) if i in q.evidence), 0.0)
    n = len(questions)
    out = {f"R@{k}": v / n for k, v in r.items()} | {"MRR": rr / n}
    return out | {CATEGORIES[c]: statistics.fmean(v) for c, v in per.items() if v}


def reranked(base: Ranker, depth: int) -> Ranker:
    def rank(q: Question) -> list[str]:
        ranked = base(q)
        head = sorted(ranked[:depth], key=lambda i: -q.rerank[i])
        return head + ranked[depth:]

    return rank


def key(q: Question, dia_id: str) -> str:
    return f"{q.text}\0{q.contents[dia_id]}"


def rerank_scores(questions: list[Question], base: Ranker, args: argparse.Namespace) -> None:
    path = args.cache / "rerank-v2.json"
    cached: dict[str, float] = json.loads(path.read_text()) if path.exists() else {}
    model = CrossEncoderReranker()
    for q in questions:
        ids = base(q)[: args.rerank_depth]
        missing = [i for i in ids if key(q, i) not in cached]
        if missing:
            started = time.perf_counter()
            got = model.score(q.text, [q.contents[i] for i in missing])
            args.costs["rerank"].append(time.perf_counter() - started)
            cached.update({key(q, i): s for i, s in zip(missing, got, strict=True)})
        q.rerank = {i: cached[key(q, i)] for i in ids}
    path.write_text(json.dumps(cached))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--conversations", default="0-4")
    parser.add_argument("--depth", type=int, default=100, help="candidates from each search")
    parser.add_argument("--rerank-depth", type=int, default=20)
    parser.add_argument("--no-rerank", action="store_true")
    parser.add_argument("--cache", type=Path, default=Path("/tmp/dreamwell-tune-cache"))
    parser.add_argument("--grid", action="store_true", help="print every weight combination")
    parser.add_argument(
        "--unrelated-context",
        action="store_true",
        help="give each memory the text of an unrelated one as context (the cost of bad gating)",
    )
    args = parser.parse_args()
    shared = find_shared()
    bench = load_bench(shared)
    data = json.loads((shared / "data/locomo-dev.json").read_text())
    lo, _, hi = args.conversations.partition("-")
    args.models = (OnnxMiniLM(), OnnxE5())
    args.costs = {"e5 query": [], "rerank": []}
    questions: list[Question] = []
    for sample in data[int(lo) : int(hi or lo) + 1]:
        sys.stderr.write(f"{sample['sample_id']}\n")
        questions += conversation(sample, bench, args)

    variants: dict[str, Ranker] = {
        "today: BM25 + MiniLM 0.6/0.4 min .2": today,
        "BM25 only (stop-words kept)": lambda q: [i for i, _ in q.bm25_all],
        "BM25 only (stop-words dropped)": lambda q: [i for i, _ in q.bm25],
        "e5 only": lambda q: [i for i, _ in q.cos["e5"]],
        "BM25-sw + MiniLM 0.6/0.4 min .2": hybrid("minilm", 0.6, 0.2),
        "ctx MiniLM .4/.3/.3 boost .5 min .2": hybrid("minilm", 0.4, 0.2, ctx=0.3, boost=0.5),
    }
    grid: dict[str, Ranker] = {}
    for wk, m in itertools.product((0.3, 0.4, 0.5, 0.6), (0.0, 0.7, 0.75, 0.8)):
        grid[f"e5 + BM25-sw {wk:.2f}/{1 - wk:.2f} min {m}"] = hybrid("e5", wk, m)
    for wk, wc, boost, m in itertools.product(
        (0.3, 0.4, 0.5), (0.2, 0.3, 0.4), (0.0, 0.3, 0.5), (0.0, 0.75)
    ):
        if wk + wc < 1:
            name = f"e5 ctx {wk:.1f}/{1 - wk - wc:.1f}/{wc:.1f} boost {boost} min {m}"
            grid[name] = hybrid("e5", wk, m, ctx=wc, boost=boost)
    for how, around, wk, wc, boost in itertools.product(
        ("mean-ctx", "window-ctx", "half-ctx", "ctx"),
        (False, True),
        (0.3, 0.4, 0.5),
        (0.2, 0.3, 0.4),
        (0.3, 0.5),
    ):
        if wk + wc < 1 and (how != "ctx" or around):
            field = "around" if around else "prev"
            name = f"e5 {how} {field} {wk:.1f}/{1 - wk - wc:.1f}/{wc:.1f} boost {boost}"
            grid[name] = hybrid("e5", wk, 0.75, ctx=wc, boost=boost, how=how, around=around)
    results = {name: score(questions, rank) for name, rank in {**variants, **grid}.items()}
    best_plain = max((n for n in grid if " ctx " not in n), key=lambda n: results[n]["R@5"])
    best_ctx = max((n for n in grid if " ctx " in n), key=lambda n: results[n]["R@5"])
    best = [
        max((n for n in grid if f" {how} " in n), key=lambda n: results[n]["R@5"])
        for how in ("mean-ctx", "window-ctx", "half-ctx")
    ]
    shown = [*variants, best_plain, best_ctx, *best]
    if not args.no_rerank:
        rerank_scores(questions, grid[best_ctx], args)
        name = f"{best_ctx} + rerank top {args.rerank_depth}"
        results[name] = score(questions, reranked(grid[best_ctx], args.rerank_depth))
        shown.append(name)
    if args.grid:
        shown += sorted(grid, key=lambda n: -results[n]["R@5"])
    header = f"{'variant':52s} R@1   R@5   R@10  MRR   " + " ".join(
        f"{c:6s}" for c in CATEGORIES.values()
    )
    sys.stdout.write(header + "  (per-category R@10)\n")
    for name in dict.fromkeys(shown):
        r = results[name]
        cells = [r["R@1"], r["R@5"], r["R@10"], r["MRR"], *(r[c] for c in CATEGORIES.values())]
        sys.stdout.write(f"{name:52s} " + " ".join(f"{x:.3f}" for x in cells) + "\n")
    for what, secs in args.costs.items():
        if secs:
            sys.stdout.write(f"{what}: p50 {1000 * statistics.median(secs):.1f} ms\n")
    sys.stdout.write(f"{len(questions)} questions (categories 1-4)\n")


if __name__ == "__main__":
    main()
