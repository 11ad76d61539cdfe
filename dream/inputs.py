"""What feeds a cycle's passes, and when a record leaves its log (docs/dreaming.md): the feedback,
recall and conversation logs are read at the start of a cycle, and a record is dropped only once a
pass that reads it ran — Corrections: the anti-pattern pass; other feedback: scoring; a recall: the
judge; a user turn: preferences and skill gaps (and anti-patterns, when it corrects the agent)."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dreamwell.dream import feeding
from dreamwell.dream.report import BUDGET, CHUNK_SKIPPED, NO_LLM, STOPPED, Report
from dreamwell.stores import CONVERSATION, FEEDBACK, RECALL, JsonlLog, StoreError

logger = logging.getLogger(__name__)


@dataclass
class Inputs:
    """What feeds the passes (README "What feeds each pass"): the feedback and recall logs,
    and the conversation log the `recall` prompt records user turns into."""

    feedback: list[dict[str, Any]]
    recalls: list[dict[str, Any]]
    conversation: list[dict[str, Any]]


INPUT_LOGS = (FEEDBACK, RECALL, CONVERSATION)
LAST_READER = "scoring"  # the last pass that reads the input logs
CONVERSATION_READERS = frozenset({"preferences", "skill-gap"})  # + anti-patterns: corrections


def _passes_that_read(report: Report) -> set[str]:
    """The passes that read all their inputs: they ran whole, or had nothing to do for a
    reason of the inputs themselves; not one skipped for want of an LLM or of budget, or
    because the LLM failed earlier in the cycle, nor one that failed, was cut short or left
    a chunk unread."""
    out = set()
    for p in report.passes:
        whole = not any(n.startswith(CHUNK_SKIPPED) for n in p.notes)
        if (p.status == "ran" and whole) or (
            p.status == "skipped" and not p.reason.startswith((NO_LLM, BUDGET, STOPPED))
        ):
            out.add(p.name)
    return out


def _unread(inputs: Inputs, report: Report, judged: set[int]) -> tuple[list[Any], ...]:
    """(feedback, recalls, conversation) that no pass reading them has read yet (docs/dreaming.md):
    Corrections wait for anti-patterns, other feedback for scoring, a recall for the judge,
    a user turn for preferences and skill gaps (and anti-patterns, when it corrects)."""
    read = _passes_that_read(report)
    feedback = [
        f
        for f in inputs.feedback
        if ("anti-patterns" if is_correction(f) else LAST_READER) not in read
    ]
    recalls = [r for r in inputs.recalls if id(r) not in judged]
    conversation = [
        r
        for r in inputs.conversation
        if not read >= CONVERSATION_READERS or (feeding.corrects(r) and "anti-patterns" not in read)
    ]
    return feedback, recalls, conversation


def consume_inputs(data: Path, inputs: Inputs, report: Report, judged: set[int]) -> None:
    """Drop from the input logs exactly the records a pass read, once the last pass that
    reads them has written: a cycle killed or cancelled before that leaves them as they were,
    what was appended meanwhile stays for the next cycle, and so does every record whose
    pass did not run (no LLM, budget spent, failed): the report says how many."""
    kept = _unread(inputs, report, judged)
    every = (inputs.feedback, inputs.recalls, inputs.conversation)
    left = []
    for name, records, unread in zip(INPUT_LOGS, every, kept, strict=True):
        stay = {id(r) for r in unread}
        used = [r for r in records if id(r) not in stay]
        if unread:
            left.append(f"{len(unread)} from {name}")
        try:
            if used:
                JsonlLog(data, name).consume(used)
        except StoreError as exc:  # the passes' writes stand; the report says what is left
            logger.warning("%s", exc)
            report.passes[-1].notes.append(f"{name} was not emptied ({exc}); read again next cycle")
    if left:
        report.passes[-1].notes.append(
            f"kept for a later cycle, unread by the passes that did not run: {', '.join(left)}"
        )


def is_correction(record: dict[str, Any]) -> bool:
    return str(record.get("kind", "")).lower() == "correction"
