"""What the prompt hook injects against what `search_memory` finds (issue 54). Not collected
by pytest; in process, on real stores in a temporary directory with the shipped e5 model.

Each LoCoMo dev conversation (../shared/data/locomo-dev.json, read through
../shared/bench/memory_bench.py, every turn one memory as that harness saves it) is saved into
a store opened as a server opens it; then every question of categories 1-4 is asked

- as `search_memory` asks it (`LongTermStore.search`, limit 20), its top 8 kept;
- through `stores/hooks/inject.py`'s `recalled`, the function the prompt hook, the session
  start and the `recall` prompt call, as the resident hook process ranks (the same store:
  `StoreRanker`), and as a hook without the resident does (`QuickRecall`, keywords only);

and R@5, R@8 and the characters injected (the `- [id] (category): content` lines, as
`stores/hooks/excerpts.py`'s `shown` cuts them to fit RECALL_CHARS; "whole" is the lines
uncut) per question are printed, with how many memories the everyday coding prompts of
tests/support/everyday.py inject into each conversation's store. Cutting a memory's text
costs no recall as measured (a memory counts as recalled if its line is injected), so how
much of the answer survives the cut is printed too: of the evidence memories injected whose
text holds words of the question's answer, the share of those words still shown.

Run: python tests/bench/injection_bench.py [--conversations 0-4]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from dreamwell.server.recall_text import memory_line
from dreamwell.stores import DataDir, LongTermStore, OnnxE5
from dreamwell.stores.hooks import QuickRecall, shown, write_snapshot
from dreamwell.stores.hooks.excerpts import query_words
from dreamwell.stores.hooks.inject import StoreRanker, recalled

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.support.everyday import CODING_PROMPTS

SHARED = next(
    (p / "shared" for p in Path(__file__).resolve().parents if (p / "shared/bench").is_dir()),
    Path("../shared"),
)


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


def answer_kept(answer: str, texts: list[str], lines: list[str]) -> list[float]:
    """For each evidence memory's text (`texts`) and its injected line whose text holds
    words of `answer`: the share of those words the line still shows."""
    wanted = query_words(answer)
    out = []
    for text, line in zip(texts, lines, strict=True):
        if held := wanted & query_words(text):
            out.append(len(held & query_words(line)) / len(held))
    return out


def saved_turns(store: LongTermStore, turns: Any) -> dict[str, str]:
    """`turns` saved one at a time, embedded and checkpointed: each memory's id -> its turn's
    dia_id (the evidence the questions name)."""
    key = {}
    for t in turns:
        key[store.save(t.content, t.category, t.tags, caller="bench").entry.id] = t.dia_id
    while store.backfill(batch=256):
        pass
    store.checkpoint()
    return key


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--conversations", default="0-4")
    args = parser.parse_args()
    first, _, last = args.conversations.partition("-")
    bench = load_bench()
    data = json.loads((SHARED / "data/locomo-dev.json").read_text())
    paths = ("search_memory top 8", "hook, resident (hybrid)", "hook, keywords only")
    acc = {p: bench.RecallAcc((5, 8)) for p in paths}
    chars: dict[str, list[int]] = {p: [] for p in paths}
    whole: dict[str, list[int]] = {p: [] for p in paths}
    kept: dict[str, list[float]] = {p: [] for p in paths}
    counts: dict[str, list[int]] = {p: [] for p in paths}
    unrelated: dict[str, list[int]] = {p: [] for p in paths[1:]}
    model = OnnxE5()
    say(f"injection, LoCoMo dev {args.conversations}; load average {os.getloadavg()[0]:.2f}")
    started = time.monotonic()
    with tempfile.TemporaryDirectory() as tmp:
        for conv in range(int(first), int(last or first) + 1):
            turns, qas, _ = bench.locomo_conversation(data[conv], False)
            answers = {q["question"]: str(q.get("answer", "")) for q in data[conv]["qa"]}
            root = Path(tmp) / f"c{conv}"
            store = LongTermStore(root, embedder=model, min_similarity=0.7, keyword_weight=0.4)
            key = saved_turns(store, turns)
            write_snapshot(DataDir(root), store.entries(), 0)
            quick = QuickRecall(DataDir(root))
            rankers = {paths[1]: StoreRanker(store), paths[2]: quick}
            for qa in qas:
                if qa["category"] == 5:
                    continue
                found = {paths[0]: [h.entry for h in store.search(qa["question"], limit=20)][:8]}
                for label, ranker in rankers.items():
                    found[label] = recalled(ranker, qa["question"])
                for label, entries in found.items():
                    acc[label].add([key.get(e.id) for e in entries], qa["evidence"])
                    lines = shown(entries, qa["question"], memory_line)
                    chars[label].append(sum(len(line) + 1 for line in lines))
                    whole[label].append(sum(len(memory_line(e)) + 1 for e in entries))
                    counts[label].append(len(entries))
                    ev = [k for k, e in enumerate(entries) if key.get(e.id) in qa["evidence"]]
                    kept[label] += answer_kept(
                        answers.get(qa["question"], ""),
                        [entries[k].content for k in ev],
                        [lines[k] for k in ev],
                    )
            for label, ranker in rankers.items():
                unrelated[label] += [len(recalled(ranker, p)) for p in CODING_PROMPTS]
            quick.close()
            sys.stderr.write(f"  conversation {conv}: {len(turns)} turns, {len(qas)} questions\n")
    for label in paths:
        r = acc[label].report()
        say(
            f"  {label:24s} n={r['n']}  R@5 {r['recall@5']:.3f}  R@8 {r['recall@8']:.3f}  "
            f"memories median {statistics.median(counts[label]):.0f}  "
            f"chars median {statistics.median(chars[label]):.0f} "
            f"(whole {statistics.median(whole[label]):.0f}, max {max(chars[label])})  "
            f"answer words shown {statistics.mean(kept[label]) if kept[label] else 1:.2f}"
        )
    for label, found in unrelated.items():
        say(
            f"  {label:24s} everyday coding prompts ({len(found)}): memories injected "
            f"median {statistics.median(found):.0f}, max {max(found)}, "
            f"prompts injecting any {sum(1 for n in found if n)}"
        )
    say(f"{time.monotonic() - started:.0f} s; load average {os.getloadavg()[0]:.2f} at the end")


if __name__ == "__main__":
    main()
