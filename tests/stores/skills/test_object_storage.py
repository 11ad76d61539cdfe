"""The skills catalog on object storage (SeaweedFS on 127.0.0.1): catalogs with a cache
directory each, as separate replicas have, sharing one location.

What is provoked: an import, an edit and an archive on one replica read on another within 2 s;
replicas racing compare-and-set edits of one skill (exactly one lands, the others hear the
conflict and read the stored text) and racing writes of different skills (the loser of the
commit decides again: nothing lost); a dream group written whole against a skill another
replica moved; the undo case, where a revision handed out on one replica must never match a
writer on another again; the records kept as objects, not in the cache; a record deleted
under a reader (it reads the new manifest instead); records a crashed writer left, swept;
the object store stopped under a catalog (one-line error, nothing half written, it recovers).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from dreamwell.stores import ANY_REVISION, NEW, SkillCatalog, SkillChange, SkillConflict, StoreError
from dreamwell.stores.remote import location as remote
from dreamwell.stores.remote.blobs import Blobs, attach
from dreamwell.stores.skills.catalog import ApplyResult
from dreamwell.stores.skills.folders import read_skills
from dreamwell.stores.skills.object_storage import SWEEP_EVERY, BlobSkills
from dreamwell.stores.skills.porting import export_skills, import_skills
from tests.support.racing import eventually
from tests.support.s3server import SeaweedS3
from tests.support.skill_samples import assert_runnable, runnable_skill, simple_md, write_skill

pytestmark = pytest.mark.filterwarnings("ignore::ResourceWarning")
Replica = Callable[[], SkillCatalog]


@pytest.fixture
def location(s3: SeaweedS3, s3_prefix: str) -> remote.Remote:
    return remote.Remote.of(s3.uri(s3_prefix), s3.storage_options)


@pytest.fixture
def replica(location: remote.Remote, tmp_path: Path) -> Iterator[Replica]:
    """Opens another catalog on the test's location, with a cache directory of its own."""
    count = iter(range(100))

    def open_one() -> SkillCatalog:
        cache = tmp_path / f"cache{next(count)}"
        attach(cache, location)
        return SkillCatalog(cache)

    yield open_one


def md(name: str, text: str) -> dict[str, bytes]:
    return {"SKILL.md": simple_md(name, text).encode()}


def test_records_are_objects_and_a_batch_is_one_commit(
    replica: Replica, location: remote.Remote
) -> None:
    a = replica()
    assert isinstance(a._storage, BlobSkills)
    a.apply([SkillChange(n, NEW, md(n, n)) for n in ("one", "two")])
    manifest = json.loads(Blobs(location, "skills").read(".generation")[0])  # type: ignore[index]
    assert manifest["generation"] == 1 and sorted(manifest["skills"]) == ["one", "two"]
    assert {e["revision"] for e in manifest["skills"].values()} == {1}
    assert not a.layout.skills_generation.exists()  # no local generation, no lock taken
    assert not a.layout.skills_lock.exists()
    a.apply([SkillChange("one", 1, md("one", "edited"))])
    objects = Blobs(location, "skills").names()  # the record replaced is deleted
    assert sorted(k.split("/")[0] for k in objects if k != ".generation") == ["one", "two"]
    # a new process on this cache reads the records from its files, only the manifest remotely
    for key in objects:
        if key != ".generation":
            Blobs(location, "skills").delete(key)
    assert {s.description for s in SkillCatalog(a.layout).list()} == {"edited", "two"}


def test_import_edit_and_archive_are_seen_by_another_replica(
    replica: Replica, tmp_path: Path
) -> None:
    a, b = replica(), replica()
    assert b.list() == []
    folder = write_skill(tmp_path / "src", "cut-release", simple_md("cut-release", "first"))
    made = import_skills(a, folder)[0]
    eventually(lambda: (s := b.find("cut-release")) is not None and s.description == "first")
    edited = b.put(read_skills(folder)[0], expect=made.revision)
    assert edited.revision > made.revision
    a.apply([SkillChange("cut-release", edited.revision, md("cut-release", "second"))])
    eventually(lambda: b.get("cut-release").description == "second")
    b.archive("cut-release")
    eventually(lambda: a.get("cut-release").status == "archived")
    assert a.list("active") == [] and a.generation() == b.generation() == 4


def test_another_replica_exports_an_executable_script_executable(
    replica: Replica, tmp_path: Path
) -> None:
    import_skills(replica(), runnable_skill(tmp_path / "src"))
    fresh = replica()  # an empty cache: the record comes from the object store
    assert fresh.get("run-tests").executable == {"scripts/run.sh"}
    export_skills(fresh, tmp_path / "out")
    assert_runnable(tmp_path / "out" / "run-tests")


def test_racing_edits_of_one_skill_from_two_replicas_land_exactly_once(replica: Replica) -> None:
    a, b = replica(), replica()
    base = a.apply([SkillChange("deploy", NEW, md("deploy", "base"))]).written[0]
    start = threading.Barrier(6)
    results: dict[str, ApplyResult] = {}

    def race(catalog: SkillCatalog, who: str) -> None:
        start.wait()
        results[who] = catalog.apply([SkillChange("deploy", base.revision, md("deploy", who))])

    catalogs = [a, b, a, b, a, b]
    threads = [threading.Thread(target=race, args=(c, f"w{i}")) for i, c in enumerate(catalogs)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    won = [who for who, result in results.items() if result.written]
    assert len(results) == 6 and len(won) == 1
    stored = results[won[0]].written[0]
    assert stored.description == won[0] and stored.revision > base.revision
    for i, catalog in enumerate(catalogs):
        who = f"w{i}"
        if who == won[0]:
            continue
        (conflict,) = results[who].conflicts
        assert conflict.expected == base.revision and conflict.found == stored.revision
        assert "changed since it was read" in conflict.reason
        assert catalog.get("deploy") == stored  # the loser's replica shows the stored text


def test_racing_writes_of_different_skills_lose_nothing(replica: Replica) -> None:
    catalogs = [replica(), replica(), replica()]
    start = threading.Barrier(6)

    def writer(catalog: SkillCatalog, names: list[str]) -> None:
        start.wait()
        for n in names:
            catalog.apply([SkillChange(n, NEW, md(n, n))])

    threads = [
        threading.Thread(target=writer, args=(catalogs[i % 3], [f"t{i}-s{j}" for j in range(5)]))
        for i in range(6)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    fresh = replica()
    assert len(fresh.list()) == 30 and fresh.generation() == 30
    assert sorted(s.revision for s in fresh.list()) == list(range(1, 31))


def test_a_group_is_written_whole_against_a_skill_another_replica_moved(
    replica: Replica,
) -> None:
    a, b = replica(), replica()
    a.apply([SkillChange(n, NEW, md(n, n)) for n in ("deploy-web", "deploy-site")])
    web, site = a.get("deploy-web"), a.get("deploy-site")
    b.archive("deploy-site")
    group = [
        SkillChange("deploy-web", web.revision, see_also=("deploy-site",)),
        SkillChange("deploy-site", site.revision, status="archived"),
        SkillChange("deploy-all", NEW, md("deploy-all", "both")),
    ]
    done = a.apply(group, refuse_pinned=True, whole=True)
    assert done.written == () and [c.name for c in done.conflicts] == ["deploy-site"]
    assert replica().find("deploy-all") is None and replica().get("deploy-web") == web
    now = replica().get("deploy-site")
    group[1] = SkillChange("deploy-site", now.revision, status="archived")
    done = a.apply(group, whole=True)
    seen = replica()
    assert [s.name for s in done.written] == ["deploy-web", "deploy-site", "deploy-all"]
    assert {s.revision for s in seen.list()} == {seen.generation()}  # one commit


def test_a_revision_never_comes_back_across_replicas(replica: Replica) -> None:
    a, b = replica(), replica()
    made = a.apply([SkillChange("merged", NEW, md("merged", "first"))]).written[0]
    eventually(lambda: b.find("merged") is not None)
    moved = b.apply([SkillChange("merged", made.revision, md("merged", "dream"))]).written[0]
    undone = a.revert([("merged", moved.revision, made)])  # the undo of b's change, on a
    back = undone.written[0]
    assert undone.conflicts == () and back.description == "first"
    assert back.revision > moved.revision > made.revision
    eventually(lambda: b.get("merged").revision == back.revision)
    with pytest.raises(SkillConflict):  # a writer on b still holding the undone revision
        b.archive("merged", expect=moved.revision)
    # undo of the creation, then the name made again on the other replica
    assert not a.revert([("merged", back.revision, None)]).conflicts
    again = b.apply([SkillChange("merged", NEW, md("merged", "again"))]).written[0]
    assert again.revision > back.revision
    for old in (made.revision, moved.revision, back.revision):
        stale = a.apply([SkillChange("merged", old, status="archived")])
        assert stale.conflicts and stale.conflicts[0].found == again.revision
    assert a.get("merged").status == "active"
    assert a.archive("merged", expect=ANY_REVISION).revision > again.revision


def test_a_reader_whose_record_was_replaced_reads_the_new_manifest(replica: Replica) -> None:
    a, b = replica(), replica()
    a.apply([SkillChange("tea", NEW, md("tea", "v1"))])
    assert b.get("tea").description == "v1"
    for text in ("v2", "v3"):  # each commit deletes the record it replaced
        a.apply([SkillChange("tea", ANY_REVISION, md("tea", text))])
    fresh = replica()
    storage = fresh._storage
    assert isinstance(storage, BlobSkills)
    storage._refresh(0.0)
    a.apply([SkillChange("tea", ANY_REVISION, md("tea", "v4"))])  # fresh's manifest is stale
    assert fresh.get("tea").description == "v4"


def test_a_tenants_skills_are_its_own_on_every_replica(
    replica: Replica, location: remote.Remote
) -> None:
    a, b = replica(), replica()
    alice_a = SkillCatalog(a.layout.tenant("alice"))
    alice_b = SkillCatalog(b.layout.tenant("alice"))
    alice_a.apply([SkillChange("tea", NEW, md("tea", "alice's tea"))])
    eventually(lambda: alice_b.find("tea") is not None)
    assert a.list() == [] and b.list() == [] and SkillCatalog(b.layout.tenant("bob")).list() == []
    assert Blobs(location.tenant("alice"), "skills").version(".generation") is not None
    assert Blobs(location, "skills").version(".generation") is None


def test_records_a_crashed_writer_left_are_swept_and_a_writer_in_flight_is_not(
    replica: Replica, location: remote.Remote
) -> None:
    a = replica()
    objects = Blobs(location, "skills")
    objects.write("ghost/000000000001-deadbeef0000.json", b"{}", None)  # staged, never committed
    objects.write("ghost/000000000099-deadbeef0000.json", b"{}", None)  # a commit yet to come
    for i in range(SWEEP_EVERY):
        a.apply([SkillChange("tea", NEW if i == 0 else ANY_REVISION, md("tea", f"v{i}"))])
    left = sorted(objects.names())
    manifest = json.loads(objects.read(".generation")[0])  # type: ignore[index]
    assert manifest["generation"] == SWEEP_EVERY
    tea = manifest["skills"]["tea"]["key"]
    assert left == [".generation", "ghost/000000000099-deadbeef0000.json", tea]


def test_the_store_away_refuses_writes_in_one_line_and_a_catalog_recovers(
    tmp_path: Path,
) -> None:
    with SeaweedS3() as own:
        location = remote.Remote.of(own.uri("away"), own.storage_options)
        attach(tmp_path / "a", location)
        a = SkillCatalog(tmp_path / "a")
        a.apply([SkillChange("tea", NEW, md("tea", "v1"))])
        own.pause()
        began = time.monotonic()
        with pytest.raises(StoreError) as failed:
            a.apply([SkillChange("tea", ANY_REVISION, md("tea", "v2"))])
        assert time.monotonic() - began < 15  # the call time-out, not a hang
        assert "\n" not in str(failed.value) and "does not answer" in str(failed.value)
        with pytest.raises(StoreError):
            a.version()  # what the servers' watch polls: an error it logs, not a hang
        assert a.get("tea").description == "v1"  # readers keep the catalog last read
        with pytest.raises(StoreError):
            SkillCatalog(tmp_path / "a").list()  # a catalog that never read one: the error
        own.resume()
        assert a.get("tea").description == "v1"  # nothing half written
        assert a.apply([SkillChange("tea", ANY_REVISION, md("tea", "v3"))]).written
        assert SkillCatalog(tmp_path / "a").get("tea").description == "v3"


def test_another_replica_never_reads_half_a_batch(replica: Replica) -> None:
    a, b = replica(), replica()
    pair = ("deploy-web", "deploy-site")
    a.apply([SkillChange(n, NEW, md(n, "v0")) for n in pair])
    done = threading.Event()
    seen: set[tuple[str, ...]] = set()

    def read() -> None:
        while not done.is_set():
            fresh = SkillCatalog(b.layout)  # reads the manifest now, records from the cache
            seen.add(tuple(fresh.get(n).description for n in pair))

    reader = threading.Thread(target=read)
    reader.start()
    try:
        for i in range(1, 16):
            a.apply([SkillChange(n, ANY_REVISION, md(n, f"v{i}")) for n in pair], whole=True)
    finally:
        done.set()
        reader.join(60)
    assert len(seen) > 1 and all(x == y for x, y in seen)
