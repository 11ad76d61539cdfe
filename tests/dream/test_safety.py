"""The dream never loses or resurrects data: writes that land while a cycle waits for its LLM,
between its batches, or from another process win; a cycle that fails or is killed half-way
can be undone exactly; undo never overwrites what the user changed after the cycle."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import replace
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from dreamwell.dream import DreamOptions, run_cycle, undo
from dreamwell.dream.report import list_reports, load_report
from dreamwell.stores import LongTermStore, MemoryEntry, StoreError, Write, utcnow
from tests.support.cli import dreamwell
from tests.support.fake_ollama import fake_ollama

QUIET = DreamOptions(quiet_seconds=0)


def everything(data: Path) -> dict[str, MemoryEntry]:
    return {e.id: e for e in LongTermStore(data).entries(include_archived=True)}


def old_entries(n: int, prefix: str = "e") -> list[MemoryEntry]:
    when = utcnow() - timedelta(days=200)
    return [
        MemoryEntry(f"{prefix}{i:011d}"[:12], f"old fact number {i}", "facts", (), when, when, when)
        for i in range(n)
    ]


class ScriptedLLM:
    """An LLM double that runs `during` while it 'thinks' (the window a real model takes
    minutes for), then answers the consolidation prompt with `answer`."""

    name = "scripted"

    def __init__(self, answer: dict[str, Any], during: Callable[[], None]) -> None:
        self.answer, self.during, self.asked = answer, during, 0

    def check(self) -> None:
        pass

    def ask(self, system: str, prompt: str, schema: dict[str, Any], *_: Any, **__: Any) -> str:
        self.asked += 1
        if self.asked == 1:
            self.during()
            return json.dumps(self.answer)
        return "{}"


DELETE_IN_ANOTHER_PROCESS = """
import sys
from dreamwell.stores import LongTermStore
LongTermStore(sys.argv[1]).delete(sys.argv[2])
"""


def test_a_delete_and_a_reinforcement_during_the_llm_call_win(tmp_path: Path) -> None:
    store = LongTermStore(tmp_path)
    now = utcnow()
    c = MemoryEntry("cccccccccccc", "Standup is at 9:30 with Priya", "work", (), now, now, now)
    d = MemoryEntry(
        "dddddddddddd", "Daily standup at 9:30, run by Priya", "work", (), now, now, now
    )
    store.apply([c, d])

    def user_acts() -> None:  # from another process, and from this one
        subprocess.run(
            [sys.executable, "-c", DELETE_IN_ANOTHER_PROCESS, str(tmp_path), c.id], check=True
        )
        LongTermStore(tmp_path).save(d.content, d.category)  # reinforced: seen 2x

    plan = {
        "toSave": [
            {
                "content": "Daily standup at 9:30, run by Priya",
                "category": "work",
                "tags": [],
                "sourceIds": [c.id, d.id],
                "importance": 0.5,
            }
        ],
        "toDelete": [],
    }
    llm = ScriptedLLM(plan, user_acts)
    report = run_cycle(store, llm, options=QUIET)
    assert llm.asked >= 1
    after = everything(tmp_path)
    assert c.id not in after, "a deleted memory came back"
    assert after[d.id].live and after[d.id].reinforcement_count == 2
    assert [e for e in after.values() if e.id not in (c.id, d.id)] == []
    consolidation = next(p for p in report.passes if p.name == "consolidation")
    assert consolidation.changes == []
    assert any(n.startswith("conflict:") for n in consolidation.notes)


class PausingStore(LongTermStore):
    """Runs `between` after the first batch the dream writes (a user acting between batches)."""

    between: Callable[[], None] | None = None

    def write(self, groups: Any) -> list[bool]:
        done = super().write(groups)
        if self.between is not None:
            hook, self.between = self.between, None
            hook()
        return done


def test_a_delete_between_batches_is_kept_and_undo_reverts_only_what_was_written(
    tmp_path: Path,
) -> None:
    store = PausingStore(tmp_path)
    entries = old_entries(5)
    store.apply(entries)
    before = everything(tmp_path)
    victim = entries[3].id
    store.between = lambda: LongTermStore(tmp_path).delete(victim)
    report = run_cycle(store, None, options=DreamOptions(quiet_seconds=0, batch=1))
    decay = next(p for p in report.passes if p.name == "decay")
    assert len(decay.changes) == 4 and any(victim in n for n in decay.notes)
    assert victim not in everything(tmp_path)
    undo(LongTermStore(tmp_path), report.run)
    expected = {i: e for i, e in before.items() if i != victim}
    assert everything(tmp_path) == expected


def test_a_batch_that_fails_after_others_were_written_leaves_an_exact_undo(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = LongTermStore(tmp_path)
    store.apply(old_entries(6))
    before = everything(tmp_path)
    calls = 0
    original = LongTermStore.write

    def failing(self: LongTermStore, groups: Any) -> list[bool]:
        nonlocal calls
        calls += 1
        if calls == 3:
            raise StoreError("the disk is full")
        return original(self, groups)

    monkeypatch.setattr(LongTermStore, "write", failing)
    report = run_cycle(store, None, options=DreamOptions(quiet_seconds=0, batch=2))
    monkeypatch.undo()
    decay = next(p for p in report.passes if p.name == "decay")
    assert decay.status == "partial" and len(decay.changes) == 4
    saved = load_report(tmp_path, report.run)
    assert len(next(p for p in saved.passes if p.name == "decay").changes) == 4
    assert everything(tmp_path) != before
    undo(LongTermStore(tmp_path), report.run)
    assert everything(tmp_path) == before


def test_undo_keeps_what_the_user_changed_after_the_cycle(tmp_path: Path) -> None:
    store = LongTermStore(tmp_path)
    entries = old_entries(3)
    store.apply(entries)
    report = run_cycle(store, None, options=QUIET)
    edited = replace(store.get(entries[0].id), content="the user rewrote this")  # type: ignore[type-var]
    store.write([[Write(edited.id, store.get(edited.id), edited)]])
    undone = undo(store, report.run)
    assert store.get(entries[0].id) == edited
    assert store.get(entries[1].id) == entries[1] and store.get(entries[2].id) == entries[2]
    assert any(entries[0].id in n for p in undone.passes for n in p.notes)


def test_a_cycle_killed_mid_way_is_undone_to_the_exact_store(tmp_path: Path) -> None:
    data = tmp_path / "data"
    LongTermStore(data).apply(old_entries(30))
    before = everything(data)
    slow = (120.0, "{}")  # the LLM never answers in time: the cycle sits in consolidation
    with fake_ollama(slow) as (host, _script):
        env = {
            **os.environ,
            "DREAMWELL_OLLAMA_HOST": host,
            "DREAMWELL_OLLAMA_MODEL": "fake",
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
            run = ""
            while time.monotonic() < deadline:
                runs = list_reports(data)
                if runs:
                    report = json.loads((data / "dreams" / f"{runs[0]}.json").read_text())
                    decayed = [p for p in report["passes"] if p["name"] == "decay"]
                    if decayed and len(decayed[0]["changes"]) == 30:
                        run = runs[0]
                        break
                time.sleep(0.05)
            assert run, "the cycle never reached the LLM pass"
            assert everything(data) != before
            dreamer.send_signal(signal.SIGKILL)
            dreamer.wait(10)
        finally:
            if dreamer.poll() is None:
                dreamer.kill()
                dreamer.wait()
    result = dreamwell("dream", "--undo", run, "--data-dir", str(data))
    assert result.returncode == 0, result.stderr
    assert everything(data) == before


def test_a_delete_while_the_cycle_waits_for_quiet_is_never_undone(tmp_path: Path) -> None:
    import threading

    store = LongTermStore(tmp_path)
    entries = old_entries(3)
    store.apply(entries)
    (tmp_path / ".activity").touch()  # a tool call just arrived: the cycle waits ~1 s
    reports = []
    cycle = threading.Thread(
        target=lambda: reports.append(run_cycle(store, None, options=DreamOptions(quiet_seconds=1)))
    )
    cycle.start()
    time.sleep(0.2)
    LongTermStore(tmp_path).delete(entries[1].id)  # lands during the wait
    cycle.join(30)
    assert reports and entries[1].id not in everything(tmp_path)
    touched = {(c.before or c.after).id for c in reports[0].changes()}  # type: ignore[union-attr]
    assert entries[1].id not in touched and touched == {entries[0].id, entries[2].id}
