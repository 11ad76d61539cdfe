"""The resident hook process's hybrid ranking: the long-term store opened as a second server
process opens it (the same embedder, blend and relevance rule as `search_memory`), its
stored vectors loaded and the model warmed on a thread of its own, so the prompt hook ranks
as `search_memory` does (stores/hooks/inject.py's `StoreRanker`).

Until that is done (LanceDB's import, the vectors, the model: seconds after the resident
starts), and in a hook that runs as its own process, the hooks rank by keywords, and
`hooks.log` says so ("keyword-only: embedder loading"). The resident also embeds what the
sessions' servers saved and did not live to embed (a `claude -p` session's server lives
about a second): a search embeds a few short ones in memory at once, and a backfill thread
logs their vectors, as a server's backfill does."""

from __future__ import annotations

import gc
import logging
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dreamwell.stores import DataDir
from dreamwell.stores.hooks import hooks_log

if TYPE_CHECKING:
    from dreamwell.stores.hooks import StoreRanker

logger = logging.getLogger(__name__)

BACKFILL_BATCH = 64
BACKFILL_IDLE = 30.0  # seconds between looks for vectors to log when nothing asks sooner


class Hybrid:
    """The resident's long-term store, opened on a thread: `ranker(dirs)` is None (and
    `why` says why) until it is ready."""

    def __init__(self, data_dir: Path, tenant: str, given: Mapping[str, Any]) -> None:
        self.dirs = DataDir(data_dir).tenant(tenant)
        self._given = {k: v for k, v in given.items() if v is not None}
        self._data_dir = data_dir
        self._ranker: StoreRanker | None = None
        self.why = "embedder loading"
        self._wanted = threading.Event()
        self._stopped = False

    def start(self) -> None:
        threading.Thread(target=self._run, name="dreamwell-hybrid", daemon=True).start()

    def stop(self) -> None:
        """End the backfill thread (after its current round)."""
        self._stopped = True
        self._wanted.set()

    def ranker(self, dirs: DataDir) -> StoreRanker | None:
        if dirs.root != self.dirs.root:
            return None
        if self._ranker is not None:
            self._wanted.set()  # a memory saved since may want its vector logged
        return self._ranker

    def _run(self) -> None:
        try:
            store = self._open()
        except Exception as exc:  # keywords serve; the reason goes to hooks.log once
            self.why = f"the store could not be opened for vectors ({type(exc).__name__}: {exc})"
            hooks_log(self.dirs, f"resident: keyword-only: {self.why}")
            return
        from dreamwell.stores.hooks import StoreRanker

        self._ranker = StoreRanker(store)
        self.why = ""
        self._backfill_forever(store)

    def _open(self) -> Any:
        from dreamwell.server.config import Settings
        from dreamwell.server.runtime import KEYWORD_WEIGHT, MIN_SIMILARITY, Runtime
        from dreamwell.stores import LongTermStore

        settings = Settings(data_dir=self._data_dir, **self._given)
        runtime = Runtime(settings)  # the server's embedder and reranker for these settings
        if runtime.embedder is None:
            raise ValueError("embedder=none: keywords are all there is")
        s = settings
        store = LongTermStore(
            self.dirs.root,
            embedder=runtime.embedder,
            keyword_weight=s.keyword_weight
            if s.keyword_weight is not None
            else KEYWORD_WEIGHT.get(s.embedder, 1.0),
            min_similarity=s.min_similarity
            if s.min_similarity is not None
            else MIN_SIMILARITY.get(s.embedder, 0.0),
            reranker=runtime.reranker,
            rerank_depth=s.rerank_depth,
            contextual=s.contextual,
            search_embeds_others=True,
        )
        store.load_vectors()
        warm = getattr(runtime.embedder, "warm", None)
        if warm is not None:
            warm()
        store.search("warm")  # embeds the reference sentences: not on the first prompt's clock
        from dreamwell.server.heap import give_back_freed

        gc.collect()
        give_back_freed()  # the stored vectors' Arrow batches and the model's first activations
        return store

    def _backfill_forever(self, store: Any) -> None:
        """Log the vectors of memories no process logged (their savers are gone), as a
        server's backfill does, under the same lock (one process embeds each memory)."""
        from dreamwell.server.heap import give_back_freed
        from dreamwell.stores import claimed

        while not self._stopped:
            soon = store.vectors_claimed_for()
            self._wanted.wait(BACKFILL_IDLE if soon is None else min(BACKFILL_IDLE, soon + 0.05))
            self._wanted.clear()
            if self._stopped:
                return
            done = 0
            with claimed(self.dirs.backfill_lock) as mine:
                try:
                    while mine and (n := store.backfill(BACKFILL_BATCH)) > 0:
                        done += n
                except Exception as exc:  # never take the resident down
                    hooks_log(self.dirs, f"resident: backfill failed: {exc}")
            if done:
                give_back_freed()


_resident: Hybrid | None = None


def start(data_dir: Path, tenant: str, given: Mapping[str, Any]) -> None:
    """Begin opening the store for hybrid ranking in this (resident) process."""
    global _resident
    if _resident is None:
        _resident = Hybrid(data_dir, tenant, given)
        _resident.start()


def ranker(dirs: DataDir) -> tuple[StoreRanker | None, str]:
    """The hybrid ranker for `dirs` in this process, else None and why not."""
    if _resident is None:
        return None, "the hook ran as its own process"
    found = _resident.ranker(dirs)
    return found, "" if found is not None else _resident.why or "another data directory"
