"""A read-only data directory: reads keep working, writes refuse in words, nothing changes.

Made read-only for real: a read-only bind mount in a private mount namespace when the tests run
as root (chmod does not stop root), else the directory's write permission removed."""

from __future__ import annotations

from pathlib import Path

import pytest
from mcp import Client

from dreamwell.server.config import Settings
from dreamwell.server.mcp.app import build_server
from tests.support.calls import fails, ok
from tests.support.readonly import read_only_server, seed, tree

pytestmark = pytest.mark.anyio


async def test_working_memory_reads_work_and_writes_refuse_on_a_read_only_directory(
    tmp_path: Path,
) -> None:
    data = tmp_path / "data"
    await seed(data)
    before = tree(data)
    with read_only_server(data) as params:
        async with Client(params) as c:
            assert await ok(c, "get_from_working_memory", key="k") == "working value"
            assert "patrol/readonly/k" in await ok(c, "list_working_memory")
            assert "1 result(s)" in await ok(c, "search_working_memory", query="working")
            refusal = await fails(c, "save_to_working_memory", key="k2", data="v")
            assert "Nothing was saved" in refusal and "Traceback" not in refusal
            assert "Error executing tool" not in await fails(c, "save_memory", content="new")
            assert "not found" in await fails(c, "get_from_working_memory", key="k2")
    assert tree(data) == before


async def test_long_term_reads_work_on_a_read_only_directory(tmp_path: Path) -> None:
    data = tmp_path / "data"
    await seed(data)
    before = {p: p.read_bytes() for p in data.rglob("*") if p.is_file()}
    with read_only_server(data) as params:
        async with Client(params) as c:
            assert "Readable on a read-only disk" in await ok(c, "search_memory", query="disk")
            assert "- ops (1)" in await ok(c, "list_memory_categories")
            refused = await fails(c, "save_memory", content="cannot be written")
            assert "read-only" in refused and "Reads still work" in refused
    after = {p: p.read_bytes() for p in data.rglob("*") if p.is_file()}
    assert after == before, "a read-only directory was changed or its index thrown away"


async def test_long_term_memory_that_cannot_open_does_not_take_working_memory_down(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import dreamwell.stores  # where the runtime finds LongTermStore when a tenant opens

    def broken(*_args: object, **_kwargs: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(dreamwell.stores, "LongTermStore", broken)
    async with Client(build_server(Settings(data_dir=tmp_path, embedder="none"))) as c:
        for tool, args in [("save_memory", {"content": "x"}), ("search_memory", {})]:
            text = await fails(c, tool, **args)
            assert "cannot be opened (No space left on device" in text or "[Errno 28]" in text
            assert "Working memory still works." in text
        await ok(c, "save_to_working_memory", key="k", data="still here")
        assert await ok(c, "get_from_working_memory", key="k") == "still here"
        recalled = await c.get_prompt("recall", {"message": "anything"})
        text = recalled.messages[0].content.text  # type: ignore[union-attr]
        assert text.startswith("Long-term memory is unavailable: long-term memory in")
        assert "/k: expires in" in text
