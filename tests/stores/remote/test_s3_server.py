"""What the object store under `s3://` data dirs must guarantee, checked on the real SeaweedFS
the tests start (tests/support/s3server.py): conditional PUT (`If-None-Match: *`) lets exactly
one of racing creators win, LanceDB's `merge_insert` on an unenforced primary key inserts a
racing row once, `If-Match` on an ETag lets exactly one of racing replacers win, and a stopped
or hung server makes a call fail within a bounded time instead of hanging."""

from __future__ import annotations

import multiprocessing
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import obstore
import pyarrow as pa
import pytest
from obstore.exceptions import AlreadyExistsError, PreconditionError

from tests.support.s3server import SeaweedS3, listening_ports

RACERS = 16
# spawned processes racing for one row: each imports LanceDB (~2 s of CPU here), and two cores
# never run more than two at once, so 8 race as hard as 16 did (13.5 s against 31.9 here)
MERGE_RACERS = 8
BOUNDED = {  # the call time-out recommended to the store: these figures are what it yields
    "client_options": {"timeout": "2s", "connect_timeout": "1s"},
    "retry_config": {
        "max_retries": 2,
        "retry_timeout": timedelta(seconds=5),
        "backoff": {
            "init_backoff": timedelta(milliseconds=100),
            "max_backoff": timedelta(seconds=1),
        },
    },
}


_SCHEMA = pa.schema(
    [
        pa.field(
            "n",
            pa.int64(),
            nullable=False,
            metadata={"lance-schema:unenforced-primary-key": "true"},
        ),
        pa.field("body", pa.string()),
    ]
)


def race(n: int, fn: Callable[[int], object]) -> list[object]:
    """Run fn(0..n-1) on n threads released together; each result or the exception raised."""
    barrier = threading.Barrier(n)
    results: list[object] = [None] * n

    def run(i: int) -> None:
        barrier.wait(30)
        try:
            results[i] = fn(i)
        except Exception as e:
            results[i] = e

    threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not any(t.is_alive() for t in threads)
    return results


def test_the_server_listens_only_on_ports_chosen_for_it(s3: SeaweedS3) -> None:
    assert s3.proc is not None
    ports = listening_ports(s3.proc.pid)
    assert s3.ports["s3.port"] in ports and s3.ports["filer.port"] in ports
    assert ports <= set(s3.ports.values()), ports - set(s3.ports.values())


def test_racing_creators_of_one_key_exactly_one_wins(s3: SeaweedS3, s3_prefix: str) -> None:
    store = s3.store(s3_prefix)
    results = race(RACERS, lambda i: obstore.put(store, "lease", f"w{i}".encode(), mode="create"))
    winners = [i for i, r in enumerate(results) if isinstance(r, dict)]
    losers = [r for r in results if isinstance(r, AlreadyExistsError)]
    assert len(winners) == 1 and len(losers) == RACERS - 1, results
    assert bytes(obstore.get(store, "lease").bytes()) == f"w{winners[0]}".encode()


def test_if_match_lets_exactly_one_of_racing_replacers_win(s3: SeaweedS3, s3_prefix: str) -> None:
    store = s3.store(s3_prefix)
    first = obstore.put(store, "doc", b"v0")
    obstore.put(store, "doc", b"v1", mode={"e_tag": first["e_tag"]})
    with pytest.raises(PreconditionError):  # a stale ETag is refused
        obstore.put(store, "doc", b"v2", mode={"e_tag": first["e_tag"]})
    with pytest.raises(PreconditionError):  # so is any ETag for an object that is not there
        obstore.put(store, "absent", b"x", mode={"e_tag": first["e_tag"]})
    for rnd in range(3):
        read = obstore.head(store, "doc")["e_tag"]
        results = race(
            RACERS,
            lambda i, r=rnd, e=read: obstore.put(
                store, "doc", f"r{r}w{i}".encode(), mode={"e_tag": e}
            ),
        )
        winners = [i for i, r in enumerate(results) if isinstance(r, dict)]
        refused = [r for r in results if isinstance(r, PreconditionError)]
        assert len(winners) == 1 and len(refused) == RACERS - 1, results
        assert bytes(obstore.get(store, "doc").bytes()) == f"r{rnd}w{winners[0]}".encode()


def _merge_insert_row(
    uri: str, options: dict[str, str], barrier: Any, results: Any, i: int
) -> None:
    """One spawned racer: open the table, wait for all, insert row n=2 if it is not there."""
    import lancedb

    table = lancedb.connect(uri, storage_options=options).open_table("log")
    barrier.wait(120)
    try:
        row = pa.table({"n": pa.array([2], pa.int64()), "body": [f"racer {i}"]}, schema=_SCHEMA)
        got = table.merge_insert("n").when_not_matched_insert_all().execute(row)
        results.put((i, got.num_inserted_rows, ""))
    except Exception as e:
        results.put((i, -1, f"{type(e).__name__}: {e}"))


def test_racing_merge_inserts_of_one_primary_key_insert_it_once(
    s3: SeaweedS3, s3_prefix: str
) -> None:
    import lancedb

    uri = s3.uri(s3_prefix)
    lancedb.connect(uri, storage_options=s3.storage_options).create_table("log", schema=_SCHEMA)
    ctx = multiprocessing.get_context("spawn")  # LanceDB's runtime does not survive a fork
    barrier, results = ctx.Barrier(MERGE_RACERS), ctx.Queue()
    args = (uri, s3.storage_options, barrier, results)
    procs = [ctx.Process(target=_merge_insert_row, args=(*args, i)) for i in range(MERGE_RACERS)]
    for p in procs:
        p.start()
    try:
        outcomes = sorted(results.get(timeout=300) for _ in procs)
    finally:
        for p in procs:
            p.join(60)
            if p.exitcode is None:
                p.kill()
    assert all(p.exitcode == 0 for p in procs)
    assert [o for o in outcomes if o[2]] == []
    assert sorted(o[1] for o in outcomes) == [0] * (MERGE_RACERS - 1) + [1], outcomes
    table = lancedb.connect(uri, storage_options=s3.storage_options).open_table("log")
    assert table.to_arrow().column("n").to_pylist() == [2]


@pytest.fixture
def own_s3() -> Iterator[SeaweedS3]:
    """A server of this test's own, since it is stopped and hung (the session's stays up)."""
    with SeaweedS3(bucket="outage") as server:
        yield server


def elapsed_failure(call: Callable[[], object]) -> tuple[float, Exception]:
    start = time.monotonic()
    with pytest.raises(Exception) as caught:
        call()
    return time.monotonic() - start, caught.value


def test_a_stopped_or_hung_server_fails_calls_within_the_call_time_out(
    own_s3: SeaweedS3,
) -> None:
    store = own_s3.store("o", **BOUNDED)
    obstore.put(store, "kept", b"acknowledged")
    own_s3.pause()  # stopped: connections refused, retried with backoff, then the error
    for call in (
        lambda: obstore.put(store, "a", b"x", mode="create"),
        lambda: obstore.get(store, "kept").bytes(),
        lambda: obstore.list(store).collect(),
    ):
        took, error = elapsed_failure(call)
        assert took < 8 and "error sending request" in str(error), (took, error)
    own_s3.resume()  # same ports, same data: the same store object works again
    assert bytes(obstore.get(store, "kept").bytes()) == b"acknowledged"
    own_s3.freeze()  # hung: each attempt waits the 2 s time-out; retries end by 5 s + 2 s
    try:
        took, error = elapsed_failure(lambda: obstore.put(store, "b", b"x", mode="create"))
        assert 1.5 < took < 5 and "error sending request" in str(error), (took, error)
        took, error = elapsed_failure(lambda: obstore.get(store, "kept").bytes())
        assert 1.5 < took < 12, (took, error)
    finally:
        own_s3.thaw()
    assert bytes(obstore.get(store, "kept").bytes()) == b"acknowledged"


def test_a_port_lost_between_the_check_and_the_bind_gives_new_ports(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The harness, not the product. A port chosen free and taken by another test after `weed
    mini` checked it but before its admin server bound it: the admin server fails, and `weed
    mini` neither serves nor exits (a CI run waited 90 s for it, then failed a test). The
    wait now reads that in the log, and the start tries again on new ports. (The race itself
    cannot be staged on cue, so a process that never serves stands in for `weed mini`.)"""
    server = SeaweedS3(bucket="taken", root=tmp_path)
    server.log_path.write_text(
        "Admin        starting\nE1129 02:34:32.940663 mini.go:1673 Admin server error: admin"
        " server: listen tcp 127.0.0.1:34400: bind: address already in use\n"
    )
    monkeypatch.setattr(server, "_probe", lambda: False)
    server.proc = subprocess.Popen(["sleep", "60"])
    try:
        began = time.monotonic()
        assert server._wait_ready(0) is False
        assert time.monotonic() - began < 10 and server._taken(0)
    finally:
        server.proc.kill()
        server.proc.wait()
