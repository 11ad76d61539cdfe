"""The caller's project (docs/projects.md) over real transports: a stdio server started in a project
directory (as Claude Code starts it) with and without roots, and streamable HTTP where each
client's roots name its project."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from mcp import Client, StdioServerParameters
from mcp.client.sse import sse_client

from dreamwell.server.config import Settings
from tests.support.calls import ok
from tests.support.repos import Roots, two_projects
from tests.support.servers import from_mcp_json, http_server
from tests.support.servers import http as http_client

pytestmark = pytest.mark.anyio

ID = re.compile(r"\[([0-9a-f]{12})\]")


def _in(params: StdioServerParameters, cwd: Path) -> StdioServerParameters:
    return params.model_copy(update={"cwd": cwd})


async def _save(client: Client, content: str) -> str:
    found = ID.search(await ok(client, "save_memory", content=content))
    assert found
    return found.group(1)


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_stdio_servers_started_in_two_projects_never_show_each_other_s_memories(
    tmp_path: Path, mode: str
) -> None:
    shop, billing = two_projects(tmp_path / "src")
    params = from_mcp_json(tmp_path / "data")
    async with Client(_in(params, billing), mode=mode) as b:  # type: ignore[arg-type]
        theirs = await _save(b, "Deploy billing with kubectl apply")
    (shop / "web").mkdir()  # a sub-directory of the repository is the same project
    async with Client(_in(params, shop / "web"), mode=mode) as a:  # type: ignore[arg-type]
        mine = await _save(a, "Deploy the shop with make deploy-shop")
        found = await ok(a, "search_memory", query="deploy")
        assert mine in found and theirs not in found


async def test_a_stdio_client_s_roots_win_over_the_server_s_directory(tmp_path: Path) -> None:
    shop, billing = two_projects(tmp_path / "src")
    params = from_mcp_json(tmp_path / "data")
    async with Client(_in(params, billing), mode="legacy") as b:  # type: ignore[arg-type]
        theirs = await _save(b, "Deploy billing with kubectl apply")
    roots = Roots(shop)
    async with Client(_in(params, billing), mode="legacy", list_roots_callback=roots.callback) as a:  # type: ignore[arg-type]
        mine = await _save(a, "Deploy the shop with make deploy-shop")
        found = await ok(a, "search_memory", query="deploy")
        assert mine in found and theirs not in found
    assert roots.asked == 1


async def test_streamable_http_clients_are_scoped_by_their_roots(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    shop, billing = two_projects(tmp_path / "src")
    outside = tmp_path / "srv"
    outside.mkdir()
    monkeypatch.chdir(outside)  # the server runs outside any repository
    settings = Settings(data_dir=tmp_path / "data", embedder="none")
    async with http_server(settings) as url:
        async with http_client(url, mode="legacy", roots=Roots(billing)) as b:
            theirs = await _save(b, "Deploy billing with kubectl apply")
        async with http_client(url, mode="legacy", roots=Roots(shop)) as a:
            mine = await _save(a, "Deploy the shop with make deploy-shop")
            found = await ok(a, "search_memory", query="deploy")
            assert mine in found and theirs not in found
        async with http_client(url) as anyone:  # no roots, a server in no project: all
            found = await ok(anyone, "search_memory", query="deploy")
            assert mine in found and theirs in found


async def test_sse_clients_are_scoped_by_their_roots(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    shop, billing = two_projects(tmp_path / "src")
    outside = tmp_path / "srv"
    outside.mkdir()
    monkeypatch.chdir(outside)
    settings = Settings(data_dir=tmp_path / "data", transport="sse", port=0, embedder="none")

    def over_sse(url: str, roots: Roots) -> Client:
        transport = sse_client(f"{url}/sse")
        return Client(transport, mode="legacy", list_roots_callback=roots.callback)  # type: ignore[arg-type]

    async with http_server(settings) as url:
        async with over_sse(url, Roots(billing)) as b:
            theirs = await _save(b, "Deploy billing with kubectl apply")
        async with over_sse(url, Roots(shop)) as a:
            mine = await _save(a, "Deploy the shop with make deploy-shop")
            found = await ok(a, "search_memory", query="deploy")
            assert mine in found and theirs not in found
