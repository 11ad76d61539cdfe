"""The dream through Claude Code when the API fails (docs/dreaming.md; the breaker:
dream/budget.py), with the real `claude` binary against a scripted Anthropic API on 127.0.0.1 that
answers 401, 429 (no retry-after), 529, or hangs: the first failure ends the cycle's questions, one
line names it, the lock is free, the next automatic cycle waits longer, nothing is spent or
left behind. And a budget that holds against what the API counts, and a cycle cut short by
a signal whose report says so."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from contextlib import suppress
from dataclasses import replace
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from dreamwell.dream import ClaudeCodeLLM, backoff, render
from dreamwell.dream.report import list_reports, load_report
from dreamwell.server.auto_dream import AutoDream, due, last_cycle
from dreamwell.stores import DataDir, JsonlLog, LongTermStore, MemoryEntry, exclusive, utcnow
from tests.support.anthropic_api import AnthropicAPI, Failure, Turn, structured, structured_schema
from tests.support.claude_code import DREAMWELL, ClaudeHome

A, B = "a" * 12, "b" * 12
FAILURES = {  # what the API answers every dream question with, and what the report names
    "401": (Failure(401, "authentication_error"), "401"),
    "429": (Failure(429, "rate_limit_error"), "429"),
    "529": (Failure(529, "overloaded_error"), "529"),
    "hang": (Failure(hang=True), "gave no answer within 10 s"),
}


def seeded(home: ClaudeHome, talk: bool = True) -> None:
    """Two near-duplicates and (`talk`) three user turns: the skill, consolidation and
    preference passes each have a question to ask."""
    store = LongTermStore(home.data_dir, embedder=None)
    when = utcnow() - timedelta(days=2)
    store.apply(
        [
            MemoryEntry(A, "Standup is at 9:30 with Priya", "work", (), when, when, when),
            MemoryEntry(B, "Daily standup at 9:30, Priya runs it", "work", (), when, when, when),
        ]
    )
    if not talk:
        return
    log = JsonlLog(home.data_dir, "conversation.jsonl")
    for session, text in (("s1", "Cut a release with make release"), ("s2", "Release again")):
        log.append({"session": session, "role": "user", "content": text})
    log.append({"session": "s3", "role": "user", "content": "I like prose answers, no bullets"})


def every_list_empty(request: dict[str, Any]) -> Turn:
    """An answer to any pass, each counted as the API would (its JSON / 4, input)."""
    schema = structured_schema(request)
    turn = structured({k: [] for k in schema.get("properties", {})}) if schema else Turn("t")
    return replace(turn, input_tokens=len(json.dumps(request)) // 4)


def dream_once(home: ClaudeHome, api: AnthropicAPI, *more: str) -> subprocess.CompletedProcess[str]:
    return home.dreamwell(
        "dream", "--once", "--llm-provider", "claude-code", "--claude-path", str(home.binary),
        *more, api=api, check=False,
    )  # fmt: skip


def lock_is_free(data: Path) -> bool:
    with exclusive(data, "dream", DataDir(data).dream_lock, "a dream cycle"):
        return True


def leftovers(tmp: Path) -> list[str]:
    return sorted(p.name for p in tmp.glob("dreamwell-claude-*"))


def test_the_first_api_failure_ends_the_cycle_s_questions_and_the_next_auto_dream_waits_longer(
    tmp_path: Path,
) -> None:
    home = ClaudeHome(tmp_path)
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    # an answer's time-out: long enough for a `claude` starting on a loaded machine
    home.extra_env |= {"TMPDIR": str(tmp), "DREAMWELL_LLM_TIMEOUT": "10"}
    seeded(home)
    auto = AutoDream(after=60.0, sessions=0)
    for n, (name, (failure, cause)) in enumerate(FAILURES.items(), start=1):
        with AnthropicAPI(lambda request, failure=failure: failure) as api:
            began = time.monotonic()
            done = dream_once(home, api)
            took = time.monotonic() - began
            asked = [r for r in api.requests if structured_schema(r) is not None]
        out, err = done.stdout, done.stderr
        assert done.returncode == 0, (name, err)
        assert len(asked) == 1, (name, len(asked), out)  # one question, no retry
        assert took < 60, (name, took)  # the hang: one 10 s time-out, not one per question
        stopped = [line for line in out.splitlines() if line.startswith("LLM stopped")]
        assert len(stopped) == 1 and cause in stopped[0], (name, out)
        assert "1 call (1 failed), 0 of 200,000 tokens" in out, (name, out)  # nothing spent
        assert "skipped (LLM stopped after a failure earlier in this cycle)" in out, out
        assert "Traceback" not in err and len(err.splitlines()) <= 4, (name, err)
        assert lock_is_free(home.data_dir)
        assert leftovers(tmp) == []
        # the next automatic cycle: due after 60 s doubled for each failed cycle in a row
        dirs = DataDir(home.data_dir)
        assert backoff.read(home.data_dir).failures == n
        last = last_cycle(dirs)
        assert not due(dirs, auto, now=last + 60 * 2**n - 1), name
        assert due(dirs, auto, now=last + 60 * 2**n + 1), name
    assert len(JsonlLog(home.data_dir, "conversation.jsonl").read()) == 3  # kept for later


def test_what_the_api_counts_never_exceeds_the_token_budget(tmp_path: Path) -> None:
    """Each question is counted before it is sent — with Claude Code's own wrapping and the
    longest answer it may give — so the API's own count stays within the budget. And a cycle
    whose LLM answered clears the back-off of earlier failed ones."""
    home = ClaudeHome(tmp_path)
    home.extra_env |= {"DREAMWELL_LLM_MAX_TOKENS": "256"}  # the longest answer it may give
    seeded(home)
    backoff.record(home.data_dir, "an earlier cycle's failure")
    counted: list[int] = []

    def brain(request: dict[str, Any]) -> Turn:
        turn = every_list_empty(request)
        counted.append(turn.input_tokens + turn.output_tokens)
        return turn

    with AnthropicAPI(brain) as api:
        done = dream_once(home, api, "--dream-budget-tokens", "3000")
    assert 0 < sum(counted) <= 3000, (counted, done.stdout)
    assert f"{sum(counted):,} of 3,000 tokens" in done.stdout, (counted, done.stdout)
    assert "token budget" in done.stdout  # a question was refused before it was sent
    assert backoff.read(home.data_dir).failures == 0  # the LLM answered: no more back-off


def claude_runs_in(tmp: Path) -> list[int]:
    """The processes working in a folder under `tmp` (the dream's `claude` runs)."""
    found = []
    for proc in Path("/proc").iterdir():
        try:
            if proc.name.isdigit() and str(tmp) in os.readlink(proc / "cwd"):
                found.append(int(proc.name))
        except OSError:
            continue
    return found


def last_report(data: Path) -> str:
    """The newest report, as `dreamwell dream --report` prints it."""
    return render(load_report(data, list_reports(data)[0]))


def dream_stopped_by(home: ClaudeHome, api: AnthropicAPI, signum: int) -> tuple[int, str]:
    """`dream --once` sent `signum` while its `claude` waits for the API: (exit code, stderr)."""
    command = [str(DREAMWELL), "dream", "--once", "--llm-provider", "claude-code"]
    command += ["--claude-path", str(home.binary)]
    child = subprocess.Popen(
        command,
        env=home.env(api),
        cwd=home.project,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60
        while len([r for r in api.requests if structured_schema(r) is not None]) < 1:
            assert time.monotonic() < deadline and child.poll() is None, child.poll()
            time.sleep(0.1)
        api.requests.clear()
        child.send_signal(signum)
        _, err = child.communicate(timeout=30)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    return child.returncode, err


def test_a_cycle_stopped_by_a_signal_or_killed_says_so_and_leaves_no_claude_nor_temp_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = ClaudeHome(tmp_path)
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    home.extra_env |= {"TMPDIR": str(tmp)}
    seeded(home)
    with AnthropicAPI(lambda request: Failure(hang=True)) as api:
        code, err = dream_stopped_by(home, api, signal.SIGTERM)
        assert code == 130 and "interrupted" in err and "Traceback" not in err, err
        assert leftovers(tmp) == [] and claude_runs_in(tmp) == []
        assert lock_is_free(home.data_dir)
        report = last_report(home.data_dir)
        assert "INCOMPLETE: cut short: the dream was interrupted" in report, report
        # killed outright: nothing of it runs, yet its report says so
        code, err = dream_stopped_by(home, api, signal.SIGKILL)
        assert code == -signal.SIGKILL
        report = last_report(home.data_dir)
        assert "INCOMPLETE: the cycle did not finish" in report, report
        assert lock_is_free(home.data_dir)
        orphans = claude_runs_in(tmp)  # its `claude`, until the API's time-out ends it
        for pid in orphans:
            with suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
    assert leftovers(tmp) != []
    monkeypatch.setattr(tempfile, "tempdir", str(tmp))
    ClaudeCodeLLM(str(home.binary)).check()  # the next cycle's start removes its folder
    assert leftovers(tmp) == []


# `dreamwell dream --once` with its consolidation pass made to raise as a full disk would (a
# pass that fails before it asks anything: no `claude` runs)
FAILING_PASS = """
import sys
from dreamwell.dream import passes
def boom(*args, **kwargs):
    raise OSError(28, "No space left on device")
passes.consolidation_pass = boom
from dreamwell.server.cli.main import run
sys.argv[0] = "dreamwell"
run()
"""


def test_a_pass_that_fails_is_one_line_on_stderr_never_a_traceback(tmp_path: Path) -> None:
    home = ClaudeHome(tmp_path)
    seeded(home, talk=False)  # no other pass has a question: no `claude` runs
    with AnthropicAPI(every_list_empty) as api:
        done = subprocess.run(
            [sys.executable, "-c", FAILING_PASS, "dream", "--once", "--llm-provider",
             "claude-code", "--claude-path", str(home.binary)],
            env=home.env(api), cwd=home.project, capture_output=True, text=True, timeout=120,
        )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "- consolidation: failed (OSError: " in done.stdout, done.stdout
    failed = [line for line in done.stderr.splitlines() if "dream pass" in line]
    assert len(failed) == 1 and "consolidation failed: OSError" in failed[0], done.stderr
    assert "Traceback" not in done.stderr, done.stderr
