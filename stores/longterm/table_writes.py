"""Folding log records into LanceDB and Tantivy: what a checkpoint and a repair write.

`fold(parts, start, end)` reads the records start < seq <= end from the log, reduces them to
each id's final entry (or deletion) and vector, upserts those rows into LanceDB with one
write and the index documents into Tantivy with one commit. It is idempotent: a fold that
died half-way is simply done again. Deciding when to fold, and recording it, is
`stores/longterm/checkpoint.py`'s business.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable

from dreamwell.stores.longterm import operations as ops
from dreamwell.stores.longterm.components import Parts
from dreamwell.stores.longterm.lance_table import StoredVector
from dreamwell.stores.longterm.log import Op, Record
from dreamwell.stores.longterm.operations import Changes
from dreamwell.stores.model import MemoryEntry, entry_from_dict, text_hash

logger = logging.getLogger(__name__)

Row = tuple[MemoryEntry, StoredVector | None]


def fold(parts: Parts, start: int, end: int) -> set[str]:
    """Write the records start < seq <= end to LanceDB and Tantivy; returns the ids changed."""
    final, vectors = _reduce(parts.log.sealed_records(start, end))
    for entry_id in vectors.keys() - final.keys():
        current = parts.mirror.view.get(entry_id)  # a vector for an entry checkpointed earlier
        if current is not None:
            final[entry_id] = current
    rows = _rows(parts, final, vectors)
    began = time.perf_counter()
    parts.table.delete([i for i, e in final.items() if e is None])
    parts.table.upsert(list(rows.values()))
    written = time.perf_counter()
    _index(parts, final, end)
    logger.debug(
        "fold: LanceDB %.0f ms, Tantivy %.0f ms",
        1000 * (written - began),
        1000 * (time.perf_counter() - written),
    )
    return set(final)


def _reduce(records: Iterable[Record]) -> tuple[Changes, dict[str, Op]]:
    """Each id's last entry (None: deleted) and the vector of that entry's text, if logged."""
    final: Changes = {}
    vectors: dict[str, Op] = {}
    for record in records:
        for op in record.ops:
            if op["op"] == "put":
                entry = entry_from_dict(op["e"])
                final[entry.id] = entry
                if (v := vectors.get(entry.id)) is not None and v["h"] != text_hash(entry.content):
                    del vectors[entry.id]
            elif op["op"] == "del":
                final[str(op["id"])] = None
                vectors.pop(str(op["id"]), None)
            elif op["op"] == "vec":
                vectors[str(op["id"])] = op
    return final, vectors


def kept_rows(parts: Parts, final: Changes) -> dict[str, Row]:
    """The LanceDB rows of `final`'s entries, with the vectors stored of the same text."""
    return _rows(parts, final, {})


def _rows(parts: Parts, final: Changes, vectors: dict[str, Op]) -> dict[str, Row]:
    """The LanceDB rows of the entries kept: with the logged vector of their text, else the
    one already stored if it was made from the same text."""
    kept = {i: e for i, e in final.items() if e is not None}
    stored = parts.table.stored_vectors([i for i in kept if i not in vectors])
    rows: dict[str, Row] = {}
    for entry_id, entry in kept.items():
        vector: StoredVector | None = None
        logged = vectors.get(entry_id)
        if logged is not None and logged["h"] == text_hash(entry.content):
            vector = StoredVector(str(logged["m"]), ops.vector_of(logged), str(logged["h"]))
        elif (old := stored.get(entry_id)) is not None and old.text_hash == text_hash(
            entry.content
        ):
            vector = old
        rows[entry_id] = (entry, vector)
    return rows


def _index(parts: Parts, final: Changes, end: int) -> None:
    """Write the index documents of the changed entries, and of their neighbours: a changed
    memory also changes the contextual field of those (unless their own change is still to
    be checkpointed: that checkpoint will index them)."""
    m = parts.mirror
    docs: dict[str, MemoryEntry | None] = dict(final)
    pending = m.pending
    for entry_id in final:
        for other in m.rows.neighbours(entry_id):
            if other not in docs and pending.get(other, (0, 0.0))[0] <= end:
                docs[other] = m.view.get(other)
    with parts.index.writing() as writer:
        for entry_id, doc_entry in docs.items():
            if doc_entry is not None and doc_entry.live:
                writer.upsert(m.doc(doc_entry))
            else:
                writer.delete(entry_id)
