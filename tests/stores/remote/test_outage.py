"""Reads never wait on the object store (issue 45): with SeaweedFS frozen (SIGSTOP: the port
open, nothing answering), a replica's searches, categories and working-memory reads are
served from what it holds, at once, even while a save waits on the store; the save fails
within the call's bound, in one line."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from dreamwell.stores import LongTermStore, WorkingMemory
from dreamwell.stores.errors import StoreError
from dreamwell.stores.longterm.shared import log as lancelog
from dreamwell.stores.remote import location as remote
from dreamwell.stores.remote.blobs import attach
from tests.support.s3server import SeaweedS3

pytestmark = pytest.mark.filterwarnings("ignore::ResourceWarning")

READ_BOUND = 2.0  # seconds; a read waits at most 0.5 s, the rest is a loaded machine's slack
WRITE_BOUND = 40.0  # seconds: the call time-out with its retries (remote.DEFAULTS), and slack


@pytest.fixture
def own_s3() -> Iterator[SeaweedS3]:
    """A server of this test's own, since it is frozen (the session's stays up)."""
    with SeaweedS3(bucket="frozen") as server:
        yield server


def timed(call: object) -> float:
    began = time.monotonic()
    call()  # type: ignore[operator]
    return time.monotonic() - began


def test_reads_are_served_while_the_store_hangs_and_a_save_waits_on_it(
    own_s3: SeaweedS3, tmp_path: Path
) -> None:
    location = remote.Remote.of(own_s3.uri("r"), own_s3.storage_options)
    mine, other = tmp_path / "mine", tmp_path / "other"
    attach(mine, location)
    attach(other, location)
    store, elsewhere = LongTermStore(mine), LongTermStore(other)
    working = WorkingMemory(mine)
    for i in range(20):
        store.save(f"deploy note {i} about the staging cluster", f"ops/{i % 3}")
    working.save("session/alice", "plan", "ship on friday")
    elsewhere.save("a note from another replica", "ops/0")  # news for `store` to catch up on
    saving: list[object] = []
    own_s3.freeze()
    try:
        writer = threading.Thread(
            target=lambda: saving.append(_attempt(lambda: store.save("during", "ops/x")))
        )
        writer.start()
        times = [timed(lambda: store.search("staging cluster")) for _ in range(5)]
        times.append(timed(store.categories))
        times.append(timed(lambda: working.get("plan", "session/alice")))
        times.append(timed(lambda: working.listing("session")))
        assert max(times) < READ_BOUND, times
        assert working.get("plan", "session/alice").value == "ship on friday"
        assert len(store.search("staging cluster")) == 20
        writer.join(WRITE_BOUND)
        assert not writer.is_alive()
    finally:
        own_s3.thaw()
        for s in (store, elsewhere):
            if isinstance(s._wal, lancelog.LanceLog):
                s._wal.close()
    [outcome] = saving
    if isinstance(outcome, StoreError):  # it may also have landed just before the freeze
        assert "\n" not in str(outcome) and "does not answer" in str(outcome)


def _attempt(call: object) -> object:
    try:
        return call()  # type: ignore[operator]
    except StoreError as exc:
        return exc
