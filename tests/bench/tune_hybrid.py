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

--levers (first argument or anywhere) runs the follow-up instead: the server's current
contextual scheme ("server": window-sum contextual cosine as in Rows.vector_top, the ctx BM25
field with the neighbours' text at CONTEXT_BOOST, CONTEXT_WEIGHT) and one row per lever, each
with the paired bootstrap 95% CI of its R@5/R@10 gain over "server", R@5/R@10 per conversation
and R@5/R@10 per category. Options: --prefixes (query prefix rows), --unrelated SHARE (that
share of the links points at another session: the cost of bad gating), --costs (each step's
CPU per search at 10,000 memories), --only 'a|b' (rows whose name contains a or b),
--no-joined (leave out the levers that need a second embedding: 3 minutes less the first
time), --candidate NAME (rows with a candidate embedder's vectors in the same scheme, its own
vector cache, and one text's embedding time beside e5's; tests/bench/candidate_embedders.py).
About 1-5 minutes once the vectors are cached.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import hashlib
import importlib.util
import itertools
import json
import math
import os
import re
import statistics
import sys
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from dreamwell.stores import CrossEncoderReranker, Embedder, OnnxE5, OnnxMiniLM, rank_hits
from dreamwell.stores.index import temporal, text_index
from dreamwell.stores.index.hybrid_rank import CONTEXT_WEIGHT
from dreamwell.stores.index.stopwords import ENGLISH_STOPWORDS
from dreamwell.stores.index.text_index import (
    CONTEXT_BOOST,
    IndexDoc,
    TextIndex,
    _distinct,
    _prepare,
)

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.bench.candidate_embedders import DequantisedE5, OnnxBge, dequantised_bge

Hits = list[tuple[str, float]]
# contextual window: weights of the neighbours at distance 1, 2, ... on both sides, or a pair
# (weights backwards, weights forwards)
Window = tuple[float, ...] | tuple[tuple[float, ...], tuple[float, ...]]
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
        return _distinct(self._analyzer, _prepare(text))


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
        return np.asarray(np.load(path))
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
    if "--levers" in sys.argv:
        sys.argv.remove("--levers")
        levers_main()
        return
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


# ---- levers: the server's current scheme and cheap changes to it (--levers) ---------------
#
# "server" is what dreamwell does today with the e5 default: BM25 over the memory's text plus
# a `ctx` field holding the text of the memories saved just before and after it (boost
# CONTEXT_BOOST), query stop-words dropped; cosine; a contextual cosine = (own cosine +
# the cosines of the neighbours up to RADIUS = 2 links each way) / norm of the summed vectors
# (Rows.vector_top); rank_hits with BM25 0.4, contextual CONTEXT_WEIGHT, min_similarity 0.7
# on both cosine lists, 100 candidates. The "when" lever is the server's since issue 54, but
# off in "server" so that its rows show its gain.
# Each lever below changes one thing and is scored against it per question, so the gain gets
# a paired bootstrap interval and per-conversation figures.

SERVER_WK, SERVER_MIN, SERVER_DEPTH = 0.4, 0.7, 100
WORD = re.compile(r"\w+")


@dataclass
class Conv:
    """One conversation saved the way the bench saves it, with what the levers need."""

    name: str
    ids: list[str]
    texts: list[str]
    vec: np.ndarray  # e5 passage vectors (unit rows)
    prev: np.ndarray  # row saved just before by the same caller (same session), -1 for none
    nxt: np.ndarray
    index: TextIndex  # body + ctx (neighbours' text), as the server indexes it
    tf: list[Counter[str]]  # analysed terms of each memory, stop-words dropped
    df: Counter[str]
    surface: dict[str, str]  # stem -> a word that analyses to it (for expansion queries)
    joined: dict[str, np.ndarray] = field(default_factory=dict)  # second-embedding variants
    norms: dict[tuple[str, Window], np.ndarray] = field(default_factory=dict)  # per window
    alt: dict[str, np.ndarray] = field(default_factory=dict)  # --candidate's passage vectors
    chains: dict[tuple[int, int], np.ndarray] = field(default_factory=dict)

    def chain(self, links_: np.ndarray, distance: int) -> np.ndarray:
        """The row `distance` links away along `links_` (prev or nxt), -1 for none (a column
        the server would keep per row)."""
        key = (id(links_), distance)
        if key not in self.chains:
            out = np.arange(len(self.ids))
            for _ in range(distance):
                out = np.where(out >= 0, links_[np.maximum(out, 0)], -1)
            self.chains[key] = out
        return self.chains[key]

    def matrix(self, model: str = "") -> np.ndarray:
        """The passage vectors of e5 ("") or of a --candidate embedder."""
        return self.alt[model] if model else self.vec

    def norm(self, window: Window, model: str = "") -> np.ndarray:
        """Norm of each row's window sum of vectors (kept per row by the server, like
        Rows.ctx_norm: computed at save time, not per search)."""
        if (model, window) not in self.norms:
            vec = self.matrix(model)
            total = vec.copy()
            for links_, d, w in self.around(window):
                far = self.chain(links_, d)
                rows = np.flatnonzero(far >= 0)
                total[rows] += w * vec[far[rows]]
            self.norms[model, window] = np.maximum(np.linalg.norm(total, axis=1), 1e-6)
        return self.norms[model, window]

    def around(self, window: Window) -> list[tuple[np.ndarray, int, float]]:
        """(links, distance, weight) of a window: `window` backwards and forwards, or a pair
        (backwards weights, forwards weights)."""
        if window and isinstance(window[0], tuple):
            back, ahead = window
        else:
            back = ahead = window
        return [
            (links_, d, float(w))
            for links_, weights in ((self.prev, back), (self.nxt, ahead))
            for d, w in enumerate(weights, start=1)
            if w
        ]


@dataclass
class LQ:
    conv: Conv
    number: int  # the conversation's position in the dev split
    category: int
    evidence: set[str]
    text: str
    qv: dict[str, np.ndarray]  # query vectors by prefix variant ("query" is the server's)
    bm25s: dict[tuple[int, float], Hits]  # by (ctx field radius, boost); depth 200

    @property
    def bm25(self) -> Hits:  # the server's: neighbours at distance 1, CONTEXT_BOOST
        return self.bm25s[1, CONTEXT_BOOST]


def links(turns: Sequence[Any]) -> tuple[np.ndarray, np.ndarray]:
    prev = np.full(len(turns), -1, dtype=np.int64)
    nxt = np.full(len(turns), -1, dtype=np.int64)
    for n, (a, b) in enumerate(itertools.pairwise(turns)):
        if a.category == b.category:  # same session: the gate (same category, within 300 s)
            prev[n + 1], nxt[n] = n, n + 1
    return prev, nxt


def unrelated_links(
    turns: Sequence[Any], prev: np.ndarray, nxt: np.ndarray, share: float
) -> tuple[np.ndarray, np.ndarray]:
    """A `share` of the links pointed at a memory of another session (what a gate that lets
    unrelated saves through would give), picked deterministically."""
    rng = np.random.default_rng(int(hashlib.sha256(turns[0].dia_id.encode()).hexdigest(), 16))
    session = np.asarray([hash_session(t.category) for t in turns])
    out = []
    for links_ in (prev, nxt):
        new = links_.copy()
        for n in np.flatnonzero(links_ >= 0):
            if rng.random() >= share:
                continue
            others = np.flatnonzero(session != session[n])
            new[n] = others[rng.integers(len(others))]
        out.append(new)
    return out[0], out[1]


def hash_session(category: str) -> int:
    return int(hashlib.sha256(category.encode()).hexdigest()[:8], 16)


def analysed(index: TextIndex, texts: list[str]) -> tuple[list[Counter[str]], dict[str, str]]:
    stem: dict[str, str | None] = {}
    surface: dict[str, str] = {}
    out = []
    for text in texts:
        counts: Counter[str] = Counter()
        for word in WORD.findall(text.lower()):
            if word not in stem:
                terms = [] if word in ENGLISH_STOPWORDS else index.terms(word)
                stem[word] = terms[0] if len(terms) == 1 else None
                if stem[word] is not None:
                    surface.setdefault(str(stem[word]), word)
            if (s := stem[word]) is not None:
                counts[s] += 1
        out.append(counts)
    return out, surface


def lever_conversation(number: int, sample: dict[str, Any], bench: Any, args: Any) -> list[LQ]:
    turns, qas, _ = bench.locomo_conversation(sample, False)
    ids, texts = [t.dia_id for t in turns], [t.content for t in turns]
    prev, nxt = links(turns)
    if args.unrelated:
        prev, nxt = unrelated_links(turns, prev, nxt, args.unrelated)
    e5 = args.e5
    plain = vectors(args.cache, "plain", e5, texts)
    conv = Conv(
        sample["sample_id"], ids, texts, plain, prev, nxt, TextIndex(None), [], Counter(), {}
    )
    indexes = {radius: field_index(conv, turns, radius) for radius in FIELD_RADII}
    idx = conv.index = indexes[1]
    conv.tf, conv.surface = analysed(idx, texts)
    conv.df = Counter(t for counts in conv.tf for t in counts)
    if not (args.unrelated or args.no_joined):  # second-embedding levers (minutes, once)
        conv.joined = joined_vectors(conv, args)
    for name, model in args.candidates.items():
        conv.alt[name] = vectors(args.cache, "plain", model, texts)
        # both embedders at once: the cosine with this vector is the mean of their cosines
        conv.alt[f"e5+{name}"] = np.hstack([plain, conv.alt[name]]) / math.sqrt(2)
    out = []
    for qa in qas:
        if qa["category"] not in CATEGORIES:
            continue
        text = qa["question"]
        started = time.perf_counter()
        qv = {"query": np.asarray(e5.embed_query(text), dtype=np.float32)}
        args.costs["e5 query"].append(time.perf_counter() - started)
        if args.prefixes:
            qv["passage"] = np.asarray(e5.embed([text])[0], dtype=np.float32)
            qv["none"] = np.asarray(e5._run([text])[0], dtype=np.float32)
        for name, model in args.candidates.items():
            started = time.perf_counter()
            qv[name] = np.asarray(model.embed_query(text), dtype=np.float32)
            args.costs[f"{name} query"].append(time.perf_counter() - started)
            qv[f"{name}-plain"] = np.asarray(model.embed([text])[0], dtype=np.float32)
            qv[f"e5+{name}"] = np.hstack([qv["query"], qv[name]]) / math.sqrt(2)
        started = time.perf_counter()
        bm25s = {(1, CONTEXT_BOOST): idx.search(text, 200)}
        args.costs["bm25"].append(time.perf_counter() - started)
        for radius, boost in itertools.product(FIELD_RADII, FIELD_BOOSTS):
            bm25s[radius, boost] = searched(indexes[radius], text, boost)
        out.append(LQ(conv, number, qa["category"], set(qa["evidence"]), text, qv, bm25s))
    return out


FIELD_RADII, FIELD_BOOSTS = (0, 1, 2, 3), (0.3, 0.5, 0.7, 1.0)


def joined_vectors(conv: Conv, args: Any) -> dict[str, np.ndarray]:
    texts, prev, nxt = conv.texts, conv.prev, conv.nxt
    joined3 = [
        "\n".join(texts[r] for r in (prev[n], n, nxt[n]) if r >= 0) for n in range(len(texts))
    ]
    joined2 = [f"{texts[prev[n]]}\n{c}" if prev[n] >= 0 else c for n, c in enumerate(texts)]
    return {
        "prev+self": vectors(args.cache, "ctx", args.e5, joined2),
        "prev+self+next": vectors(args.cache, "ctx3", args.e5, joined3),
    }


def field_index(conv: Conv, turns: Sequence[Any], radius: int) -> TextIndex:
    """The server's index, with the ctx field holding neighbours up to `radius` links away."""
    around = neighbour_texts(conv, radius)
    return index(
        TextIndex,
        [
            IndexDoc(t.dia_id, t.content, t.category, tuple(t.tags), around[n])
            for n, t in enumerate(turns)
        ],
    )


def neighbour_texts(conv: Conv, radius: int) -> list[str]:
    """Each memory's ctx field: the text of the memories up to `radius` links away."""
    near = [conv.chain(links_, d) for d in range(1, radius + 1) for links_ in (conv.prev, conv.nxt)]
    return ["\n".join(conv.texts[r[n]] for r in near if r[n] >= 0) for n in range(len(conv.ids))]


def searched(idx: TextIndex, text: str, boost: float) -> Hits:
    """TextIndex.search with another context boost (the module constant, read per search)."""
    saved = text_index.CONTEXT_BOOST
    text_index.CONTEXT_BOOST = boost
    try:
        return idx.search(text, 200)
    finally:
        text_index.CONTEXT_BOOST = saved


@dataclass(frozen=True)
class Lever:
    """One variant of the server's scheme (the defaults are the server's)."""

    wk: float = SERVER_WK
    wc: float = CONTEXT_WEIGHT
    min_sim: float = SERVER_MIN
    depth: int = SERVER_DEPTH
    window: Window = (1.0, 1.0)  # weight of neighbours at distance 1, 2, ... in ctx (RADIUS 2)
    field_radius: int = 1  # the BM25 ctx field holds neighbours up to this many links away
    boost: float = CONTEXT_BOOST
    pool: str = "centroid"  # how the window's cosines make the contextual score
    mnz: bool = False  # CombMNZ: fused score x the number of lists that found the memory
    spread: float = 0.0  # diversity: penalty for a memory next to one ranked above it
    dbsf: bool = False  # distribution-based score normalisation instead of min-max
    joined: str = ""  # contextual cosine from a second embedding of the joined text instead
    prefix: str = "query"
    propagate: float = 0.0  # fused score += this x the neighbours' fused scores
    prf_docs: int = 0  # BM25 pseudo-relevance feedback from the top fused hits
    prf_terms: int = 10
    prf_weight: float = 0.3
    rocchio: float = 0.0  # query vector += this x the mean of the top prf_docs' vectors
    rocchio_docs: int = 3
    when: float = 0.0  # a "when" question: a memory that holds a time gains this (temporal)
    model: str = ""  # passage vectors of a --candidate embedder instead of e5 (prefix: its own)


def contextual(
    conv: Conv, sims: np.ndarray, window: Window, pool: str = "centroid", model: str = ""
) -> np.ndarray:
    """Rows.vector_top's contextual cosine: (own cosine + weighted neighbours' cosines) / the
    norm of the same weighted sum of vectors (the cosine with the window's centroid); the
    server's window is (1.0,). `pool` "mean" divides by the weights instead, "max" takes the
    best cosine in the window."""
    summed, weights, best = sims.copy(), np.ones_like(sims), sims.copy()
    for links_, d, w in conv.around(window):
        far = conv.chain(links_, d)
        rows = np.flatnonzero(far >= 0)
        summed[rows] += w * sims[far[rows]]
        weights[rows] += w
        best[rows] = np.maximum(best[rows], sims[far[rows]])
    if pool == "max":
        return best
    return np.asarray(summed / (weights if pool == "mean" else conv.norm(window, model)))


def top_of(conv: Conv, scores: np.ndarray, depth: int) -> Hits:
    order = np.argpartition(-scores, min(depth, len(scores)) - 1)[:depth]
    order = order[np.argsort(-scores[order], kind="stable")]
    return [(conv.ids[i], float(scores[i])) for i in order]


def fuse(q: LQ, lever: Lever, bm25: Hits, qv: np.ndarray) -> list[tuple[str, float]]:
    conv = q.conv
    sims = conv.matrix(lever.model) @ qv
    joined = conv.joined.get(lever.joined)
    ctx = (
        joined @ qv
        if joined is not None
        else contextual(conv, sims, lever.window, lever.pool, lever.model)
    )
    lists = [
        bm25[: lever.depth],
        top_of(conv, sims, lever.depth),
        top_of(conv, ctx, lever.depth) if lever.wc else [],
    ]
    if lever.dbsf:
        return dbsf(lists, lever)
    fused = rank_hits(lists[0], lists[1], {}, lever.min_sim, lever.wk, lists[2], lever.wc)
    if not lever.mnz:
        return fused
    found: Counter[str] = Counter(i for hits in lists for i, s in hits if s >= lever.min_sim)
    found.update(i for i, _ in lists[0] if lists[0][-1][1] < lever.min_sim)  # BM25: no floor
    return sorted(((i, s * found[i]) for i, s in fused), key=lambda kv: (-kv[1], kv[0]))


def dbsf(lists: list[Hits], lever: Lever) -> Hits:
    """rank_hits with distribution-based normalisation (each list's scores mapped from
    mean - 3 sd .. mean + 3 sd onto 0..1) instead of min-max."""
    weights = (lever.wk, 1 - lever.wk - lever.wc, lever.wc)
    out: dict[str, float] = {}
    for n, (hits, weight) in enumerate(zip(lists, weights, strict=True)):
        kept = hits if n == 0 else [(i, s) for i, s in hits if s >= lever.min_sim]
        if not kept:
            continue
        scores = np.asarray([s for _, s in kept])
        lo, spread = scores.mean() - 3 * scores.std(), max(6 * scores.std(), 1e-9)
        for i, s in kept:
            out[i] = out.get(i, 0.0) + weight * (s - lo) / spread
    return sorted(out.items(), key=lambda kv: (-kv[1], kv[0]))


def expansion(q: LQ, fused: list[tuple[str, float]], lever: Lever) -> str:
    """RM3-style: the feedback memories' terms weighted by fused score x tf/len x idf."""
    conv = q.conv
    row = {i: n for n, i in enumerate(conv.ids)}
    asked = set(conv.index.terms(q.text))
    weight: dict[str, float] = {}
    n_docs = len(conv.ids)
    for i, score in fused[: lever.prf_docs]:
        counts = conv.tf[row[i]]
        length = max(sum(counts.values()), 1)
        for term, c in counts.items():
            if term not in asked:
                idf = math.log(n_docs / conv.df[term])
                weight[term] = weight.get(term, 0.0) + score * c / length * idf
    best = sorted(weight, key=lambda t: -weight[t])[: lever.prf_terms]
    return " ".join(conv.surface[t] for t in best)


def lever_rank(q: LQ, lever: Lever) -> list[str]:
    qv = q.qv[lever.prefix]
    base_bm25 = q.bm25s[lever.field_radius, lever.boost]
    fused = fuse(q, lever, base_bm25, qv)
    if lever.rocchio:
        conv, row = q.conv, {i: n for n, i in enumerate(q.conv.ids)}
        fb = [conv.matrix(lever.model)[row[i]] for i, _ in fused[: lever.rocchio_docs]]
        qv = qv + lever.rocchio * np.mean(fb, axis=0)
        qv = qv / np.linalg.norm(qv)
    if lever.prf_docs:
        extra = q.conv.index.search(expansion(q, fused, lever), lever.depth)
        bm25 = sorted(
            with_context(base_bm25[: lever.depth], extra, lever.prf_weight),
            key=lambda h: -h[1],
        )
        fused = fuse(q, lever, bm25, qv)
    elif lever.rocchio:
        fused = fuse(q, lever, base_bm25, qv)
    if lever.when:
        fused = timed(q, fused, lever.when)
    if lever.propagate:
        fused = propagated(q.conv, fused, lever.propagate)
    if lever.spread:
        fused = spread(q.conv, fused, lever.spread)
    return [i for i, _ in fused[:20]]


def timed(q: LQ, fused: list[tuple[str, float]], gain: float) -> Hits:
    """The server's time-aware ranking (stores/index/temporal.py) with another gain."""
    texts = dict(zip(q.conv.ids, q.conv.texts, strict=True))
    return temporal.favour_times(q.text, fused, texts.get, gain)


def spread(conv: Conv, fused: list[tuple[str, float]], penalty: float) -> Hits:
    """Greedy diversity over the top 30: a memory whose neighbour (distance 1 or 2) is already
    ranked loses `penalty` (fused scores are in [0, 1]), so one window does not fill the top."""
    row = {i: n for n, i in enumerate(conv.ids)}
    near = [conv.chain(links_, d) for d in (1, 2) for links_ in (conv.prev, conv.nxt)]
    pool, out, taken = dict(fused[:30]), [], set[str]()
    while pool:
        best = max(pool, key=lambda i: pool[i] - penalty * (i in taken))
        out.append((best, pool.pop(best) - penalty * (best in taken)))
        n = row[best]
        taken.update(conv.ids[r[n]] for r in near if r[n] >= 0)
    return out + fused[30:]


def propagated(conv: Conv, fused: list[tuple[str, float]], beta: float) -> Hits:
    row = {i: n for n, i in enumerate(conv.ids)}
    got = dict(fused)
    out = {}
    for i, s in got.items():
        n = row[i]
        near = [conv.ids[r] for r in (conv.prev[n], conv.nxt[n]) if r >= 0]
        out[i] = s + beta * sum(got.get(j, 0.0) for j in near)
    return sorted(out.items(), key=lambda kv: (-kv[1], kv[0]))


def recalls(questions: list[LQ], lever: Lever) -> np.ndarray:
    """Per question: R@1, R@5, R@10, reciprocal rank of the first evidence (top 20)."""
    out = np.zeros((len(questions), 4))
    for n, q in enumerate(questions):
        ranked = lever_rank(q, lever)
        for col, k in enumerate((1, 5, 10)):
            out[n, col] = len(q.evidence & set(ranked[:k])) / len(q.evidence)
        out[n, 3] = next((1 / (r + 1) for r, i in enumerate(ranked) if i in q.evidence), 0.0)
    return out


def bootstrap(gain: np.ndarray, rounds: int = 2000) -> tuple[float, float]:
    rng = np.random.default_rng(10)
    picks = rng.integers(0, len(gain), size=(rounds, len(gain)))
    means = gain[picks].mean(axis=1)
    return float(np.quantile(means, 0.025)), float(np.quantile(means, 0.975))


LEVERS: dict[str, Lever] = {
    "server (e5 + ctx field .5 + window-sum ctx cosine)": Lever(),
    "no contextual cosine (wc 0)": Lever(wc=0.0),
    "no context at all (wc 0, no ctx field)": Lever(wc=0.0, field_radius=0),
    "wider window: distance-2 neighbours x0.5": Lever(window=(1.0, 0.5)),
    "wider window: distance-2 neighbours x1": Lever(window=(1.0, 1.0)),
    "wider window: distance 1-3 x1": Lever(window=(1.0, 1.0, 1.0)),
    "wider window: distance 1-3 x1/.7/.5": Lever(window=(1.0, 0.7, 0.5)),
    "wider window: distance 1-4 x1": Lever(window=(1.0,) * 4),
    "wider window: distance 1-6 x1": Lever(window=(1.0,) * 6),
    "BM25 ctx field radius 2 (boost .5)": Lever(field_radius=2),
    "BM25 ctx field radius 1 boost .3": Lever(boost=0.3),
    "BM25 ctx field radius 1 boost .7": Lever(boost=0.7),
    "BM25 ctx field radius 2 boost .3": Lever(field_radius=2, boost=0.3),
    "BM25 ctx field radius 3 boost .3": Lever(field_radius=3, boost=0.3),
    "ctx cosine from 2nd embedding prev+self": Lever(joined="prev+self"),
    "ctx cosine from 2nd embedding prev+self+next": Lever(joined="prev+self+next"),
    "propagate fused score x0.1": Lever(propagate=0.1),
    "propagate fused score x0.2": Lever(propagate=0.2),
    "BM25 PRF 3 docs 10 terms x0.3": Lever(prf_docs=3),
    "BM25 PRF 3 docs 10 terms x0.5": Lever(prf_docs=3, prf_weight=0.5),
    "BM25 PRF 5 docs 10 terms x0.3": Lever(prf_docs=5),
    "BM25 PRF 3 docs 5 terms x0.3": Lever(prf_docs=3, prf_terms=5),
    "Rocchio query vector +0.3 x top 3": Lever(rocchio=0.3),
    "Rocchio query vector +0.5 x top 3": Lever(rocchio=0.5),
    "Rocchio +0.3 x top 3 + BM25 PRF 3/10 x0.3": Lever(rocchio=0.3, prf_docs=3),
    "depth 50": Lever(depth=50),
    "depth 200": Lever(depth=200),
    "min_similarity 0 (no floor)": Lever(min_sim=0.0),
}
LEVERS |= {
    f"weights BM25 {wk}/cos {1 - wk - wc:.1f}/ctx {wc}": Lever(wk=wk, wc=wc)
    for wk, wc in itertools.product((0.3, 0.4, 0.5), (0.2, 0.3, 0.4))
    if (wk, wc) != (SERVER_WK, CONTEXT_WEIGHT)
}
W2 = (1.0, 1.0)
COMBOS: dict[str, Lever] = {
    "W2 = window 1-2 x1": Lever(window=W2),
    "W2, mean of window cosines": Lever(window=W2, pool="mean"),
    "W2, max of window cosines": Lever(window=W2, pool="max"),
    "server window, mean of cosines": Lever(pool="mean"),
    "W2 x1/.75": Lever(window=(1.0, 0.75)),
    "W2 + BM25 ctx field radius 2": Lever(window=W2, field_radius=2),
    "W2 + BM25 ctx field radius 2 boost .7": Lever(window=W2, field_radius=2, boost=0.7),
    "W2 + ctx field r2 + depth 200": Lever(window=W2, field_radius=2, depth=200),
}
COMBOS |= {
    f"W2 + field r2, BM25 {wk}/cos {1 - wk - wc:.2f}/ctx {wc}": Lever(
        window=W2, field_radius=2, wk=wk, wc=wc
    )
    for wk, wc in itertools.product((0.35, 0.4, 0.45), (0.15, 0.2, 0.25, 0.3))
    if (wk, wc) != (SERVER_WK, CONTEXT_WEIGHT)
}
GRID2 = {  # the two levers that help together, around their best weights (report all rows)
    f"G W2{'-mean' if pool == 'mean' else ''} r2 boost {boost} BM25 {wk}/cos {1 - wk - wc:.2f}"
    f"/ctx {wc}": Lever(window=W2, field_radius=2, boost=boost, wk=wk, wc=wc, pool=pool)
    for pool, boost, wk, wc in itertools.product(
        ("centroid", "mean"), (0.5, 0.7, 1.0), (0.4, 0.45), (0.25, 0.3)
    )
}
BEST = Lever(window=W2, field_radius=2, boost=0.7, wc=0.3)
MORE = {
    "B = W2 + r2 boost .7 + BM25 .4/cos .3/ctx .3": BEST,
    "B + CombMNZ": dataclasses.replace(BEST, mnz=True),
    "B, window back 1-2, ahead 1": dataclasses.replace(BEST, window=((1.0, 1.0), (1.0,))),
    "B, window back 1, ahead 1-2": dataclasses.replace(BEST, window=((1.0,), (1.0, 1.0))),
    "B, window back 1-2 x1, ahead 1-2 x.5": dataclasses.replace(
        BEST, window=((1.0, 1.0), (0.5, 0.5))
    ),
    "B, ctx from 2nd embedding prev+self+next": dataclasses.replace(BEST, joined="prev+self+next"),
    "B + BM25 PRF 3 docs 5 terms x0.3": dataclasses.replace(BEST, prf_docs=3, prf_terms=5),
    "B + propagate x0.1": dataclasses.replace(BEST, propagate=0.1),
    "B, depth 200": dataclasses.replace(BEST, depth=200),
    "B + spread .05": dataclasses.replace(BEST, spread=0.05),
    "B + spread .1": dataclasses.replace(BEST, spread=0.1),
    "B + spread .2": dataclasses.replace(BEST, spread=0.2),
    "server + spread .1": Lever(spread=0.1),
    "server, DBSF normalisation": Lever(dbsf=True),
    "C = W2 + r2 boost .7 (server weights)": dataclasses.replace(BEST, wc=CONTEXT_WEIGHT),
    "C, DBSF normalisation": dataclasses.replace(BEST, wc=CONTEXT_WEIGHT, dbsf=True),
    "B, DBSF normalisation": dataclasses.replace(BEST, dbsf=True),
}
WHEN = {
    f"when-question: a memory holding a time +{g}": Lever(when=g) for g in (0.05, 0.1, 0.2, 0.3)
}
PREFIX_LEVERS = {
    "query embedded as 'passage: '": Lever(prefix="passage"),
    "query embedded with no prefix": Lever(prefix="none"),
}


# tests/bench/candidate_embedders.py; "bge-mean" checks the pooling (the model was trained on
# [CLS])
CANDIDATES: dict[str, Callable[[], Embedder]] = {
    "bge": OnnxBge,
    "bge-mean": lambda: OnnxBge(pooling="mean"),
    "bge-deq": dequantised_bge,  # float activations: is int8 what costs bge its recall?
    "e5-deq": DequantisedE5,
}


def candidate_levers(name: str) -> dict[str, Lever]:
    """The server's scheme with a --candidate embedder's vectors instead of e5's: its floor
    (min_similarity is per embedder, server/runtime.py) and its query instruction vary."""
    out = {
        f"{name}: server scheme, min_similarity {m}": Lever(model=name, prefix=name, min_sim=m)
        for m in (0.0, 0.5, 0.6, 0.65, 0.7)
    }
    out |= {
        f"{name}: query as a memory, min_similarity {m}": Lever(
            model=name, prefix=f"{name}-plain", min_sim=m
        )
        for m in (0.0, 0.6)
    }
    out[f"{name}: min_similarity 0.6 + when +0.1"] = Lever(
        model=name, prefix=name, min_sim=0.6, when=0.1
    )
    out["e5 (server) + when +0.1"] = Lever(when=0.1)
    out |= {  # the server's weights were tuned for e5; and each embedder alone
        f"{name}: min_similarity 0.5, BM25 {wk}/cos {1 - wk - wc:.1f}/ctx {wc}": Lever(
            model=name, prefix=name, min_sim=0.5, wk=wk, wc=wc
        )
        for wk, wc in ((0.3, 0.2), (0.5, 0.2), (0.4, 0.1), (0.4, 0.3))
    }
    out["e5 cosine alone"] = Lever(wk=0.0, wc=0.0, min_sim=0.0)
    both = f"e5+{name}"  # two embeddings per text: twice the cost, shown for what it would buy
    out |= {
        f"{both} (mean cosine), min_similarity {m}": Lever(model=both, prefix=both, min_sim=m)
        for m in (0.0, 0.65)
    }
    out[f"{both} cosine alone"] = Lever(model=both, prefix=both, wk=0.0, wc=0.0, min_sim=0.0)
    out[f"{name} cosine alone"] = Lever(model=name, prefix=name, wk=0.0, wc=0.0, min_sim=0.0)
    out[f"{name} cosine alone, query as a memory"] = Lever(
        model=name, prefix=f"{name}-plain", wk=0.0, wc=0.0, min_sim=0.0
    )
    return out


def embed_costs(args: Any, questions: list[LQ], out: Any, count: int = 50) -> None:
    """One text's embedding time on one thread, median of `count`: short queries (the first
    dev questions) and memories (LoCoMo turns), the embedders taking turns text by text so
    that the machine's load falls on each alike."""
    models = {"e5": args.e5, **args.candidates}
    queries = [q.text for q in questions[:count]]
    memories = questions[0].conv.texts[:count]
    for model in models.values():
        model.embed_query("warm up")
    got: dict[str, list[float]] = {}
    for kind, texts in (("query", queries), ("memory", memories)):
        for text in texts:
            for name, model in models.items():
                started = time.perf_counter()
                model.embed_query(text) if kind == "query" else model.embed([text])
                got.setdefault(f"{name} {kind}", []).append(time.perf_counter() - started)
    for label, secs in got.items():
        out.write(f"{label:20s} p50 {1000 * statistics.median(secs):6.2f} ms ({len(secs)} texts)\n")
    chars = statistics.mean(len(t) for t in memories)
    out.write(
        f"(queries {statistics.mean(len(t) for t in queries):.0f} chars, memories "
        f"{chars:.0f} chars on average; load {os.getloadavg()})\n"
    )


def lever_table(questions: list[LQ], levers: dict[str, Lever], out: Any) -> None:
    base = recalls(questions, Lever())
    convs = sorted({q.number for q in questions})
    by_conv = {c: np.asarray([q.number == c for q in questions]) for c in convs}
    cats = {c: np.asarray([q.category == c for q in questions]) for c in CATEGORIES}
    out.write(
        f"{'lever':46s} R@1  R@5  R@10 MRR  | dR@5 95% CI       | dR@10 95% CI      | "
        + " ".join(f"c{c} R@5/R@10" for c in convs)
        + " | R@5/R@10 "
        + " ".join(CATEGORIES.values())
        + "\n"
    )
    for name, lever in levers.items():
        got = base if lever == Lever() else recalls(questions, lever)
        mean = got.mean(axis=0)
        cells = [f"{name[:46]:46s} " + " ".join(f"{x:.3f}"[1:] for x in mean)]
        for col in (1, 2):
            gain = got[:, col] - base[:, col]
            lo, hi = bootstrap(gain)
            cells.append(f"{gain.mean():+.3f} [{lo:+.3f},{hi:+.3f}]")
        cells.append(
            " ".join(
                f"{got[m, 1].mean():.2f}/{got[m, 2].mean():.2f}"[0:]
                + ("*" if got[m, 2].mean() < base[m, 2].mean() - 1e-9 else " ")
                for m in by_conv.values()
            )
        )
        cells.append(
            " ".join(
                f"{got[m, 1].mean():.2f}/{got[m, 2].mean():.2f}" for m in cats.values() if m.any()
            )
        )
        out.write(" | ".join(cells) + "\n")
        out.flush()
    out.write(f"{len(questions)} questions (categories 1-4); '*' = R@10 below the server's\n")


def lever_costs(questions: list[LQ], out: Any, size: int = 10_000) -> None:
    """CPU per search at `size` memories of each step a lever adds or changes, timed over a
    quarter of the dev questions on the dev conversations repeated to `size` rows. Per-row
    data (window norms, neighbour rows) is computed before timing: the server keeps it per
    row at save time."""
    big = repeated(list({id(q.conv): q.conv for q in questions}.values()), size)
    sample = questions[::4]
    timings: dict[str, list[float]] = {}

    def timed(name: str, work: Callable[[LQ], object]) -> None:
        for q in sample:
            started = time.perf_counter()
            work(q)
            timings.setdefault(name, []).append(time.perf_counter() - started)

    windows = {"server (1)": (1.0,), "1-2": (1.0, 1.0), "1-3": (1.0,) * 3, "1-4": (1.0,) * 4}
    for window in windows.values():  # per-row data, outside the timing
        big.norm(window)
    fields = {}
    for radius in (1, 2):
        started = time.perf_counter()
        around = neighbour_texts(big, radius)
        fields[radius] = index(
            TextIndex,
            [
                IndexDoc(i, t, None, (), c)
                for i, t, c in zip(big.ids, big.texts, around, strict=True)
            ],
        )
        out.write(
            f"index build, ctx field radius {radius}: {time.perf_counter() - started:.1f} s\n"
        )
    timed("BM25 search, ctx field radius 1 (server)", lambda q: fields[1].search(q.text, 100))
    timed("BM25 search, ctx field radius 2", lambda q: fields[2].search(q.text, 100))
    timed("cosine matmul + top 100", lambda q: top_of(big, big.vec @ q.qv["query"], 100))
    for name, window in windows.items():
        timed(f"matmul + top + ctx window {name} + top", functools.partial(scan, big, window))
    timed(
        "BM25 PRF: 2nd Tantivy search (10 terms)",
        lambda q: big.index.search(expansion(q, lever_fused(q), Lever(prf_docs=3)), 100),
    )
    timed("rank_hits (3 lists of 100)", lever_fused)
    for name, secs in timings.items():
        out.write(f"{name:44s} p50 {1000 * statistics.median(secs):6.2f} ms\n")
    out.write(f"(at {size} memories; {len(sample)} queries)\n")


def repeated(convs: list[Conv], size: int) -> Conv:
    """The conversations repeated (fresh ids) up to `size` memories, links kept."""
    ids: list[str] = []
    texts: list[str] = []
    vecs, prev, nxt = [], [], []
    while len(ids) < size:
        for c in convs:
            offset = len(ids)
            ids += [f"{offset}/{i}" for i in c.ids]
            texts += c.texts
            vecs.append(c.vec)
            prev.append(np.where(c.prev >= 0, c.prev + offset, -1))
            nxt.append(np.where(c.nxt >= 0, c.nxt + offset, -1))
    before, after = (np.concatenate(x)[:size] for x in (prev, nxt))
    before[before >= size] = -1
    after[after >= size] = -1
    docs = [IndexDoc(i, t, None, ()) for i, t in zip(ids[:size], texts, strict=False)]
    vec = np.vstack(vecs)[:size]
    big = index(TextIndex, docs)
    return Conv("big", ids[:size], texts[:size], vec, before, after, big, [], Counter(), {})


def scan(conv: Conv, window: tuple[float, ...], q: LQ) -> None:
    sims = conv.vec @ q.qv["query"]
    top_of(conv, sims, 100)
    top_of(conv, contextual(conv, sims, window), 100)


def lever_fused(q: LQ) -> list[tuple[str, float]]:
    return fuse(q, Lever(), q.bm25, q.qv["query"])


def levers_main() -> None:
    parser = argparse.ArgumentParser(description="recall levers against the server's scheme")
    parser.add_argument("--conversations", default="0-4")
    parser.add_argument("--cache", type=Path, default=Path("/tmp/dreamwell-tune-cache"))
    parser.add_argument("--prefixes", action="store_true", help="also try query prefixes")
    parser.add_argument("--costs", action="store_true", help="time each lever at 10k memories")
    parser.add_argument(
        "--no-joined", action="store_true", help="skip the second-embedding levers' vectors"
    )
    parser.add_argument(
        "--only", default="", help="run the levers whose name has one of these 'a|b' texts"
    )
    parser.add_argument(
        "--candidate",
        action="append",
        default=[],
        choices=sorted(CANDIDATES),
        help="also rank with this embedder's vectors in the server's scheme (own vector cache), "
        "and time one text's embedding beside e5's",
    )
    parser.add_argument(
        "--unrelated",
        type=float,
        default=0.0,
        metavar="SHARE",
        help="point this share of the links (1 = all) at unrelated memories: the cost of bad "
        "gating (second-embedding levers are left out then)",
    )
    args = parser.parse_args()
    shared = find_shared()
    bench = load_bench(shared)
    data = json.loads((shared / "data/locomo-dev.json").read_text())
    lo, _, hi = args.conversations.partition("-")
    args.e5 = OnnxE5()
    args.costs_ = args.costs
    args.candidates = {name: CANDIDATES[name]() for name in args.candidate}
    args.costs = {"e5 query": [], "bm25": [], **{f"{n} query": [] for n in args.candidates}}
    questions: list[LQ] = []
    for number in range(int(lo), int(hi or lo) + 1):
        sys.stderr.write(f"{data[number]['sample_id']}\n")
        questions += lever_conversation(number, data[number], bench, args)
    levers = {
        **LEVERS,
        **COMBOS,
        **GRID2,
        **MORE,
        **WHEN,
        **(PREFIX_LEVERS if args.prefixes else {}),
        **{k: v for name in args.candidates for k, v in candidate_levers(name).items()},
    }
    wanted = args.only.split("|")
    levers = {
        n: lv
        for n, lv in levers.items()
        if any(w in n for w in wanted) or lv == Lever()
        if not ((args.unrelated or args.no_joined) and lv.joined)
    }
    lever_table(questions, levers, sys.stdout)
    if args.candidates:
        embed_costs(args, questions, sys.stdout)
    if args.costs_:
        lever_costs(questions, sys.stdout)


if __name__ == "__main__":
    main()
