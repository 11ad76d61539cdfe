"""What the prompt hook injects against what `search_memory` finds (issue 54). Not collected
by pytest; in process, on real stores in a temporary directory with the shipped e5 model.

Each LoCoMo dev conversation (../shared/data/locomo-dev.json, read through
../shared/bench/memory_bench.py, every turn one memory as that harness saves it) is saved into
a store opened as a server opens it; then every question of categories 1-4 is asked

- as `search_memory` asks it (`LongTermStore.search`, limit 20), its top 8 kept;
- through `stores/hooks/inject.py`'s `recalled`, the function the prompt hook, the session
  start and the `recall` prompt call, as the resident hook process ranks (the same store:
  `StoreRanker`), and as a hook without the resident does (`QuickRecall`, keywords only);

and R@5, R@8 and the characters injected (the `- [id] (category): content` lines) per
question are printed, with how many memories the everyday coding prompts of
tests/support/everyday.py inject into each conversation's store.

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
from dreamwell.stores.hooks import QuickRecall, write_snapshot
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
    counts: dict[str, list[int]] = {p: [] for p in paths}
    unrelated: dict[str, list[int]] = {p: [] for p in paths[1:]}
    model = OnnxE5()
    say(f"injection, LoCoMo dev {args.conversations}; load average {os.getloadavg()[0]:.2f}")
    started = time.monotonic()
    with tempfile.TemporaryDirectory() as tmp:
        for conv in range(int(first), int(last or first) + 1):
            turns, qas, _ = bench.locomo_conversation(data[conv], False)
            root = Path(tmp) / f"c{conv}"
            store = LongTermStore(root, embedder=model, min_similarity=0.7, keyword_weight=0.4)
            key = {}
            for t in turns:
                key[store.save(t.content, t.category, t.tags, caller="bench").entry.id] = t.dia_id
            while store.backfill(batch=256):
                pass
            store.checkpoint()
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
                    chars[label].append(sum(len(memory_line(e)) + 1 for e in entries))
                    counts[label].append(len(entries))
            for label, ranker in rankers.items():
                unrelated[label] += [len(recalled(ranker, p)) for p in CODING_PROMPTS]
            quick.close()
            sys.stderr.write(f"  conversation {conv}: {len(turns)} turns, {len(qas)} questions\n")
    for label in paths:
        r = acc[label].report()
        say(
            f"  {label:24s} n={r['n']}  R@5 {r['recall@5']:.3f}  R@8 {r['recall@8']:.3f}  "
            f"memories median {statistics.median(counts[label]):.0f}  "
            f"chars median {statistics.median(chars[label]):.0f}"
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
