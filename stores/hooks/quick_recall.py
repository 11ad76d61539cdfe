"""Keyword recall for client hooks, which start a fresh process on every user message and so
must never import LanceDB (2.5-3.3 s) or numpy: the Tantivy index, the write-ahead log's tail
and a snapshot of the memories' text.

The Tantivy index holds ids only, so the text of what it finds comes from `hooks/entries.sqlite`
(one row per live memory, written by `write_snapshot` in a background process that opens the
store) with the log's records after the snapshot laid over it. A memory the index finds but
neither holds (checkpointed and dropped from the log after the snapshot was taken) is left
out, and `stale` says a new snapshot is due. Reads take no lock and write nothing.
"""

from __future__ import annotations

import functools
import json
import os
import re
import sqlite3
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from dreamwell.stores.hooks.excerpts import stem
from dreamwell.stores.index.hybrid_rank import rank_hits
from dreamwell.stores.index.relevance import (
    Meaning,
    Rule,
    Words,
    keyword_share,
    select,
    topical,
)
from dreamwell.stores.index.stopwords import ENGLISH_STOPWORDS
from dreamwell.stores.index.text_index import IndexDoc, TextIndex
from dreamwell.stores.layout import DataDir
from dreamwell.stores.longterm.log import Record
from dreamwell.stores.longterm.state import StateFile
from dreamwell.stores.longterm.wal import Wal, WalGap
from dreamwell.stores.model import (
    PROJECT,
    MemoryEntry,
    entry_from_dict,
    entry_to_dict,
    fold_text,
    under_any,
)

_CANDIDATES = 100
_MAX_OVERLAY = 2000  # log records over the snapshot past which a new snapshot is asked for
_SCHEMA = """
CREATE TABLE entries (id TEXT PRIMARY KEY, category TEXT NOT NULL, seen TEXT NOT NULL,
                      body TEXT NOT NULL);
CREATE INDEX entries_seen ON entries (seen);
CREATE INDEX entries_category ON entries (category, seen);
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
"""


def write_snapshot(dirs: DataDir, entries: Iterable[MemoryEntry], seq: int) -> None:
    """Replace the hooks' snapshot with `entries` (the live ones), valid for every log record
    up to `seq`: a reader lays the records after `seq` over it (replaying one it already
    holds is harmless, so `seq` may be a lower bound)."""
    dirs.hooks.mkdir(parents=True, exist_ok=True)
    tmp = dirs.hooks / f".entries.{os.getpid()}.tmp"
    tmp.unlink(missing_ok=True)
    con = sqlite3.connect(tmp)
    try:
        con.executescript(_SCHEMA)
        con.executemany(
            "INSERT OR REPLACE INTO entries VALUES (?, ?, ?, ?)",
            (
                (e.id, e.category or "", e.last_seen_at.isoformat(), json.dumps(entry_to_dict(e)))
                for e in entries
                if e.live
            ),
        )
        con.execute("INSERT INTO meta VALUES ('seq', ?)", (str(seq),))
        con.commit()
    finally:
        con.close()
    os.replace(tmp, dirs.hook_entries)


@dataclass(frozen=True)
class Tail:
    overlay: dict[str, MemoryEntry | None]  # changed after the snapshot (None: deleted)
    pending: set[str]  # changed after the index's checkpoint
    gap: bool  # some records after the snapshot were no longer in the log


class QuickRecall:
    """One hook call's read-only view of a store."""

    def __init__(self, dirs: DataDir) -> None:
        self.dirs = dirs
        self.problems: list[str] = []  # what could not be read (the rest is still searched)
        state = _state_file(dirs.state).read()
        self._db = self._open_snapshot()
        oldest = self._first_logged() - 1  # everything the log still holds
        checkpoint = state.checkpoint if state.known else oldest
        snapshot_seq = self._meta_seq()
        start = min(checkpoint, snapshot_seq) if snapshot_seq is not None else oldest
        self._tail = _read_tail(Wal(dirs.wal), (start, oldest, checkpoint), checkpoint)
        self.stale = self._db is None or self._tail.gap or len(self._tail.overlay) > _MAX_OVERLAY
        self._index: TextIndex | None = None
        if dirs.index.is_dir() and any(dirs.index.iterdir()):
            try:
                self._index = TextIndex(dirs.index, repair=False)
            except (ValueError, OSError) as exc:  # the server repairs it; the log is searched
                self.problems.append(f"the text index is unreadable ({exc})")

    def _first_logged(self) -> int:
        segments = Wal(self.dirs.wal).segments()
        return segments[0] if segments else 1

    def _open_snapshot(self) -> sqlite3.Connection | None:
        path = self.dirs.hook_entries
        if not path.exists():
            return None
        try:
            con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
            con.execute("SELECT 1 FROM meta LIMIT 1")
        except sqlite3.Error as exc:
            self.problems.append(f"the hooks' snapshot is unreadable ({exc}); rebuilding it")
            return None
        return con

    def _meta_seq(self) -> int | None:
        if self._db is None:
            return None
        try:
            row = self._db.execute("SELECT value FROM meta WHERE key = 'seq'").fetchone()
            return int(row[0]) if row else None
        except (sqlite3.Error, ValueError):
            self._db = None
            return None

    def close(self) -> None:
        if self._db is not None:
            self._db.close()

    # ---- entries ----------------------------------------------------------------------------
    def get_many(self, ids: Sequence[str]) -> dict[str, MemoryEntry]:
        """The live entries among `ids` whose text this reader has."""
        out: dict[str, MemoryEntry] = {}
        rest = []
        for i in ids:
            if i in self._tail.overlay:
                entry = self._tail.overlay[i]
                if entry is not None and entry.live:
                    out[i] = entry
            else:
                rest.append(i)
        if rest and self._db is not None:
            marks = ",".join("?" * len(rest))
            rows = self._db.execute(f"SELECT body FROM entries WHERE id IN ({marks})", rest)
            for entry in _entries(row[0] for row in rows):
                out[entry.id] = entry
        return out

    def recent(
        self, limit: int, prefixes: Sequence[str] = (), project: str | None = None
    ) -> list[MemoryEntry]:
        """The most recently seen live entries (in categories under `prefixes`, if given; of
        `project` or global, if given)."""
        found = [
            e
            for e in self._tail.overlay.values()
            if e is not None and e.live and under_any(e.category, prefixes) and _of(e, project)
        ]
        if self._db is not None:
            # `p` or under `p/`: a range ('0' follows '/'), which the category index serves
            # (LIKE could not, and each session start scanned every row: 12 ms at 10,000)
            where = [
                " OR ".join("category = ? OR (category >= ? AND category < ?)" for _ in prefixes)
            ]
            args: list[object] = [a for p in prefixes for a in (p, p + "/", p + "0")]
            if project is not None:  # filtered before the LIMIT, as the server's search
                where.append("coalesce(json_extract(body, ?), '') IN ('', ?)")
                args += [f"$.metadata.{PROJECT}", project]
            clauses = " AND ".join(f"({w})" for w in where if w)
            sql = "SELECT body FROM entries" + (f" WHERE {clauses}" if clauses else "")
            rows = self._db.execute(sql + " ORDER BY seen DESC LIMIT ?", [*args, limit * 2])
            found += [e for e in _entries(r[0] for r in rows) if e.id not in self._tail.overlay]
        found.sort(key=lambda e: e.last_seen_at, reverse=True)
        return found[:limit]

    # ---- search -------------------------------------------------------------------------------
    def search(self, text: str, limit: int, project: str | None = None) -> list[MemoryEntry]:
        """Live entries for `text` (of `project` or global, if given), BM25 × importance as
        the server ranks with keywords only; entries with the same folded text once."""
        out: list[MemoryEntry] = []
        folded: set[str] = set()
        for entry in self.ranked(text, limit, project):
            key = fold_text(entry.content)
            if key not in folded:
                folded.add(key)
                out.append(entry)
        return out

    def ranked(
        self, text: str, limit: int, project: str | None = None, prefixes: Sequence[str] = ()
    ) -> list[MemoryEntry]:
        """The relevant live entries for `text`, best first, as the server's search with
        keywords only returns its best `limit` (of `project` or global, if given; under one
        of `prefixes`, if given): a `Ranker` (inject.py)."""
        pending = self._tail.pending
        hits: list[tuple[str, float]] = []
        if self._index is not None:
            found = self._index.search(text, _CANDIDATES, prefixes, project=project)
            hits = [h for h in found if h[0] not in pending]
            docs = {
                i: self._index.doc_terms(IndexDoc(e.id, e.content, e.category, e.tags))
                for i in pending
                if (e := self._tail.overlay.get(i)) is not None and e.live and _of(e, project)
            }
            hits += self._index.score_docs(text, docs)
        else:  # the server repairs it meanwhile: the log's tail, by the words it shares
            hits = self._by_words(text, project)
        entries = {
            i: e
            for i, e in self.get_many([i for i, _ in hits]).items()
            if under_any(e.category, prefixes)
        }
        bm25 = [h for h in hits if h[0] in entries]
        ranked = rank_hits(bm25, [], {i: e.importance for i, e in entries.items()}, 0.0, 1.0)
        if self._index is not None:  # what the server returns: only hits relevant enough
            ranked = self._relevant(text, ranked, entries, limit)
        return [entries[i] for i, _ in ranked[:limit]]

    def _by_words(self, text: str, project: str | None) -> list[tuple[str, float]]:
        """The log's live entries by the share of `text`'s words (stop-words left out) they
        hold, kept as the relevance rule keeps hits by words (without an index to weigh
        them, each word weighs the same)."""
        asked = {stem(w) for w in re.findall(r"\w+", text.casefold()) if w not in ENGLISH_STOPWORDS}
        hits = []
        for entry in self._tail.overlay.values():
            if entry is None or not entry.live or not _of(entry, project) or not asked:
                continue
            held = len(asked & {stem(w) for w in re.findall(r"\w+", entry.content.casefold())})
            words = Words(held / len(asked), held, len(asked))
            if Rule().answers(Meaning(), words):
                hits.append((entry.id, words.share))
        return sorted(hits, key=lambda h: (-h[1], h[0]))

    def _relevant(
        self,
        text: str,
        ranked: list[tuple[str, float]],
        entries: dict[str, MemoryEntry],
        limit: int,
    ) -> list[tuple[str, float]]:
        """The server's rule (`stores/index/relevance.py`) by words alone (a hook has no
        vectors): a prompt that shares only a stop-word or one word of several with the
        memories recalls none of them."""
        index = self._index
        assert index is not None
        weights = topical(index.term_weights(text), text)

        def judge(entry_id: str) -> tuple[Meaning, Words]:
            e = entries[entry_id]
            terms = index.doc_terms(IndexDoc(e.id, e.content, e.category, e.tags))
            return Meaning(), keyword_share(weights, terms.counts, terms.context)

        return select(Rule(), ranked, judge, limit)


def _read_tail(wal: Wal, starts: tuple[int, ...], checkpoint: int) -> Tail:
    """The log's records after the first of `starts` it still holds in full (a later one
    when some were dropped: `gap`)."""
    records: list[Record] = []
    gap = False
    for begin in dict.fromkeys(starts):
        wal.start_at(begin)
        try:
            records = wal.read_new()
            break
        except WalGap:
            gap = True
    wal.close()
    overlay: dict[str, MemoryEntry | None] = {}
    pending: set[str] = set()
    for record in records:
        for op in record.ops:
            if op.get("op") == "put":
                entry: MemoryEntry | None = entry_from_dict(op["e"])
                entry_id = entry.id if entry is not None else ""
            elif op.get("op") == "del":
                entry, entry_id = None, str(op["id"])
            else:
                continue
            overlay[entry_id] = entry
            if record.seq > checkpoint:
                pending.add(entry_id)
    return Tail(overlay, pending, gap)


def _entries(bodies: Iterator[str]) -> Iterator[MemoryEntry]:
    for body in bodies:
        try:
            entry = entry_from_dict(json.loads(body))
        except (ValueError, KeyError, TypeError, AssertionError):
            continue
        if entry.live:
            yield entry


def _of(entry: MemoryEntry, project: str | None) -> bool:
    """Whether `entry` is seen from `project` (its own or global; every one without)."""
    return project is None or (entry.metadata.get(PROJECT) or project) == project


@functools.lru_cache(maxsize=16)
def _state_file(path: Path) -> StateFile:
    """One reader of each state file per process: it parses the file again only when it
    changed, and a resident hook process reads it at every call (its journal of ids made
    that 3-5 ms at 10,000 memories)."""
    return StateFile(path)
