"""The durable long-term records in LanceDB: the only module that imports lancedb/pyarrow."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pyarrow as pa

from dreamwell.stores.model import MemoryEntry, text_hash

logger = logging.getLogger(__name__)

TABLE = "memories"
_CACHE_BYTES = 32 * 1024 * 1024
_TS = pa.timestamp("us", tz="UTC")


def _schema() -> pa.Schema:
    return pa.schema(
        [
            pa.field("id", pa.string(), nullable=False),
            pa.field("content", pa.string(), nullable=False),
            pa.field("category", pa.string()),
            pa.field("tags", pa.list_(pa.string())),
            pa.field("created_at", _TS, nullable=False),
            pa.field("updated_at", _TS, nullable=False),
            pa.field("last_seen_at", _TS, nullable=False),
            pa.field("reinforcement_count", pa.int64(), nullable=False),
            pa.field("importance", pa.float64(), nullable=False),
            pa.field("score", pa.float64(), nullable=False),
            pa.field("last_used_at", _TS),
            pa.field("decayed_at", _TS),
            pa.field("metadata", pa.string(), nullable=False),
            pa.field("archived_at", _TS),
            # The embedder slot: a vector per entry, null until computed, and the model that made
            # it. Variable length, so switching to an embedder of another dimension needs no
            # migration: vectors of any other model are ignored and re-embedded.
            pa.field("vector", pa.list_(pa.float32())),
            pa.field("vector_model", pa.string()),
        ]
    )


_RECORD_COLUMNS = [f.name for f in _schema() if f.name not in ("vector", "vector_model")]


@dataclass(frozen=True)
class StoredVector:
    model: str
    values: Sequence[float]
    text_hash: str  # of the content it was made from: an edited entry's vector is stale


def _row(entry: MemoryEntry, vector: Sequence[float] | None, model: str | None) -> dict[str, Any]:
    return {
        "id": entry.id,
        "content": entry.content,
        "category": entry.category,
        "tags": list(entry.tags),
        "created_at": entry.created_at,
        "updated_at": entry.updated_at,
        "last_seen_at": entry.last_seen_at,
        "reinforcement_count": entry.reinforcement_count,
        "importance": entry.importance,
        "score": entry.score,
        "last_used_at": entry.last_used_at,
        "decayed_at": entry.decayed_at,
        "metadata": json.dumps(dict(entry.metadata), sort_keys=True),
        "archived_at": entry.archived_at,
        "vector": list(vector) if vector is not None else None,
        "vector_model": model if vector is not None else None,
    }


def _aware(value: datetime | None) -> datetime | None:
    if value is None:
        return None
    return value if value.tzinfo else value.replace(tzinfo=timezone.utc)


def _entry(row: dict[str, Any]) -> MemoryEntry:
    created = _aware(row["created_at"])
    assert created is not None
    return MemoryEntry(
        id=row["id"],
        content=row["content"],
        category=row["category"],
        tags=tuple(row["tags"] or ()),
        created_at=created,
        updated_at=_aware(row["updated_at"]) or created,
        last_seen_at=_aware(row["last_seen_at"]) or created,
        reinforcement_count=int(row["reinforcement_count"]),
        importance=float(row["importance"]),
        score=float(row["score"]),
        last_used_at=_aware(row["last_used_at"]),
        decayed_at=_aware(row["decayed_at"]),
        metadata=json.loads(row["metadata"] or "{}"),
        archived_at=_aware(row["archived_at"]),
    )


def _quote(ids: Iterable[str]) -> str:
    # ids are validated 12-hex strings or come from our own records; quote defensively anyway
    return ", ".join("'" + i.replace("'", "''") + "'" for i in ids)


class MemoryTable:
    """LanceDB table `memories` under `path`, read at its latest version on every call."""

    def __init__(self, path: Path) -> None:
        import lancedb  # imported here: it takes seconds, and start-up must not wait for it

        # Small caches: the defaults keep every table version's metadata (hundreds of MB
        # after a few thousand single-row writes); our own mirror serves the reads.
        session = lancedb.Session(
            index_cache_size_bytes=_CACHE_BYTES, metadata_cache_size_bytes=_CACHE_BYTES
        )
        self._db = lancedb.connect(path, read_consistency_interval=timedelta(0), session=session)
        self._table = self._db.create_table(TABLE, schema=_schema(), exist_ok=True)

    @property
    def version(self) -> int:
        return int(self._table.version)

    def entries(self) -> list[MemoryEntry]:
        rows = self._table.search().select(_RECORD_COLUMNS).limit(None).to_arrow().to_pylist()
        return [_entry(row) for row in rows]

    def get(self, ids: Sequence[str]) -> list[MemoryEntry]:
        if not ids:
            return []
        query = self._table.search().where(f"id IN ({_quote(ids)})").select(_RECORD_COLUMNS)
        return [_entry(row) for row in query.limit(None).to_arrow().to_pylist()]

    def upsert(self, rows: Sequence[tuple[MemoryEntry, StoredVector | None]]) -> None:
        """Insert or replace whole rows (records and vectors) by id. LanceDB refuses a batch
        whose `vector` column mixes lengths (null included), so rows are written in one
        merge per vector length: usually one or two versions."""
        by_length: dict[int, list[dict[str, Any]]] = {}
        for entry, vector in rows:
            values = vector.values if vector else None
            row = _row(entry, values, vector.model if vector else None)
            by_length.setdefault(len(values) if values is not None else 0, []).append(row)
        for batch in by_length.values():
            (
                self._table.merge_insert("id")
                .when_matched_update_all()
                .when_not_matched_insert_all()
                .execute(pa.Table.from_pylist(batch, schema=_schema()))
            )

    def vectors(self, model: str, ids: Sequence[str] | None = None) -> dict[str, StoredVector]:
        """Vectors made by `model` (all, or of `ids`)."""
        where = f"vector_model = {_quote([model])}"
        if ids is not None:
            if not ids:
                return {}
            where += f" AND id IN ({_quote(ids)})"
        return self._vectors(where)

    def stored_vectors(self, ids: Sequence[str]) -> dict[str, StoredVector]:
        """Whatever vectors `ids` have, of any model."""
        if not ids:
            return {}
        return self._vectors(f"vector_model IS NOT NULL AND id IN ({_quote(ids)})")

    def _vectors(self, where: str) -> dict[str, StoredVector]:
        query = (
            self._table.search().where(where).select(["id", "content", "vector", "vector_model"])
        )
        return {
            row["id"]: StoredVector(row["vector_model"], row["vector"], text_hash(row["content"]))
            for row in query.limit(None).to_arrow().to_pylist()
        }

    def delete(self, ids: Sequence[str]) -> None:
        if ids:
            self._table.delete(f"id IN ({_quote(ids)})")

    def count(self) -> int:
        return int(self._table.count_rows())

    def count_live(self) -> int:
        return int(self._table.count_rows("archived_at IS NULL"))

    def fragments(self) -> int:
        stats: Any = self._table.stats()
        return int(stats["fragment_stats"]["num_fragments"])

    def optimize(self, keep_versions_for: timedelta) -> None:
        """Compact fragments and drop versions older than `keep_versions_for`."""
        import warnings

        with warnings.catch_warnings():  # a short retention is deliberate: see KEEP_VERSIONS
            warnings.simplefilter("ignore", UserWarning)
            self._table.optimize(cleanup_older_than=keep_versions_for)
