"""Replicas of one object-store location (SeaweedFS on 127.0.0.1) for the long-term tests."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from dreamwell.stores.index.embedders import Embedder
from dreamwell.stores.longterm.shared import log as lancelog
from dreamwell.stores.longterm.store import LongTermStore
from dreamwell.stores.remote import location as remote
from dreamwell.stores.remote.blobs import attach
from tests.support.s3server import SeaweedS3


@pytest.fixture
def replica(
    s3: SeaweedS3, s3_prefix: str, tmp_path: Path
) -> Iterator[Callable[..., LongTermStore]]:
    """Opens another store on the test's location, with a cache directory of its own (and
    the embedder given, if any)."""
    location = remote.Remote.of(s3.uri(s3_prefix), s3.storage_options)
    opened: list[LongTermStore] = []

    def open_one(embedder: Embedder | None = None) -> LongTermStore:
        cache = tmp_path / f"cache{len(opened)}"
        attach(cache, location)
        store = LongTermStore(cache, embedder=embedder)
        opened.append(store)
        return store

    yield open_one
    for store in opened:
        log = store._wal
        if isinstance(log, lancelog.LanceLog):
            log.close()
