"""A skill written by another process reaches every running server's clients as
prompts/resources list_changed notifications: in-memory, stdio, SSE and streamable HTTP, in
the 2025-11-25 era (session notifications) and the 2026-07-28 era (subscriptions/listen)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import anyio
import anyio.to_thread
import pytest
from mcp import Client
from mcp.client.sse import sse_client
from mcp.shared.exceptions import MCPError
from mcp.shared.subscriptions import PromptsListChanged, ResourcesListChanged

from dreamwell.server.config import Settings
from dreamwell.server.mcp.app import build_server
from dreamwell.stores import NEW, SkillCatalog, SkillChange
from tests.support.notify import BOUND, SLACK, WANTED, Recorder, http_client
from tests.support.servers import from_mcp_json, http_server
from tests.support.skill_samples import simple_md

pytestmark = pytest.mark.anyio


def write_elsewhere(data_dir: Path, name: str) -> None:
    """A skill written through another catalog (what the CLI or the dream does)."""
    SkillCatalog(data_dir).apply(
        [SkillChange(name, NEW, {"SKILL.md": simple_md(name, "written elsewhere").encode()})]
    )


async def legacy_sees_change(client: Client, recorder: Recorder, data_dir: Path) -> float:
    assert "tea" not in {p.name for p in (await client.list_prompts()).prompts}
    started = time.monotonic()
    await anyio.to_thread.run_sync(write_elsewhere, data_dir, "tea")
    with anyio.fail_after(BOUND + SLACK):
        await recorder.changed.wait()
    elapsed = time.monotonic() - started
    assert "tea" in {p.name for p in (await client.list_prompts()).prompts}
    return elapsed


async def modern_sees_change(client: Client, data_dir: Path) -> float:
    kinds: set[type] = set()
    async with client.listen(prompts_list_changed=True, resources_list_changed=True) as sub:
        started = time.monotonic()
        await anyio.to_thread.run_sync(write_elsewhere, data_dir, "tea")
        with anyio.fail_after(BOUND + SLACK):
            async for event in sub:
                kinds.add(type(event))
                if kinds >= {PromptsListChanged, ResourcesListChanged}:
                    break
        elapsed = time.monotonic() - started
    assert "tea" in {p.name for p in (await client.list_prompts()).prompts}
    return elapsed


async def sees_change(client: Client, recorder: Recorder, mode: str, data_dir: Path) -> None:
    if mode == "legacy":
        elapsed = await legacy_sees_change(client, recorder, data_dir)
    else:
        elapsed = await modern_sees_change(client, data_dir)
    assert elapsed < BOUND + SLACK


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_in_memory_clients_are_notified(tmp_path: Path, mode: str) -> None:
    recorder = Recorder()
    settings = Settings(data_dir=tmp_path, embedder="none")
    async with Client(build_server(settings), mode=mode, message_handler=recorder) as c:  # type: ignore[arg-type]
        await sees_change(c, recorder, mode, tmp_path)


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_stdio_clients_are_notified(tmp_path: Path, mode: str) -> None:
    recorder = Recorder()
    async with Client(from_mcp_json(tmp_path), mode=mode, message_handler=recorder) as c:  # type: ignore[arg-type]
        await sees_change(c, recorder, mode, tmp_path)


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_streamable_http_clients_are_notified(tmp_path: Path, mode: str) -> None:
    recorder = Recorder()
    settings = Settings(data_dir=tmp_path, transport="http", port=0, embedder="none")
    async with http_server(settings) as url, http_client(url, mode, recorder) as c:
        await sees_change(c, recorder, mode, tmp_path)


async def test_sse_clients_are_notified(tmp_path: Path) -> None:
    recorder = Recorder()
    settings = Settings(data_dir=tmp_path, transport="sse", port=0, embedder="none")
    async with (
        http_server(settings) as url,
        Client(sse_client(f"{url}/sse"), mode="legacy", message_handler=recorder) as c,
    ):
        await sees_change(c, recorder, "legacy", tmp_path)


async def test_two_clients_of_one_server_are_each_notified_once(tmp_path: Path) -> None:
    first, second = Recorder(), Recorder()
    settings = Settings(data_dir=tmp_path, transport="sse", port=0, embedder="none")
    async with (
        http_server(settings) as url,
        Client(sse_client(f"{url}/sse"), mode="legacy", message_handler=first) as a,
        Client(sse_client(f"{url}/sse"), mode="legacy", message_handler=second) as b,
    ):
        await b.list_prompts()
        await legacy_sees_change(a, first, tmp_path)
        with anyio.fail_after(BOUND + SLACK):
            await second.changed.wait()
        await a.list_prompts()  # a round trip: anything sent twice would have arrived by now
        assert sorted(first.methods) == sorted(WANTED)


async def test_each_tenant_sees_and_hears_of_only_its_own_skills(tmp_path: Path) -> None:
    tokens = tmp_path / "tokens.json"
    tokens.write_text(json.dumps({"token-for-alice": "alice", "token-for-bob": "bob"}))
    settings = Settings(
        data_dir=tmp_path, transport="http", port=0, embedder="none", tokens_file=tokens
    )
    alice_heard, bob_heard = Recorder(), Recorder()
    async with (
        http_server(settings) as url,
        http_client(url, "legacy", alice_heard, "token-for-alice") as alice,
        http_client(url, "legacy", bob_heard, "token-for-bob") as bob,
    ):
        await bob.list_prompts()
        await legacy_sees_change(alice, alice_heard, tmp_path / "tenants" / "alice")
        await bob.list_prompts()  # a round trip after alice's notifications were sent
        assert bob_heard.methods == []
        assert "tea" not in {p.name for p in (await bob.list_prompts()).prompts}
        with pytest.raises(MCPError, match="Unknown resource"):
            await bob.read_resource("skill://tea/SKILL.md")


async def test_the_watch_outlives_the_first_sse_connection(tmp_path: Path) -> None:
    """SSE enters a lifespan per connection and one of them watches: when its connection
    closes, another takes over."""
    recorder = Recorder()
    settings = Settings(data_dir=tmp_path, transport="sse", port=0, embedder="none")
    opened, close, closed = anyio.Event(), anyio.Event(), anyio.Event()

    async def first_connection(url: str) -> None:
        async with Client(sse_client(f"{url}/sse"), mode="legacy") as first:
            await first.list_prompts()
            opened.set()
            await close.wait()
        closed.set()

    async with http_server(settings) as url, anyio.create_task_group() as tg:
        tg.start_soon(first_connection, url)
        with anyio.fail_after(30):
            await opened.wait()
        async with Client(sse_client(f"{url}/sse"), mode="legacy", message_handler=recorder) as c:
            await c.list_prompts()
            close.set()
            with anyio.fail_after(30):
                await closed.wait()
            await legacy_sees_change(c, recorder, tmp_path)


async def test_a_skill_written_elsewhere_reaches_the_clients_skill_folders(
    tmp_path: Path,
) -> None:
    from dreamwell.stores.layout import DataDir
    from dreamwell.stores.skills import enable_sync

    folders = tmp_path / "claude-skills"
    enable_sync(DataDir(tmp_path / "data"), folders)
    settings = Settings(data_dir=tmp_path / "data", embedder="none")
    async with Client(build_server(settings), mode="legacy") as client:
        await client.list_prompts()  # the server now watches this store
        await anyio.to_thread.run_sync(write_elsewhere, tmp_path / "data", "tea")
        with anyio.fail_after(BOUND + SLACK):
            while not (folders / "tea" / "SKILL.md").exists():
                await anyio.sleep(0.05)
        await anyio.to_thread.run_sync(lambda: SkillCatalog(tmp_path / "data").archive("tea"))
        with anyio.fail_after(BOUND + SLACK):
            while (folders / "tea").exists():
                await anyio.sleep(0.05)
