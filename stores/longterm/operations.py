"""The operations a log record carries, and the duplicate key of a memory's text.

A record's ops are `{"op": "put", "e": <entry>}` (write an entry whole), `{"op": "del",
"id": ...}` (delete it for good) and `{"op": "vec", "id", "m": model, "h": text hash, "v":
base64 float32}` (a vector for the entry's text as it was when embedded). This module makes
and reads them; it owns their shape, which is the log's on-disk format.
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Sequence

import numpy as np

from dreamwell.stores.longterm.log import Op, Record
from dreamwell.stores.model import (
    PROJECT,
    MemoryEntry,
    entry_from_dict,
    entry_to_dict,
    fold_text,
    text_hash,
)

Changes = dict[str, MemoryEntry | None]  # id -> the entry now (None: deleted)


def put_op(entry: MemoryEntry) -> Op:
    return {"op": "put", "e": entry_to_dict(entry)}


def del_op(entry_id: str) -> Op:
    return {"op": "del", "id": entry_id}


def vec_op(entry: MemoryEntry, model: str, vector: Sequence[float]) -> Op:
    raw = np.asarray(vector, dtype=np.float32).tobytes()
    return {
        "op": "vec",
        "id": entry.id,
        "m": model,
        "h": text_hash(entry.content),
        "v": base64.b64encode(raw).decode("ascii"),
    }


def vector_of(op: Op) -> list[float]:
    return np.frombuffer(base64.b64decode(op["v"]), dtype=np.float32).tolist()  # type: ignore[no-any-return]


def split_record(record: Record) -> tuple[Changes, list[Op]]:
    """A record's entry changes (puts and deletes, the last for an id winning) and its
    vector ops, in order."""
    changes: Changes = {}
    vectors: list[Op] = []
    for op in record.ops:
        if op["op"] == "put":
            entry = entry_from_dict(op["e"])
            changes[entry.id] = entry
        elif op["op"] == "del":
            changes[str(op["id"])] = None
        elif op["op"] == "vec":
            vectors.append(op)
    return changes, vectors


def dup_key(category: str | None, content: str, project: str | None = None) -> int:
    """A 64-bit digest of the category, the project and the folded text: one small int per
    live memory in the duplicate map (a (category, 128-bit digest) tuple took 105 bytes). A
    hit is only a candidate: `same_text` confirms it, so a collision can never merge two
    memories. The same text saved in two projects is two memories (docs/projects.md)."""
    text = f"{category or ''}\0{fold_text(content) or content}"
    if project:
        text += f"\0{project}"
    return int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "little")


def entry_dup_key(entry: MemoryEntry) -> int:
    return dup_key(entry.category, entry.content, entry.metadata.get(PROJECT))


def same_text(
    entry: MemoryEntry, category: str | None, content: str, project: str | None = None
) -> bool:
    """Whether `entry` is a duplicate of this category, text and project (what dup_key
    digests)."""
    return (
        (entry.category or "") == (category or "")
        and (entry.metadata.get(PROJECT) or None) == (project or None)
        and (fold_text(entry.content) or entry.content) == (fold_text(content) or content)
    )
