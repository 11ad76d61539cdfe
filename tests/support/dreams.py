"""Dreams scripted for the tests: a model answering each skill pass by a handler, the skills and
conversation they work on, and a whole dream over seeded memories, skills and feedback."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

from dreamwell.dream import DreamOptions, run_cycle
from dreamwell.dream.llm import OpenAILLM
from dreamwell.stores import CONVERSATION, FEEDBACK, JsonlLog, LongTermStore, MemoryEntry, utcnow
from dreamwell.stores.skills.catalog import NEW, SkillCatalog, SkillChange
from dreamwell.stores.skills.folders import make_folder
from dreamwell.stores.skills.usage import SkillUsage
from tests.support import ui_browser
from tests.support.fake_openai import fake_openai

Handler = Callable[[dict[str, Any]], Any]  # a dict (sent as JSON) or the raw text


RELEASE = """\
1. On a clean `main`, run `scripts/bump.sh 1.4.0`.
2. Push the tag: `git push origin v1.4.0`.
3. Watch https://ci.example.com/billing for 15 minutes.
"""


def kind_of(request: dict[str, Any]) -> str:
    """Which pass asks: told apart by the answer's JSON schema."""
    props = request["response_format"]["json_schema"]["schema"]["properties"]
    if {"body", "reason"} <= set(props):
        return "optimise"
    item = props.get("toSave", {}).get("items", {}).get("properties", {})
    if "sessions" in item:
        return "gap"
    return "consolidate" if "sourceNames" in item else "memory"


def model(**handlers: Handler) -> Callable[[dict[str, Any]], str]:
    """A scripted model: each skill pass's handler answers its prompts (and sees them); the
    memory passes get empty plans."""

    def answer(request: dict[str, Any]) -> str:
        kind = kind_of(request)
        if kind in handlers:
            said = handlers[kind](request)
            return said if isinstance(said, str) else json.dumps(said)
        return json.dumps({"toDelete": [], "toSave": [], "antiPatterns": [], "preferences": []})

    return answer


def say(data: Path, session: str, text: str) -> None:
    JsonlLog(data, CONVERSATION).append({"session": session, "role": "user", "content": text})


def add_skill(data: Path, name: str, body: str, days_old: int = 0, **kw: Any) -> None:
    md = f"---\nname: {name}\ndescription: {kw.pop('description', name + ' steps')}\n---\n\n{body}"
    folder = make_folder(name, {"SKILL.md": md.encode()}, name)
    made = (utcnow() - timedelta(days=days_old)).isoformat()
    change = SkillChange(name, NEW, dict(folder.files), kw.pop("status", "active"), created_at=made)
    assert not SkillCatalog(data).apply([change]).conflicts
    if kw.pop("pinned", False):
        SkillCatalog(data).pin(name)


def dream(data: Path, url: str, **options: Any) -> Any:
    store = LongTermStore(data)
    llm = OpenAILLM(url, "fake-model", 10.0)
    opts = DreamOptions(quiet_seconds=0, **options)
    return store, run_cycle(store, llm, options=opts)


def new_skill(name: str, sessions: list[str], body: str = "Run `make release`.") -> dict[str, Any]:
    return {"name": name, "description": f"{name} for the user", "body": body, "sessions": sessions}


def three_overlapping(data: Path) -> None:
    add_skill(data, "deploy-web", "Run `make deploy-web` then check https://web.example.com.", 40)
    add_skill(data, "deploy-site", "Deploy with `make deploy-web`; it takes 5 minutes.", 20)
    add_skill(data, "deploy-frontend", "Use `make deploy-web` and purge the CDN.", 10)
    add_skill(data, "rotate-keys", "Run `vault rotate billing` every 90 days.", 30, pinned=True)
    add_skill(data, "tidy-inbox", "Archive mail older than 30 days in `mutt`.", 30)


def at_risk(data: Path) -> None:
    add_skill(data, "cut-release", RELEASE, 30)
    SkillUsage(data).record_use("s9", "cut-release", "prompt")
    JsonlLog(data, FEEDBACK).append(
        {"session": "s9", "kind": "Correction", "detail": "you forgot to run the tests first"}
    )


def improved(body: str) -> Handler:
    return lambda request: {"name": "cut-release", "body": body, "reason": "tests were skipped"}


PREFERENCE = "Prefers prose answers with no bullet points"


ANTI = "Don't skip running the tests before a release"


def memory_answer(request: dict[str, Any]) -> dict[str, Any]:
    return {
        "toDelete": [],
        "toSave": [],
        "antiPatterns": [{"content": ANTI, "domain": "release", "sessions": ["s9"]}],
        "preferences": [{"content": PREFERENCE, "sentiment": "strong", "occurrences": 1}],
    }


def dreamt(data: Path) -> LongTermStore:
    """A real dream over seeded memories, skills, conversation and feedback."""
    ui_browser.seed(data)
    three_overlapping(data)
    at_risk(data)  # cut-release, used, with a Correction: "you forgot to run the tests first"
    say(data, "s1", "Cut a release of the billing service with make release")
    say(data, "s2", "Cut the billing release again with make release")
    say(data, "s3", "I like prose answers, with no bullet points at all")
    merged = {"description": "d", "body": "Use `make deploy-web`, 5 minutes, then the CDN."}
    handlers: dict[str, Handler] = {
        "gap": lambda r: {"toSave": [new_skill("billing-release", ["s1", "s2"])]},
        "consolidate": lambda r: {
            "toDelete": ["deploy-frontend"],
            "toSave": [
                merged | {"name": "deploy-site", "sourceNames": ["deploy-frontend"], "seeAlso": []}
            ],
        },
        "optimise": improved("0. Run `make test` and stop if it fails.\n" + RELEASE),
        "memory": memory_answer,
    }
    with fake_openai(model(**handlers)) as (url, _):
        store, report = dream(data, url)
    kinds = {c.kind for c in report.changes()}
    assert {"merge", "preference", "anti-pattern", "skill-create", "skill-merge"} <= kinds
    return store  # type: ignore[no-any-return]


def seed(store: LongTermStore) -> dict[str, MemoryEntry]:
    now = utcnow()
    old = now - timedelta(days=120)

    def e(i: str, content: str, category: str | None, when: object = old, **kw: object):
        return MemoryEntry(i * 12, content, category, (), when, when, when, **kw)  # type: ignore[arg-type]

    entries = [
        e("a", "User lives in Chicago", "user-preferences/location", importance=0.9),
        e(
            "b",
            "user lives in chicago!",
            "user-preferences/location",
            importance=0.6,
            reinforcement_count=2,
        ),
        e("c", "Trip to Lisbon in May 2024", "travel"),
        e("d", "Trip to Lisbon in May 2025", "travel"),
        e("e", "Likes green tea", "food", when=now),
        e("f", "Use tabs in Go code", "coding", when=now, score=-2.3),
    ]
    store.apply(entries)
    return {x.id: x for x in entries}


class EmptyAnswers:
    """An LLM double (the dream's `LLM` protocol, in this process) that answers every pass
    with an empty plan: each list its schema asks for, empty. `fail` names the answer keys
    (`preferences`, `judgements`, …) whose pass it fails with an LLM error; `during` runs
    once, inside the first question (the minutes a real model thinks)."""

    name = "empty-answers"

    def __init__(
        self,
        fail: tuple[str, ...] = (),
        during: Callable[[], None] | None = None,
        tokens: int = 0,
    ):
        self.fail, self.during, self.asked = fail, during, 0
        self.tokens = tokens  # what each answer says it spent (0: the cycle estimates)
        self.last_tokens = 0

    def check(self) -> None:
        pass

    def ask(self, system: str, prompt: str, schema: dict[str, Any], *_: Any, **__: Any) -> str:
        from dreamwell.dream.llm import LLMUnavailable

        self.asked += 1
        self.last_tokens = self.tokens
        if self.during is not None:
            during, self.during = self.during, None
            during()
        keys = list(schema.get("properties", {}))
        if set(keys) & set(self.fail):
            raise LLMUnavailable(f"scripted failure for {keys}")
        return json.dumps({k: [] for k in keys})
