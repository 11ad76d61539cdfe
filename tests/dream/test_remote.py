"""The dream across replicas on object storage (SeaweedFS on 127.0.0.1): its lease, its
reports and their undo.

What is provoked: eight holders racing to take one lease (exactly one does); a holder that
died without releasing (taken over only after its expiry, and its late release does not
clear the new holder's lease); two dream cycles on two replicas at once (one runs, the other
hears that another replica is dreaming, and may dream once the first is done); a report
written on one replica listed, read and undone exactly from another, and two replicas
undoing one run at once (one undoes, the other hears it was undone).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from dreamwell.dream import DreamBusy, DreamOptions, run_cycle, undo
from dreamwell.dream.options import DreamFenced
from dreamwell.dream.report import list_reports, load_report
from dreamwell.stores import LongTermStore
from dreamwell.stores import lease as lease_module
from dreamwell.stores.lease import Lease
from dreamwell.stores.longterm.shared import log as lancelog
from dreamwell.stores.remote import location as remote
from dreamwell.stores.remote.blobs import Blobs, attach
from tests.support.cli import dreamwell
from tests.support.dreams import seed
from tests.support.racing import eventually
from tests.support.s3server import SeaweedS3

pytestmark = pytest.mark.filterwarnings("ignore::ResourceWarning")


@pytest.fixture
def location(s3: SeaweedS3, s3_prefix: str) -> remote.Remote:
    return remote.Remote.of(s3.uri(s3_prefix), s3.storage_options)


@pytest.fixture
def replica(location: remote.Remote, tmp_path: Path) -> Iterator[Callable[[], LongTermStore]]:
    opened: list[LongTermStore] = []

    def open_one() -> LongTermStore:
        cache = tmp_path / f"cache{len(opened)}"
        attach(cache, location)
        opened.append(LongTermStore(cache))
        return opened[-1]

    yield open_one
    for store in opened:
        if isinstance(store._wal, lancelog.LanceLog):
            store._wal.close()


def test_of_holders_racing_for_one_lease_exactly_one_takes_it(location: remote.Remote) -> None:
    leases = [Lease(Blobs(location, "leases"), "dream") for _ in range(8)]
    start = threading.Barrier(len(leases))
    won: list[bool] = [False] * len(leases)

    def take(i: int) -> None:
        start.wait()
        won[i] = leases[i].acquire()

    threads = [threading.Thread(target=take, args=(i,)) for i in range(len(leases))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert won.count(True) == 1
    winner = leases[won.index(True)]
    winner.release()
    assert leases[won.index(False)].acquire()  # released: the next one takes it at once
    leases[won.index(False)].release()


def test_a_dead_holders_lease_is_taken_over_after_it_expires(location: remote.Remote) -> None:
    blobs = Blobs(location, "leases")
    dead = Lease(blobs, "dream", ttl=1.5)
    assert dead.acquire()
    dead._stop.set()  # the holder dies: no renewal, no release
    assert dead._renewer is not None
    dead._renewer.join()
    heir = Lease(blobs, "dream", ttl=30)
    assert not heir.acquire()  # not expired yet
    began = time.monotonic()
    eventually(heir.acquire, within=10)
    assert time.monotonic() - began > 0.5  # only once the 1.5 s had passed
    dead._renewer = None
    dead.release()  # a late release replaces only its own version: the heir keeps it
    found = blobs.read("dream.json")
    assert found is not None and json.loads(found[0])["holder"] == heir.holder
    assert not Lease(blobs, "dream").acquire()
    heir.release()


def test_two_cycles_on_two_replicas_at_once_one_runs_the_other_is_told(
    replica: Callable[[], LongTermStore],
) -> None:
    a, b = replica(), replica()
    seed(a)
    inside, go = threading.Event(), threading.Event()

    def hold(name: str) -> None:
        if name == "decay":
            inside.set()
            go.wait(30)

    results: list[object] = []
    first = threading.Thread(
        target=lambda: results.append(
            run_cycle(a, None, options=DreamOptions(quiet_seconds=0, progress=hold))
        )
    )
    first.start()
    assert inside.wait(60)
    with pytest.raises(DreamBusy, match="already running on another replica"):
        run_cycle(b, None, options=DreamOptions(quiet_seconds=0))
    go.set()
    first.join()
    assert len(results) == 1
    second = run_cycle(b, None, options=DreamOptions(quiet_seconds=0))  # free again
    assert second.run != results[0].run  # type: ignore[attr-defined]


def test_a_report_from_one_replica_is_listed_and_undone_exactly_from_another(
    replica: Callable[[], LongTermStore],
) -> None:
    a, b = replica(), replica()
    seeded = seed(a)
    report = run_cycle(a, None, options=DreamOptions(quiet_seconds=0))
    assert report.changes()
    assert list_reports(b.data_dir) == [report.run]
    assert load_report(b.data_dir, report.run).to_json() == report.to_json()
    assert not (b.data_dir / "dreams").exists() and not (a.data_dir / "dreams").exists()
    eventually(lambda: {e.id for e in b.entries()} == {e.id for e in a.entries()}, within=5)
    outcomes: list[object] = []

    def undo_on(store: LongTermStore) -> None:
        try:
            outcomes.append(undo(store, report.run))
        except ValueError as exc:
            outcomes.append(exc)

    threads = [threading.Thread(target=undo_on, args=(s,)) for s in (a, b)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    errors = [o for o in outcomes if isinstance(o, ValueError)]
    assert len(errors) == 1 and "undone" in str(errors[0])
    for store in (a, b):
        eventually(lambda s=store: {e.id for e in s.entries()} == set(seeded), within=5)  # type: ignore[misc]
    restored = {e.id: e for e in b.entries()}
    for entry_id, entry in seeded.items():
        assert restored[entry_id].content == entry.content
        assert restored[entry_id].importance == pytest.approx(entry.importance)
    assert load_report(a.data_dir, report.run).undone


def test_the_command_line_reports_and_undoes_a_run_from_another_replica(
    replica: Callable[[], LongTermStore], s3: SeaweedS3, s3_prefix: str, tmp_path: Path
) -> None:
    """`dreamwell dream --report` and `--undo RUN` on a machine that did not dream (a cache
    directory of its own): they read and claim the report in the object store."""
    a = replica()
    seed(a)
    report = run_cycle(a, None, options=DreamOptions(quiet_seconds=0))
    env = {
        "DREAMWELL_DATA_DIR": s3.uri(s3_prefix),
        "DREAMWELL_CACHE_DIR": str(tmp_path / "elsewhere"),
        "DREAMWELL_STORAGE_OPTIONS": json.dumps(s3.storage_options),
        "DREAMWELL_EMBEDDER": "none",
    }
    shown = dreamwell("dream", "--report", env=env)
    assert shown.returncode == 0, shown.stderr
    assert f"Dream report {report.run}" in shown.stdout and "exact-duplicates: ran" in shown.stdout
    undone = dreamwell("dream", "--undo", report.run, env=env)
    assert undone.returncode == 0, undone.stderr
    assert "Undone at" in undone.stdout
    again = dreamwell("dream", "--undo", report.run, env=env)
    assert again.returncode == 1 and "already undone" in again.stderr
    assert load_report(a.data_dir, report.run).undone


def test_a_cycle_that_lost_its_lease_stops_before_its_next_write(
    replica: Callable[[], LongTermStore],
    location: remote.Remote,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Issue 45: a replica paused past its lease's expiry kept writing after another took the
    lease over. Here the holder is frozen before its first write (its renewer too, as with
    SIGSTOP), another holder takes the expired lease, and the first, resumed, writes nothing
    more: its report says why, and holds no change made after the takeover."""
    monkeypatch.setattr(lease_module, "TTL_SECONDS", 1.0)
    monkeypatch.setattr(Lease, "_renew", lambda self: self._stop.wait())  # frozen renewer
    a = replica()
    seed(a)
    before = {e.id: e for e in a.entries(include_archived=True)}
    inside, go = threading.Event(), threading.Event()

    def pause(name: str) -> None:
        if name == "decay":
            inside.set()
            go.wait(60)

    outcome: list[BaseException | object] = []

    def first() -> None:
        try:
            outcome.append(
                run_cycle(a, None, options=DreamOptions(quiet_seconds=0, progress=pause))
            )
        except BaseException as exc:
            outcome.append(exc)

    thread = threading.Thread(target=first)
    thread.start()
    assert inside.wait(60)
    heir = Lease(Blobs(location, "leases"), "dream", ttl=30)
    eventually(heir.acquire, within=10)  # taken over once the holder's 1 s had passed
    go.set()
    thread.join(60)
    heir.release()
    [stopped] = outcome
    assert isinstance(stopped, DreamFenced), stopped
    [run] = list_reports(a.data_dir)
    report = load_report(a.data_dir, run)
    decay = next(p for p in report.passes if p.name == "decay")
    assert decay.status == "partial" and "taken over" in decay.reason
    assert report.changes() == []  # nothing written after the takeover
    after = {e.id: e for e in a.entries(include_archived=True)}
    assert after == before
