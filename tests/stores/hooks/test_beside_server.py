"""Hooks work on the data directory directly, beside a running server that writes at the same
time: they see its writes (through the log and the snapshot) and no log line is lost."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest
from mcp import Client

from dreamwell.stores import RECALL, JsonlLog
from tests.support.calls import ok
from tests.support.hooks import hook, log_lines, prompt, turns, wait_for_refresher
from tests.support.servers import stdio_params

pytestmark = pytest.mark.anyio


async def test_hooks_beside_a_writing_server_see_its_memories_and_lose_no_log_line(
    tmp_path: Path,
) -> None:
    async with Client(stdio_params(tmp_path)) as server:
        await ok(server, "save_memory", content="The api ships with make ship", category="ops")
        first = await anyio.to_thread.run_sync(
            hook, "user-prompt", prompt("s0", "how does the api ship"), tmp_path
        )
        assert "make ship" in first.stdout  # from the log: the server has not checkpointed
        await anyio.to_thread.run_sync(wait_for_refresher, tmp_path)

        async def server_work() -> None:
            for i in range(30):
                await ok(server, "save_memory", content=f"server fact number{i}", category="load")
                await ok(server, "search_memory", query=f"number{i}")

        async def hook_work() -> None:
            for i in range(1, 7):
                done = await anyio.to_thread.run_sync(
                    hook, "user-prompt", prompt(f"s{i}", "how does the api ship"), tmp_path
                )
                assert done.returncode == 0 and "make ship" in done.stdout, done

        async with anyio.create_task_group() as tg:
            tg.start_soon(server_work)
            tg.start_soon(hook_work)
        # the server's checkpoints may have dropped records the snapshot lacks: the hook that
        # notices starts a refresher, and once it is done every memory is there
        await anyio.to_thread.run_sync(
            hook, "user-prompt", prompt("s9", "server fact number29"), tmp_path
        )
        await anyio.to_thread.run_sync(wait_for_refresher, tmp_path)
        last = await anyio.to_thread.run_sync(  # a new session: s9 may have been shown it
            hook, "user-prompt", prompt("s10", "server fact number29"), tmp_path
        )
        assert "server fact number29" in last.stdout
    await anyio.to_thread.run_sync(wait_for_refresher, tmp_path)
    logged = JsonlLog(tmp_path, RECALL).read()
    assert len([r for r in logged if r.get("via") == "hook"]) >= 8
    assert len([r for r in logged if r.get("via") != "hook"]) == 30
    assert "failed" not in "".join(log_lines(tmp_path))
    sessions = [f"s{i}" for i in (0, 1, 2, 3, 4, 5, 6, 9, 10)]
    assert sorted(r["session"] for r in turns(tmp_path)) == sorted(sessions)
