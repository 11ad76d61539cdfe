"""Reads never wait on a hung object store through the tools (issue 53 goal 5): with the
session's SeaweedFS frozen (SIGSTOP: the port open, nothing answering) just as another
replica's save was heard, and a save waiting on the store, `search_memory` (with hits and
without), `list_memory_categories` and the `recall` prompt answer from the replica's view at
once, each saying so; once the store is back, the search made during the freeze is in the
recall log (it was recorded off the search's path)."""

from __future__ import annotations

import time
from collections.abc import Awaitable
from pathlib import Path
from typing import Any, TypeVar

import anyio
import pytest
from mcp import Client

from dreamwell.server.cli.main import attach_remote
from dreamwell.server.config import Settings
from dreamwell.server.mcp.app import build_server
from dreamwell.server.runtime import Runtime
from dreamwell.stores import LongTermStore
from dreamwell.stores.remote.blobs import attach
from dreamwell.stores.remote.location import Remote
from tests.support.calls import call, ok
from tests.support.s3server import SeaweedS3

pytestmark = [pytest.mark.anyio, pytest.mark.filterwarnings("ignore::ResourceWarning")]

# seconds: a read waits at most 0.5 s for the store (not at all once a call to it hangs); the
# rest is a loaded machine's slack. On the unfixed tools a search with hits took 10 s and the
# recall prompt 10-26 s (or failed).
READ_BOUND = 2.5
STALE = "the store is not responding)"
T = TypeVar("T")


async def timed(pending: Awaitable[T]) -> tuple[float, T]:
    began = time.monotonic()
    result = await pending
    return time.monotonic() - began, result


async def _reads(client: Client) -> dict[str, tuple[float, str]]:
    """(seconds, text) of each read (a memory is recalled once per session: then none is)."""
    reads: dict[str, tuple[float, str]] = {
        "hits": await timed(ok(client, "search_memory", query="staging cluster")),
        "none": await timed(ok(client, "search_memory", query="zebra xylophone")),
        "categories": await timed(ok(client, "list_memory_categories")),
    }
    spent, prompt = await timed(client.get_prompt("recall", {"message": "staging deploys"}))
    reads["recall"] = spent, prompt.messages[0].content.text  # type: ignore[union-attr]
    assert all(t < READ_BOUND for t, _ in reads.values()), reads
    assert "deploy note 4" in reads["hits"][1]
    assert "deploy note" in reads["recall"][1] or "Nothing recalled" in reads["recall"][1]
    assert reads["none"][1].startswith("No memories found")
    assert "- ops (5)" in reads["categories"][1] or "- ops (6)" in reads["categories"][1]
    return reads


def _news_from_another_replica(s3: SeaweedS3, prefix: str, tmp_path: Path) -> None:
    cache = tmp_path / "elsewhere"
    attach(cache, Remote.of(s3.uri(prefix), s3.storage_options))
    elsewhere = LongTermStore(cache)
    try:
        elsewhere.save("a note from another replica", "ops")
    finally:
        elsewhere._wal.close()  # type: ignore[attr-defined]


async def test_reads_answer_from_the_view_while_the_store_hangs(
    s3: SeaweedS3, s3_prefix: str, tmp_path: Path
) -> None:
    settings = Settings(
        data_dir=s3.uri(s3_prefix),  # type: ignore[arg-type]
        cache_dir=tmp_path / "cache",
        storage_options=s3.storage_options,
        embedder="none",
    )
    attach_remote(settings)
    runtime = Runtime(settings)
    async with Client(build_server(settings, runtime)) as client:
        for i in range(5):
            note = f"deploy note {i} about the staging cluster"
            await ok(client, "save_memory", content=note, category="ops")
        tenant = await runtime.tenant("")
        await anyio.to_thread.run_sync(_news_from_another_replica, s3, s3_prefix, tmp_path)
        with anyio.fail_after(10):  # this replica's poller heard it; nothing read it yet
            while not tenant.longterm._wal.has_news():
                await anyio.sleep(0.01)
        saved: list[Any] = []
        s3.freeze()  # the first read's catch-up now hangs on the store
        try:
            async with anyio.create_task_group() as tg:

                async def save() -> None:
                    saved.append(await call(client, "save_memory", content="during the freeze"))

                tg.start_soon(save)  # waits on the store, holding the log's write lock
                first = await _reads(client)  # at once
                assert "deploy note" in first["recall"][1]
                with anyio.fail_after(15):  # until the replica has heard nothing for a while
                    while STALE not in await ok(client, "list_memory_categories"):
                        await anyio.sleep(0.2)
                later = await _reads(client)  # ... and then each says it
                s3.thaw()  # the save may now land or fail; either is fine here
        finally:
            s3.thaw()
        assert all(STALE in text for _, text in later.values()), later
        assert len(saved) == 1
        with anyio.fail_after(30):  # the search's record, queued while the store hung, lands
            while not any(
                r.get("query") == "staging cluster"
                for r in await anyio.to_thread.run_sync(tenant.recall_log.read)
            ):
                await anyio.sleep(0.2)
