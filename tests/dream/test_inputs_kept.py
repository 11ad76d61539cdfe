"""Nothing the hooks recorded is lost (docs/dreaming.md): a record
leaves the conversation, recall or feedback log only once a pass that reads it ran —
without an LLM, with a pass failing, with a cycle killed half-way, and with records a hook
appends while the cycle runs."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections import Counter
from datetime import timedelta
from pathlib import Path
from typing import Any

from dreamwell.dream import DreamOptions, render, run_cycle
from dreamwell.stores import (
    CONVERSATION,
    FEEDBACK,
    RECALL,
    JsonlLog,
    LongTermStore,
    MemoryEntry,
    utcnow,
)
from tests.support.dreams import EmptyAnswers
from tests.support.fake_ollama import fake_ollama
from tests.support.hooks import hook, prompt, wait_for_refresher

QUIET = DreamOptions(quiet_seconds=0)
SHOWN = "a" * 12


def recorded(data: Path) -> dict[str, list[dict[str, Any]]]:
    """What the hooks and the agent recorded: ten user turns in two sessions, two recalls
    followed by a turn, a helpful judgement and a Correction."""
    store = LongTermStore(data)
    when = utcnow() - timedelta(days=2)
    store.apply([MemoryEntry(SHOWN, "Deploys go out with make ship", "work", (), when, when, when)])
    early = utcnow() - timedelta(hours=2)
    conversation = JsonlLog(data, CONVERSATION)
    for i in range(10):
        turn = {"session": f"s{i % 2}", "role": "user", "content": f"turn {i}: ship the build"}
        conversation.append(turn, early + timedelta(minutes=i))
    for i in range(2):
        record = {"session": f"s{i}", "query": "ship", "ids": [SHOWN], "via": "hook"}
        JsonlLog(data, RECALL).append(record, early)
    feedback = JsonlLog(data, FEEDBACK)
    feedback.append({"session": "s0", "kind": "helpful", "memory_id": SHOWN, "detail": "yes"})
    feedback.append({"session": "s1", "kind": "Correction", "detail": "no, use make ship"})
    return logs(data)


def logs(data: Path) -> dict[str, list[dict[str, Any]]]:
    return {name: JsonlLog(data, name).read() for name in (CONVERSATION, RECALL, FEEDBACK)}


def kinds(records: list[dict[str, Any]]) -> Counter[str]:
    return Counter(str(r.get("kind")) for r in records)


def test_a_cycle_without_an_llm_keeps_every_record_its_skipped_passes_would_read(
    tmp_path: Path,
) -> None:
    before = recorded(tmp_path)
    report = run_cycle(LongTermStore(tmp_path), None, options=QUIET)
    after = logs(tmp_path)
    assert after[CONVERSATION] == before[CONVERSATION]  # preferences, skill gaps: no LLM
    assert after[RECALL] == before[RECALL]  # the judge: no LLM
    assert kinds(after[FEEDBACK]) == {"Correction": 1}  # scoring read the helpful one
    text = render(report)
    assert "kept for a later cycle" in text
    assert f"10 from {CONVERSATION}" in text and f"2 from {RECALL}" in text


def test_a_failing_pass_keeps_what_it_was_to_read_and_the_others_take_theirs(
    tmp_path: Path,
) -> None:
    before = recorded(tmp_path)
    llm = EmptyAnswers(fail=("preferences",))
    report = run_cycle(LongTermStore(tmp_path), llm, options=QUIET)
    status = {p.name: p.status for p in report.passes}
    assert status["preferences"] == "failed" and status["anti-patterns"] == "ran"
    after = logs(tmp_path)
    assert after[CONVERSATION] == before[CONVERSATION]
    assert after[RECALL] == before[RECALL]  # the judge asked nothing: the LLM had failed
    assert after[FEEDBACK] == []  # anti-patterns and scoring ran


def test_a_judge_that_fails_keeps_the_recalls_for_a_later_cycle(tmp_path: Path) -> None:
    before = recorded(tmp_path)
    run_cycle(LongTermStore(tmp_path), EmptyAnswers(fail=("judgements",)), options=QUIET)
    after = logs(tmp_path)
    assert after[RECALL] == before[RECALL]
    assert after[CONVERSATION] == []  # preferences and skill gaps ran


def test_a_budget_spent_mid_cycle_skips_the_passes_left_and_keeps_what_they_read(
    tmp_path: Path,
) -> None:
    before = recorded(tmp_path)
    llm = EmptyAnswers(tokens=50_000)  # the first answer spends the whole budget
    options = DreamOptions(quiet_seconds=0, budget_tokens=50_000)
    report = run_cycle(LongTermStore(tmp_path), llm, options=options)
    assert llm.asked == 1
    skipped = [p.name for p in report.passes if p.reason.startswith("token budget spent")]
    assert {"anti-patterns", "preferences"} <= set(skipped)
    text = render(report)
    assert "empty-answers, 1 call, 50,000 of 50,000 tokens" in text
    assert "preferences: skipped (token budget spent: 50,000 of 50,000 tokens)" in text
    after = logs(tmp_path)
    assert after[CONVERSATION] == before[CONVERSATION]
    assert after[RECALL] == before[RECALL]  # the judge was refused
    assert kinds(after[FEEDBACK]) == {"Correction": 1}


def test_a_budget_of_one_token_asks_nothing_and_says_which_passes_it_skipped(
    tmp_path: Path,
) -> None:
    recorded(tmp_path)
    llm = EmptyAnswers()
    options = DreamOptions(quiet_seconds=0, budget_tokens=1)
    report = run_cycle(LongTermStore(tmp_path), llm, options=options)
    assert llm.asked == 0
    status = {p.name: (p.status, p.reason) for p in report.passes}
    for name in ("skill-gap", "anti-patterns", "preferences"):
        assert status[name][0] == "skipped" and status[name][1].startswith("token budget"), name
    assert "empty-answers, 0 calls, 0 of 1 tokens" in render(report)


def test_what_a_hook_records_while_the_cycle_runs_survives_it(tmp_path: Path) -> None:
    """The real `dreamwell hook user-prompt` appends a turn and a recall while the cycle
    waits for its model; the cycle drops only what it read."""
    recorded(tmp_path)

    def a_prompt_meanwhile() -> None:
        # a prompt the stored memory answers: the hook records its turn and what it recalled
        done = hook("user-prompt", prompt("s7", "do deploys go out with make ship?"), tmp_path)
        assert done.returncode == 0, done.stderr

    llm = EmptyAnswers(during=a_prompt_meanwhile)
    run_cycle(LongTermStore(tmp_path), llm, options=QUIET)
    after = logs(tmp_path)
    assert [r["content"] for r in after[CONVERSATION]] == ["do deploys go out with make ship?"]
    assert [r["session"] for r in after[RECALL]] == ["s7"]
    assert after[FEEDBACK] == []
    wait_for_refresher(tmp_path)  # the hook may have started one: it must not outlive the test


def test_a_cycle_killed_mid_way_leaves_the_input_logs_as_they_were(tmp_path: Path) -> None:
    data = tmp_path / "data"
    before = recorded(data)
    raw = {name: (data / name).read_bytes() for name in before}
    with fake_ollama((120.0, "{}")) as (host, script):  # the model never answers in time
        env = {
            **os.environ,
            "DREAMWELL_OLLAMA_HOST": host,
            "DREAMWELL_OLLAMA_MODEL": "fake",
            "DREAMWELL_EMBEDDER": "none",
            "DREAMWELL_LOG_LEVEL": "ERROR",
        }
        dreamer = subprocess.Popen(
            [sys.executable, "-m", "dreamwell.server", "dream", "--once", "--data-dir", str(data)],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and not script.requests:
                time.sleep(0.05)
            assert script.requests, "the cycle never reached an LLM pass"
            dreamer.send_signal(signal.SIGKILL)
            dreamer.wait(10)
        finally:
            if dreamer.poll() is None:
                dreamer.kill()
                dreamer.wait()
    assert {name: (data / name).read_bytes() for name in before} == raw
