"""Undo of a dream cycle: every change put back, newest first, each with compare-and-set
against what the cycle wrote; the report is claimed first so that one undo happens, whatever
replica (or process) asks for it."""

from __future__ import annotations

from dreamwell.dream.report import PassResult, Report, load_versioned, save_report
from dreamwell.dream.skills import commit as skillcommit
from dreamwell.dream.writes import groups_of
from dreamwell.stores import LongTermStore, ReportChanged, Write, utcnow


def undo(store: LongTermStore, run: str) -> Report:
    """Put back every change the cycle made, newest first, each only if the entry is still as
    the cycle left it; changes the user made since are kept and named in the report. The
    report is claimed first (marked undone with compare-and-set): of two undoing one run at
    once, on any replicas, one undoes and the other hears it was undone."""
    report, version = load_versioned(store.data_dir, run)
    if report.undone:
        raise ValueError(f"dream run {run} was already undone at {report.undone}")
    if report.dry_run:
        raise ValueError(f"dream run {run} was a dry run: it changed nothing")
    report.undone = utcnow().isoformat()
    try:
        version = save_report(store.data_dir, report, expect=version)
    except ReportChanged:
        raise ValueError(
            f"dream run {run} was changed meanwhile (undone elsewhere, or still being written); "
            "read its report again"
        ) from None
    try:
        undo_notes = _undo_writes(store, report)
    except BaseException:
        report.undone = ""  # nothing was put back, or the rest can be put back by a retry
        save_report(store.data_dir, report, expect=version)
        raise
    if undo_notes:
        report.passes.append(PassResult("undo", "partial", "", [], undo_notes))
    save_report(store.data_dir, report, expect=version)
    return report


def _undo_writes(store: LongTermStore, report: Report) -> list[str]:
    """Write the undo of every change (compare-and-set); notes name what was skipped."""
    groups = [
        list(reversed(g))
        for p in report.passes
        for g in groups_of([c for c in p.changes if not c.is_skill])
    ]
    groups.reverse()
    written = store.write(
        [
            [Write((c.after or c.before).id, c.after, c.before) for c in g]  # type: ignore[union-attr]
            for g in groups
        ]
    )
    skipped = [g for g, ok in zip(groups, written, strict=True) if not ok]
    undo_notes = [
        f"undo skipped {g[0].kind} of [{', '.join(sorted({(c.after or c.before).id for c in g}))}]"  # type: ignore[union-attr]
        ": changed after the cycle; kept as it is"
        for g in skipped
    ]
    return undo_notes + skillcommit.undo_skills(store.data_dir, report)
