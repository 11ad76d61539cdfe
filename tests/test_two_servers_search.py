"""A memory saved through one `dreamwell serve` is found by a search in another on the same
data directory within 1 s of its save (docs/architecture.md, "Seeing it"), while the first goes
on saving and a checkpoint folds the log into the index meanwhile."""

from __future__ import annotations

import time
from pathlib import Path

import anyio
import pytest
from mcp import Client

from dreamwell.stores import LongTermStore
from dreamwell.stores.layout import DataDir
from dreamwell.stores.longterm.state import StateFile
from tests.support.calls import ok
from tests.support.servers import stdio_params

pytestmark = pytest.mark.anyio
SAVES, FOLD_AT = 40, 15


def fold(data: Path) -> None:
    """A checkpoint by a third process's store (as `dreamwell` commands open one)."""
    assert LongTermStore(data).checkpoint()


async def test_each_save_in_one_server_is_found_by_the_other_within_a_second(
    tmp_path: Path,
) -> None:
    """The writer saves one at a time; after each reply the reader searches the save's own
    word until it finds it, within 1 s, before, during and after a checkpoint that starts
    after FOLD_AT saves (the reader then reloads the index and drops what it held as
    pending), and once it is done."""
    data = tmp_path / "data"
    waits: list[float] = []
    async with Client(stdio_params(data)) as writer, Client(stdio_params(data)) as reader:
        await ok(writer, "list_memory_categories")  # both open the store (its first call
        await ok(reader, "search_memory", query="opening")  # took up to 2 s on a busy host)
        async with anyio.create_task_group() as tg:
            for n in range(SAVES):
                word = f"zqx{n}ledger"
                await ok(writer, "save_memory", content=f"quarry ledger line {word}")
                saved = time.monotonic()
                with anyio.fail_after(1.0):
                    while word not in await ok(reader, "search_memory", query=word):
                        pass
                waits.append(time.monotonic() - saved)
                if n == FOLD_AT:
                    tg.start_soon(anyio.to_thread.run_sync, fold, data)
        assert StateFile(DataDir(data).state).read().checkpoint > FOLD_AT
        assert "zqx0ledger" in await ok(reader, "search_memory", query="zqx0ledger")
    assert len(waits) == SAVES and max(waits) < 1.0, max(waits)
