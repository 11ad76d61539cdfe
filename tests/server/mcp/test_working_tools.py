"""Working-memory tools through a real in-memory MCP client session
(docs/reference.md#working-memory-namespaces)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from mcp import Client

from dreamwell.server.config import Settings
from dreamwell.server.mcp.app import build_server
from tests.support.calls import fails, ok

pytestmark = pytest.mark.anyio


async def own_namespace(client: Client) -> str:
    text = await ok(client, "save_to_working_memory", key="probe", data="x")
    match = re.match(
        r"^Saved to working memory under key '(session/[0-9a-f]{12})/probe' "
        r"\(expires in 5m0s\)\.$",
        text,
    )
    assert match, text
    return match.group(1)


async def test_save_get_list_and_search_in_own_namespace(client: Client) -> None:
    ns = await own_namespace(client)
    text = await ok(
        client,
        "save_to_working_memory",
        key="emails_inbox",
        data="3 unread from Bob",
        ttl_minutes=60,
        category="email",
        tags="inbox, unread",
    )
    assert text == f"Saved to working memory under key '{ns}/emails_inbox' (expires in 1h0m)."
    assert await ok(client, "get_from_working_memory", key="emails_inbox") == "3 unread from Bob"
    assert await ok(client, "get_from_working_memory", key=f"{ns}/emails_inbox") == (
        "3 unread from Bob"
    )
    listing = await ok(client, "list_working_memory")
    assert listing.startswith(f"Working memory '{ns}' (2 entries):\n")
    assert re.search(
        rf"- {ns}/emails_inbox \(expires in 5\dm\d+s, category: email, "
        r"tags: inbox, unread\)",
        listing,
    ), listing
    found = await ok(client, "search_working_memory", query="bob")
    assert found.startswith(f"Working memory search (query='bob') in '{ns}' — 1 result(s):\n")
    assert found.endswith("): 3 unread from Bob")


async def test_overwriting_a_key_replaces_value_and_ttl(client: Client) -> None:
    await ok(client, "save_to_working_memory", key="k", data="one", ttl_minutes=120)
    text = await ok(client, "save_to_working_memory", key="k", data="two")
    assert text.endswith("(expires in 5m0s).")
    assert await ok(client, "get_from_working_memory", key="k") == "two"


async def test_search_snippet_is_cut_at_120_chars_with_an_ellipsis(client: Client) -> None:
    await ok(client, "save_to_working_memory", key="long", data="word " * 100)
    found = await ok(client, "search_working_memory", query="word")
    line = found.splitlines()[1]
    assert line.endswith("…")
    assert len(line.split("): ", 1)[1]) == 121
    await ok(client, "save_to_working_memory", key="short", data="brief words")
    assert "): brief words\n" in found + "\n" or "brief words" in await ok(
        client, "search_working_memory", query="brief"
    )


async def test_search_description_names_every_filter_given(client: Client) -> None:
    ns = await own_namespace(client)
    await ok(client, "save_to_working_memory", key="a", data="alpha", category="c", tags="t")
    found = await ok(client, "search_working_memory", query="alpha", category="c", tags="t")
    assert found.startswith(
        f"Working memory search (query='alpha', category='c', tags='t') in '{ns}' — 1 result(s):"
    )
    none = await ok(client, "search_working_memory")
    assert none.startswith(f"Working memory search (no filters) in '{ns}' — 2 result(s):")


async def test_empty_listings_say_so(client: Client) -> None:
    assert await ok(client, "list_working_memory") == "Working memory is empty."
    assert await ok(client, "list_working_memory", namespace="patrol/heartbeat") == (
        "No entries found in namespace 'patrol/heartbeat'."
    )


async def test_writes_to_another_namespace_are_refused(client: Client) -> None:
    ns = await own_namespace(client)
    text = await fails(client, "save_to_working_memory", key="patrol/heartbeat/alert", data="x")
    assert f"writes go to your own namespace '{ns}'" in text
    assert await ok(client, "list_working_memory", namespace="patrol") == (
        "No entries found in namespace 'patrol'."
    )


async def test_reads_cross_namespaces_by_full_path_and_prefix(tmp_path: Path) -> None:
    data = tmp_path / "data"
    patrol = build_server(Settings(data_dir=data, namespace="patrol/heartbeat", embedder="none"))
    async with Client(patrol) as p:
        await ok(
            p,
            "save_to_working_memory",
            key="latest_alert",
            data="disk 91% full",
            category="patrol-finding",
        )
    async with Client(build_server(Settings(data_dir=data, embedder="none"))) as c:
        assert await ok(c, "get_from_working_memory", key="patrol/heartbeat/latest_alert") == (
            "disk 91% full"
        )
        listing = await ok(c, "list_working_memory", namespace="patrol")
        assert listing.startswith("Working memory 'patrol' (1 entries):\n- patrol/heartbeat/")
        found = await ok(c, "search_working_memory", query="disk", namespace="patrol/heartbeat")
        assert "1 result(s)" in found
        missing = await fails(c, "get_from_working_memory", key="latest_alert")
        assert missing.startswith("Working memory entry 'session/")
        assert missing.endswith("/latest_alert' not found or has expired.")


async def test_namespace_prefixes_match_whole_segments_only(tmp_path: Path) -> None:
    data = tmp_path / "data"
    for ns in ("patrol/ab", "patrol/abc"):
        server = build_server(Settings(data_dir=data, namespace=ns, embedder="none"))
        async with Client(server) as c:
            await ok(c, "save_to_working_memory", key="k", data=ns)
    async with Client(build_server(Settings(data_dir=data, embedder="none"))) as c:
        listing = await ok(c, "list_working_memory", namespace="patrol/ab")
        assert "patrol/ab/k" in listing and "patrol/abc/k" not in listing


async def test_a_full_namespace_evicts_the_entry_closest_to_expiry(tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path / "d", wm_max_per_namespace=3, embedder="none")
    async with Client(build_server(settings)) as c:
        ns = await own_namespace(c)  # probe: 5 minutes
        await ok(c, "save_to_working_memory", key="long", data="x", ttl_minutes=100)
        await ok(c, "save_to_working_memory", key="mid", data="x", ttl_minutes=50)
        text = await ok(c, "save_to_working_memory", key="new", data="x", ttl_minutes=10)
        assert text == (
            f"Saved to working memory under key '{ns}/new' (expires in 10m0s) "
            f"(namespace full: evicted '{ns}/probe')."
        )
        assert "(3 entries)" in await ok(c, "list_working_memory")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({"key": "k", "data": "x", "ttl_minutes": 0}, "'ttl_minutes' must be at least 1"),
        ({"key": "k", "data": "x", "ttl_minutes": -5}, "'ttl_minutes' must be at least 1"),
        ({"key": "k", "data": "x", "ttl_minutes": 10_081}, "'ttl_minutes' must be at most 10080"),
        ({"key": "../etc/passwd", "data": "x"}, "key '../etc/passwd' is not valid"),
        ({"key": "a//b", "data": "x"}, "key 'a//b' is not valid"),
        ({"key": "a/./b", "data": "x"}, "is not valid"),
        ({"key": "with space", "data": "x"}, "is not valid"),
        ({"key": "/abs", "data": "x"}, "is not valid"),
        ({"key": "k" * 257, "data": "x"}, "'key' is longer than 256 characters"),
        ({"key": "k", "data": "x" * (1024 * 1024 + 1)}, "'data' is longer than 1048576 characters"),
        ({"key": "k", "data": "é" * (600 * 1024)}, "data is larger than 1 MiB"),
        ({"key": "k", "data": "x", "category": "no spaces"}, "category 'no spaces' is not valid"),
        ({"key": "session/other/k", "data": "x"}, "writes go to your own namespace"),
        ({"data": "x"}, "Invalid arguments for save_to_working_memory: 'key' is required"),
    ],
)
async def test_save_to_working_memory_rejects_bad_input_and_writes_nothing(
    client: Client, args: dict[str, object], message: str
) -> None:
    assert message in await fails(client, "save_to_working_memory", **args)
    assert await ok(client, "list_working_memory") == "Working memory is empty."


@pytest.mark.parametrize(
    ("tool", "args", "message"),
    [
        ("get_from_working_memory", {"key": "../../x"}, "is not valid"),
        ("get_from_working_memory", {"key": ""}, "'key' must not be empty"),
        ("list_working_memory", {"namespace": "etc/passwd"}, "must start with one of"),
        ("list_working_memory", {"namespace": "../session"}, "is not valid"),
        ("search_working_memory", {"namespace": "session/.."}, "is not valid"),
        ("search_working_memory", {"category": "a b"}, "category 'a b' is not valid"),
        ("search_working_memory", {"tags": "x" * 65}, "longer than 64 characters"),
    ],
)
async def test_working_memory_reads_reject_bad_input(
    client: Client, tool: str, args: dict[str, object], message: str
) -> None:
    assert message in await fails(client, tool, **args)
