"""Projects (docs/projects.md), measured (not collected by pytest). Three parts, one run:

1. Collisions: two repositories whose memories collide on wording (deploy commands, test
   runners, conventions), saved through the real server from a client whose roots name each
   repository, plus global preferences. For each project: what `search_memory`, the `recall`
   prompt and the `user-prompt` hook (a `dreamwell hook` process with that `cwd`) return for
   the same questions, and how many of the other project's memories leak in (must be 0).
2. LoCoMo dev split: every conversation its own project in ONE data directory (searched with
   that project's filter) against one data directory per conversation (no filter): recall@5
   and recall@10 of the evidence turns. e5 vectors are computed once and shared by both
   layouts, so only the layout differs.
3. Search p50 at N memories in 20 projects (synthetic text, deterministic random vectors, as
   tests/bench/search_scale_bench.py builds them), the same queries with the project filter and
   without, interleaved in the same run, in process (`LongTermStore.search`).

Run from the repo root: python tests/bench/projects_bench.py [--n 100000] [--skip locomo]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import anyio
import numpy as np
from mcp import Client

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # tests.support
sys.path.insert(0, str(Path(__file__).resolve().parent))  # tune_hybrid
from tune_hybrid import find_shared, load_bench

from dreamwell.server.config import Settings
from dreamwell.server.mcp.app import build_server
from dreamwell.stores import PROJECT, LongTermStore, MemoryEntry, OnnxE5, new_id, utcnow
from tests.support.repos import Roots, make_repo

COLLIDING = {
    "shop": [
        "Deploy: run make deploy-shop from the repo root",
        "Tests: run pytest -q tests/ before pushing",
        "Convention: branch names are feature/<ticket>",
        "Lint with ruff check . and format with ruff format",
        "The staging database is shop-staging on db1",
    ],
    "billing": [
        "Deploy: run kubectl apply -f deploy/billing.yaml",
        "Tests: run go test ./... before pushing",
        "Convention: branch names are bill-<ticket>-<slug>",
        "Lint with golangci-lint run and format with gofmt",
        "The staging database is billing-stage on db7",
    ],
}
GLOBAL = ["The user prefers short answers without bullet points"]
QUESTIONS = [
    "how do I deploy?",
    "how do I run the tests?",
    "what are the branch naming conventions?",
    "how do we lint and format?",
    "which staging database?",
]


def say(text: str = "") -> None:
    sys.stdout.write(text + "\n")
    sys.stdout.flush()


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


# ---- 1. collisions ---------------------------------------------------------------------------
async def _mcp_part(data: Path, repos: dict[str, Path]) -> dict[str, dict[str, list[str]]]:
    server = build_server(Settings(data_dir=data, embedder="none"))
    seen: dict[str, dict[str, list[str]]] = {}
    for name, repo in repos.items():
        async with Client(server, mode="legacy", list_roots_callback=Roots(repo).callback) as c:
            for content in COLLIDING[name]:
                await c.call_tool("save_memory", {"content": content})
            if name == "shop":
                for content in GLOBAL:
                    await c.call_tool(
                        "save_memory", {"content": content, "category": "user-preferences/style"}
                    )
    for name, repo in repos.items():
        async with Client(server, mode="legacy", list_roots_callback=Roots(repo).callback) as c:
            for q in QUESTIONS:
                found = await c.call_tool("search_memory", {"query": q})
                prompt = await c.get_prompt("recall", {"message": q})
                text = found.content[0].text  # type: ignore[union-attr]
                recalled = prompt.messages[0].content.text  # type: ignore[union-attr]
                seen.setdefault(name, {})[f"search: {q}"] = [text]
                seen[name][f"recall: {q}"] = [recalled]
    return seen


def _hook(data: Path, cwd: Path, session: str, prompt: str) -> str:
    payload = {"session_id": session, "cwd": str(cwd), "hook_event_name": "UserPromptSubmit"}
    done = subprocess.run(
        [sys.executable, "-m", "dreamwell.server", "hook", "user-prompt", "--data-dir", str(data)],
        input=json.dumps(payload | {"prompt": prompt, "transcript_path": "/nonexistent"}).encode(),
        capture_output=True,
        timeout=120,
        env={**os.environ, "DREAMWELL_EMBEDDER": "none"},
        check=False,
    )
    return done.stdout.decode()


def collisions(base: Path) -> int:
    repos = {
        "shop": make_repo(base / "shop", {"origin": "git@github.com:acme/shop.git"}),
        "billing": make_repo(base / "billing", {"origin": "https://github.com/acme/billing"}),
    }
    data = base / "data"
    seen = anyio.run(_mcp_part, data, repos)
    for name, repo in repos.items():
        for i, q in enumerate(QUESTIONS):
            seen[name][f"hook: {q}"] = [_hook(data, repo, f"{name}-{i}", q)]
    leaks = 0
    for name, answers in seen.items():
        other = next(n for n in COLLIDING if n != name)
        say(f"\n  project {name} ({repos[name]}):")
        for what, (text,) in answers.items():
            leaked = [c for c in COLLIDING[other] if c in text]
            own = [c for c in COLLIDING[name] if c in text]
            leaks += len(leaked)
            top = min(own, key=text.index) if own else "-"  # the first one the answer shows
            say(f"    {what:<52} own {len(own)}, other {len(leaked)}; first: {top}")
    say(f"\n  leaks: {leaks} (of {len(seen) * len(QUESTIONS) * 3} answers)")
    return leaks


# ---- 2. LoCoMo: one directory with a project per conversation vs one per conversation -----
class Cached:
    """e5, each text embedded once for both layouts."""

    def __init__(self) -> None:
        self.e5 = OnnxE5()
        self.name = self.e5.name
        self.passages: dict[str, list[float]] = {}
        self.queries: dict[str, list[float]] = {}

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        missing = [t for t in dict.fromkeys(texts) if t not in self.passages]
        if missing:
            self.passages.update(zip(missing, self.e5.embed(missing), strict=True))
        return [self.passages[t] for t in texts]

    def embed_query(self, text: str) -> list[float]:
        if text not in self.queries:
            self.queries[text] = self.e5.embed_query(text)
        return self.queries[text]


def _store(data: Path, embedder: Cached) -> LongTermStore:
    # the server's e5 tuning (server/runtime.py)
    return LongTermStore(data, embedder=embedder, keyword_weight=0.4, min_similarity=0.7)  # type: ignore[arg-type]


def _fill(store: LongTermStore, turns: Sequence[Any], project: str | None) -> dict[str, str]:
    ids = {}
    meta = {PROJECT: project} if project else None
    for t in turns:
        saved = store.save(t.content, t.category, t.tags, metadata=meta, caller=project or "bench")
        ids[saved.entry.id] = t.dia_id
    while store.backfill(batch=256):
        pass
    store.load_vectors()
    store.checkpoint()  # as a server does every few seconds: the index holds them
    return ids


def _recall(
    store: LongTermStore, qas: Sequence[dict[str, Any]], ids: dict[str, str], project: str | None
) -> tuple[float, float]:
    r5 = r10 = 0.0
    for qa in qas:
        hits = [
            ids.get(h.entry.id) for h in store.search(qa["question"], limit=10, project=project)
        ]
        evidence = set(qa["evidence"])
        r5 += len(evidence & set(hits[:5])) / len(evidence)
        r10 += len(evidence & set(hits[:10])) / len(evidence)
    return r5 / len(qas), r10 / len(qas)


def locomo(base: Path) -> None:
    bench = load_bench(find_shared())
    samples = json.loads((find_shared() / "data" / "locomo-dev.json").read_text())
    embedder = Cached()
    convs = [bench.locomo_conversation(s, False)[:2] for s in samples]
    began = time.perf_counter()
    separate = []  # (R@5, R@10, questions) per conversation, each in its own directory
    for n, (turns, qas) in enumerate(convs):
        own = _store(base / f"conv{n}", embedder)
        separate.append((*_recall(own, qas, _fill(own, turns, None), None), len(qas)))
    shared = _store(base / "one", embedder)  # every conversation in, then every question
    ids = [_fill(shared, turns, f"locomo/{n}") for n, (turns, _) in enumerate(convs)]
    together = [
        (*_recall(shared, qas, ids[n], f"locomo/{n}"), len(qas)) for n, (_, qas) in enumerate(convs)
    ]

    def mean(rows: list[tuple[float, float, int]], k: int) -> float:
        return sum(r[k] * r[2] for r in rows) / sum(r[2] for r in rows)

    for what, rows in (
        ("one directory per conversation", separate),
        ("one directory, a project per conversation", together),
    ):
        say(f"  {what:<42} R@5 {mean(rows, 0):.3f}  R@10 {mean(rows, 1):.3f}")
    for n, (a, b) in enumerate(zip(separate, together, strict=True)):
        say(f"    conversation {n}: R@5 {a[0]:.3f} -> {b[0]:.3f} ({a[2]} questions)")
    questions = sum(r[2] for r in together)
    say(
        f"  {questions} questions with evidence, {time.perf_counter() - began:.0f} s, load {load()}"
    )


# ---- 3. search p50 with and without the project filter ----------------------------------------
WORDS = [
    "deploy",
    "release",
    "build",
    "test",
    "lint",
    "format",
    "branch",
    "ticket",
    "review",
    "merge",
    "staging",
    "database",
    "cache",
    "queue",
    "worker",
    "api",
    "schema",
    "migration",
    "backup",
    "monitor",
]


def _vector(text: str) -> list[float]:
    seed = int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "little")
    v = np.random.default_rng(seed).standard_normal(384)
    return (v / np.linalg.norm(v)).tolist()  # type: ignore[no-any-return]


class Seeded:
    name = "seeded-384"

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        return [_vector(t) for t in texts]

    def embed_query(self, text: str) -> list[float]:
        return _vector(text)


def scale(base: Path, n: int, searches: int) -> None:
    rng = random.Random(7)
    store = LongTermStore(base / "scale", embedder=Seeded(), keyword_weight=0.4)  # type: ignore[arg-type]
    began = time.perf_counter()
    now = utcnow()
    for start in range(0, n, 5000):
        batch = []
        for i in range(start, min(n, start + 5000)):
            words = " ".join(rng.sample(WORDS, 4))
            meta = {PROJECT: f"github.com/acme/p{i % 20}"} if i % 10 else {}  # a tenth global
            batch.append(
                MemoryEntry(
                    new_id(),
                    f"{words} note {i}",
                    f"notes/{i % 7}",
                    (),
                    now,
                    now,
                    now,
                    metadata=meta,
                )
            )
        store.apply(batch)
        while store.backfill(batch=5000):
            pass
        store.checkpoint()
    store.load_vectors()
    took = time.perf_counter() - began
    say(f"  built {n} memories in 20 projects (a tenth of them global) in {took:.0f} s")
    queries = [" ".join(rng.sample(WORDS, 3)) for _ in range(searches)]
    timed: dict[str, list[float]] = {"filtered": [], "unfiltered": []}
    for i, q in enumerate(queries):
        for what in ("filtered", "unfiltered") if i % 2 else ("unfiltered", "filtered"):
            project = f"github.com/acme/p{i % 20}" if what == "filtered" else None
            t = time.perf_counter()
            store.search(q, limit=20, project=project)
            timed[what].append(1000 * (time.perf_counter() - t))
    for what, ms in timed.items():
        ms.sort()
        p50, p95 = statistics.median(ms), ms[int(0.95 * len(ms))]
        say(f"  {what:<10} p50 {p50:6.2f} ms  p95 {p95:6.2f} ms  ({len(ms)} searches)")
    say(f"  load {load()}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--searches", type=int, default=300)
    parser.add_argument("--skip", default="", help="comma-separated: collisions, locomo, scale")
    args = parser.parse_args()
    skip = set(args.skip.split(","))
    say(f"load average at start: {load()} (2 cores, shared with other work)")
    with tempfile.TemporaryDirectory(prefix="projects-bench-") as tmp:
        base = Path(tmp)
        if "collisions" not in skip:
            say("\n1. two projects whose memories collide on wording")
            leaks = collisions(base / "collide")
        if "locomo" not in skip:
            say("\n2. LoCoMo dev split: recall with a project per conversation")
            locomo(base / "locomo")
        if "scale" not in skip:
            say(f"\n3. search p50 at {args.n} memories in 20 projects")
            scale(base, args.n, args.searches)
    if "collisions" not in skip and leaks:
        raise SystemExit(f"{leaks} leaks")


if __name__ == "__main__":
    main()
