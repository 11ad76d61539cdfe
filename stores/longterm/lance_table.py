"""The durable long-term records in LanceDB, and the shared log's table on object storage:
the only module that imports lancedb/pyarrow."""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import json
import logging
import os
import re
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from dreamwell.stores.index.packed_entries import PackedEntries
from dreamwell.stores.model import NO_METADATA, MemoryEntry, VectorLike, text_hash

logger = logging.getLogger(__name__)

# pyarrow's default pool is its bundled mimalloc, which keeps what it frees: in a server under
# a long mixed load (tests/bench/rss_growth_bench.py, 1,500 live memories) its arena held 160
# MiB resident after 120,000 calls, and grew, while the Arrow buffers alive at once peak at 2
# MiB. Each of anyio's short-lived worker threads gets a mimalloc heap of its own. glibc's
# malloc, with the server's two arenas and its trims after checkpoints (server/heap.py),
# gives the memory back.
pa.set_memory_pool(pa.system_memory_pool())

# LanceDB imports the REST client of Lance's namespace service whether or not a namespace is
# used: 150 generated pydantic models and nine API classes, each of whose methods is a pydantic
# `validate_call`. The API classes alone took 0.55 s of LanceDB's 1.0 s import and 14 MiB that
# stayed resident. The client package's own body (which imports them all) is deferred until
# something asks the package itself for a name; its models, which `lance_namespace` imports
# from their own module, load as before, and an embedded store never asks for the API.
_DEFERRED_PACKAGE = "lance_namespace_urllib3_client"


class _Deferred(importlib.abc.Loader):
    """Runs a package's body on the first name asked of it that it does not have yet."""

    def __init__(self, real: importlib.abc.Loader) -> None:
        self._real = real
        self._lock = threading.Lock()

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        return None  # the default module, with the package's __path__

    def exec_module(self, module: ModuleType) -> None:
        def __getattr__(name: str) -> Any:
            if name.startswith("__"):
                raise AttributeError(name)
            with self._lock:
                if "__getattr__" in vars(module):
                    del module.__getattr__
                    self._real.exec_module(module)
            return getattr(module, name)

        module.__getattr__ = __getattr__  # type: ignore[method-assign]

    def __getattr__(self, name: str) -> Any:  # resource readers and the like: the real one's
        return getattr(self._real, name)


class _DeferFinder(importlib.abc.MetaPathFinder):
    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname != _DEFERRED_PACKAGE:
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is None or spec.loader is None or spec.submodule_search_locations is None:
            return spec
        spec.loader = _Deferred(spec.loader)
        return spec


def _lancedb() -> Any:
    """The lancedb module, imported with the namespace client's body deferred (see above).
    Imported on first use: it takes a second, and start-up must not wait for it."""
    if not any(isinstance(f, _DeferFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, _DeferFinder())
    import lancedb

    return lancedb


TABLE = "memories"
# LanceDB's index and metadata caches fill up to this each as checkpoints write new versions,
# and stay there (with a constant number of rows, RSS stopped growing after 450 write rounds:
# +1 MiB over the next 1,050). At 32 MiB each, 300 write rounds on a 100,000-row table grew
# RSS by 81 MiB; at 8 MiB by 55, the rounds (background checkpoints) perhaps 3 ms slower: p50
# 25 / 29 ms against 28 / 33 in alternating runs (tests/bench/rss_growth_bench.py measures
# the server as a whole).
_CACHE_BYTES = 8 * 1024 * 1024
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
    values: VectorLike  # a row of a matrix read from the table, or a list from the log
    text_hash: str  # of the content it was made from: an edited entry's vector is stale


def _row(entry: MemoryEntry, vector: VectorLike | None, model: str | None) -> dict[str, Any]:
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
        "vector": np.asarray(vector, dtype=np.float32) if vector is not None else None,
        "vector_model": model if vector is not None else None,
    }


def _aware(value: datetime | None) -> datetime | None:
    if value is None:
        return None
    return value if value.tzinfo else value.replace(tzinfo=timezone.utc)


# values that repeat across entries, one object each (bounded: past the bound, new values
# are no longer added)
_SHARED_TAGS: dict[tuple[str, ...], tuple[str, ...]] = {}
_SHARED_FLOATS: dict[str, float] = {}
_SHARED_MAX = 65_536


def _shared_tags(tags: tuple[str, ...]) -> tuple[str, ...]:
    """One tuple for equal tag lists (most entries share a few), bounded."""
    if len(_SHARED_TAGS) < _SHARED_MAX:
        return _SHARED_TAGS.setdefault(tags, tags)
    return _SHARED_TAGS.get(tags, tags)


def _shared_float(value: float) -> float:
    """One float object for equal scores (most are the defaults), keyed by its exact bits so
    that -0.0 stays -0.0."""
    key = value.hex()
    if len(_SHARED_FLOATS) < _SHARED_MAX:
        return _SHARED_FLOATS.setdefault(key, value)
    return _SHARED_FLOATS.get(key, value)


def _entry(row: dict[str, Any]) -> MemoryEntry:
    """An entry from a table row, sharing what repeats across 100,000 of them: category and
    tag strings (interned), tag tuples and scores, equal timestamps (one object) and empty
    metadata."""
    created = _aware(row["created_at"])
    assert created is not None
    updated = _aware(row["updated_at"]) or created
    seen = _aware(row["last_seen_at"]) or created
    category = row["category"]
    metadata = row["metadata"]
    return MemoryEntry(
        id=row["id"],
        content=row["content"],
        category=sys.intern(category) if category is not None else None,
        tags=_shared_tags(tuple(sys.intern(t) for t in row["tags"] or ())),
        created_at=created,
        updated_at=created if updated == created else updated,
        last_seen_at=updated if seen == updated else seen,
        reinforcement_count=int(row["reinforcement_count"]),
        importance=_shared_float(float(row["importance"])),
        score=_shared_float(float(row["score"])),
        last_used_at=_aware(row["last_used_at"]),
        decayed_at=_aware(row["decayed_at"]),
        metadata=json.loads(metadata) if metadata and metadata != "{}" else NO_METADATA,
        archived_at=_aware(row["archived_at"]),
    )


# what lancedb raises when a data file is missing or unreadable ("lance error: Not found ...")
# or, for a damaged file, ValueError ("Invalid input, file does not appear to be a Lance file")
_READ_ERRORS = (RuntimeError, OSError, ValueError)
_LANCE_MAGIC = b"LANC"  # the last bytes of every complete Lance data file
_MISSING = re.compile(r"Not found: (\S+?\.lance)\b")


@dataclass(frozen=True)
class Damage:
    """A fragment of the table that cannot be read: its rows are lost unless the log has them."""

    fragment: int
    rows: int
    error: str


def _quote(ids: Iterable[str]) -> str:
    # ids are validated 12-hex strings or come from our own records; quote defensively anyway
    return ", ".join("'" + i.replace("'", "''") + "'" for i in ids)


def _by_length(
    vectors: pa.Array,
) -> Iterator[tuple[npt.NDArray[np.int64], npt.NDArray[np.float32]]]:
    """The rows of a list column that hold a vector, grouped by its length: (their row
    numbers, one float32 matrix of their vectors). Never a Python float per value."""
    lengths = pc.fill_null(pc.list_value_length(vectors), 0).to_numpy()
    for length in np.unique(lengths[lengths > 0]).tolist():
        rows = np.flatnonzero(lengths == length)
        same = vectors if len(rows) == len(vectors) else vectors.take(pa.array(rows))
        matrix = same.flatten().to_numpy().astype(np.float32, copy=False)
        yield rows, matrix.reshape(len(rows), length)


class MemoryTable:
    """LanceDB table `memories` under `path`, read at its latest version on every call."""

    def __init__(self, path: Path) -> None:
        lancedb = _lancedb()
        # Small caches: the defaults keep every table version's metadata (hundreds of MB
        # after a few thousand single-row writes); our own mirror serves the reads.
        session = lancedb.Session(
            index_cache_size_bytes=_CACHE_BYTES, metadata_cache_size_bytes=_CACHE_BYTES
        )
        self._db = lancedb.connect(path, read_consistency_interval=timedelta(0), session=session)
        self._table = self._db.create_table(TABLE, schema=_schema(), exist_ok=True)
        self._path = path
        self.damaged: dict[int, Damage] = {}  # fragments a read had to skip

    def _scan(
        self,
        columns: list[str],
        where: str | None = None,
        keep: Callable[[dict[str, Any]], bool] | None = None,
    ) -> pa.Table:
        """Rows matching `where` (`keep` is the same condition in Python, over every column
        but `vector`). When a data file is missing or damaged the table is read fragment by
        fragment instead: the readable ones are returned and the others noted in `damaged`,
        so that one bad file does not take down every other memory. Row addresses come from
        the manifest, not the files."""
        try:
            return self._query(columns, where)
        except _READ_ERRORS as exc:
            first = exc
        by_fragment: dict[int, list[int]] = {}
        for address in self._query(["_rowaddr"], None)["_rowaddr"].to_pylist():
            by_fragment.setdefault(int(address) >> 32, []).append(int(address))
        parts: list[pa.Table] = []
        for fragment, addresses in sorted(by_fragment.items()):
            try:
                found = self._table.take_row_ids(addresses).select(columns).to_arrow()
            except _READ_ERRORS as exc:
                self.damaged[fragment] = Damage(fragment, len(addresses), str(exc).split(", /")[0])
                continue
            if keep is not None:
                plain = found.drop_columns(["vector"]) if "vector" in columns else found
                found = found.filter(pa.array([keep(r) for r in plain.to_pylist()], pa.bool_()))
            parts.append(found.select(columns))
        if not self.damaged:
            raise first
        if not parts:
            return pa.schema([self._table.schema.field(c) for c in columns]).empty_table()
        return pa.concat_tables(parts)

    def _query(self, columns: list[str], where: str | None) -> pa.Table:
        query = self._table.search()
        if where is not None:
            query = query.where(where)
        table: pa.Table = query.select(columns).limit(None).to_arrow()
        return table

    def isolate(self, keep: Path) -> list[Path]:
        """Remove the damaged fragments from the table (a new version without them) so that
        writes work again, and move their data files, when present, into `keep`. Returns the
        files kept. Callers hold the checkpoint lock."""
        for fragment in sorted(self.damaged):
            self._table.delete(
                f"_rowaddr >= {fragment << 32} AND _rowaddr < {(fragment + 1) << 32}"
            )
        errors = " ".join(d.error for d in self.damaged.values())
        self.damaged = {}
        kept: list[Path] = []
        named = {Path(m).name for m in _MISSING.findall(errors)}
        data = self._path / f"{TABLE}.lance" / "data"
        for file in sorted(data.glob("*.lance")) if data.is_dir() else []:
            if file.name in named or not _complete(file):
                keep.mkdir(parents=True, exist_ok=True)
                target = keep / file.name
                os.replace(file, target)
                kept.append(target)
        return kept

    @property
    def version(self) -> int:
        return int(self._table.version)

    def entries(self) -> PackedEntries:
        """Every entry, held packed (`stores/index/packed_entries.py`): each row becomes an entry
        and then one bytes object before the next is read, so the whole table is never held as
        entries (the mirror keeps these records), and a batch of row dicts at a time (100,000 of
        them at once would take 60 MB for a moment)."""
        table = self._scan(_RECORD_COLUMNS)
        held = PackedEntries()
        for batch in table.to_batches(4096):
            for row in batch.to_pylist():
                held.append(_entry(row))
        return held

    def get(self, ids: Sequence[str]) -> list[MemoryEntry]:
        if not ids:
            return []
        wanted = set(ids)
        rows = self._scan(_RECORD_COLUMNS, f"id IN ({_quote(ids)})", lambda r: r["id"] in wanted)
        return [_entry(row) for row in rows.to_pylist()]

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
        if ids is None:
            return self._vectors(where, lambda r: r["vector_model"] == model)
        if not ids:
            return {}
        wanted = set(ids)
        return self._vectors(
            f"{where} AND id IN ({_quote(ids)})",
            lambda r: r["vector_model"] == model and r["id"] in wanted,
        )

    def vector_blocks(
        self, model: str, rows: int = 4096
    ) -> Iterator[tuple[list[str], list[str], npt.NDArray[np.float32]]]:
        """Every vector `model` made, a block of up to `rows` at a time in the table's order:
        (ids, text hashes, matrix). For loading them all: no object per vector (a dict of
        100,000 StoredVector took 145 MB for a moment, and left the heap 15 MB larger)."""
        table = self._scan(
            ["id", "content", "vector", "vector_model"],
            f"vector_model = {_quote([model])}",
            lambda r: r["vector_model"] == model,
        )
        for batch in table.to_batches(rows):
            ids, contents = batch.column("id").to_pylist(), batch.column("content").to_pylist()
            for picked, matrix in _by_length(batch.column("vector")):
                got = picked.tolist()
                yield [ids[r] for r in got], [text_hash(contents[r]) for r in got], matrix

    def stored_vectors(self, ids: Sequence[str]) -> dict[str, StoredVector]:
        """Whatever vectors `ids` have, of any model."""
        if not ids:
            return {}
        wanted = set(ids)
        return self._vectors(
            f"vector_model IS NOT NULL AND id IN ({_quote(ids)})",
            lambda r: r["vector_model"] is not None and r["id"] in wanted,
        )

    def _vectors(
        self, where: str, keep: Callable[[dict[str, Any]], bool]
    ) -> dict[str, StoredVector]:
        """Read as matrices, one per vector length, never as Python floats (at 100,000
        memories a list per vector would take a gigabyte for a moment)."""
        table = self._scan(["id", "content", "vector", "vector_model"], where, keep)
        out: dict[str, StoredVector] = {}
        ids = table["id"].to_pylist()
        models = table["vector_model"].to_pylist()
        contents = table["content"].to_pylist()
        start = 0
        for chunk in table["vector"].chunks:  # the column as read: no combined copy
            for rows, matrix in _by_length(chunk):
                for k, row in enumerate((rows + start).tolist()):
                    out[ids[row]] = StoredVector(models[row], matrix[k], text_hash(contents[row]))
            start += len(chunk)
        return out

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


def _complete(file: Path) -> bool:
    """A Lance data file ends with its magic bytes; a truncated one does not."""
    try:
        with open(file, "rb") as fh:
            fh.seek(-len(_LANCE_MAGIC), os.SEEK_END)
            return fh.read() == _LANCE_MAGIC
    except OSError:
        return False


# ---- the log of an object-store data directory (stores/longterm/shared/log.py decides; this
# reads/writes)
LOG_TABLE = "log"
_LOG_SCHEMA = pa.schema(
    [
        pa.field(
            "n",
            pa.int64(),
            nullable=False,
            metadata={"lance-schema:unenforced-primary-key": "true"},
        ),
        pa.field("first", pa.int64(), nullable=False),
        pa.field("last", pa.int64(), nullable=False),
        pa.field("at", pa.float64(), nullable=False),
        pa.field("body", pa.string(), nullable=False),
    ]
)
_LOG_COLUMNS = ["n", "first", "last", "body"]


def connect(uri: str, options: dict[str, str]) -> Any:
    """A LanceDB connection at an object-store location."""
    return _lancedb().connect(uri, storage_options=options)


def has_log(uri: str, options: dict[str, str]) -> bool:
    """Whether a store's log is at `uri` (read only: opening a `LogTable` creates it)."""
    return bool(log_tables(connect(uri, options)))


def log_tables(db: Any) -> list[str]:
    """The names of the log's tables at `db`'s location (`log`, `log-1`, ...; one LIST)."""
    names: list[str] = []
    token: str | None = None
    while True:
        page = db.list_tables(page_token=token, limit=1000)
        names += [n for n in page.tables if n == LOG_TABLE or n.startswith(f"{LOG_TABLE}-")]
        token = page.page_token
        if not token:
            return names


def drop_log_table(db: Any, name: str) -> None:
    db.drop_table(name, ignore_missing=True)


class LogTable:
    """The rows of one table of the shared log: `n` (append number, unenforced primary key),
    `first` and `last` (the seqs they hold), `at`, `body` (JSON). Each call reads the version
    checked out by the last `latest()`."""

    def __init__(self, db: Any, name: str = LOG_TABLE) -> None:
        self._table = self._open(db, name)
        self.checked_at = time.monotonic()  # when the version read was the latest

    @staticmethod
    def existing(db: Any, name: str) -> LogTable | None:
        """The table `name` at `db`'s location, None if there is none (nothing created)."""
        try:
            table = db.open_table(name)
        except (FileNotFoundError, ValueError):
            return None
        found = LogTable.__new__(LogTable)
        found._table = table
        found.checked_at = time.monotonic()
        return found

    @staticmethod
    def _open(db: Any, name: str) -> Any:
        for _ in range(5):
            found = LogTable.existing(db, name)
            if found is not None:
                return found._table
            try:
                return db.create_table(name, schema=_LOG_SCHEMA, exist_ok=True)
            except _READ_ERRORS as exc:  # another replica created it first
                logger.debug("creating the log table: %s", exc)
        return db.open_table(name)

    def latest(self) -> int:
        """Check out the newest version (one LIST) and return its number."""
        began = time.monotonic()
        self._table.checkout_latest()
        self.checked_at = began
        return int(self._table.version)

    def rows(self, where: str, columns: Sequence[str] = _LOG_COLUMNS) -> list[dict[str, Any]]:
        """Rows matching `where` at the version checked out, in append order."""
        found = self._table.search().where(where).select(list(columns)).to_arrow()
        return list(found.sort_by("n").to_pylist())

    def extreme(self, column: str, low: bool) -> int | None:
        values = self._table.search().select([column]).to_arrow().column(column)
        if len(values) == 0:
            return None
        return int((pc.min(values) if low else pc.max(values)).as_py())

    def insert_if_absent(self, row: dict[str, Any]) -> tuple[bool, int]:
        """Insert the row unless one with its `n` exists: (inserted, the version it made)."""
        data = pa.Table.from_pylist([row], schema=_LOG_SCHEMA)
        began = time.monotonic()
        result = self._table.merge_insert("n").when_not_matched_insert_all().execute(data)
        if result.num_inserted_rows == 1:
            self.checked_at = began  # its commit was the latest version at some point since
        return result.num_inserted_rows == 1, int(self._table.version)

    def delete(self, where: str) -> None:
        self._table.delete(where)

    def compact(self, keep_versions_for: timedelta) -> None:
        """Fold the fragments together and remove versions older than `keep_versions_for`
        (never the latest; files of a write still in progress are kept)."""
        import warnings

        with warnings.catch_warnings():  # a short retention is deliberate (shared/log.py)
            warnings.simplefilter("ignore", UserWarning)
            self._table.optimize(cleanup_older_than=keep_versions_for)
