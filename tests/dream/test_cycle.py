"""Dream cycles on real stores without an LLM: decay, exact duplicates, scoring, pruning,
maintenance, reports, undo, and one cycle at a time."""

from __future__ import annotations

import json
import os
import threading
import time
from dataclasses import replace
from pathlib import Path

import pytest

from dreamwell.dream import DreamBusy, DreamCancelled, DreamOptions, render, run_cycle, undo
from dreamwell.dream.report import list_reports, load_report
from dreamwell.stores import FEEDBACK, RECALL, JsonlLog, LongTermStore, utcnow
from tests.support.dreams import seed

QUIET = DreamOptions(quiet_seconds=0)


def test_a_cycle_without_an_llm_decays_merges_exact_duplicates_and_reports(tmp_path: Path) -> None:
    store = LongTermStore(tmp_path)
    seeded = seed(store)
    report = run_cycle(store, None, options=QUIET)
    status = {p.name: p.status for p in report.passes}
    assert status == {
        "skill-gap": "skipped",
        "skill-consolidation": "skipped",
        "skill-optimisation": "skipped",
        "decay": "ran",
        "exact-duplicates": "ran",
        "consolidation": "skipped",
        "anti-patterns": "skipped",
        "preferences": "skipped",
        "scoring": "ran",
        "pruning": "ran",
        "maintenance": "ran",
    }
    assert "no LLM configured" in render(report)
    live = {e.id: e for e in store.entries()}
    merged = [e for e in live.values() if e.category == "user-preferences/location"]
    assert len(merged) == 1
    m = merged[0]
    assert m.reinforcement_count == 3 and m.created_at == seeded["a" * 12].created_at
    assert set(m.metadata["merged_from"].split(",")) == {"a" * 12, "b" * 12}
    assert m.importance < 0.9  # decayed first, then max of the sources
    assert {"c" * 12, "d" * 12} <= live.keys()  # distinct episodes are not exact duplicates
    archived = {e.id for e in store.entries(include_archived=True) if not e.live}
    assert archived == {"a" * 12, "b" * 12}
    assert list_reports(tmp_path) == [report.run]
    assert load_report(tmp_path, report.run).to_json() == report.to_json()


def test_undo_restores_the_store_exactly(tmp_path: Path) -> None:
    store = LongTermStore(tmp_path)
    seed(store)
    JsonlLog(tmp_path, FEEDBACK).append(
        {"session": "s", "kind": "harmful", "memory_id": "f" * 12, "detail": "wrong"}
    )
    before = sorted(store.entries(include_archived=True), key=lambda e: e.id)
    report = run_cycle(store, None, options=QUIET)
    assert len(report.changes()) >= 5
    assert sorted(store.entries(include_archived=True), key=lambda e: e.id) != before
    undo(store, report.run)
    assert sorted(store.entries(include_archived=True), key=lambda e: e.id) == before
    reopened = LongTermStore(tmp_path)
    assert sorted(reopened.entries(include_archived=True), key=lambda e: e.id) == before
    assert [h.entry.id for h in reopened.search("Chicago")] == ["a" * 12, "b" * 12] or {
        h.entry.id for h in reopened.search("Chicago")
    } == {"a" * 12, "b" * 12}
    with pytest.raises(ValueError, match="already undone"):
        undo(store, report.run)


def test_a_dry_run_changes_nothing_and_keeps_the_logs(tmp_path: Path) -> None:
    store = LongTermStore(tmp_path)
    seed(store)
    JsonlLog(tmp_path, RECALL).append({"caller": "c", "query": "q", "ids": ["e" * 12]})
    before = store.entries(include_archived=True)
    report = run_cycle(store, None, dry_run=True, options=QUIET)
    assert report.changes() and render(report).startswith("Dream plan (dry run")
    assert store.entries(include_archived=True) == before
    assert len(JsonlLog(tmp_path, RECALL).read()) == 1


def test_feedback_moves_scores_recall_sets_last_used_and_pruning_archives(tmp_path: Path) -> None:
    store = LongTermStore(tmp_path)
    seed(store)
    feedback = JsonlLog(tmp_path, FEEDBACK)
    feedback.append({"session": "s", "kind": "harmful", "memory_id": "f" * 12, "detail": "no"})
    feedback.append({"session": "s", "kind": "helpful", "memory_id": "e" * 12, "detail": "yes"})
    JsonlLog(tmp_path, RECALL).append({"caller": "c", "query": "tea", "ids": ["e" * 12]})
    run_cycle(store, None, options=QUIET)
    tea = store.get("e" * 12)
    assert tea is not None and tea.score == pytest.approx(0.6) and tea.last_used_at is not None
    tabs = store.get("f" * 12)
    assert tabs is not None and not tabs.live  # −2.3 → −2.51: pruned
    assert JsonlLog(tmp_path, FEEDBACK).read() == []  # scoring read it
    assert len(JsonlLog(tmp_path, RECALL).read()) == 1  # kept for the judge (no LLM here)


def test_corrections_wait_for_a_cycle_with_an_llm(tmp_path: Path) -> None:
    store = LongTermStore(tmp_path)
    JsonlLog(tmp_path, FEEDBACK).append(
        {"session": "s1", "kind": "Correction", "detail": "don't grep the whole disk"}
    )
    run_cycle(store, None, options=QUIET)
    kept = JsonlLog(tmp_path, FEEDBACK).read()
    assert [r["detail"] for r in kept] == ["don't grep the whole disk"]


def test_only_one_cycle_runs_per_data_directory(tmp_path: Path) -> None:
    from filelock import FileLock

    store = LongTermStore(tmp_path)
    with FileLock(str(tmp_path / "dream.lock")), pytest.raises(DreamBusy, match="already"):
        run_cycle(store, None, options=QUIET)


def test_a_cycle_waits_while_tool_calls_are_arriving(tmp_path: Path) -> None:
    store = LongTermStore(tmp_path)
    marker = tmp_path / ".activity"
    marker.touch()
    recent = marker.stat().st_mtime - 29.7  # the last tool call was 29.7 s ago
    os.utime(marker, (recent, recent))
    started = time.monotonic()
    run_cycle(store, None, options=DreamOptions(quiet_seconds=30))
    assert time.monotonic() - started >= 0.25
    marker.touch()
    with pytest.raises(DreamBusy, match="kept arriving"):
        run_cycle(store, None, options=DreamOptions(quiet_seconds=30, max_wait_seconds=0))


def test_a_waiting_cycle_holds_no_lock_and_stops_when_cancelled(tmp_path: Path) -> None:
    store = LongTermStore(tmp_path)
    (tmp_path / ".activity").touch()
    options = DreamOptions(quiet_seconds=600)
    outcome: list[BaseException] = []

    def timer_cycle() -> None:
        try:
            run_cycle(store, None, options=options)
        except DreamCancelled as exc:
            outcome.append(exc)

    waiting = threading.Thread(target=timer_cycle)
    waiting.start()
    time.sleep(0.2)
    assert run_cycle(store, None, options=QUIET).passes  # an on-demand cycle is not refused
    started = time.monotonic()
    options.cancel.set()
    waiting.join(5)
    assert not waiting.is_alive() and time.monotonic() - started < 2
    assert outcome and isinstance(outcome[0], DreamCancelled)


def test_dreaming_never_overwrites_a_newer_write(tmp_path: Path) -> None:
    store = LongTermStore(tmp_path)
    seed(store)
    from dreamwell.dream.passes import exact_duplicates_pass
    from dreamwell.dream.report import PassResult
    from dreamwell.dream.writes import commit

    snapshot = {e.id: e for e in store.entries()}
    proposed = exact_duplicates_pass(snapshot, utcnow()).changes
    live_write = replace(snapshot["b" * 12], reinforcement_count=9)
    store.apply([live_write])
    result = PassResult("exact-duplicates")
    commit(store, result, proposed, QUIET, lambda: None)
    assert result.changes == [] and result.notes[0].startswith("conflict:")
    assert store.get("b" * 12) == live_write
    assert len(store.entries()) == len(snapshot)


def test_reports_are_json_files_in_the_data_directory(tmp_path: Path) -> None:
    store = LongTermStore(tmp_path)
    report = run_cycle(store, None, options=QUIET)
    data = json.loads((tmp_path / "dreams" / f"{report.run}.json").read_text())
    assert data["run"] == report.run and data["passes"][0]["name"] == "skill-gap"
    with pytest.raises(KeyError):
        load_report(tmp_path, "../../etc/passwd")
