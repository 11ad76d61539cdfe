"""Three `dreamwell serve --transport http` replicas on one object-store location (SeaweedFS on
127.0.0.1), each a process with its own cache directory, reached by real MCP clients.

What is provoked: a write acknowledged by one replica searched for on the others; kill -9 of a
replica while it has many saves in flight; saves, deletes and reinforcements racing from all
three (they must converge, nothing lost or resurrected); the object store stopped for 10 s
under a replica and started again.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

from tests.support.calls import call, ok
from tests.support.replicas import SAVED, Replica, client, warm
from tests.support.s3server import SeaweedS3
from tests.support.skill_samples import simple_md, write_skill

pytestmark = [pytest.mark.anyio, pytest.mark.filterwarnings("ignore::ResourceWarning")]


@pytest.fixture(scope="module")
def started(s3: SeaweedS3, tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[Replica]]:
    """Three replicas shared by this module's tests (each test writes its own memories)."""
    base = tmp_path_factory.mktemp("replicas")
    prefix = f"replicas-{uuid.uuid4().hex[:8]}"
    group = [Replica(s3, prefix, base / f"replica{i}") for i in range(3)]
    try:
        for r in group:
            r.start(wait=False)
        for r in group:
            r.wait_ready()
        yield group
    finally:
        for r in group:
            r.stop()


@pytest.fixture
def replicas(started: list[Replica]) -> list[Replica]:
    """The three replicas, any a previous test killed started again (on its old cache)."""
    for r in started:
        if r.proc is None or r.proc.poll() is not None:
            r.start()
    return started


async def seen_within(url: str, query: str, wanted: str, present: bool, limit: float) -> float:
    """Seconds until a search on `url` finds (or no longer finds) `wanted`."""
    began = time.monotonic()
    async with client(url) as c:
        while True:
            found = wanted in await ok(c, "search_memory", query=query)
            if found == present:
                return time.monotonic() - began
            assert time.monotonic() - began < limit, f"{wanted} not {'seen' if present else 'gone'}"
            await anyio.sleep(0.05)


async def test_a_save_and_a_delete_on_one_replica_are_seen_on_the_others_within_2_s(
    replicas: list[Replica],
) -> None:
    await warm(replicas)
    async with client(replicas[0].url) as c:
        text = await ok(c, "save_memory", content="the staging database is called heron")
    entry_id = SAVED.search(text).group(1)  # type: ignore[union-attr]
    for r in replicas[1:]:
        assert await seen_within(r.url, "staging database heron", entry_id, True, 2.0) < 2.0
    async with client(replicas[2].url) as c:
        await ok(c, "delete_memory", id=entry_id)
    for r in replicas[:2]:
        assert await seen_within(r.url, "staging database heron", entry_id, False, 2.0) < 2.0


async def test_kill_9_during_many_saves_in_flight_loses_no_acknowledged_save(
    replicas: list[Replica],
) -> None:
    """32 clients pipeline 1,000 saves into replica 0, which is killed with SIGKILL part-way;
    every save it acknowledged is on the other replicas."""
    victim = replicas[0]
    acknowledged: list[str] = []
    failed = 0

    async def saver(worker: int) -> None:
        nonlocal failed
        try:
            async with client(victim.url, timeout=20) as c:
                for i in range(worker, 1000, 32):
                    error, text = await call(c, "save_memory", content=f"burst memory {i} x{i * 7}")
                    if error:
                        failed += 1
                        continue
                    acknowledged.append(SAVED.search(text).group(1))  # type: ignore[union-attr]
        except Exception:  # the replica died under this client
            failed += 1

    async def killer() -> None:
        while len(acknowledged) < 300:
            await anyio.sleep(0.01)
        victim.kill9()

    async with anyio.create_task_group() as tg:
        tg.start_soon(killer)
        for w in range(32):
            tg.start_soon(saver, w)
    assert 300 <= len(acknowledged) < 1000, (len(acknowledged), failed)
    wanted = set(acknowledged)
    for other in replicas[1:]:
        held = other.ids()
        assert wanted <= held, f"lost: {sorted(wanted - held)[:10]}"


async def test_saves_deletes_and_reinforcements_racing_on_three_replicas_converge(
    replicas: list[Replica],
) -> None:
    """Each replica's client saves the same ten facts (racing for the one entry each: the
    others reinforce it), saves notes of its own and deletes every third of them. Afterwards
    every replica holds the same memories: each fact once, every kept note, no deleted one."""
    await warm(replicas)
    kept: set[str] = set()
    deleted: set[str] = set()
    fact_ids: dict[int, set[str]] = {k: set() for k in range(10)}

    async def worker(r: int) -> None:
        async with client(replicas[r].url) as c:
            for i in range(12):
                text = await ok(c, "save_memory", content=f"shared fact {i % 10}", category="facts")
                fact_ids[i % 10].add(SAVED.search(text).group(1))  # type: ignore[union-attr]
                text = await ok(c, "save_memory", content=f"replica {r} note {i}", category="notes")
                note = SAVED.search(text).group(1)  # type: ignore[union-attr]
                if i % 3 == 0:
                    await ok(c, "delete_memory", id=note)
                    deleted.add(note)
                else:
                    kept.add(note)

    async with anyio.create_task_group() as tg:
        for r in range(3):
            tg.start_soon(worker, r)
    assert all(len(ids) == 1 for ids in fact_ids.values()), fact_ids  # one entry per fact
    exported = [
        {i: e for i, e in r.export().items() if e["category"] in ("facts", "notes")}
        for r in replicas
    ]
    assert exported[0] == exported[1] == exported[2]
    facts = {k: next(iter(ids)) for k, ids in fact_ids.items()}
    assert set(exported[0]) == kept | set(facts.values())
    assert not set(exported[0]) & deleted
    for k, entry_id in facts.items():  # every save of a fact counted once: 12 saves, 3 each
        assert exported[0][entry_id]["reinforcement_count"] == (6 if k < 2 else 3)


async def test_the_object_store_stopped_for_10_s_gives_clear_errors_then_recovers(
    replicas: list[Replica], s3: SeaweedS3
) -> None:
    await warm(replicas)
    async with client(replicas[0].url) as c:
        text = await ok(c, "save_memory", content="saved before the outage: lighthouse")
    before = SAVED.search(text).group(1)  # type: ignore[union-attr]
    await seen_within(replicas[2].url, "lighthouse", before, True, 2.0)
    s3.pause()
    try:
        began = time.monotonic()
        async with client(replicas[1].url, timeout=90) as c:
            error, text = await call(c, "save_memory", content="saved during the outage")
        took = time.monotonic() - began
        assert error, text
        assert "cannot" in text and "s3://" in text and "Traceback" not in text, text
        assert took < 30, f"a save during the outage took {took:.1f} s to fail"
        async with client(replicas[2].url) as c:  # reads are served from the replica's view
            assert before in await ok(c, "search_memory", query="lighthouse")
        await anyio.sleep(max(0.0, 10 - (time.monotonic() - began)))
    finally:
        s3.resume()
    after: dict[int, str] = {}
    for k, r in enumerate(replicas):  # every replica writes again, none restarted
        async with client(r.url) as c:
            text = await ok(c, "save_memory", content=f"saved after the outage by {k}")
        after[k] = SAVED.search(text).group(1)  # type: ignore[union-attr]
    for r in replicas:
        held = r.ids()
        assert {before, *after.values()} <= held


async def test_working_memory_and_a_skill_written_on_one_replica_are_read_on_another(
    replicas: list[Replica], tmp_path: Path
) -> None:
    """A working-memory write on replica 0 is read (by its full key) on replica 1, and a
    skill imported with `dreamwell skills import` on replica 2 is a prompt of replica 0,
    each within 2 s."""
    await warm(replicas)
    async with client(replicas[0].url) as c:
        text = await ok(c, "save_to_working_memory", key="handoff", data="ticket 4711 is next")
    key = text.split("'")[1]  # the full key, in the writer's own namespace
    began = time.monotonic()
    async with client(replicas[1].url) as c:
        while True:
            error, got = await call(c, "get_from_working_memory", key=key)
            if not error and "ticket 4711" in got:
                break
            assert time.monotonic() - began < 2.0, got
            await anyio.sleep(0.05)
    folder = write_skill(tmp_path, "cut-release", simple_md("cut-release", "How to cut a release"))
    done = replicas[2].cli("skills", "import", str(folder))
    assert done.returncode == 0, done.stderr.decode(errors="replace")
    began = time.monotonic()
    async with client(replicas[0].url) as c:
        while "cut-release" not in {p.name for p in (await c.list_prompts()).prompts}:
            assert time.monotonic() - began < 2.0, "the skill was not served in time"
            await anyio.sleep(0.05)
