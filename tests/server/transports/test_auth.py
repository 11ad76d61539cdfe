"""Binding and bearer tokens on the HTTP transports; tenants never see each other."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import httpx2
import pytest
from mcp import Client

from dreamwell.server.config import Settings
from dreamwell.server.mcp.app import build_server
from tests.support.calls import INIT, ok
from tests.support.cli import NO_EMBEDDER, dreamwell
from tests.support.servers import http, http_server

pytestmark = pytest.mark.anyio


def serve(*args: str) -> subprocess.CompletedProcess[str]:
    return dreamwell("serve", *args, stdin=subprocess.DEVNULL, env=NO_EMBEDDER, timeout=60)


@pytest.mark.parametrize("open_on_purpose", [[], ["--no-token"]])
def test_a_non_loopback_bind_without_tokens_is_refused(
    tmp_path: Path, open_on_purpose: list[str]
) -> None:
    """Even with --no-token: an open server is for 127.0.0.1 alone."""
    where = ("--host", "0.0.0.0", "--data-dir", str(tmp_path))
    done = serve("--transport", "http", *where, *open_on_purpose)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "dreamwell: refusing to bind 0.0.0.0: a non-loopback address needs bearer tokens "
        "(--token or --tokens-file)"
    ]


@pytest.mark.parametrize(
    ("args", "key"),
    [
        (["--port", "70000"], "bad setting port='70000'"),
        (["--transport", "carrier-pigeon"], "transport"),
        (["--dream-every", "soon"], "dream_every='soon'"),
    ],
)
def test_bad_settings_exit_2_with_one_line_naming_the_key(
    tmp_path: Path, args: list[str], key: str
) -> None:
    done = serve(*args, "--data-dir", str(tmp_path))
    assert done.returncode == 2
    assert len(done.stderr.strip().splitlines()) == 1 and key in done.stderr


@pytest.mark.parametrize(
    "content",
    ['["not", "an object"]', '{"short": "t"}', '{"long-enough-token": "../escape"}', "{oops"],
)
def test_a_bad_tokens_file_exits_2(tmp_path: Path, content: str) -> None:
    tokens = tmp_path / "tokens.json"
    tokens.write_text(content)
    done = serve("--transport", "http", "--tokens-file", str(tokens), "--data-dir", str(tmp_path))
    assert done.returncode == 2 and str(tokens) in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


async def test_requests_without_a_valid_bearer_token_get_401(tmp_path: Path) -> None:
    settings = Settings(
        data_dir=tmp_path, transport="http", port=0, embedder="none", token="s3cret-token"
    )
    async with http_server(settings) as url, httpx2.AsyncClient() as raw:
        headers = {"Accept": "application/json, text/event-stream"}
        for auth in (None, "Bearer wrong-token", "Basic czNjcmV0LXRva2Vu", "Bearer"):
            sent = headers | ({"Authorization": auth} if auth else {})
            response = await raw.post(f"{url}/mcp", json=INIT, headers=sent)
            assert response.status_code == 401, auth
            assert response.headers["www-authenticate"].startswith("Bearer")
        async with http(url, {"Authorization": "Bearer s3cret-token"}) as c:
            await ok(c, "save_memory", content="behind a token")


async def test_each_token_is_a_tenant_with_its_own_data(tmp_path: Path) -> None:
    tokens = tmp_path / "tokens.json"
    tokens.write_text(json.dumps({"token-for-alice": "alice", "token-for-bob": "bob"}))
    data = tmp_path / "data"
    settings = Settings(
        data_dir=data, transport="http", port=0, embedder="none", tokens_file=tokens
    )
    async with http_server(settings) as url:
        async with http(url, {"Authorization": "Bearer token-for-alice"}) as alice:
            await ok(alice, "save_memory", content="alice's private note")
            await ok(alice, "save_to_working_memory", key="k", data="alice scratch")
        async with http(url, {"Authorization": "Bearer token-for-bob"}) as bob:
            assert (await ok(bob, "search_memory", query="private")).startswith("No memories")
            assert (await ok(bob, "list_memory_categories")).startswith("No categories")
            assert (await ok(bob, "list_working_memory", namespace="session")).startswith("No")
    assert (data / "tenants" / "alice" / "lancedb").is_dir()
    assert (data / "tenants" / "bob" / "lancedb").is_dir()
    assert not (data / "lancedb").exists()


async def test_dream_reports_belong_to_the_callers_tenant(tmp_path: Path) -> None:
    tokens = tmp_path / "tokens.json"
    tokens.write_text(json.dumps({"token-for-alice": "alice", "token-for-bob": "bob"}))
    settings = Settings(
        data_dir=tmp_path / "data", transport="http", port=0, embedder="none", tokens_file=tokens
    )
    async with http_server(settings) as url:
        async with http(url, {"Authorization": "Bearer token-for-alice"}) as alice:
            await alice.get_prompt("dream", {"apply": "yes"})
            mine = await alice.read_resource("dream://reports")
            assert "- " in mine.contents[0].text  # type: ignore[union-attr]
        async with http(url, {"Authorization": "Bearer token-for-bob"}) as bob:
            theirs = await bob.read_resource("dream://reports")
            assert theirs.contents[0].text == "No dream cycles yet."  # type: ignore[union-attr]


async def test_a_single_token_serves_the_store_the_user_already_has(tmp_path: Path) -> None:
    data = tmp_path / "data"
    local = Settings(data_dir=data, embedder="none")
    async with Client(build_server(local)) as stdio_like:
        await ok(stdio_like, "save_memory", content="saved before the token existed")
    settings = Settings(
        data_dir=data, transport="http", port=0, embedder="none", token="s3cret-token"
    )
    async with (
        http_server(settings) as url,
        http(url, {"Authorization": "Bearer s3cret-token"}) as c,
    ):
        assert "before the token existed" in await ok(c, "search_memory", query="token")
        await ok(c, "save_memory", content="saved over HTTP with the token")
    assert not (data / "tenants").exists()
    async with Client(build_server(local)) as stdio_like:
        assert "with the token" in await ok(stdio_like, "search_memory", query="HTTP")


def test_a_short_single_token_is_refused_in_one_line(tmp_path: Path) -> None:
    done = serve("--transport", "http", "--token", "short", "--data-dir", str(tmp_path))
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "dreamwell: bad setting token: a bearer token must be at least 8 characters"
    ]
