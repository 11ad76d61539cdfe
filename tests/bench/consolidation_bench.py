"""Consolidation benchmark (not collected by pytest): how many true duplicates merge and how
many distinct entries are wrongly merged, under the host's rules.

A labelled set of 180 pairs is built from templates: 60 true duplicates (30 that differ only in
case, spacing and punctuation, 30 paraphrases that keep every fact), 80 distinct-but-similar
episodes (same template, another date, number, person or place) and 40 unrelated pairs. Each
pair is saved into its own category of one real store, then a dream cycle runs with:
  host     no LLM: only the host's exact-duplicate rule;
  ideal    a scripted LLM that merges exactly the true duplicates;
  careless a scripted LLM that also merges every distinct pair, keeping one side's text;
  greedy   a scripted LLM that merges every pair of a category, joining both texts.
Run: python tests/bench/consolidation_bench.py
"""

from __future__ import annotations

import json
import re
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar

from dreamwell.dream import DreamOptions, run_cycle
from dreamwell.stores import LongTermStore, MemoryEntry, utcnow

PEOPLE = ["Priya", "Marco", "Aiko", "Tomás", "Lena", "Kwame", "Sofia", "Ravi", "Hannah", "Omar"]
PLACES = [
    "Lisbon",
    "Osaka",
    "Denver",
    "Nairobi",
    "Oslo",
    "Lima",
    "Porto",
    "Seoul",
    "Austin",
    "Krakow",
]
TOOLS = ["ripgrep", "PostgreSQL 16", "Neovim", "Terraform", "pnpm", "Docker", "Bazel", "Rust"]
MONTHS = ["January", "March", "May", "July", "September", "November"]


def exact_dup(i: int) -> tuple[str, str]:
    text = f"{PEOPLE[i % 10]} prefers {TOOLS[i % 8]} for the {PLACES[i % 10]} project"
    return text, "  " + text.upper().replace(" FOR ", " for  ") + "!"


def paraphrase(i: int) -> tuple[str, str]:
    p, t, c = PEOPLE[i % 10], TOOLS[(i + 3) % 8], PLACES[(i + 1) % 10]
    return (f"{p} uses {t} every day in {c}", f"In {c}, {p} relies on {t} daily")


def episode(i: int) -> tuple[str, str]:
    p, c, m = PEOPLE[i % 10], PLACES[i % 10], MONTHS[i % 6]
    kind = i % 4
    if kind == 0:
        return (f"Trip to {c} with {p} in {m} 2024", f"Trip to {c} with {p} in {m} 2025")
    if kind == 1:
        return (f"Met {p} in {c} on {i % 27 + 1} {m}", f"Met {p} in {c} on {i % 27 + 2} {m}")
    if kind == 2:
        return (
            f"{p}'s budget for {c} is {1000 + i} EUR",
            f"{p}'s budget for {c} is {2000 + i} EUR",
        )
    return (f"{p} presented the {c} roadmap", f"{PEOPLE[(i + 1) % 10]} presented the {c} roadmap")


def unrelated(i: int) -> tuple[str, str]:
    return (
        f"{PEOPLE[i % 10]} likes {TOOLS[i % 8]}",
        f"The {PLACES[(i + 5) % 10]} office closes at {17 + i % 3}:00",
    )


def labelled() -> list[tuple[str, str, str]]:
    pairs = [("exact", *exact_dup(i)) for i in range(30)]
    pairs += [("paraphrase", *paraphrase(i)) for i in range(30)]
    pairs += [("episode", *episode(i)) for i in range(80)]
    pairs += [("unrelated", *unrelated(i)) for i in range(40)]
    return pairs


class ScriptedLLM:
    """Reads the ids shown in each consolidation prompt and answers with a plan."""

    def __init__(self, name: str, decide: Callable[[str, list[tuple[str, str]]], Any]) -> None:
        self.name, self._decide = name, decide

    def check(self) -> None:
        pass

    def ask(self, system: str, prompt: str, schema: dict[str, Any]) -> str:
        if not prompt.startswith("Entries:"):
            return "{}"
        shown = re.findall(r"id=(\w+) category=(\S+)", prompt)
        plans = []
        by_cat: dict[str, list[str]] = {}
        for i, cat in shown:
            by_cat.setdefault(cat, []).append(i)
        for cat, ids in by_cat.items():
            if len(ids) == 2:
                item = self._decide(cat, [(i, self.texts[i]) for i in ids])
                if item:
                    plans.append(item)
        return json.dumps({"toDelete": [], "toSave": plans})

    texts: ClassVar[dict[str, str]] = {}


def merge_keep_first(kinds: set[str]) -> Callable[[str, list[tuple[str, str]]], Any]:
    def decide(cat: str, pair: list[tuple[str, str]]) -> Any:
        kind = cat.split("/")[1]
        if kind in kinds:
            return {"content": pair[0][1], "sourceIds": [i for i, _ in pair]}
        return None

    return decide


def greedy(cat: str, pair: list[tuple[str, str]]) -> Any:
    return {"content": " / ".join(t for _, t in pair), "sourceIds": [i for i, _ in pair]}


def run(mode: str) -> dict[str, tuple[int, int]]:
    pairs = labelled()
    with tempfile.TemporaryDirectory() as tmp:
        store = LongTermStore(Path(tmp))
        now = utcnow()
        entries = []
        for n, (kind, a, b) in enumerate(pairs):
            cat = f"bench/{kind}/{n}"
            entries += [
                MemoryEntry(f"{2 * n:012x}", a, cat, (), now, now, now),
                MemoryEntry(f"{2 * n + 1:012x}", b, cat, (), now, now, now),
            ]
        store.apply(entries)
        ScriptedLLM.texts = {e.id: e.content for e in entries}
        llm = {
            "host": None,
            "ideal": ScriptedLLM("ideal", merge_keep_first({"exact", "paraphrase"})),
            "careless": ScriptedLLM(
                "careless", merge_keep_first({"exact", "paraphrase", "episode", "unrelated"})
            ),
            "greedy": ScriptedLLM("greedy", greedy),
        }[mode]
        run_cycle(store, llm, options=DreamOptions(quiet_seconds=0))  # type: ignore[arg-type]
        live = store.entries()
        counts: dict[str, tuple[int, int]] = {}
        for n, (kind, _, _) in enumerate(pairs):
            merged = sum(1 for e in live if e.category == f"bench/{kind}/{n}") == 1
            done, total = counts.get(kind, (0, 0))
            counts[kind] = (done + merged, total + 1)
        return counts


def main() -> None:
    out = sys.stdout
    out.write(
        "| plans | exact dups merged | paraphrase dups merged | distinct episodes wrongly "
        "merged | unrelated wrongly merged |\n|---|---|---|---|---|\n"
    )
    for mode in ("host", "ideal", "careless", "greedy"):
        c = run(mode)
        out.write(
            f"| {mode} | "
            + " | ".join(
                f"{c[k][0]}/{c[k][1]}" for k in ("exact", "paraphrase", "episode", "unrelated")
            )
            + " |\n"
        )
        out.flush()


if __name__ == "__main__":
    main()
