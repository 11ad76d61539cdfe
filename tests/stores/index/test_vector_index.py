"""The inverted file over the rows' vectors and their contextual vectors (stores/index/ivf.py),
probed from ivf.INDEX_AT vectors on (lowered here): its answers against the exact scan on
seeded data, filters before the top k, and the lists kept true as vectors and links arrive,
change and go, while a reader searches, and across two processes on one data directory."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

from dreamwell.stores import LongTermStore, MemoryEntry, new_id, utcnow
from dreamwell.stores.index import ivf, vector_rank
from dreamwell.stores.index.rows import Rows
from tests.support import ROOT
from tests.support.embedders import SeededEmbedder
from tests.support.vectors import DIM, SHARED, TOPICS, build, clustered, unit

INDEX_AT = 4_000
N = 24_000
SUBTOPICS = np.random.default_rng(2).normal(size=(50, 20, DIM))


def nested(n: int, seed: int) -> npt.NDArray[np.float32]:
    """Like `clustered`, with subtopics inside each topic, and each stream of three (the
    rows `build` links) about one topic, as a caller's consecutive saves tend to be.
    Clusters of pure noise (`clustered`) are an inverted file's worst case: a query's
    nearest rows then lie in every leaf of its topic. And streams that jump topic at every
    save make a contextual vector a mix of unrelated ones, which no leaf holds together:
    tests/bench/million_bench.py measures that case at a million rows (random pairs of
    LoCoMo texts in random streams of ten)."""
    rng = np.random.default_rng(seed)
    topic = np.repeat(rng.integers(0, 50, -(-n // 3)), 3)[:n]
    sub = rng.integers(0, 20, n)
    return unit(
        SHARED + TOPICS[topic] + 0.7 * SUBTOPICS[topic, sub] + 0.7 * rng.normal(size=(n, DIM))
    )


@pytest.fixture(scope="module")
def data() -> tuple[npt.NDArray[np.float32], Rows]:
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(ivf, "INDEX_AT", INDEX_AT)
        vectors = nested(N, 21)
        return vectors, build(vectors, stream=3)


def held(rows: Rows) -> tuple[npt.NDArray[np.float32], npt.NDArray[np.float32]]:
    """Every row's vector as held, and its contextual vector (once per data, not per query:
    each takes a few hundred milliseconds at N rows)."""
    assert rows.vec is not None
    every = np.arange(rows.n)
    return rows.vec.rows(every), rows._contexts(every)


def truth(
    rows: Rows,
    matrices: tuple[npt.NDArray[np.float32], npt.NDArray[np.float32]],
    q: npt.NDArray[np.float32],
    mask: Any,
    k: int,
) -> tuple[set[str], set[str]]:
    """The exact scan: every allowed row's cosine, and its contextual vector's."""
    allowed = np.flatnonzero(mask[: rows.n] & rows.has_vec[: rows.n])
    plain, ctx = (m @ q for m in matrices)
    best = allowed[np.argsort(-plain[allowed], kind="stable")[:k]]
    best_ctx = allowed[np.argsort(-ctx[allowed], kind="stable")[:k]]
    return {rows.ids[i] for i in best}, {rows.ids[i] for i in best_ctx}


def recall(rows: Rows, queries: npt.NDArray[np.float32], mask: Any) -> tuple[float, float]:
    """Mean share of the exact scan's top 10 the search returns, plain and contextual."""
    matrices = held(rows)
    found, found_ctx = [], []
    for q in queries:
        plain, ctx = rows.vector_top(list(q), 10, mask, contextual=True)
        want, want_ctx = truth(rows, matrices, q, mask, 10)
        found.append(len({i for i, _ in plain} & want) / 10)
        found_ctx.append(len({i for i, _ in ctx} & want_ctx) / 10)
    return float(np.mean(found)), float(np.mean(found_ctx))


def test_the_lists_keep_the_exact_top_ten_while_scanning_a_fraction(
    data: tuple[npt.NDArray[np.float32], Rows], monkeypatch: pytest.MonkeyPatch
) -> None:
    _, rows = data
    index = rows.index
    assert index is not None and len(index.plain.rows) == len(index.context.rows) > 16_000
    queries = nested(40, 22)
    allowed = rows.mask(None, ())
    scanned: list[int] = []
    similarity = ivf.similarity

    def counted(bits: npt.NDArray[np.uint64], words: npt.NDArray[np.uint64]) -> Any:
        scanned.append(bits.shape[1])
        return similarity(bits, words)

    monkeypatch.setattr(ivf, "similarity", counted)
    rows.vector_top(list(queries[0]), 10, allowed, contextual=True)
    # the lists, then the tail, of each ranking: a fraction of the rows, not every one
    assert len(scanned) == 4 and 0 < sum(scanned) < N // 3, scanned
    plain, ctx = recall(rows, queries, allowed)
    assert plain >= 0.95 and ctx >= 0.9, (plain, ctx)
    # the scores stay exact cosines of the vectors as held
    assert rows.vec is not None
    top, _ = rows.vector_top(list(queries[1]), 5, allowed)
    for entry_id, score in top:
        assert abs(score - float(rows.vec.rows([int(entry_id[1:])])[0] @ queries[1])) < 1e-5
    # without the lists (every row's sign bits), the same data: the lists cost little recall
    rows.index = None
    try:
        every = recall(rows, queries, allowed)
    finally:
        rows.index = index
    assert plain >= every[0] - 0.03 and ctx >= every[1] - 0.03, (plain, ctx, every)


def test_filters_apply_before_the_top_k_on_the_lists(
    data: tuple[npt.NDArray[np.float32], Rows], monkeypatch: pytest.MonkeyPatch
) -> None:
    _, rows = data
    probed = []
    orig = vector_rank._probed
    monkeypatch.setattr(vector_rank, "_probed", lambda *a: probed.append(1) or orig(*a))
    half = rows.mask("c/1", ()) | rows.mask("c/2", ())  # half the rows: probed
    queries = nested(30, 23)
    for q in queries[:5]:
        plain, ctx = rows.vector_top(list(q), 10, half, contextual=True)
        assert len(plain) == len(ctx) == 10
        assert all(int(i[1:]) % 4 in (1, 2) for i, _ in [*plain, *ctx])
    assert len(probed) == 5
    plain_recall, ctx_recall = recall(rows, queries, half)
    assert plain_recall >= 0.95 and ctx_recall >= 0.9, (plain_recall, ctx_recall)
    # a quarter of the rows or fewer: their own bits are scanned, not the lists
    narrow = rows.mask("c/1", ())
    before = len(probed)
    plain, ctx = rows.vector_top(list(queries[0]), 10, narrow, contextual=True)
    assert len(probed) == before and len(plain) == len(ctx) == 10
    assert all(int(i[1:]) % 4 == 1 for i, _ in [*plain, *ctx])


def test_small_stores_have_no_lists(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ivf, "INDEX_AT", 1_000)
    rows = build(clustered(999, 25))
    assert rows.index is None and rows.ctx_bits is None
    rows.put(MemoryEntry("x", "x", None, (), utcnow(), utcnow(), utcnow()))
    rows.set_vector("x", "test", clustered(1, 26)[0])  # the thousandth: listed now
    assert rows.index is not None and len(rows.index.plain.rows) == 1_000


def test_vectors_and_links_that_arrive_change_or_go_are_found_as_they_are_now(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(ivf, "INDEX_AT", 2_000)
    vectors = clustered(8_000, 27)
    rows = build(vectors)
    index = rows.index
    assert index is not None and index.plain.room < 2_000
    rng = np.random.default_rng(28)
    # a row whose vector changes goes to the tail; then new rows, more than a tail holds:
    # the lists are made again with the same quantisers
    rows.set_vector("m3", "test", clustered(1, 40)[0])
    fresh = clustered(index.plain.room + 50, 29)
    now = utcnow()
    for k, v in enumerate(fresh):
        rows.put(MemoryEntry(f"n{k}", "x", "c/0", (), now, now, now))
        rows.set_vector(f"n{k}", "test", v)
    new = rows.index
    assert new is not None and new is not index and new.centre is index.centre
    assert new.plain.quantiser is index.plain.quantiser
    assert new.context.quantiser is index.context.quantiser
    assert len(new.plain.rows) > 8_000 and new.plain.tail_n > 0  # some since the new lists
    # the new lists hold every row with a vector once (or it came since, in the tail), with
    # its current bits, as lists made from scratch would
    assert rows.codes is not None and rows.ctx_bits is not None
    with_vector = set(np.flatnonzero(rows.has_vec[: rows.n]).tolist())
    for lists, current in ((new.plain, rows.codes[1]), (new.context, rows.ctx_bits)):
        listed = lists.rows.tolist()
        assert len(set(listed)) == len(listed)
        assert set(listed) | set(lists.tail[: lists.tail_n].tolist()) == with_vector
        assert np.array_equal(lists.bits, current[:, lists.rows])
        assert (np.diff(lists.leaf) >= 0).all()
    everything = rows.mask(None, ())
    for k in rng.choice(len(fresh), 20, replace=False).tolist():
        plain, _ = rows.vector_top(list(fresh[k]), 1, everything)
        assert plain[0][0] == f"n{k}"  # found by its own vector, in a leaf or in the tail
    # a row whose vector changed is found by its new vector, and a removed one never
    moved = clustered(1, 30)[0]
    rows.set_vector("m5", "test", moved)
    assert rows.vector_top(list(moved), 1, rows.mask(None, ()))[0][0][0] == "m5"
    rows.remove("m7")
    plain, ctx = rows.vector_top(list(vectors[7]), 50, rows.mask(None, ()), contextual=True)
    assert "m7" not in {i for i, _ in [*plain, *ctx]}
    # a link made since the lists: the row whose new neighbour is the query is found by its
    # context (the contextual lists' tail), with the exact contextual score
    far = clustered(1, 31)[0]
    rows.put(MemoryEntry("p", "x", "c/0", (), now, now, now))
    rows.set_vector("p", "test", clustered(1, 32)[0])
    rows.put(MemoryEntry("f", "x", "c/0", (), now, now, now, metadata={"follows": "p"}))
    rows.set_vector("f", "test", far)
    _, ctx = rows.vector_top(list(far), 5, rows.mask(None, ()), contextual=True)
    assert {"p", "f"} <= {i for i, _ in ctx}
    want = rows._contexts(np.array([rows.row_of["p"]]))[0] @ far
    assert abs(dict(ctx)["p"] - float(want)) < 1e-5


def test_the_lists_follow_a_new_centre() -> None:
    """When the vectors quadruple the sign bits get a new centre, and the lists are made
    again for it (a search never pairs lists with bits of another centre)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(ivf, "INDEX_AT", 1_500)
        rows = build(clustered(4_100, 33))  # centred at 257, 1,028 and 4,112 vectors
        index = rows.index
        assert rows.codes is not None and index is not None and index.centre is rows.codes[0]
        more = clustered(20, 34)
        now = utcnow()
        for k, v in enumerate(more):
            rows.put(MemoryEntry(f"n{k}", "x", None, (), now, now, now))
            rows.set_vector(f"n{k}", "test", v)
        assert rows.index is not None and rows.index is not index
        assert rows.index.centre is rows.codes[0] and rows.index.centre is not index.centre
        assert rows.index.plain.quantiser is not index.plain.quantiser
        plain, _ = rows.vector_top(list(more[3]), 1, rows.mask(None, ()))
        assert plain[0][0] == "n3"


def test_a_reader_searching_while_the_lists_are_remade_sees_every_change_it_follows(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Searches run while a writer adds rows past two tails (the lists made again twice)
    and deletes: every search answers, a row is found by its own vector from the moment its
    set_vector returned, and a removed row is never found after remove returned."""
    monkeypatch.setattr(ivf, "INDEX_AT", 2_000)
    rows = build(clustered(6_000, 35))
    index = rows.index
    assert index is not None
    fresh = clustered(2 * index.plain.room + 10, 36)
    done: list[int] = []  # rows set: the reader checks the latest
    removed: list[str] = []
    failures: list[str] = []
    stop = threading.Event()

    def reader() -> None:
        while not stop.is_set():
            if done:
                k = done[-1]
                gone = set(removed)
                plain, ctx = rows.vector_top(list(fresh[k]), 3, rows.mask(None, ()), True)
                # (the writer may have removed it meanwhile: every 50th row is removed once
                # the next one is set)
                if plain[0][0] != f"n{k}" and f"n{k}" not in removed:
                    failures.append(f"n{k} not first: {plain}")
                if gone & {i for i, _ in [*plain, *ctx]}:
                    failures.append(f"removed found: {gone}")

    thread = threading.Thread(target=reader)
    thread.start()
    now = utcnow()
    try:
        for k, v in enumerate(fresh):
            rows.put(MemoryEntry(f"n{k}", "x", None, (), now, now, now))
            rows.set_vector(f"n{k}", "test", v)
            done.append(k)
            if k % 50 == 7:
                rows.remove(f"n{k - 1}")
                removed.append(f"n{k - 1}")
    finally:
        stop.set()
        thread.join(timeout=30)
    assert not failures, failures[:3]
    assert rows.index is not None and rows.index is not index


def test_the_quantiser_places_each_row_in_its_nearest_leaf() -> None:
    x = clustered(5_000, 31)
    q = ivf.Quantiser.train(x)
    assert q.fine == ivf.FINE and len(q.leaves) == ivf.COARSE * ivf.FINE
    leaf = q.assign(x[:300])
    for i in range(0, 300, 37):
        cell = int(np.argmin(np.linalg.norm(q.coarse - x[i], axis=1)))
        fine = q.leaves[cell * q.fine : (cell + 1) * q.fine]
        assert leaf[i] == cell * q.fine + int(np.argmin(np.linalg.norm(fine - x[i], axis=1)))
    assert q.ranked(x[0])[0] == int(np.argmin(np.linalg.norm(q.leaves - x[0], axis=1)))


WRITER = """
import sys
from dreamwell.stores import LongTermStore
from tests.support.embedders import SeededEmbedder
store = LongTermStore(sys.argv[1], embedder=SeededEmbedder())
if sys.argv[2] == "save":
    entry = store.save(sys.argv[3]).entry
    assert store.backfill() == 1
    print(entry.id)
else:
    store.delete(sys.argv[3])
"""


def writer(data: Path, *args: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(WRITER), str(data), *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
        cwd=ROOT,
    )
    return done.stdout.strip()


def test_a_store_lists_its_vectors_once_loaded_and_follows_another_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A store past a lowered threshold makes its lists once, after loading every vector
    (not as each block arrives), and then follows another process's save (found by its
    vector alone: keyword weight 0) and delete."""
    monkeypatch.setattr(ivf, "INDEX_AT", 1_000)
    embedder = SeededEmbedder()
    seeding = LongTermStore(tmp_path, embedder=embedder)
    now = utcnow()
    texts = [f"seeded memory {i}" for i in range(3_000)]  # past RESCORE: the sign stage runs
    seeding.apply([MemoryEntry(new_id(), t, None, (), now, now, now) for t in texts])
    while seeding.backfill(batch=1_000):
        pass
    seeding.checkpoint()
    made: list[bool] = []  # per call, whether the lists were deferred then
    index = Rows._index
    monkeypatch.setattr(
        Rows, "_index", lambda self, *a: made.append(self.defer_index) or index(self, *a)
    )
    reader = LongTermStore(tmp_path, embedder=embedder, keyword_weight=0.0)
    reader.load_vectors()
    rows = reader._parts.mirror.rows
    assert rows.index is not None and len(rows.index.plain.rows) == 3_000
    assert made.count(False) == 1  # made once, at the end: while loading, deferred
    assert reader.search("seeded memory 1234", limit=1)[0].entry.content == "seeded memory 1234"
    new = "a note about quasars and their jets"
    entry_id = writer(tmp_path, "save", new)
    hits = reader.search(new, limit=3)
    assert hits[0].entry.id == entry_id and hits[0].score > 0
    assert rows.index is not None and rows.index.plain.tail_n >= 1  # it came after the lists
    writer(tmp_path, "delete", entry_id)
    assert entry_id not in {h.entry.id for h in reader.search(new, limit=50)}
