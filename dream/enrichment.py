"""save_memory enrichment (seeds 000/002, memory-rules.md): with an LLM configured, memories
saved as long or vague notes are expanded in the background into focused entries.

`save_memory` only appends the new id to `enrich-queue.jsonl` (bounded; the reply never
waits). `enrich_queued` takes a few ids, asks the LLM (`feeding.enrich`), and writes the
derived entries (metadata `derived_from`) in one compare-and-set group with the original as
it was seen: if the user edited or deleted it meanwhile, nothing is written. The original is
archived only when the derived entries cover every fact it held. Each batch is reported like
a dream cycle (`dreams/<run>.json`), so `dreamwell dream --undo RUN` reverts it. Ids leave the
queue only once handled, so pending work survives a restart; one process at a time works the
queue (`enrich.lock`), so with two servers on one data directory each memory is enriched once.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import replace
from datetime import datetime
from typing import Any

from dreamwell.dream import directives, feeding
from dreamwell.dream.llm import LLM, LLMCancelled, LLMError, LLMUnavailable
from dreamwell.dream.report import Change, PassResult, Report, save_report
from dreamwell.stores import (
    ENRICH_QUEUE,
    ENRICH_QUEUE_MAX_BYTES,
    DataDir,
    JsonlLog,
    LongTermStore,
    MemoryEntry,
    StoreError,
    Write,
    claimed,
    new_id,
    utcnow,
)

logger = logging.getLogger(__name__)
MIN_CHARS = 40  # shorter memories are atomic already


def queue_for(store: LongTermStore) -> JsonlLog:
    return JsonlLog(store.data_dir, ENRICH_QUEUE, max_bytes=ENRICH_QUEUE_MAX_BYTES)


def enqueue(store: LongTermStore, entry: MemoryEntry) -> None:
    """Ask for `entry` to be enriched later; never fails the save that called it."""
    if len(entry.content) < MIN_CHARS:
        return
    try:
        queue_for(store).append({"id": entry.id})
    except StoreError as exc:
        logger.warning("could not queue [%s] for enrichment: %s", entry.id, exc)


def enrich_queued(
    store: LongTermStore,
    llm: LLM,
    limit: int = 4,
    cancel: threading.Event | None = None,
    now: datetime | None = None,
) -> Report | None:
    """Enrich up to `limit` queued memories; the report when anything was tried. None when
    nothing waits, or another process (a second server on this data directory) is enriching
    this store: the queue is worked by one process at a time, so no memory goes to the LLM
    twice."""
    with claimed(DataDir(store.data_dir).enrich_lock) as mine:
        return _enrich_claimed(store, llm, limit, cancel, now) if mine else None


def _enrich_claimed(
    store: LongTermStore,
    llm: LLM,
    limit: int,
    cancel: threading.Event | None,
    now: datetime | None,
) -> Report | None:
    queue = queue_for(store)
    waiting = list(dict.fromkeys(str(r.get("id", "")) for r in queue.read()))[:limit]
    if not waiting:
        return None
    now = now or utcnow()
    report = Report(f"{now:%Y%m%dT%H%M%S}-enrich-{new_id()[:4]}", now.isoformat(), False, llm.name)
    result = PassResult("enrichment")
    report.passes.append(result)
    rules = directives.directive(store.data_dir, "memory-rules.md", directives.MEMORY_RULES)
    try:
        for entry_id in waiting:
            _enrich_one(store, llm, entry_id, rules, now, cancel, result)
            # off the queue as soon as its write landed: a process killed later in the batch
            # does not leave it to be enriched again
            queue.drop(_other_than(entry_id))
    except LLMCancelled:
        result.status, result.reason = "partial", "cancelled"
    except LLMUnavailable as exc:  # the server failed, not the note: it stays queued
        result.status, result.reason = "failed", str(exc)
        report.llm_stopped = str(exc)
    finally:
        if result.changes or result.notes:
            report.finished = utcnow().isoformat()
            save_report(store.data_dir, report)
    return report


def _other_than(entry_id: str) -> Callable[[dict[str, Any]], bool]:
    return lambda record: str(record.get("id", "")) != entry_id


def _enrich_one(
    store: LongTermStore,
    llm: LLM,
    entry_id: str,
    rules: str,
    now: datetime,
    cancel: threading.Event | None,
    result: PassResult,
) -> None:
    entry = store.get(entry_id)
    if entry is None or not entry.live:
        return
    try:
        derived = feeding.enrich(entry, llm, rules, now, cancel=cancel, notes=result.notes)
    except (LLMCancelled, LLMUnavailable):
        raise
    except LLMError as exc:  # dropped from the queue: a bad answer is not retried for ever
        result.notes.append(f"[{entry_id}] not enriched: {exc}")
        return
    if not derived:
        return
    changes = [Change("derived", None, d, (entry.id,)) for d in derived]
    if feeding.covered(entry, derived):
        archived = replace(entry, archived_at=now)
        ids = tuple(d.id for d in derived)
        changes.append(Change("archive", entry, archived, ids, "covered by derived facts"))
    writes = [Write(c.after.id, c.before, c.after) for c in changes if c.after is not None]
    if len(changes) == len(derived):
        writes.append(Write(entry.id, entry, entry))  # only if the original is unchanged
    if store.write([writes]) == [True]:
        result.changes += changes
    else:
        result.notes.append(f"conflict: skipped enrichment of [{entry.id}]: changed meanwhile")
