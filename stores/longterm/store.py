"""Long-term memory: a durable log in front of LanceDB records and a Tantivy index.

`LongTermStore` is the one door callers use (the server, the dream, the CLI); it opens the
parts and hands each call to the part that owns it:

- `stores/longterm/log.py`: the `Log` interface; `stores/longterm/wal.py`: the local write-ahead log
- `stores/longterm/group_commit.py` and `stores/longterm/plans.py`: the write path (group commit;
  save, delete, compare-and-set)
- `stores/longterm/mirror.py` and `stores/longterm/catchup.py`: this process's in-memory copy and
  keeping it in step with other processes
- `stores/longterm/checkpoint.py`, `stores/longterm/table_writes.py` and
  `stores/longterm/repair.py`: folding the log into LanceDB and Tantivy, maintenance, and restoring
  what was lost on disk
- `stores/longterm/vectors.py` and `stores/longterm/search.py`: vectors (backfill) and hybrid search

Writes: a save, delete or batch takes the log's write lock, reads the log to its end, decides
(the duplicate check, compare-and-set of background writers), appends one record per commit
with one fsync, and replies. Saves that arrive together share that fsync (group commit).
Vectors are computed afterwards and logged as their own records, and a checkpoint folds the
log into LanceDB (one upsert) and Tantivy (one commit) in batches, without holding up saves.
Reads never take a file lock: every process tails the log into an immutable view.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path

from filelock import FileLock

from dreamwell.stores.index.embedders import Embedder, Reranker
from dreamwell.stores.index.hybrid_rank import KEYWORD_WEIGHT
from dreamwell.stores.index.postings import Postings
from dreamwell.stores.index.relevance import Rule
from dreamwell.stores.index.rows import Rows
from dreamwell.stores.index.text_index import TextIndex
from dreamwell.stores.layout import DataDir
from dreamwell.stores.longterm import lance_files as lancefiles
from dreamwell.stores.longterm.catchup import Follower
from dreamwell.stores.longterm.checkpoint import CHECKPOINT_SECONDS, KEEP_VERSIONS, Checkpointer
from dreamwell.stores.longterm.components import Parts
from dreamwell.stores.longterm.group_commit import GroupCommit
from dreamwell.stores.longterm.lance_table import MemoryTable
from dreamwell.stores.longterm.log import Log
from dreamwell.stores.longterm.mirror import Mirror
from dreamwell.stores.longterm.plans import ANY, SaveResult, Write, Writer
from dreamwell.stores.longterm.repair import Repair
from dreamwell.stores.longterm.search import Hit, Searcher, Tuning, matches
from dreamwell.stores.longterm.shared.log import LanceLog
from dreamwell.stores.longterm.shared.snapshots import CacheKeeper, SharedSnapshots
from dreamwell.stores.longterm.state import StateFile
from dreamwell.stores.longterm.table_writes import fold
from dreamwell.stores.longterm.vectors import Embed, Vectors
from dreamwell.stores.longterm.wal import Wal
from dreamwell.stores.model import MemoryEntry, Vector

RELEVANT = Rule()  # which hits a search returns (stores/index/relevance.py)
# seconds an object store may take to answer the log's poll (every 0.25 s) before reads say
# they are served as of its last answer
SILENT_AFTER = 2.0

__all__ = [
    "ANY",
    "CHECKPOINT_SECONDS",
    "Hit",
    "LongTermStore",
    "SaveResult",
    "Write",
    "matches",
]


class LongTermStore:
    def __init__(
        self,
        data_dir: Path,
        *,
        embedder: Embedder | None = None,
        embed_on_save: bool = False,
        min_similarity: float = 0.0,
        keyword_weight: float = KEYWORD_WEIGHT,
        lock_timeout: float = 15.0,
        reranker: Reranker | None = None,
        rerank_depth: int = 20,
        contextual: bool = True,
        wait_for_model: bool = True,
        on_vectors_wanted: Callable[[], None] | None = None,
        log: Log | None = None,
        save_backlog: int | None = None,
        relevance: Rule | None = RELEVANT,
        search_embeds_others: bool = False,
    ) -> None:
        """Opening only reads. `embedder` adds vector recall; with `embed_on_save` a save
        embeds its text before it replies, else `backfill()` embeds in the background. With
        `contextual`, a memory saved by a caller within minutes of its previous one, in the
        same category, is linked to it, and each is also found through the other's words and
        meaning. Without `wait_for_model`, a search while the embedder's model is still
        loading (a server warming it after start-up) ranks by keywords instead of waiting.
        `on_vectors_wanted` is called, from whichever thread, when `vectors_wanted` becomes
        set: the background backfill can sleep until then instead of polling. `log` is the
        durable log (default: the write-ahead log in the data directory). With `save_backlog`,
        a save waits while more of this process's memories than that wait for a vector and a
        backfill is logging them (`Vectors.hold_save`). The settings are
        fixed when the store is opened (the attributes of the same names only say them).
        `relevance` says which hits a search returns (`stores/index/relevance.py`); None
        returns the best ranked whatever they are. With `search_embeds_others`, a search
        embeds (in memory, a few short ones) memories other processes saved without waiting
        for them to log a vector: a resident hook process, whose savers live a second."""
        self.dirs = DataDir(Path(data_dir))
        self.dirs.ensure()
        self.data_dir = self.dirs.root
        self.embedder = embedder
        self.embed_on_save = embed_on_save
        self.save_backlog = save_backlog
        self.min_similarity = min_similarity
        self.keyword_weight = keyword_weight
        self.reranker = reranker
        self.rerank_depth = rerank_depth
        self.contextual = contextual
        self.wait_for_model = wait_for_model
        self.relevance = relevance
        self._parts = self._open(lock_timeout, on_vectors_wanted, log)
        self.vectors_wanted = self._parts.mirror.vectors_wanted
        self._start()
        self._vectors.search_embeds_others = search_embeds_others

    def _start(self) -> None:
        """Make the parts that act, load, and make good what was lost on disk."""
        p, embedder = self._parts, self.embedder
        commit = GroupCommit(p)
        repair = self._repair = Repair(p)
        self._checkpointer = Checkpointer(p, repair)
        self._writer = Writer(p, commit, embedder, self.embed_on_save, self.contextual)
        self._vectors = Vectors(p, commit, embedder, self.wait_for_model)
        tuning = Tuning(
            self.min_similarity,
            self.keyword_weight,
            self.contextual,
            self.reranker,
            self.rerank_depth,
            self.relevance,
        )
        self._searcher = Searcher(p, self._vectors, embedder, tuning)
        repair.files_set_aside = self._set_aside
        if p.shared is not None:  # object storage: this directory is a replica's cache
            keeper = CacheKeeper(p, p.shared)
            p.follower.on_gap = keeper.ensure
            keeper.ensure()
        p.follower.load()
        repair.check_table()
        repair.index()

    def _open(
        self, lock_timeout: float, on_vectors_wanted: Callable[[], None] | None, log: Log | None
    ) -> Parts:
        """The log, the state file, LanceDB, Tantivy and the mirror (nothing read yet)."""
        dirs = self.dirs
        mirror = Mirror(self.embedder.name if self.embedder else None, on_vectors_wanted)
        remote = dirs.remote
        if log is None:
            log = LanceLog(remote) if remote else Wal(dirs.wal, dirs.write_lock, lock_timeout)
        state = StateFile(dirs.state)
        cplock = FileLock(str(dirs.checkpoint_lock), timeout=lock_timeout)
        self._set_aside = lancefiles.check(
            dirs.lancedb, dirs.lance_sums, dirs.damaged, cplock, lock_timeout
        )  # before LanceDB reads a damaged file
        table = MemoryTable(dirs.lancedb)
        index = TextIndex(dirs.index)
        follower = Follower(mirror, log, state, table, index)
        shared = SharedSnapshots(remote) if remote else None
        return Parts(dirs, log, state, table, index, mirror, follower, cplock, lock_timeout, shared)

    # ---- writing --------------------------------------------------------------------------------
    def save(
        self,
        content: str,
        category: str | None = None,
        tags: str | Iterable[str] | None = None,
        metadata: Mapping[str, str] | None = None,
        now: datetime | None = None,
        caller: str | None = None,
    ) -> SaveResult:
        """Save a memory, or reinforce the live entry with the same folded text and category.
        `caller` (the saver's namespace) links it to that caller's previous memory when it
        came at most CONTEXT_SECONDS before, in the same category (contextual memories)."""
        if self.save_backlog is not None:
            self._vectors.hold_save(self.save_backlog)
        return self._writer.save(content, category, tags, metadata, now, caller)

    def delete(self, entry_id: str, project: str | None = None) -> MemoryEntry:
        """Delete a memory. With `project` (a key), another project's memory is not found,
        exactly as an unknown id, and stays."""
        return self._writer.delete(entry_id, project)

    def write(self, groups: Sequence[Sequence[Write]]) -> list[bool]:
        """Compare-and-set: each group is written whole if every entry in it still equals its
        `expect`, else not at all. One log record per group, one fsync for all. Returns, per
        group, whether it was written. Background writers (the dream, undo, import) use this
        so they never overwrite, or bring back, what a user changed meanwhile."""
        return self._writer.write(groups)

    def apply(self, upserts: Sequence[MemoryEntry] = (), deletes: Sequence[str] = ()) -> None:
        """Write whole entries and hard-delete ids unconditionally, in one commit."""
        writes = [Write(e.id, ANY, e) for e in upserts] + [Write(i, ANY, None) for i in deletes]
        self.write([writes])

    # ---- vectors --------------------------------------------------------------------------------
    @property
    def vectors_loaded(self) -> bool:
        """Whether this embedder's stored vectors are in memory (always, without one)."""
        return self._parts.mirror.vectors_ready

    def load_vectors(self) -> None:
        """Read this embedder's vectors from LanceDB into memory (after start-up: searches
        meanwhile are keyword-only). Vectors of edited text are left out and re-embedded."""
        self._vectors.load()

    def backfill(self, batch: int = 64, embed: Embed | None = None) -> int:
        """Embed up to `batch` live entries that have no vector from the current embedder and
        log the vectors. Returns how many got one; 0 when nothing is missing or the embedder
        is unavailable. `embed` runs the embedder's `embed` (e.g. on several threads)."""
        return self._vectors.backfill(batch, embed)

    def vectors(self, model: str) -> dict[str, Vector]:
        """Every entry's vector made by `model`: the current embedder's as held in memory
        (pending ones included), another model's as stored in LanceDB. Rows of one copied
        matrix, so the caller may keep them while the store goes on changing."""
        return self._vectors.of_model(model)

    def missing_vectors(self) -> int:
        return self._vectors.missing()

    def vectors_claimed_for(self) -> float | None:
        """Seconds until memories another process saved (and is embedding) become this
        process's to embed, if it never logs their vectors; None when there are none."""
        return self._parts.mirror.unclaimed_in()

    # ---- checkpoints ----------------------------------------------------------------------------
    def checkpoint_due(self, max_age: float = CHECKPOINT_SECONDS) -> bool:
        """Enough changes are pending, or the oldest has waited `max_age` seconds."""
        return self._checkpointer.due(max_age)

    def checkpoint(self, wait: bool = True) -> bool:
        """Fold the log into LanceDB and Tantivy and drop the folded segments. Returns False
        when another process is doing it (with wait=False) or there was nothing to fold."""
        return self._checkpointer.checkpoint(wait)

    def maintain(self, keep_versions_for: timedelta = KEEP_VERSIONS) -> None:
        """Checkpoint, then compact LanceDB and drop old versions."""
        self._checkpointer.maintain(keep_versions_for)

    def reindex(self) -> None:
        """Rebuild the Tantivy index from LanceDB (after a checkpoint)."""
        self._checkpointer.reindex()

    def version(self) -> int:
        """The LanceDB table version: changes with every checkpoint by any process."""
        return self._parts.table.version

    def change_seq(self) -> int:
        """The number of the last change any process logged: moves with every write (a few
        stat() calls when nothing changed), so a page can poll it to know when to reload."""
        self._parts.follower.fresh()
        return self._parts.log.last_seq

    def index_documents(self) -> int:
        return self._parts.index.doc_count()

    def index_ids(self) -> set[str]:
        """The ids the Tantivy index holds (a consistency check, not a hot path)."""
        return self._parts.index.ids()

    def index_in_step(self) -> bool:
        """The text index holds as many documents as LanceDB holds live records (both as of
        the last checkpoint; the log's pending changes are searched beside the index)."""
        return self._parts.index.in_step(self._parts.table.count_live())

    def pending(self) -> int:
        """Changes logged but not yet folded into LanceDB and Tantivy."""
        return len(self._parts.mirror.pending)

    # ---- reads ----------------------------------------------------------------------------------
    def silent_since(self) -> datetime | None:
        """On an object store that has not answered for SILENT_AFTER seconds (it hangs or
        refuses), when it last did: reads are then served from this replica's view as of
        that time (and say so). None while it answers, and for a local data directory."""
        silent = getattr(self._parts.log, "silent_since", None)
        found = silent(SILENT_AFTER) if silent is not None else None
        return None if found is None else datetime.fromtimestamp(found, UTC)

    # ---- reads ----------------------------------------------------------------------------------
    def get(self, entry_id: str) -> MemoryEntry | None:
        self._parts.follower.fresh()
        return self._parts.mirror.view.get(entry_id)

    def entries(self, include_archived: bool = False) -> list[MemoryEntry]:
        self._parts.follower.fresh()
        return [e for e in self._parts.mirror.view.values() if include_archived or e.live]

    def count(self, project: str | None = None) -> int:
        """Live memories; with `project` (a key), that project's and global ones."""
        self._parts.follower.fresh()
        m = self._parts.mirror
        return m.view.live_count if project is None else m.rows.live_in(project)

    def categories(self, project: str | None = None) -> list[tuple[str, int]]:
        """Live memories per category; with `project` (a key), only that project's memories
        and global ones are counted (a category of another project's alone is not named)."""
        self._parts.follower.fresh()
        m = self._parts.mirror
        found = m.view.categories.items() if project is None else m.rows.categories(project)
        return sorted(found, key=lambda kv: (kv[0].casefold(), kv[0]))

    def search(
        self,
        query: str | None = None,
        category: str | Iterable[str] | None = None,
        tags: str | Iterable[str] | None = None,
        limit: int = 20,
        project: str | None = None,
    ) -> list[Hit]:
        """Hybrid-ranked live entries for `query`; with no query, the most recently seen.
        `category`: a prefix, or several (entries under any one of them, ranked together).
        With `project` (a key, stores/projects.py), only that project's memories and global
        ones, filtered before the top-k as the category and tags are."""
        hits = self._searcher.search(query, category, tags, limit, project)
        if self._parts.index.damaged:  # a search found a damaged index file: rebuild, again
            self._repair.index()
            hits = self._searcher.search(query, category, tags, limit, project)
        return hits

    # ---- the parts, for tests that reach inside ------------------------------------------------
    @property
    def _wal(self) -> Log:
        return self._parts.log

    @property
    def _table(self) -> MemoryTable:
        return self._parts.table

    @property
    def _rows(self) -> Rows:
        return self._parts.mirror.rows

    @property
    def _terms(self) -> Postings:
        return self._parts.mirror.terms

    def _fold(self, start: int, end: int) -> set[str]:
        return fold(self._parts, start, end)
