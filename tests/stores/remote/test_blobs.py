"""Blobs' conditional writes on the real SeaweedFS (tests/support/s3server.py) when the answer
never comes: SeaweedFS answers racing conditional writes of one key about a second apart, so
with a short client time-out every loser times out. A time-out is not "unreachable": the
write landed or lost, and reading the object back tells which."""

from __future__ import annotations

import threading

import pytest

from dreamwell.stores.errors import StoreUnreachable
from dreamwell.stores.remote import location as remote
from dreamwell.stores.remote.blobs import CREATE, Blobs, Conflict
from tests.support.s3server import SeaweedS3

RACERS = 8  # as many as the lease race that timed out in CI

pytestmark = pytest.mark.filterwarnings("ignore::ResourceWarning")


def test_racing_creates_that_time_out_are_conflicts_not_an_unreachable_store(
    s3: SeaweedS3, s3_prefix: str
) -> None:
    location = remote.Remote.of(s3.uri(s3_prefix), s3.storage_options)
    blobs = Blobs(location, "leases")
    start = threading.Barrier(RACERS)
    outcome: list[str] = [""] * RACERS

    def create(i: int) -> None:
        start.wait()
        try:
            blobs.write("one.json", f"writer {i}".encode(), CREATE)
            outcome[i] = "won"
        except Conflict:
            outcome[i] = "lost"
        except StoreUnreachable as exc:
            outcome[i] = f"unreachable: {exc}"

    threads = [threading.Thread(target=create, args=(i,)) for i in range(RACERS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(outcome) == ["lost"] * (RACERS - 1) + ["won"], outcome
    stored = blobs.read("one.json")
    assert stored is not None and stored[0] == f"writer {outcome.index('won')}".encode()


def test_a_write_whose_answer_was_lost_is_settled_by_what_the_store_holds(
    s3: SeaweedS3, s3_prefix: str
) -> None:
    blobs = Blobs(remote.Remote.of(s3.uri(s3_prefix), s3.storage_options), "leases")
    lost_answer = TimeoutError("error sending request")
    assert blobs.version("a.json") is None
    with pytest.raises(StoreUnreachable):  # nothing landed: the store did not take it
        blobs._settle("a.json", b"mine", lost_answer)
    version = blobs.write("a.json", b"mine", CREATE)
    assert blobs._settle("a.json", b"mine", lost_answer) == version  # ours landed
    with pytest.raises(Conflict):  # another writer's landed
        blobs._settle("a.json", b"theirs", lost_answer)
