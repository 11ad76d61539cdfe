"""Writing a pass's changes: in batches of groups that stand or fall together (a merge with
the archiving of its sources), each write compare-and-set against the snapshot the pass
planned on, the report saved after every batch so that it always holds what was written."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from dreamwell.dream.options import DreamOptions, check_cancel
from dreamwell.dream.report import Change, PassResult
from dreamwell.stores import LongTermStore, Write


def groups_of(changes: Sequence[Change]) -> list[list[Change]]:
    """Changes that stand or fall together: a merge with the archiving of its sources."""
    merges = {c.after.id: [c] for c in changes if c.kind == "merge" and c.after is not None}
    out: list[list[Change]] = []
    for change in changes:
        if change.kind == "merge" and change.after is not None:
            out.append(merges[change.after.id])
        elif change.kind == "archive" and len(change.sources) == 1 and change.sources[0] in merges:
            merges[change.sources[0]].append(change)
        else:
            out.append([change])
    return out


def _writes(group: Sequence[Change]) -> list[Write]:
    return [
        Write(c.after.id if c.after else c.before.id, c.before, c.after)  # type: ignore[union-attr]
        for c in group
        if c.after is not None or c.before is not None
    ]


def commit(
    store: LongTermStore,
    result: PassResult,
    proposed: Sequence[Change],
    options: DreamOptions,
    saved: Callable[[], object],
) -> None:
    """Write `proposed` in batches of groups with compare-and-set; what was written goes into
    `result.changes` (and the report is saved) after every batch, conflicts into its notes."""
    result.status = "partial"
    batch: list[list[Change]] = []
    size = 0
    for group in [*groups_of(proposed), None]:
        if group is not None:
            batch.append(group)
            size += len(group)
            if size < options.batch:
                continue
        if batch:
            check_cancel(options)
            written = store.write([_writes(g) for g in batch])
            for g, ok in zip(batch, written, strict=True):
                if ok:
                    result.changes += g
                else:
                    ids = ", ".join(sorted({(c.before or c.after).id for c in g}))  # type: ignore[union-attr]
                    result.notes.append(
                        f"conflict: skipped {g[0].kind} of [{ids}]: changed since the plan"
                    )
            saved()
        batch, size = [], 0
    result.status = "ran"
