"""One dream cycle: wait for quiet, lock, plan on a fresh snapshot, write with compare-and-set
in small batches (saving the report after each), report; and undo.

Safety rules (docs/dreaming.md; never lose or resurrect data):
- The cycle waits for quiet *before* it takes `dream.lock`, so a waiting timer never blocks
  an on-demand cycle, and it plans on a snapshot taken *after* the wait.
- Every write is compare-and-set inside the store's write lock: an entry must still equal the
  snapshot the plan was made from. A merge and the archiving of its sources form one group,
  written whole or not at all. A change whose entry moved on (a delete, a reinforcement, an
  edit, from this process or another) is dropped and reported as a conflict.
- The report is saved after every batch that was written, so a cycle that fails or is killed
  half-way can still be undone exactly; undo itself is compare-and-set and skips (and names)
  entries that changed after the cycle.
- The input logs (feedback, recall, conversation) are taken in two phases (dream/inputs.py):
  read at the start, and what a pass that ran read dropped once the last pass reading them
  has written. A cycle killed before that leaves them as they were.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from contextlib import suppress
from dataclasses import replace
from datetime import datetime
from pathlib import Path
from typing import Any

from dreamwell.dream import backoff, budget, feeding, passes
from dreamwell.dream.budget import Metered
from dreamwell.dream.inputs import (
    INPUT_LOGS,
    LAST_READER,
    Inputs,
    consume_inputs,
    is_correction,
)
from dreamwell.dream.llm import LLM, LLMCancelled, LLMError
from dreamwell.dream.options import (
    DreamBusy,
    DreamCancelled,
    DreamFenced,
    DreamOptions,
    check_cancel,
)
from dreamwell.dream.report import (
    INCOMPLETE,
    NO_LLM,
    PassResult,
    Report,
    failure,
    save_report,
)
from dreamwell.dream.skills import passes as skillpasses
from dreamwell.dream.writes import commit
from dreamwell.stores import (
    DataDir,
    Held,
    JsonlLog,
    LongTermStore,
    MemoryEntry,
    exclusive,
    new_id,
    utcnow,
)

logger = logging.getLogger(__name__)


PASSES = (  # in the order a cycle runs them (DreamOptions.progress reports each)
    *skillpasses.SKILL_PASSES,  # skills first: before memory consolidation (docs/skills.md)
    "decay",
    "exact-duplicates",
    "consolidation",
    "anti-patterns",
    "preferences",
    "scoring",
    "pruning",
    "maintenance",
)


# the passes that never run without an LLM (and scoring's judge: recalls judged by it)
LLM_PASSES = (*skillpasses.SKILL_PASSES, "consolidation", "anti-patterns", "preferences")


def wait_for_quiet(store: LongTermStore, options: DreamOptions) -> None:
    """Return once no tool call arrived for `quiet_seconds`; cancellable at any moment."""
    marker = DataDir(store.data_dir).activity
    waited = 0.0
    while True:
        check_cancel(options)
        try:
            idle = time.time() - marker.stat().st_mtime
        except FileNotFoundError:
            return
        if idle >= options.quiet_seconds:
            return
        if waited >= options.max_wait_seconds:
            raise DreamBusy(f"tool calls kept arriving for {waited:.0f} s; dreaming later")
        pause = min(options.quiet_seconds - idle, 5.0)
        options.cancel.wait(pause)
        waited += pause


def run_cycle(
    store: LongTermStore,
    llm: LLM | None,
    *,
    dry_run: bool = False,
    options: DreamOptions | None = None,
    now: datetime | None = None,
    no_llm_reason: str = "no LLM configured",
) -> Report:
    options = options or DreamOptions()
    wait_for_quiet(store, options)
    try:
        with exclusive(
            store.data_dir, "dream", DataDir(store.data_dir).dream_lock, "a dream cycle"
        ) as confirm:
            options = replace(options, confirm=confirm)
            return _locked_cycle(store, llm, dry_run, options, now, no_llm_reason)
    except Held as exc:
        raise DreamBusy(str(exc)) from exc


def _locked_cycle(
    store: LongTermStore,
    llm: LLM | None,
    dry_run: bool,
    options: DreamOptions,
    now: datetime | None,
    no_llm_reason: str,
) -> Report:
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
            llm = Metered(llm, options.budget_tokens)
        except LLMError as exc:
            llm, no_llm_reason = None, str(exc)
    data = store.data_dir
    report.cut_short = INCOMPLETE  # until the end: a killed cycle's report says so
    save_report(data, report)
    # read, not emptied: `consume_inputs` drops what was read once the passes wrote
    inputs = Inputs(*(JsonlLog(data, name).read() for name in INPUT_LOGS))
    try:
        _PassRun(store, llm, no_llm_reason, inputs, report, options, now).run()
        report.cut_short = ""
    except BaseException as exc:
        report.cut_short = f"cut short: {_why(exc)}"
        raise
    finally:
        report.finished = utcnow().isoformat()
        _count_spend(report, llm)
        save_report(data, report)
        if not dry_run:  # when the last cycle ran: the dream that starts by itself asks
            with suppress(OSError):
                DataDir(data).last_dream.touch()
            _back_off(data, llm)
    return report


def _why(exc: BaseException) -> str:
    if isinstance(exc, KeyboardInterrupt | SystemExit):
        return "the dream was interrupted (a signal or Ctrl-C)"
    return str(exc) or type(exc).__name__


def _back_off(data: Path, llm: LLM | None) -> None:
    """The next automatic cycle waits longer after one whose LLM failed (dream/backoff.py);
    one whose LLM answered clears that."""
    if not isinstance(llm, Metered) or not (llm.stopped or llm.calls > llm.failed):
        return  # no LLM, or it was never asked: nothing learnt about it
    try:
        state = backoff.record(data, llm.stopped)
    except OSError as exc:
        logger.warning("the dream's back-off was not written: %s", exc)
        return
    if state.failures:
        logger.warning(
            "the dream's LLM failed (%s); %d cycle(s) in a row: the next automatic dream waits "
            "longer",
            llm.stopped,
            state.failures,
        )


def _count_spend(report: Report, llm: LLM | None) -> None:
    if isinstance(llm, Metered):
        report.llm_calls, report.llm_tokens = llm.calls, llm.tokens
        report.llm_budget, report.llm_failed = llm.budget, llm.failed
        report.llm_stopped = llm.stopped


Step = tuple[str, bool, Callable[[], PassResult]]  # (pass, needs an LLM, plan it)


class _PassRun:
    """What the passes of one cycle share: the snapshot they plan on, the inputs, the
    corrections mined from them, the stored vectors."""

    def __init__(
        self,
        store: LongTermStore,
        llm: LLM | None,
        no_llm_reason: str,
        inputs: Inputs,
        report: Report,
        options: DreamOptions,
        now: datetime,
    ) -> None:
        self.store, self.llm, self.no_llm_reason = store, llm, no_llm_reason
        self.inputs, self.report, self.options, self.now = inputs, report, options, now
        self.snapshot = {e.id: e for e in store.entries(include_archived=True)}
        self.data = store.data_dir
        said = feeding.mine_corrections(inputs.conversation) if llm is not None else []
        self.corrections = [f for f in inputs.feedback if is_correction(f)] + said
        embedder = store.embedder
        self.vectors = store.vectors(embedder.name) if embedder is not None else None
        self.cancel = options.cancel
        self.judged_recalls: set[int] = set()  # id() of the recalls the judge read

    def run(self) -> None:
        """The skill passes, then each memory pass in order (an LLM pass is skipped without an
        LLM), then maintenance; every pass is in the report."""
        check_cancel(self.options)
        self.skill_passes()
        steps = self.memory_steps()
        skipped = len(skillpasses.SKILL_PASSES)  # maintenance runs last
        assert [name for name, _, _ in steps] == list(PASSES[skipped:-1])
        for name, needs_llm, step in steps:
            self.one(name, needs_llm, step)
        check_cancel(self.options)
        if self.options.progress is not None:
            self.options.progress("maintenance")
        self.report.passes.append(_maintenance(self.store, self.report.dry_run))

    def save_report(self) -> None:
        _count_spend(self.report, self.llm)
        save_report(self.data, self.report)

    def the_llm(self) -> LLM:  # only called for passes that run with an LLM
        assert self.llm is not None
        return self.llm

    def judged(self) -> list[dict[str, Any]]:
        """helpful/harmful verdicts on what callers were shown, from the user turns that
        followed (LLM as judge); none without an LLM: scores are left alone."""
        notes: list[str] = []
        inputs = self.inputs
        read: list[Any] = []
        verdicts = feeding.judge_recalls(
            self.llm,
            self.snapshot,
            inputs.recalls,
            inputs.conversation,
            cancel=self.cancel,
            notes=notes,
            read=read,
        )
        self.judged_recalls |= {id(r) for r in read}
        for note in notes:
            logger.info("judge: %s", note)
        return verdicts

    def skill_passes(self) -> None:
        inputs, data, report = self.inputs, self.data, self.report
        try:
            skillpasses.run_skill_passes(
                data,
                self.llm,
                self.no_llm_reason,
                report,
                (inputs.conversation, inputs.feedback, self.corrections),
                self.now,
                self.options.progress,
                self.save_report,
                auto_approve=self.options.skills_auto_approve,
                cancel=self.cancel,
            )
        except LLMCancelled as exc:
            raise DreamCancelled("the dream cycle was cancelled") from exc

    def memory_steps(self) -> list[Step]:
        snapshot, now, data, inputs = self.snapshot, self.now, self.data, self.inputs
        cancel, llm = self.cancel, self.the_llm
        return [
            ("decay", False, lambda: passes.decay_pass(snapshot, now, self.options.decay)),
            ("exact-duplicates", False, lambda: passes.exact_duplicates_pass(snapshot, now)),
            (
                "consolidation",
                True,
                lambda: passes.consolidation_pass(
                    snapshot, llm(), data, inputs.feedback, now, self.vectors, cancel=cancel
                ),
            ),
            (
                "anti-patterns",
                True,
                lambda: passes.anti_pattern_pass(
                    snapshot, llm(), data, self.corrections, now, cancel=cancel
                ),
            ),
            (
                "preferences",
                True,
                lambda: passes.preference_pass(
                    snapshot, llm(), data, inputs.conversation, now, cancel=cancel
                ),
            ),
            (
                "scoring",
                False,
                lambda: passes.scoring_pass(
                    snapshot, inputs.feedback + self.judged(), inputs.recalls
                ),
            ),
            ("pruning", False, lambda: passes.pruning_pass(snapshot, now)),
        ]

    def one(self, name: str, needs_llm: bool, step: Callable[[], PassResult]) -> None:
        """Plan one pass on the snapshot and write its changes (compare-and-set); a failing
        pass is reported and the next still runs; a cancel propagates."""
        options, report = self.options, self.report
        check_cancel(options)
        if options.progress is not None:
            options.progress(name)
        if needs_llm and self.llm is None:
            report.passes.append(PassResult(name, "skipped", f"{NO_LLM}: {self.no_llm_reason}"))
            return
        if needs_llm and budget.spent(self.llm):
            report.passes.append(PassResult(name, "skipped", budget.spent(self.llm)))
            return
        result = PassResult(name)
        report.passes.append(result)
        began = budget.mark(self.llm)
        try:
            planned = step()
            result.notes += planned.notes
            result.status, result.reason = planned.status, planned.reason
            if report.dry_run:
                result.changes = planned.changes
            elif planned.changes:
                commit(self.store, result, planned.changes, options, self.save_report)
        except DreamFenced as exc:  # another replica dreams now: not one more write
            result.status, result.reason = "partial", str(exc)
            raise
        except (DreamCancelled, LLMCancelled) as exc:
            result.status, result.reason = "partial", "cancelled"
            raise DreamCancelled("the dream cycle was cancelled") from exc
        except Exception as exc:  # a failing pass is reported; the others still run
            result.status = "partial" if result.changes else "failed"
            result.reason = failure(name, exc)
        if needs_llm:
            budget.verdict(self.llm, began, result)
        elif budget.refused_since(self.llm, began):  # the judge, inside scoring
            result.notes.append(f"the judge was cut short: {budget.spent(self.llm) or 'budget'}")
        _refresh(self.snapshot, self.store, result)
        if name == LAST_READER and not report.dry_run:
            check_cancel(options)
            consume_inputs(self.data, self.inputs, report, self.judged_recalls)


def _refresh(snapshot: dict[str, MemoryEntry], store: LongTermStore, result: PassResult) -> None:
    """Later passes plan on what was written, and on the user's version where a change
    conflicted."""
    for change in result.changes:
        target = change.after or change.before
        if target is not None:
            snapshot[target.id] = target
    for note in result.notes:
        if note.startswith("conflict:"):
            for entry_id in note[note.index("[") + 1 : note.index("]")].split(", "):
                current = store.get(entry_id)
                if current is None:
                    snapshot.pop(entry_id, None)
                else:
                    snapshot[entry_id] = current


def _maintenance(store: LongTermStore, dry_run: bool) -> PassResult:
    if dry_run:
        return PassResult("maintenance", "skipped", "dry run")
    try:
        store.maintain()
        return PassResult("maintenance")
    except Exception as exc:
        return PassResult("maintenance", "failed", failure("maintenance", exc))
