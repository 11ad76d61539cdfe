"""Working memory and the input logs on object storage (SeaweedFS on 127.0.0.1): each replica
has its own cache directory on one location, as separate machines would.

What is provoked: a write, an overwrite, an eviction and an expiry on one replica read on
another within 2 s (the version is checked at most every 0.25 s); threads on two replicas
racing saves into one segment (each lost compare-and-set recomputes: nothing is lost); the
per-namespace cap and the TTL across replicas; log appends racing from two replicas (none
lost), the dream's consume taking each record once and leaving what came after the read;
the log's bound; and nothing of it in the local cache.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

import anyio
import pytest

from dreamwell.stores import FEEDBACK, RECALL, JsonlLog, NotFound, WorkingMemory, utcnow
from dreamwell.stores.remote.blobs import Blobs, attach
from dreamwell.stores.remote.location import Remote
from tests.support.racing import eventually, race
from tests.support.s3server import SeaweedS3

pytestmark = pytest.mark.filterwarnings("ignore::ResourceWarning")
NS = "session/shared"


@pytest.fixture
def location(s3: SeaweedS3, s3_prefix: str) -> Remote:
    return Remote.of(s3.uri(s3_prefix), s3.storage_options)


@pytest.fixture
def caches(location: Remote, tmp_path: Path) -> Callable[[], Path]:
    """Each call: another replica's cache directory on the test's location."""
    made: list[Path] = []

    def another() -> Path:
        cache = tmp_path / f"cache{len(made)}"
        attach(cache, location)
        made.append(cache)
        return cache

    return another


def value_or_none(wm: WorkingMemory, key: str) -> str | None:
    try:
        return wm.get(key, NS).value
    except NotFound:
        return None


def test_writes_overwrites_evictions_and_expiry_are_seen_by_another_replica(
    caches: Callable[[], Path], location: Remote
) -> None:
    cache = caches()
    a = WorkingMemory(cache, max_per_namespace=2)
    b = WorkingMemory(caches(), max_per_namespace=2)
    assert value_or_none(b, "plan") is None  # b has looked: now it holds a version
    a.save(NS, "plan", "first draft", ttl_minutes=30)
    eventually(lambda: value_or_none(b, "plan") == "first draft")
    a.save(NS, "plan", "second draft", ttl_minutes=30)
    eventually(lambda: value_or_none(b, "plan") == "second draft")
    b.save(NS, "soon", "expires first", ttl_minutes=1)
    outcome = a.save(NS, "later", "third key", ttl_minutes=60)  # over the cap of 2
    assert outcome.evicted == f"{NS}/soon"  # b's entry, closest to expiry
    eventually(lambda: value_or_none(b, "soon") is None)
    assert [e.key for e in b.listing(NS)] == [f"{NS}/later", f"{NS}/plan"]
    # expiry: an entry stored 10 minutes ago with a 1-minute TTL is gone everywhere, and a
    # sweep on one replica removes it from the object
    past = utcnow() - timedelta(minutes=10)
    b.save(NS, "stale", "old news", ttl_minutes=1, now=past)
    assert value_or_none(a, "stale") is None
    assert b.sweep() == 1
    found = Blobs(location, "working-memory").read("session.json")
    assert found is not None and b"old news" not in found[0] and b"third key" in found[0]
    assert not (cache / "working-memory" / "session.json").exists()  # nothing local


def test_replicas_racing_saves_into_one_segment_lose_nothing(caches: Callable[[], Path]) -> None:
    replicas = [WorkingMemory(caches(), max_per_namespace=100) for _ in range(2)]

    def saver(wm: WorkingMemory, who: str) -> None:
        for i in range(8):
            wm.save(f"session/{who}", f"k{i}", f"{who} value {i}", ttl_minutes=30)

    errors = race(replicas, saver)
    assert errors == []
    reader = WorkingMemory(caches())
    keys = {e.key for e in reader.listing("session")}
    assert keys == {f"session/r{n}t{t}/k{i}" for n in range(2) for t in range(3) for i in range(8)}


def test_the_cap_holds_across_replicas(caches: Callable[[], Path]) -> None:
    a, b = (WorkingMemory(caches(), max_per_namespace=3) for _ in range(2))
    for i in range(3):
        (a if i % 2 else b).save(NS, f"k{i}", "v", ttl_minutes=10 + i)
    outcome = b.save(NS, "k3", "v", ttl_minutes=60)
    assert outcome.evicted == f"{NS}/k0"
    eventually(lambda: len(a.listing(NS)) == 3)
    assert {e.key.rsplit("/", 1)[1] for e in a.listing(NS)} == {"k1", "k2", "k3"}


def test_log_appends_racing_from_two_replicas_are_each_consumed_once(
    caches: Callable[[], Path],
) -> None:
    dirs = [caches(), caches()]

    def appender(data: Path, who: str) -> None:
        for i in range(10):
            JsonlLog(data, FEEDBACK).append({"session": who, "kind": "helpful", "n": i})

    errors = race(dirs, appender)
    assert errors == []
    third = caches()
    read = JsonlLog(third, FEEDBACK).read()
    assert sorted((r["session"], r["n"]) for r in read) == sorted(
        (f"r{n}t{t}", i) for n in range(2) for t in range(3) for i in range(10)
    )
    JsonlLog(dirs[0], FEEDBACK).append({"session": "late", "kind": "helpful", "n": 0})
    JsonlLog(third, FEEDBACK).consume(read)  # the dream's second phase
    JsonlLog(dirs[1], FEEDBACK).consume(read)  # again, elsewhere: takes nothing more
    left = JsonlLog(dirs[1], FEEDBACK).read()
    assert [(r["session"], r["n"]) for r in left] == [("late", 0)]
    assert not (third / FEEDBACK).exists() and not (dirs[0] / FEEDBACK).exists()


def test_a_bounded_log_keeps_its_bound(caches: Callable[[], Path], location: Remote) -> None:
    data, bound = caches(), 4000
    log = JsonlLog(data, RECALL, max_bytes=bound)
    for i in range(60):
        log.append({"caller": "c", "query": f"query number {i:03d} " + "x" * 60, "ids": []})
    total = sum(Blobs(location, f"logs/{RECALL}").sizes().values())
    assert total <= bound + bound // 8 + 200
    queries = [r["query"][:16] for r in JsonlLog(data, RECALL).read()]
    assert queries[-1] == "query number 059" and "query number 000" not in queries
    assert queries == sorted(queries)  # oldest first, the oldest dropped


@pytest.mark.anyio
async def test_two_mcp_servers_on_one_location_share_working_memory(
    s3: SeaweedS3, s3_prefix: str, tmp_path: Path
) -> None:
    """Two real HTTP servers with their own caches: a save acknowledged by one is read on
    the other within 2 s, and so is an overwrite."""
    from dreamwell.server.cli.main import attach_remote
    from dreamwell.server.config import Settings
    from tests.support.calls import ok
    from tests.support.servers import http, http_server

    def settings(n: int) -> Settings:
        s = Settings(
            data_dir=s3.uri(s3_prefix),  # type: ignore[arg-type]
            cache_dir=tmp_path / f"replica{n}",
            storage_options=s3.storage_options,
            transport="http",
            embedder="none",
        )
        attach_remote(s)
        return s

    pinned = {"Dreamwell-Namespace": NS}
    async with (
        http_server(settings(1)) as one_url,
        http_server(settings(2)) as two_url,
        http(one_url, pinned) as one,
        http(two_url, pinned) as two,
    ):
        for value in ("ship on Friday", "ship on Monday instead"):
            await ok(one, "save_to_working_memory", key="release", data=value, ttl_minutes=60)
            began = time.monotonic()
            while (await two.call_tool("get_from_working_memory", {"key": "release"})).is_error or (
                await ok(two, "get_from_working_memory", key="release")
            ) != value:
                assert time.monotonic() - began < 2.0, f"{value!r} not seen on the other server"
                await anyio.sleep(0.05)
