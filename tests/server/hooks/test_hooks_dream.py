"""End to end: a scripted Claude Code session (hook inputs, and a transcript written like Claude
Code's) goes through all five hook events, then one dream cycle with a scripted OpenAI-style
model. Each pass must have received what the hooks recorded: the preference pass the user's
turns, the anti-pattern pass the correction mined from them, the judge (scoring) the memory a
hook showed together with what the user said next, and the usage log the skills and tools."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path
from typing import Any

from dreamwell.dream import DreamOptions, OpenAILLM, run_cycle
from dreamwell.server.hooks.refresh import refresh
from dreamwell.stores import CONVERSATION, RECALL, JsonlLog, LongTermStore, MemoryEntry, utcnow
from dreamwell.stores.layout import DataDir
from tests.support.fake_openai import fake_openai
from tests.support.hooks import Transcript, event, hook, prompt

DEPLOY, PREF = "c3" * 6, "a1" * 6
CORRECTION = "No, don't deploy from the repo root, I told you to use the ci pipeline"


def model(request: dict[str, Any]) -> str:
    """A scripted model that answers each pass by its system prompt."""
    system = request["messages"][0]["content"]
    if "learn from its mistakes" in system:
        content = "Don't deploy the api from the repo root — instead use the ci pipeline"
        return json.dumps(
            {"antiPatterns": [{"domain": "deploy", "sessions": ["s1"], "content": content}]}
        )
    if "durable user preferences" in system:
        said = {"content": "I prefer short answers", "sentiment": "strong", "occurrences": 1}
        return json.dumps({"preferences": [said]})
    if "judge whether memories" in system:
        verdict = {"id": DEPLOY, "verdict": "harmful", "reason": "user: don't deploy from root"}
        return json.dumps({"judgements": [verdict]})
    return json.dumps({"toDelete": [], "toSave": []})


def scripted_session(data: Path, t: Transcript) -> None:
    start = hook("session-start", event("s1", "SessionStart", t.path, source="startup"), data)
    assert start.returncode == 0 and DEPLOY not in start.stdout  # nothing asked here yet
    t.user("how do I deploy the api?")
    shown = hook(
        "user-prompt", prompt("s1", "how do I deploy the api?", transcript_path=str(t.path)), data
    )
    assert DEPLOY in shown.stdout
    t.tool("Bash", {"command": "make deploy"})
    t.tool("Skill", {"skill": "release-checklist"})
    t.assistant("Deployed from the repo root.")
    assert hook("stop", event("s1", "Stop", t.path), data).stdout == ""
    t.user(CORRECTION)
    hook("user-prompt", prompt("s1", CORRECTION, transcript_path=str(t.path)), data)
    t.tool("Bash", {"command": "gh workflow run deploy"})
    t.user("I prefer short answers")  # typed while the hooks were not installed, say
    assert hook("pre-compact", event("s1", "PreCompact", t.path, trigger="auto"), data).stdout == ""
    assert hook("session-end", event("s1", "SessionEnd", t.path, reason="exit"), data).stdout == ""


def test_a_scripted_claude_code_session_feeds_every_pass_of_the_dream(tmp_path: Path) -> None:
    store = LongTermStore(tmp_path)
    when = utcnow() - timedelta(days=3)
    store.apply(
        [
            MemoryEntry(
                DEPLOY,
                "Deploy the api with make deploy from the repo root",
                "projects/api",
                (),
                when,
                when,
                when,
            ),
            MemoryEntry(
                PREF,
                "The user prefers prose to bullet points",
                "user-preferences/style",
                (),
                when,
                when,
                when,
            ),
        ]
    )
    store.checkpoint()
    refresh(DataDir(tmp_path))
    scripted_session(tmp_path, Transcript(tmp_path / "session.jsonl", "s1"))

    conversation = JsonlLog(tmp_path, CONVERSATION).read()
    assert [r["content"] for r in conversation] == [
        "how do I deploy the api?",
        CORRECTION,
        "I prefer short answers",
    ]
    usage = [json.loads(x) for x in (tmp_path / "skill-usage.jsonl").read_text().splitlines()]
    assert [u.get("skill") for u in usage if "skill" in u] == ["release-checklist"]
    assert sum(u.get("count", 0) for u in usage if u.get("tool") == "Bash") == 2
    assert {DEPLOY} in [set(r["ids"]) for r in JsonlLog(tmp_path, RECALL).read()]

    with fake_openai(model) as (url, script):
        llm = OpenAILLM(url, "fake-model", 30.0)
        report = run_cycle(store, llm, options=DreamOptions(quiet_seconds=0))
    status = {p.name: p.status for p in report.passes}
    assert status["anti-patterns"] == status["preferences"] == status["scoring"] == "ran", status

    asked = {
        r["messages"][0]["content"][:40]: r["messages"][-1]["content"] for r in script.requests
    }
    anti = next(v for k, v in asked.items() if "learn from" in k)
    prefs = next(v for k, v in asked.items() if "durable user" in k)
    judge = next(v for k, v in asked.items() if "judge whether" in k)
    assert CORRECTION in anti  # mined from the hook-recorded turns
    assert "how do I deploy the api?" in prefs and "I prefer short answers" in prefs
    assert "make deploy from the repo root" in judge and CORRECTION in judge

    after = {e.id: e for e in store.entries()}
    assert after[DEPLOY].score < 0 and after[DEPLOY].last_used_at is not None  # judged, used
    categories = {e.category for e in after.values()}
    assert "anti-patterns/deploy" in categories and "user-preferences/inferred" in categories
    assert JsonlLog(tmp_path, CONVERSATION).read() == []  # taken by the cycle
