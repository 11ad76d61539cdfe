"""Paraphrases in a small store, by embedder (issue 54, goal 3). Not collected by pytest.

A new user's five project memories (tests/support/everyday.py's PROJECT_MEMORIES) in a real
LongTermStore on a temporary directory, with each shipped embedder (or those given); for the
two paraphrases with no shared word ("how do I release to production" -> the deploy memory,
"what UI framework do we use" -> the React one), two questions the store answers, everyday
coding prompts and gibberish it does not, prints what search returns and where the best
memory by cosine stands against the relevance rule (stores/index/relevance.py): `above`,
spreads above the baseline (VECTOR_MARGIN asks 2.5), and `beyond`, spreads beyond the nearest
reference sentence (REFERENCE_GAP asks 0.3).

Run: python tests/bench/paraphrase_bench.py [--embedder e5 --embedder bge]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

import numpy as np

from dreamwell.stores import Embedder, LongTermStore, OnnxE5
from dreamwell.stores.index.relevance import REFERENCE_GAP, VECTOR_MARGIN

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.bench.candidate_embedders import OnnxBge
from tests.support.everyday import CODING_PROMPTS, GIBBERISH, PROJECT_MEMORIES

# (query, the memory that answers it, or None)
PARAPHRASES = (
    ("how do I release to production", "We deploy the web app with make ship"),
    ("what UI framework do we use", "The frontend is written in TypeScript with React 19 and Vite"),
)
ANSWERED = (
    ("which postgres version is staging on", "Staging runs Postgres 15 on the db-stage host"),
    ("what time zone is the user in", "The user is in the Europe/Berlin time zone"),
)
# embedder -> (model, min_similarity as server/runtime.py sets it)
EMBEDDERS: dict[str, tuple[Callable[[], Embedder], float]] = {
    "e5": (OnnxE5, 0.7),
    "bge": (OnnxBge, 0.6),
    "bge-plain": (lambda: OnnxBge(instruction=""), 0.6),  # queries without the instruction
}


def say(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def probe(name: str, root: Path) -> None:
    make, floor = EMBEDDERS[name]
    model = make()
    store = LongTermStore(root, embedder=model, min_similarity=floor, keyword_weight=0.4)
    for content in PROJECT_MEMORIES:
        store.save(content, "projects/web")
    while store.backfill():
        pass
    searcher = store._searcher
    rows = searcher.parts.mirror.rows
    memories = np.asarray(model.embed(list(PROJECT_MEMORIES)), dtype=np.float32)
    say(
        f"== {name}: {model.name} (min_similarity {floor}; answered by meaning when above >= "
        f"{VECTOR_MARGIN} and beyond >= {REFERENCE_GAP})"
    )
    queries = [*PARAPHRASES, *ANSWERED, *((q, None) for q in (*CODING_PROMPTS, *GIBBERISH))]
    for query, answer in queries:
        vector = model.embed_query(query)
        cos = memories @ np.asarray(vector, dtype=np.float32)
        best = int(np.argmax(cos))
        meaning = searcher._floor(vector, rows).meaning(float(cos[best]))
        found = [h.entry.content for h in store.search(query)]
        if answer is None:
            verdict = "ok" if not found else "NOISE"
        else:
            verdict = "found" if found[:1] == [answer] else "MISSED"
        order = " > ".join(
            f"{PROJECT_MEMORIES.index(m)}" for m in [PROJECT_MEMORIES[i] for i in np.argsort(-cos)]
        )
        say(
            f"{verdict:6s} {query[:38]:38s} best {PROJECT_MEMORIES[best][:24]:24s} "
            f"cos {cos[best]:.3f} above {meaning.above:5.2f} beyond {meaning.beyond:5.2f} "
            f"order {order} hits {len(found)}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--embedder", action="append", choices=sorted(EMBEDDERS))
    args = parser.parse_args()
    say("memories: " + "; ".join(f"{n} {m}" for n, m in enumerate(PROJECT_MEMORIES)))
    for name in args.embedder or list(EMBEDDERS):
        with tempfile.TemporaryDirectory() as tmp:
            probe(name, Path(tmp))
    say(f"load average {os.getloadavg()}")


if __name__ == "__main__":
    main()
