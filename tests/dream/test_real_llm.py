"""Opt-in: the LLM passes against a real model behind an OpenAI-compatible endpoint (skipped
unless DREAMWELL_TEST_LLM_BASE_URL is set; DREAMWELL_TEST_LLM_MODEL names the model). A tiny
model makes bad proposals; whatever it answers, no fact may be lost and no pass may raise.

    ../shared/llm/start-local-llm.sh smollm2-135m 8081
    export DREAMWELL_TEST_LLM_BASE_URL=http://127.0.0.1:8081/v1
    python -m pytest -q tests/dream/test_real_llm.py
"""

from __future__ import annotations

import os
from datetime import timedelta
from pathlib import Path

import pytest

from dreamwell.dream import passes
from dreamwell.dream.llm import OpenAILLM
from dreamwell.dream.rules import key_facts
from dreamwell.stores import MemoryEntry, utcnow

BASE_URL = os.environ.get("DREAMWELL_TEST_LLM_BASE_URL", "")
pytestmark = pytest.mark.skipif(not BASE_URL, reason="DREAMWELL_TEST_LLM_BASE_URL is not set")

FACTS = [
    ("work/meetings", "Daily standup is at 9:30 with Priya"),
    ("calendar", "Priya runs our 9:30 daily standup"),
    ("travel", "Trip to Lisbon in May 2023 with Ana"),
    ("travel", "Trip to Lisbon in October 2024 with Marco"),
    ("health", "The user is allergic to peanuts"),
]


def test_a_real_model_never_loses_a_fact(tmp_path: Path) -> None:
    llm = OpenAILLM(
        BASE_URL, os.environ.get("DREAMWELL_TEST_LLM_MODEL", "smollm2-135m"), 900.0, max_tokens=512
    )
    llm.check()
    now = utcnow()
    snapshot = {}
    for n, (category, content) in enumerate(FACTS):
        at = now - timedelta(days=10 * (n + 1))
        entry = MemoryEntry(f"{n:012d}", content, category, (), at, at, at)
        snapshot[entry.id] = entry
    vectors = {e.id: [1.0, 0.1 * n] for n, e in enumerate(snapshot.values())}  # one prompt
    result = passes.consolidation_pass(snapshot, llm, tmp_path, [], now, vectors)
    assert result.status in ("ran", "failed")
    after = dict(snapshot)
    for change in result.changes:
        target = change.after or change.before
        assert target is not None
        after[target.id] = target
    text = "\n".join(e.content for e in after.values() if e.live).lower()
    lost = [f for e in snapshot.values() for f in key_facts(e.content) if f.lower() not in text]
    assert lost == []
    log = [
        {"session": "s1", "role": "user", "content": "No bullet points, I told you: prose!"},
        {"session": "s2", "role": "user", "content": "Write me a haiku about spring"},
    ]
    prefs = passes.preference_pass(snapshot, llm, tmp_path, log, now)
    for change in prefs.changes:
        assert change.after is not None and "haiku" not in change.after.content.lower()
