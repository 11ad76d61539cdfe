"""The three skill passes of a dream cycle (docs/skills.md, seed 001 passes 2–4), run before memory
consolidation: gap detection (new skills for requests seen in two or more sessions),
consolidation (merges, parent guides, see-also, pruning, with seed 001's deletion guard) and
optimisation (at-risk and sparse skills rewritten, under the body guard). Each has its
directive file and its answer model; the host disposes (dream/skills/rules.py) and every write
is compare-and-set (dream/skills/commit.py)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from dreamwell.dream import budget
from dreamwell.dream.llm import LLM, LLMCancelled
from dreamwell.dream.report import PassResult, Report, failure
from dreamwell.dream.skills.commit import SkillContext
from dreamwell.dream.skills.consolidate import consolidation_pass
from dreamwell.dream.skills.gap import gap_pass
from dreamwell.dream.skills.optimize import optimisation_pass
from dreamwell.stores import SkillUsage, StoreError

logger = logging.getLogger(__name__)
SKILL_PASSES = ("skill-gap", "skill-consolidation", "skill-optimisation")


def usage_note(data_dir: Path, now: datetime) -> str:
    """Without an LLM the skill passes only keep the books: what the usage log says."""
    stats = SkillUsage(data_dir).stats(now)
    top = sorted(stats.uses_30d.items(), key=lambda p: (-p[1], p[0]))[:5]
    used = ", ".join(f"{n} {u}" for n, u in top) or "none"
    pairs = len(stats.co_used)
    return (
        f"usage: {len(stats.uses_30d)} skill(s) used in 30 days ({used}); {pairs} co-used pair(s)"
    )


def _without_llm(
    data_dir: Path,
    reason: str,
    report: Report,
    now: datetime,
    progress: Callable[[str], None] | None,
) -> None:
    try:
        notes = [usage_note(data_dir, now)]
    except (OSError, StoreError) as exc:
        notes = [f"the usage log could not be read: {exc}"]
    for name in SKILL_PASSES:
        if progress is not None:
            progress(name)
        report.passes.append(PassResult(name, "skipped", f"no LLM: {reason}", [], list(notes)))


def run_skill_passes(
    data_dir: Path,
    llm: LLM | None,
    no_llm_reason: str,
    report: Report,
    feeds: tuple[Sequence[dict[str, Any]], Sequence[dict[str, Any]], Sequence[dict[str, Any]]],
    now: datetime,
    progress: Callable[[str], None] | None = None,
    saved: Callable[[], object] = lambda: None,
    **options: Any,
) -> None:
    """The three passes in order, each in the report; `feeds`: (conversation, feedback,
    corrections). A failing pass is reported and the next still runs; a cancel propagates."""
    conversation, feedback, corrections = feeds
    if llm is None:
        _without_llm(data_dir, no_llm_reason, report, now, progress)
        return
    ctx = SkillContext.open(
        data_dir, llm, report.run, now, dry_run=report.dry_run, saved=saved, **options
    )
    steps: list[Callable[[PassResult], PassResult]] = [
        lambda r: gap_pass(ctx, r, conversation),
        lambda r: consolidation_pass(ctx, r),
        lambda r: optimisation_pass(ctx, r, conversation, feedback, corrections),
    ]
    for name, step in zip(SKILL_PASSES, steps, strict=True):
        if progress is not None:
            progress(name)
        result = PassResult(name)
        report.passes.append(result)
        if budget.spent(llm):  # the cycle's token budget is gone: skipped, and named
            result.status, result.reason = "skipped", budget.spent(llm)
            continue
        began = budget.mark(llm)
        try:
            step(result)  # it fills `result` as it writes, so every save holds what it wrote
        except LLMCancelled:
            result.status, result.reason = "partial", "cancelled"
            raise
        except Exception as exc:  # a failing pass is reported; the others still run
            result.status = "partial" if result.changes else "failed"
            result.reason = failure(name, exc)
        budget.verdict(llm, began, result)
        saved()
