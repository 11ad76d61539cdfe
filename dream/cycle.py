"""One dream cycle: lock, wait for quiet, run the passes, apply in small batches, report;
and undo."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from filelock import FileLock, Timeout

from dreamwell.dream import passes
from dreamwell.dream.llm import LLM, LLMError
from dreamwell.dream.report import Change, PassResult, Report, load_report, save_report
from dreamwell.dream.rules import DecayPolicy
from dreamwell.stores import (
    CONVERSATION,
    FEEDBACK,
    RECALL,
    JsonlLog,
    LongTermStore,
    MemoryEntry,
    new_id,
    utcnow,
)

logger = logging.getLogger(__name__)
ACTIVITY = ".activity"


class DreamBusy(Exception):
    """Another cycle holds this data directory, or tool traffic never paused."""


@dataclass(frozen=True)
class DreamOptions:
    decay: DecayPolicy = field(default_factory=DecayPolicy)
    quiet_seconds: float = 30.0  # wait while tool calls arrived this recently
    max_wait_seconds: float = 3600.0
    batch: int = 200


def wait_for_quiet(
    store: LongTermStore, options: DreamOptions, sleep: Callable[[float], None]
) -> None:
    marker = store.data_dir / ACTIVITY
    waited = 0.0
    while True:
        try:
            idle = time.time() - marker.stat().st_mtime
        except FileNotFoundError:
            return
        if idle >= options.quiet_seconds:
            return
        if waited >= options.max_wait_seconds:
            raise DreamBusy(f"tool calls kept arriving for {waited:.0f} s; dreaming later")
        pause = min(options.quiet_seconds - idle, 5.0)
        sleep(pause)
        waited += pause


def _still_current(store: LongTermStore, changes: Sequence[Change]) -> list[Change]:
    """Drop changes to entries that live traffic changed since the snapshot, and merges whose
    sources did: dreaming never overwrites a newer write."""
    stale = {c.before.id for c in changes if c.before and store.get(c.before.id) != c.before}
    dead = {c.after.id for c in changes if c.kind == "merge" and c.after and stale & set(c.sources)}
    return [
        c
        for c in changes
        if not (c.before and c.before.id in stale)
        and not (c.after and c.after.id in dead)
        and not (c.kind == "archive" and set(c.sources) & dead)
    ]


def commit(
    store: LongTermStore,
    changes: Sequence[Change],
    options: DreamOptions,
    sleep: Callable[[float], None],
) -> list[Change]:
    """Save new entries first, then change or archive old ones, in small batches."""
    kept = _still_current(store, changes)
    ordered = [c for c in kept if c.before is None] + [c for c in kept if c.before is not None]
    for start in range(0, len(ordered), options.batch):
        wait_for_quiet(store, options, sleep)
        store.apply([c.after for c in ordered[start : start + options.batch] if c.after])
    return kept


@dataclass
class Inputs:
    feedback: list[dict[str, Any]]
    recalls: list[dict[str, Any]]
    conversation_log: JsonlLog


def _take(log: JsonlLog, dry_run: bool) -> list[dict[str, Any]]:
    return log.read() if dry_run else log.take()


def run_cycle(
    store: LongTermStore,
    llm: LLM | None,
    *,
    dry_run: bool = False,
    options: DreamOptions | None = None,
    now: datetime | None = None,
    no_llm_reason: str = "no Ollama host configured",
    sleep: Callable[[float], None] = time.sleep,
) -> Report:
    options = options or DreamOptions()
    lock = FileLock(str(store.data_dir / "dream.lock"), timeout=0)
    try:
        lock.acquire()
    except Timeout as exc:
        raise DreamBusy("a dream cycle is already running on this data directory") from exc
    try:
        wait_for_quiet(store, options, sleep)
        now = now or utcnow()
        report = Report(
            f"{now:%Y%m%dT%H%M%S}-{new_id()[:4]}",
            now.isoformat(),
            dry_run,
            llm.name if llm else None,
        )
        if llm is not None:
            try:
                llm.check()
            except LLMError as exc:
                llm, no_llm_reason = None, str(exc)
        data = store.data_dir
        inputs = Inputs(
            _take(JsonlLog(data, FEEDBACK), dry_run),
            _take(JsonlLog(data, RECALL), dry_run),
            JsonlLog(data, CONVERSATION),
        )
        _run_passes(store, llm, no_llm_reason, inputs, report, options, now, sleep)
        report.finished = utcnow().isoformat()
        save_report(data, report)
        return report
    finally:
        lock.release()


def _run_passes(
    store: LongTermStore,
    llm: LLM | None,
    no_llm_reason: str,
    inputs: Inputs,
    report: Report,
    options: DreamOptions,
    now: datetime,
    sleep: Callable[[float], None],
) -> None:
    snapshot = {e.id: e for e in store.entries(include_archived=True)}
    data = store.data_dir
    corrections = [f for f in inputs.feedback if str(f.get("kind", "")).lower() == "correction"]

    def the_llm() -> LLM:  # only called for passes that run with an LLM
        assert llm is not None
        return llm

    def conversation() -> list[dict[str, Any]]:  # cleared whatever the pass does
        return _take(inputs.conversation_log, report.dry_run)

    steps: list[tuple[str, bool, Callable[[], PassResult]]] = [
        ("decay", False, lambda: passes.decay_pass(snapshot, now, options.decay)),
        ("exact-duplicates", False, lambda: passes.exact_duplicates_pass(snapshot, now)),
        (
            "consolidation",
            True,
            lambda: passes.consolidation_pass(snapshot, the_llm(), data, inputs.feedback, now),
        ),
        (
            "anti-patterns",
            True,
            lambda: passes.anti_pattern_pass(snapshot, the_llm(), data, corrections, now),
        ),
        (
            "preferences",
            True,
            lambda: passes.preference_pass(snapshot, the_llm(), data, conversation(), now),
        ),
        ("scoring", False, lambda: passes.scoring_pass(snapshot, inputs.feedback, inputs.recalls)),
        ("pruning", False, lambda: passes.pruning_pass(snapshot, now)),
    ]
    for name, needs_llm, step in steps:
        if needs_llm and llm is None:
            if name == "preferences":
                conversation()
            report.passes.append(PassResult(name, "skipped", f"no LLM: {no_llm_reason}"))
            continue
        try:
            result = step()
            if not report.dry_run:
                result.changes = commit(store, result.changes, options, sleep)
        except Exception as exc:  # a failing pass is reported; the others still run
            logger.exception("dream pass %s failed", name)
            result = PassResult(name, "failed", f"{type(exc).__name__}: {exc}")
        for change in result.changes:
            target = change.after or change.before
            if target is not None:
                snapshot[target.id] = target
        report.passes.append(result)
    mined = any(p.name == "anti-patterns" and p.status == "ran" for p in report.passes)
    if corrections and not mined and not report.dry_run:  # keep them for a cycle with an LLM
        feedback_log = JsonlLog(data, FEEDBACK)
        for record in corrections:
            feedback_log.append(record)
    report.passes.append(_maintenance(store, report.dry_run))


def _maintenance(store: LongTermStore, dry_run: bool) -> PassResult:
    if dry_run:
        return PassResult("maintenance", "skipped", "dry run")
    try:
        store.maintain()
        return PassResult("maintenance")
    except Exception as exc:
        logger.exception("dream maintenance failed")
        return PassResult("maintenance", "failed", f"{type(exc).__name__}: {exc}")


def undo(store: LongTermStore, run: str) -> Report:
    """Put every entry the cycle changed back as it was before, and delete what it created."""
    report = load_report(store.data_dir, run)
    if report.undone:
        raise ValueError(f"dream run {run} was already undone at {report.undone}")
    before: dict[str, MemoryEntry] = {}
    created: list[str] = []
    for change in report.changes():
        if change.before is not None:
            before.setdefault(change.before.id, change.before)
        elif change.after is not None:
            created.append(change.after.id)
    if not report.dry_run:
        store.apply(list(before.values()), [i for i in created if i not in before])
    report.undone = utcnow().isoformat()
    save_report(store.data_dir, report)
    return report
