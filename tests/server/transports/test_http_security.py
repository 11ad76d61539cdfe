"""HTTP security: tenants never see each other on any surface, the namespace header stays in
the caller's tenant, DNS-rebinding checks on both transports, bodies over the limit refused
before parsing, tokens never logged."""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import httpx2
import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError

from dreamwell.server.config import Settings
from dreamwell.server.transports.http import MAX_BODY_BYTES
from tests.support.calls import INIT, fails, ok, own_namespace
from tests.support.servers import http, http_server

pytestmark = pytest.mark.anyio
ALICE = {"Authorization": "Bearer token-for-alice"}
BOB = {"Authorization": "Bearer token-for-bob"}
ACCEPT = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


def tenants(tmp_path: Path, transport: str = "http") -> Settings:
    tokens = tmp_path / "tokens.json"
    tokens.write_text(json.dumps({"token-for-alice": "alice", "token-for-bob": "bob"}))
    return Settings(
        data_dir=tmp_path / "data",
        transport=transport,  # type: ignore[arg-type]
        port=0,
        embedder="none",
        tokens_file=tokens,
    )


@asynccontextmanager
async def alice_and_bob(tmp_path: Path) -> AsyncIterator[tuple[Client, Client, dict[str, str]]]:
    """Alice has a memory, a working-memory entry and a dream report; bob connects."""
    async with http_server(tenants(tmp_path)) as url, http(url, ALICE) as alice:
        saved = await ok(alice, "save_memory", content="Alice's bank PIN is 4321", category="x")
        wm = await ok(alice, "save_to_working_memory", key="secret", data="alice scratch")
        await alice.get_prompt("dream", {"apply": "yes"})
        listing = (await alice.read_resource("dream://reports")).contents[0].text  # type: ignore[union-attr]
        facts = {
            "id": saved.split("[")[1].split("]")[0],
            "key": wm.split("'")[1],
            "run": listing.splitlines()[1].removeprefix("- "),
        }
        facts["namespace"] = facts["key"].rsplit("/", 1)[0]
        async with http(url, BOB | {"Dreamwell-Namespace": facts["namespace"]}) as bob:
            yield alice, bob, facts


async def test_no_tool_reaches_the_other_tenants_data(tmp_path: Path) -> None:
    async with alice_and_bob(tmp_path) as (alice, bob, facts):
        assert (await ok(bob, "search_memory", query="PIN bank alice")).startswith("No memories")
        assert (await ok(bob, "search_memory")).startswith("No memories")
        assert (await ok(bob, "list_memory_categories")).startswith("No categories")
        assert "No memory entry found" in await fails(bob, "delete_memory", id=facts["id"])
        assert "not found" in await fails(bob, "get_from_working_memory", key=facts["key"])
        assert "not found" in await fails(bob, "get_from_working_memory", key="secret")
        for namespace in (facts["namespace"], "session"):
            listed = await ok(bob, "list_working_memory", namespace=namespace)
            assert "secret" not in listed
            found = await ok(bob, "search_working_memory", query="alice", namespace=namespace)
            assert "— 0 result(s)" in found
        await ok(bob, "save_to_working_memory", key="secret", data="bob's own")
        await ok(bob, "save_memory", content="bob was here", category="x")
        # alice's data is untouched by all of that
        assert "4321" in await ok(alice, "search_memory", query="PIN")
        assert await ok(alice, "get_from_working_memory", key="secret") == "alice scratch"
        assert "(1)" in await ok(alice, "list_memory_categories")


async def test_no_prompt_reaches_the_other_tenants_data(tmp_path: Path) -> None:
    async with alice_and_bob(tmp_path) as (_alice, bob, facts):
        recalled = await bob.get_prompt("recall", {"message": "what is alice's bank PIN"})
        text = recalled.messages[0].content.text  # type: ignore[union-attr]
        assert "4321" not in text and facts["id"] not in text and "secret" not in text
        dreamt = await bob.get_prompt("dream", {"apply": "no"})
        assert facts["id"] not in dreamt.messages[0].content.text  # type: ignore[union-attr]


async def test_no_resource_reaches_the_other_tenants_data(tmp_path: Path) -> None:
    async with alice_and_bob(tmp_path) as (alice, bob, facts):
        mine = (await bob.read_resource("dream://reports")).contents[0].text  # type: ignore[union-attr]
        assert facts["run"] not in mine
        with pytest.raises(MCPError):
            await bob.read_resource(f"dream://reports/{facts['run']}")
        with pytest.raises(MCPError):
            await bob.read_resource("dream://reports/..%2F..%2Ftenants%2Falice")
        assert (await alice.read_resource(f"dream://reports/{facts['run']}")).contents


@pytest.mark.parametrize(
    "header",
    ["../alice", "tenants/alice", "session/../../alice", "session/a/b", "session", "s p/x"],
)
async def test_the_namespace_header_is_validated_like_a_key(tmp_path: Path, header: str) -> None:
    headers = BOB | {"Dreamwell-Namespace": header}
    async with http_server(tenants(tmp_path)) as url, http(url, headers) as bob:
        text = await fails(bob, "save_to_working_memory", key="k", data="v")
        assert f"namespace '{header}'" in text and "Traceback" not in text
        assert "namespace" in await fails(bob, "list_working_memory")
    assert not (tmp_path / "data" / "tenants" / "bob" / "working-memory" / "session.json").exists()
    assert not (tmp_path / "data" / "tenants" / "alice").exists()


async def test_the_namespace_header_names_a_namespace_inside_the_callers_tenant(
    tmp_path: Path,
) -> None:
    async with http_server(tenants(tmp_path)) as url:
        async with http(url, ALICE | {"Dreamwell-Namespace": "patrol/shared"}) as alice:
            await ok(alice, "save_to_working_memory", key="k", data="alice's")
        async with http(url, BOB | {"Dreamwell-Namespace": "patrol/shared"}) as bob:
            assert await own_namespace(bob) == "patrol/shared"
            assert "not found" in await fails(bob, "get_from_working_memory", key="k")
    assert (tmp_path / "data" / "tenants" / "alice" / "working-memory" / "patrol.json").exists()


@pytest.mark.parametrize("transport", ["http", "sse"])
@pytest.mark.parametrize(
    ("headers", "status"),
    [
        ({"Host": "evil.example:80"}, 421),
        ({"Host": "attacker.test"}, 421),
        ({"Origin": "http://evil.example"}, 403),
        ({"Origin": "http://127.0.0.1.evil.example:80"}, 403),
    ],
)
async def test_dns_rebinding_is_refused_on_both_http_transports(
    tmp_path: Path, transport: str, headers: dict[str, str], status: int
) -> None:
    settings = Settings(data_dir=tmp_path, transport=transport, port=0, embedder="none")  # type: ignore[arg-type]
    async with http_server(settings) as url, httpx2.AsyncClient(timeout=30) as raw:
        if transport == "http":
            response = await raw.post(f"{url}/mcp", json=INIT, headers=ACCEPT | headers)
        else:
            async with raw.stream("GET", f"{url}/sse", headers=headers) as response:
                pass
        assert response.status_code == status
        if transport == "sse":
            posted = await raw.post(
                f"{url}/messages/?session_id=0123456789abcdef0123456789abcdef",
                json=INIT,
                headers=ACCEPT | headers,
            )
            assert posted.status_code == status


@pytest.mark.parametrize("transport", ["http", "sse"])
async def test_a_body_over_the_limit_is_refused_with_413_before_parsing(
    tmp_path: Path, transport: str
) -> None:
    settings = Settings(data_dir=tmp_path, transport=transport, port=0, embedder="none")  # type: ignore[arg-type]
    body = b"{" + b" " * MAX_BODY_BYTES + b"}"  # not even valid JSON-RPC: never parsed
    path = (
        "/mcp" if transport == "http" else "/messages/?session_id=0123456789abcdef0123456789abcdef"
    )
    async with http_server(settings) as url, httpx2.AsyncClient(timeout=30) as raw:
        response = await raw.post(f"{url}{path}", content=body, headers=ACCEPT)
        assert response.status_code == 413


async def test_a_one_mib_value_fits_under_the_body_limit(tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path, transport="http", port=0, embedder="none")
    value = "é" * (512 * 1024)  # 1 MiB of UTF-8
    async with http_server(settings) as url, http(url) as c:
        await ok(c, "save_to_working_memory", key="big", data=value)
        assert await ok(c, "get_from_working_memory", key="big") == value


async def test_tokens_are_never_logged(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    async with http_server(tenants(tmp_path)) as url:
        async with httpx2.AsyncClient(timeout=30) as raw:
            for auth in ("Bearer token-for-alice-wrong", "Bearer token-for-bob"):
                await raw.post(f"{url}/mcp", json=INIT, headers=ACCEPT | {"Authorization": auth})
        async with http(url, ALICE) as alice:
            await ok(alice, "save_memory", content="logged?")
    assert caplog.records and "token-for" not in caplog.text
