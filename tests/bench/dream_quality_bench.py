"""Dream quality: run the LLM passes on a labelled memory against an OpenAI-compatible endpoint
and score every change they propose.

    python tests/bench/dream_quality_bench.py --fake [--scenario memory|skills|both]
    python tests/bench/dream_quality_bench.py --base-url http://127.0.0.1:8081/v1 \
        --model smollm2-135m

The skills scenario (tests/bench/skill_quality.py) runs the three skill passes on a labelled
catalog and conversation log and scores creations, merges, improvements and facts lost.

The labelled memory (30 entries) holds true duplicates and paraphrases spread over different
categories, look-alike but distinct episodes, a superseded fact and unrelated single facts;
the conversation holds corrections, preferences and a task request. Vectors come from the
bundled MiniLM, so consolidation prompts are grouped the way the cycle groups them. `--fake`
plays a careless tiny model (merges whatever it is shown, deletes without a successor, copies
placeholders, proposes a task request as a preference) so the host rules can be seen rejecting
every harmful proposal.

Scores: right/wrong merges and deletions, missed duplicate groups, facts lost, sensible and
bad anti-patterns and preferences, JSON failures, seconds per pass.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from dreamwell.dream import feeding, passes
from dreamwell.dream.llm import OpenAILLM
from dreamwell.dream.report import PassResult
from dreamwell.dream.rules import key_facts
from dreamwell.stores import MemoryEntry, OnnxMiniLM

NOW = datetime(2026, 6, 1, tzinfo=timezone.utc)

# (label, category, content, days ago). Labels: dN = duplicate group N (should become one),
# eN = distinct episodes that look alike (must stay apart), s-old/s-new = superseded fact,
# x = a single fact that must stay.
MEMORY: list[tuple[str, str, str, int]] = [
    ("d1", "work/meetings", "Daily standup is at 9:30 with Priya", 200),
    ("d1", "calendar", "The standup happens every day at 9:30 and Priya runs it", 90),
    ("d1", "team", "Priya runs our 9:30 daily standup", 10),
    ("d2", "coding/style", "The user wants type hints in all Python code", 150),
    ("d2", "user-preferences/coding", "Always add type hints to Python code for the user", 20),
    ("d3", "work/infra", "The production database is PostgreSQL 16", 300),
    ("d3", "tech/db", "Production runs on PostgreSQL 16", 40),
    ("d4", "personal/pets", "The user's dog is called Bruno", 400),
    ("d4", "family", "Bruno is the name of the user's dog", 5),
    ("d5", "work/process", "Deploys happen on Thursdays after 14:00", 120),
    ("d5", "ops", "We only deploy on Thursday afternoons after 14:00", 30),
    ("e1", "travel", "Trip to Lisbon in May 2023 with Ana", 700),
    ("e1", "travel", "Trip to Lisbon in October 2024 with Marco", 230),
    ("e2", "work/incidents", "Server outage on 3 March 2025 caused by a full disk", 450),
    (
        "e2",
        "work/incidents",
        "Server outage on 19 August 2025 caused by an expired certificate",
        280,
    ),
    ("s-old", "personal/home", "The user lives in Paris", 500),
    ("s-new", "personal/home", "The user moved from Paris to Berlin in June 2025", 300),
    ("x", "work/cloud", "The user's AWS account id is 1234-5678", 60),
    ("x", "health", "The user is allergic to peanuts", 365),
    ("x", "tools", "The user's editor is Neovim with the LazyVim setup", 50),
    ("x", "work/meetings", "Team retro is every second Friday at 16:00", 70),
    ("x", "personal/car", "The user drives a 2019 Toyota Corolla", 600),
    ("x", "family", "The user's sister Maria has her birthday on 14 February", 250),
    ("x", "hardware", "The user works on a Framework 13 laptop", 80),
    ("x", "work/infra", "The Kubernetes cluster runs on Hetzner in Falkenstein", 100),
    ("x", "personal", "The user speaks Portuguese and German", 330),
    ("x", "food", "The user prefers green tea to coffee", 45),
    ("x", "work/budget", "The Q3 budget for the platform team is 40k EUR", 15),
    ("x", "hobbies", "The book club meets monthly at Café Lume", 130),
    ("x", "work/projects", "Project Atlas migrates billing to Stripe by September 2026", 25),
]

CONVERSATION: list[tuple[str, str, str]] = [
    ("s1", "user", "Summarize this pull request for me"),
    ("s1", "assistant", "- Adds caching\n- Fixes a typo"),
    ("s1", "user", "No, don't use bullet points, I told you I want prose."),
    ("s2", "user", "Find the config file for the billing service"),
    ("s2", "assistant", "Running find / -name config.yaml"),
    ("s2", "user", "Stop using find / for this, it takes forever. Use ripgrep."),
    ("s3", "user", "Again: no bullet points please, write it as prose"),
    ("s4", "user", "Write me a haiku about spring"),
    ("s5", "user", "Can you give distances in kilometres? I never use miles."),
    ("s6", "user", "I said kilometres, not miles!"),
]
ANTI_THEMES = ("bullet", "prose", "find", "ripgrep", "miles", "kilomet")
PREF_THEMES = ("bullet", "prose", "kilomet", "miles", "metric")


def labelled() -> tuple[dict[str, MemoryEntry], dict[str, str]]:
    snapshot: dict[str, MemoryEntry] = {}
    labels: dict[str, str] = {}
    for n, (label, category, content, days) in enumerate(MEMORY):
        at = NOW - timedelta(days=days)
        entry = MemoryEntry(f"{n:04d}{'m' * 8}", content, category, (), at, at, at)
        snapshot[entry.id], labels[entry.id] = entry, label
    return snapshot, labels


def conversation() -> list[dict[str, Any]]:
    start = NOW - timedelta(hours=3)
    return [
        {"session": s, "role": r, "content": c, "ts": (start + timedelta(minutes=i)).isoformat()}
        for i, (s, r, c) in enumerate(CONVERSATION)
    ]


def careless_model(request: dict[str, Any]) -> str:
    """A tiny model's habits, seen in a real trial: merges whatever it is shown, deletes with
    no successor, copies placeholders and field names, answers a task request as a
    preference, and puts a raw newline inside a JSON string."""
    prompt = request["messages"][1]["content"]
    keys = request.get("response_format", {}).get("json_schema", {}).get("schema", {})
    keys = set(keys.get("properties", {}))
    ids = re.findall(r"id=(\w{12})", prompt)
    contents = re.findall(r"id=\w{12} [^:]*: (.*)", prompt)
    if "toSave" in keys:  # merges every neighbouring pair it is shown, facts kept or not
        pairs = [
            {
                "content": f"{contents[i]} and {contents[i + 1]}",
                "category": "merged",
                "tags": [],
                "sourceIds": [ids[i], ids[i + 1]],
                "importance": 0.5,
            }
            for i in range(0, len(ids) - 1, 2)
        ]
        placeholder = {
            "content": "...",
            "category": "<category/subcategory>",
            "tags": ["<tag>"],
            "sourceIds": ["id"],
            "importance": 0.5,
        }
        deletions = [
            {"id": ids[-1], "supersededBy": ""},
            {"id": ids[1], "supersededBy": ids[0]},
            {"id": ids[0], "supersededBy": ids[-1]},
        ]
        answer = {"toDelete": deletions, "toSave": [*pairs, placeholder]}
        return json.dumps(answer).replace("\\n", "\n")
    if "antiPatterns" in keys:
        sessions = sorted(set(re.findall(r"session=(\S+):", prompt)))
        return json.dumps(
            {
                "antiPatterns": [
                    {
                        "domain": "file-operations",
                        "sessions": sessions[:1],
                        "content": "Don't run find / to search files — instead use ripgrep",
                    },
                    {
                        "domain": "<one-word-domain>",
                        "sessions": ["<session id of a correction>"],
                        "content": "Don't <what the agent did> for <task> — instead <what works>",
                    },
                ]
            }
        )
    return json.dumps(
        {
            "preferences": [
                {
                    "content": "Prefers prose to bullet points",
                    "sentiment": "strong",
                    "occurrences": 2,
                    "sensitive": False,
                },
                {
                    "content": "Write me a haiku about spring",
                    "sentiment": "strong",
                    "occurrences": 1,
                    "sensitive": False,
                },
                {
                    "content": "strong|mild|casual",
                    "sentiment": "casual",
                    "occurrences": 3,
                    "sensitive": False,
                },
                {
                    "content": "Likes\nlong answers",
                    "sentiment": "casual",
                    "occurrences": 3,
                    "sensitive": False,
                },
            ]
        }
    )


@dataclass
class Score:
    right_merges: int = 0
    wrong_merges: int = 0
    right_deletes: int = 0
    wrong_deletes: int = 0
    missed_groups: int = 0
    facts_lost: int = 0
    refused: int = 0
    anti_sensible: int = 0
    anti_bad: int = 0
    prefs_sensible: int = 0
    prefs_bad: int = 0
    json_failures: int = 0


def score(
    snapshot: dict[str, MemoryEntry], labels: dict[str, str], results: list[PassResult]
) -> Score:
    s = Score()
    after = dict(snapshot)
    covered: set[str] = set()
    for result in results:
        s.json_failures += sum(
            1 for n in result.notes if n.startswith(("retried a bad answer", "skipped a chunk"))
        )
        s.json_failures += result.status == "failed"
        s.refused += sum(
            1 for n in result.notes if n.startswith(("rejected", "refused", "ignored", "kept"))
        )
        for c in result.changes:
            if c.kind == "merge":
                groups = {labels[i] for i in c.sources}
                pair = groups == {"s-old", "s-new"}
                good = pair or (len(groups) == 1 and groups.pop()[0] == "d")
                s.right_merges += good
                s.wrong_merges += not good
                covered |= {labels[i] for i in c.sources}
            elif c.kind == "archive" and c.note == "superseded" and c.before:
                good = labels[c.before.id] == "s-old" and labels.get(c.sources[0]) == "s-new"
                s.right_deletes += good
                s.wrong_deletes += not good
                covered.add(labels[c.before.id])
            elif c.kind == "anti-pattern" and c.after:
                sensible = any(t in c.after.content.lower() for t in ANTI_THEMES)
                s.anti_sensible += sensible
                s.anti_bad += not sensible
            elif c.kind == "preference" and c.after:
                sensible = any(t in c.after.content.lower() for t in PREF_THEMES)
                s.prefs_sensible += sensible
                s.prefs_bad += not sensible
            target = c.after or c.before
            if target is not None:
                after[target.id] = target
    wanted = {label for label in labels.values() if label.startswith("d")} | {"s-old"}
    s.missed_groups = len(wanted - covered)
    text = "\n".join(e.content for e in after.values() if e.live).lower()
    s.facts_lost = sum(
        1
        for e in snapshot.values()
        if labels[e.id] != "s-old"
        for f in key_facts(e.content)
        if f.lower() not in text
    )
    return s


def run(
    llm: OpenAILLM, vectors: dict[str, list[float]]
) -> tuple[Score, dict[str, float], list[PassResult]]:
    snapshot, labels = labelled()
    log = conversation()
    corrections = feeding.mine_corrections(log)
    seconds: dict[str, float] = {}
    results: list[PassResult] = []
    steps = [
        (
            "consolidation",
            lambda: passes.consolidation_pass(
                snapshot, llm, Path("/nonexistent"), [], NOW, vectors
            ),
        ),
        (
            "anti-patterns",
            lambda: passes.anti_pattern_pass(snapshot, llm, Path("/nonexistent"), corrections, NOW),
        ),
        (
            "preferences",
            lambda: passes.preference_pass(snapshot, llm, Path("/nonexistent"), log, NOW),
        ),
    ]
    for name, step in steps:
        started = time.monotonic()
        try:
            result = step()
        except Exception as exc:  # a pass that fails counts as a JSON/LLM failure
            result = PassResult(name, "failed", f"{type(exc).__name__}: {exc}"[:300])
        seconds[name] = time.monotonic() - started
        results.append(result)
    return score(snapshot, labels, results), seconds, results


@contextmanager
def endpoint(args: argparse.Namespace) -> Iterator[tuple[str, str]]:
    if not args.fake:
        yield args.base_url, args.model
        return
    from tests.bench.skill_quality import careful_skills_model, careless_skills_model

    skills_model = careful_skills_model if args.careful else careless_skills_model
    from tests.support.fake_openai import fake_openai

    def careless(request: dict[str, Any]) -> str:
        schema = request.get("response_format", {}).get("json_schema", {}).get("schema", {})
        props = schema.get("properties", {})
        item = props.get("toSave", {}).get("items", {}).get("properties", {})
        skills = {"body", "reason"} <= set(props) or "sessions" in item or "sourceNames" in item
        return skills_model(request) if skills else careless_model(request)

    with fake_openai(careless) as (url, _):
        yield url, "fake-model"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base-url", default="http://127.0.0.1:8081/v1")
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--fake", action="store_true", help="a scripted careless model")
    parser.add_argument("--timeout", type=float, default=600.0)
    parser.add_argument("--max-tokens", type=int, default=768)
    parser.add_argument("--json", action="store_true", help="print the notes and changes too")
    parser.add_argument("--scenario", choices=["memory", "skills", "both"], default="both")
    parser.add_argument(
        "--careful", action="store_true", help="with --fake: skill answers that keep the contract"
    )
    args = parser.parse_args()
    if args.scenario == "skills":
        with endpoint(args) as (url, model):
            skills_table(OpenAILLM(url, model, args.timeout, max_tokens=args.max_tokens), args)
        return
    snapshot, _ = labelled()
    ids = list(snapshot)
    vectors = dict(zip(ids, OnnxMiniLM().embed([snapshot[i].content for i in ids]), strict=True))
    with endpoint(args) as (url, model):
        llm = OpenAILLM(url, model, args.timeout, max_tokens=args.max_tokens)
        llm.check()
        started = time.monotonic()
        result, seconds, results = run(llm, vectors)
        if args.scenario == "both":
            skills_table(llm, args)
    out = sys.stdout
    out.write(
        f"model: {model} at {url}  entries: {len(snapshot)}  "
        f"total: {time.monotonic() - started:.0f} s\n"
    )
    out.write("| metric | value |\n|---|---|\n")
    for key, value in vars(result).items():
        out.write(f"| {key.replace('_', ' ')} | {value} |\n")
    for name, secs in seconds.items():
        status = next(r.status for r in results if r.name == name)
        out.write(f"| seconds {name} ({status}) | {secs:.1f} |\n")
    if args.json:
        for r in results:
            out.write(
                json.dumps(
                    {
                        "pass": r.name,
                        "status": r.status,
                        "reason": r.reason,
                        "notes": r.notes,
                        "changes": [c.to_json() for c in r.changes],
                    },
                    ensure_ascii=False,
                    default=str,
                )[:6000]
                + "\n"
            )


def skills_table(llm: OpenAILLM, args: argparse.Namespace) -> None:
    from tests.bench.skill_quality import run_skills

    llm.check()
    started = time.monotonic()
    result, seconds, results = run_skills(llm)
    out = sys.stdout
    out.write(f"skills scenario: {llm.name}  total: {time.monotonic() - started:.0f} s\n")
    out.write("| metric | value |\n|---|---|\n")
    for key, value in vars(result).items():
        out.write(f"| {key.replace('_', ' ')} | {value} |\n")
    for r in results:
        out.write(f"| seconds {r.name} ({r.status}) | {seconds.get(r.name, 0.0):.1f} |\n")
    if args.json:
        for r in results:
            out.write(
                json.dumps(
                    {
                        "pass": r.name,
                        "status": r.status,
                        "reason": r.reason,
                        "notes": r.notes,
                        "changes": [c.kind + " " + ",".join(c.sources) for c in r.changes],
                    },
                    ensure_ascii=False,
                )[:6000]
                + "\n"
            )


if __name__ == "__main__":
    main()
