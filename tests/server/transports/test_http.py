"""Streamable HTTP and SSE on 127.0.0.1 through the real uvicorn app, in both protocol eras;
caller namespaces per connection and by header."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path

import pytest
from mcp import Client
from mcp.client.sse import sse_client

from dreamwell.server.config import Settings
from tests.support.calls import fails, ok, own_namespace
from tests.support.servers import http, http_server

pytestmark = pytest.mark.anyio


@asynccontextmanager
async def sse(url: str, headers: dict[str, str] | None = None) -> AsyncIterator[Client]:
    async with Client(sse_client(f"{url}/sse", headers=headers), mode="legacy") as c:
        yield c


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_streamable_http_serves_the_tools_in_both_eras(tmp_path: Path, mode: str) -> None:
    settings = Settings(data_dir=tmp_path, transport="http", port=0, embedder="none")
    async with http_server(settings) as url, http(url, mode=mode) as c:
        assert len((await c.list_tools()).tools) == 8
        await ok(c, "save_memory", content="served over streamable HTTP")
        assert "streamable HTTP" in await ok(c, "search_memory", query="streamable")


async def test_sse_serves_the_tools(tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path, transport="sse", port=0, embedder="none")
    async with http_server(settings) as url, sse(url) as c:
        assert len((await c.list_tools()).tools) == 8
        await ok(c, "save_memory", content="served over SSE")
        assert "over SSE" in await ok(c, "search_memory", query="sse")


@pytest.mark.parametrize("transport", ["http", "sse"])
async def test_each_connection_gets_its_own_namespace(tmp_path: Path, transport: str) -> None:
    settings = Settings(data_dir=tmp_path, transport=transport, port=0, embedder="none")  # type: ignore[arg-type]
    connect = sse if transport == "sse" else (lambda u: http(u, mode="legacy"))
    async with http_server(settings) as url, AsyncExitStack() as stack:
        one = await stack.enter_async_context(connect(url))
        two = await stack.enter_async_context(connect(url))
        ns1, ns2 = await own_namespace(one), await own_namespace(two)
        assert ns1 != ns2 and ns1.startswith("session/") and ns2.startswith("session/")
        await ok(one, "save_to_working_memory", key="secret", data="mine")
        assert "not found" in await fails(two, "get_from_working_memory", key="secret")
        assert await ok(two, "get_from_working_memory", key=f"{ns1}/secret") == "mine"
        await ok(one, "save_memory", content="long-term memory is shared")
        assert "shared" in await ok(two, "search_memory", query="shared")


async def test_the_namespace_header_pins_the_namespace(tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path, transport="http", port=0, embedder="none")
    headers = {"Dreamwell-Namespace": "patrol/heartbeat"}
    async with http_server(settings) as url, http(url, headers) as c:
        assert await own_namespace(c) == "patrol/heartbeat"
    async with http_server(settings) as url, http(url, {"Dreamwell-Namespace": "../x"}) as c:
        assert "is not valid" in await fails(c, "list_working_memory")


async def test_stateless_http_gives_each_token_one_namespace_on_every_replica(
    tmp_path: Path,
) -> None:
    """docs/reference.md#working-memory-namespaces, issue 45: without a session (stateless HTTP),
    the namespace is the authenticated principal's: the same through another replica and after a
    restart, another for another token; the Dreamwell-Namespace header still overrides it."""
    tokens = tmp_path / "tokens.json"
    tokens.write_text(json.dumps({"token-of-alice-1": "team", "token-of-alice-2": "team"}))
    settings = Settings(
        data_dir=tmp_path / "d",
        transport="http",
        port=0,
        embedder="none",
        stateless_http=True,
        tokens_file=tokens,
    )
    alice = {"Authorization": "Bearer token-of-alice-1"}
    other = {"Authorization": "Bearer token-of-alice-2"}
    async with http_server(settings) as one, http_server(settings) as two:  # two replicas
        async with http(one, alice) as c:
            ns = await own_namespace(c)
            await ok(c, "save_to_working_memory", key="plan", data="ship friday")
        async with http(two, alice) as c:
            assert await own_namespace(c) == ns
            assert await ok(c, "get_from_working_memory", key="plan") == "ship friday"
        async with http(two, other) as c:
            assert await own_namespace(c) != ns
            assert "not found" in await fails(c, "get_from_working_memory", key="plan")
        async with http(one, alice | {"Dreamwell-Namespace": "patrol/heartbeat"}) as c:
            assert await own_namespace(c) == "patrol/heartbeat"
    async with http_server(settings) as again, http(again, alice) as c:  # a restart
        assert await ok(c, "get_from_working_memory", key="plan") == "ship friday"
