"""The server's own timeline, for stdio_save_tail_bench.py (not product code).

With DREAMWELL_SPANS=PATH in the environment and this folder on PYTHONPATH, a `dreamwell
serve` process appends one line per span to PATH, `name<TAB>start<TAB>end` (seconds of
time.perf_counter, which on Linux is CLOCK_MONOTONIC: the bench's clock too): each save and
search as the store ran it, each backfill round and its embedding, each save held for the
backfill, each checkpoint phase, each fsync (by the thread that called it), each run of the
garbage collector and each hand-back of the heap. Patched from outside, so the same bench
times a branch and main alike.
"""

import functools
import gc
import os
import sys
import threading
import time

_OUT = os.environ.get("DREAMWELL_SPANS")
_spans: list[tuple[str, float, float]] = []
_lock = threading.Lock()


def _note(name, began, ended):  # type: ignore[no-untyped-def]
    with _lock:
        _spans.append((name, began, ended))


def _flush():  # type: ignore[no-untyped-def]
    with _lock:
        out, _spans[:] = list(_spans), []
    if out:
        with open(_OUT, "a") as fh:  # type: ignore[arg-type]
            fh.writelines(f"{n}\t{s:.6f}\t{e:.6f}\n" for n, s, e in out)


def _flusher():  # type: ignore[no-untyped-def]
    while True:
        time.sleep(0.2)
        _flush()


def _timed(name, owner, attr):  # type: ignore[no-untyped-def]
    original = getattr(owner, attr, None)
    if original is None:  # not in this version of the code
        return

    @functools.wraps(original)
    def wrapper(*args, **kwargs):  # type: ignore[no-untyped-def]
        began = time.perf_counter()
        try:
            return original(*args, **kwargs)
        finally:
            _note(name, began, time.perf_counter())

    setattr(owner, attr, wrapper)


def _gc_runs():  # type: ignore[no-untyped-def]
    began = {}

    def note(phase, info):  # type: ignore[no-untyped-def]
        me = threading.get_ident()
        if phase == "start":
            began[me] = time.perf_counter()
        elif me in began:
            _note(f"gc gen{info['generation']}", began.pop(me), time.perf_counter())

    gc.callbacks.append(note)


def _fsyncs():  # type: ignore[no-untyped-def]
    original = os.fsync

    def fsync(fd):  # type: ignore[no-untyped-def]
        began = time.perf_counter()
        try:
            original(fd)
        finally:
            _note(f"fsync by {threading.current_thread().name}", began, time.perf_counter())

    os.fsync = fsync


def _install():  # type: ignore[no-untyped-def]
    from dreamwell.server import background
    from dreamwell.server import loops as app  # where the loops call them from
    from dreamwell.stores.index import centred_rows, text_index
    from dreamwell.stores.longterm import (
        checkpoint,
        group_commit,
        lance_files,
        lance_table,
        snapshot,
        table_writes,
        vectors,
    )
    from dreamwell.stores.longterm.store import LongTermStore

    _timed("save (store)", LongTermStore, "save")
    _timed("search (store)", LongTermStore, "search")
    _timed("load vectors", LongTermStore, "load_vectors")
    _timed("save held for the backfill", vectors.Vectors, "hold_save")
    _timed("backfill round", vectors.Vectors, "backfill")
    _timed("backfill embedding", background, "on_two_threads")
    _timed("vectors lent", vectors.Vectors, "_lend")
    _timed("sign bits centred at once", centred_rows.CentredRows, "_centre")
    _timed("a step of a new centre's bits", centred_rows.CentredRows, "_step")
    _timed("group commit", group_commit.GroupCommit, "commit")
    _timed("heap hand-back", app, "give_back_freed")
    _timed("tidy (gc + hand-back)", app, "tidy")
    _timed("seal", checkpoint.Checkpointer, "_seal")
    _timed("fold", checkpoint, "fold")
    _timed("lancedb upsert", lance_table.MemoryTable, "upsert")
    _timed("lancedb delete", lance_table.MemoryTable, "delete")
    _timed("tantivy writes", table_writes, "_index")
    _timed("snapshot", checkpoint.Checkpointer, "_snapshot")
    _timed("snapshot write", snapshot, "write")
    _timed("compaction", lance_table.MemoryTable, "optimize")
    _timed("checksums", lance_files, "record")
    _timed("compact rows", checkpoint.Checkpointer, "compact_rows")
    _timed("checkpoint", checkpoint.Checkpointer, "checkpoint")
    _timed("tantivy reload", text_index.TextIndex, "reload")
    from dreamwell.stores.longterm import search as _s

    for _n in ("_query_vector", "_keywords", "_cosine", "_floor", "_candidates"):
        _timed("search." + _n, _s.Searcher, _n)
    for _n in ("rank_hits", "favour_times", "select"):
        _timed("search." + _n, _s, _n)
    _gc_runs()
    _fsyncs()
    threading.Thread(target=_flusher, name="spans", daemon=True).start()
    import atexit

    atexit.register(_flush)


if _OUT and "serve" in sys.argv:
    _install()
