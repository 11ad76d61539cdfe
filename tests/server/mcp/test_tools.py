"""Tool behaviour through a real in-memory MCP client session (docs/reference.md#tools)."""

from __future__ import annotations

import re

import pytest
from mcp import Client

from dreamwell.server.config import Settings
from tests.support.calls import call, fails, ok

pytestmark = pytest.mark.anyio

SAVED = re.compile(r"^Saved memory \[([0-9a-f]{12})\] \((.+)\)\.$")


async def save(client: Client, content: str, **args: object) -> str:
    text = await ok(client, "save_memory", content=content, **args)
    match = SAVED.match(text)
    assert match, text
    return match.group(1)


async def test_save_replies_with_id_and_category_and_is_searchable_at_once(client: Client) -> None:
    text = await ok(
        client,
        "save_memory",
        content="User lives in Chicago",
        category="user-preferences/location",
        tags="home, City",
    )
    memory_id = SAVED.match(text).group(1)  # type: ignore[union-attr]
    assert text == f"Saved memory [{memory_id}] (user-preferences/location)."
    found = await ok(client, "search_memory", query="chicago")
    assert found.startswith("Found 1 memory entry:\n\n")
    assert (
        f"- [{memory_id}] (user-preferences/location, importance=0.50, first seen today): "
        "User lives in Chicago\n  Tags: home, city"
    ) in found


async def test_uncategorized_memory_says_so(client: Client) -> None:
    text = await ok(client, "save_memory", content="Tabs, not spaces")
    assert text.endswith("(uncategorized).")


async def test_list_memory_categories_counts_the_uncategorized_too(client: Client) -> None:
    """Issue 56: 3 of 7 memories, those without a category, were missing from the list."""
    await ok(client, "save_memory", content="Tabs, not spaces")
    await ok(client, "save_memory", content="Lena is the designer")
    await ok(client, "save_memory", content="Deploy with make ship", category="ops")
    listed = await ok(client, "list_memory_categories")
    assert listed == "Memory categories:\n- ops (1)\n- uncategorized (2)"


async def test_same_content_in_same_category_is_reinforced_not_duplicated(client: Client) -> None:
    first = await save(client, "Prefers dark mode.", category="ui")
    again = await ok(client, "save_memory", content="  prefers   DARK mode!! ", category="ui")
    assert again == f"Reinforced memory [{first}] (seen 2×)."
    third = await ok(client, "save_memory", content="prefers dark mode", category="ui")
    assert third == f"Reinforced memory [{first}] (seen 3×)."
    found = await ok(client, "search_memory", query="dark mode")
    assert found.count("- [") == 1
    assert "seen 3× from " in found
    other = await save(client, "Prefers dark mode.", category="editor")
    assert other != first


async def test_search_filters_by_category_prefix_on_segment_boundaries(client: Client) -> None:
    await save(client, "timezone is Chicago", category="user-preferences/timezone")
    await save(client, "user wants Chicago pizza", category="user")
    found = await ok(client, "search_memory", query="chicago", category="user-preferences")
    assert "timezone is Chicago" in found and "pizza" not in found
    found = await ok(client, "search_memory", query="chicago", category="user")
    assert "pizza" in found and "timezone" not in found


async def test_search_requires_every_tag(client: Client) -> None:
    await save(client, "deploy with blue green", tags=["ops", "deploy"])
    await save(client, "deploy on fridays is banned", tags="ops")
    found = await ok(client, "search_memory", query="deploy", tags="ops, deploy")
    assert "blue green" in found and "fridays" not in found
    found = await ok(client, "search_memory", tags=["OPS"])
    assert found.startswith("Found 2 memory entries")


async def test_filters_apply_before_the_top_k_cut(client: Client) -> None:
    for i in range(30):
        await save(client, f"coffee note number {i} coffee coffee", category="noise")
    await save(client, "coffee once", category="rare")
    found = await ok(client, "search_memory", query="coffee", category="rare")
    assert "coffee once" in found and found.startswith("Found 1 memory entry")


async def test_search_without_query_lists_most_recently_seen_first(client: Client) -> None:
    a = await save(client, "first fact")
    b = await save(client, "second fact")
    await ok(client, "save_memory", content="first fact")  # reinforced: seen now
    found = await ok(client, "search_memory")
    assert found.index(a) < found.index(b)


async def test_search_returns_at_most_twenty(client: Client) -> None:
    for i in range(25):
        await save(client, f"apple fact {i}")
    found = await ok(client, "search_memory", query="apple")
    assert found.startswith("Found 20 memory entries")


async def test_empty_search_says_nothing_found(client: Client) -> None:
    assert await ok(client, "search_memory", query="nothing here") == (
        "No memories found matching the search criteria."
    )


@pytest.mark.parametrize(
    "query",
    ["tea AND (", "-x", '"', "🎉🎉", "title:foo", "a" * 9000, "OR OR NOT", "\\", "*", "café ~2^3"],
)
async def test_hostile_query_text_never_breaks_search(client: Client, query: str) -> None:
    await save(client, "green tea with a café crème")
    error, _text = await call(client, "search_memory", query=query)
    assert not error


async def test_ten_thousand_character_query_is_accepted(client: Client) -> None:
    await save(client, "green tea")
    found = await ok(client, "search_memory", query=("tea " * 2500)[:10_000])
    assert "green tea" in found


async def test_non_ascii_words_are_searchable(client: Client) -> None:
    await save(client, "Der Nutzer trinkt gern Kaffee in München")
    await save(client, "Пользователь живёт в Москве")
    await save(client, "ユーザーは東京に住んでいる")
    assert "München" in await ok(client, "search_memory", query="münchen")
    assert "München" in await ok(client, "search_memory", query="Munchen")
    assert "Москве" in await ok(client, "search_memory", query="Москве")
    assert "東京" in await ok(client, "search_memory", query="東京")


async def test_delete_removes_the_entry_and_says_what_it_was(client: Client) -> None:
    memory_id = await save(client, "old phone number 555-0100")
    assert await ok(client, "delete_memory", id=memory_id) == (
        f"Deleted memory entry '{memory_id}': \"old phone number 555-0100\""
    )
    assert (await ok(client, "search_memory", query="phone")).startswith("No memories")
    assert await fails(client, "delete_memory", id=memory_id) == (
        f"No memory entry found with id '{memory_id}'. Use search_memory to find the correct ID."
    )


async def test_categories_are_counted_and_sorted_case_insensitively(client: Client) -> None:
    assert await ok(client, "list_memory_categories") == (
        "No categories yet. Save a memory with a category to create one."
    )
    await save(client, "a", category="beta")
    await save(client, "b", category="Alpha")
    await save(client, "c", category="beta")
    await save(client, "d")
    assert await ok(client, "list_memory_categories") == (
        "Memory categories:\n- Alpha (1)\n- beta (2)\n- uncategorized (1)"
    )


# ---- bad input: a specific message, nothing written ------------------------------------------
@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({"content": ""}, "'content' must not be empty"),
        ({"content": "   "}, "content is empty"),
        ({"content": "x" * 32_001}, "'content' is longer than 32000 characters"),
        ({"content": "x", "category": "../etc"}, "category '../etc' is not valid"),
        ({"content": "x", "category": "/abs"}, "category '/abs' is not valid"),
        ({"content": "x", "category": "a//b"}, "category 'a//b' is not valid"),
        ({"content": "x", "category": "a" * 201}, "'category' is longer than 200 characters"),
        ({"content": "x", "tags": "t" * 65}, "longer than 64 characters"),
        ({"content": "x", "tags": ",".join(f"t{i}" for i in range(33))}, "at most 32 are allowed"),
        ({"content": "x", "tags": 5}, "Invalid arguments for save_memory: 'tags' must be text"),
        ({"content": 7}, "Invalid arguments for save_memory: 'content' must be text"),
        ({}, "Invalid arguments for save_memory: 'content' is required"),
    ],
)
async def test_save_memory_rejects_bad_input_and_writes_nothing(
    client: Client, args: dict[str, object], message: str
) -> None:
    text = await fails(client, "save_memory", **args)
    assert message in text
    assert "Traceback" not in text
    assert (await ok(client, "search_memory")).startswith("No memories")
    assert (await ok(client, "list_memory_categories")).startswith("No categories")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({"category": "bad category"}, "category 'bad category' is not valid"),
        ({"tags": "x" * 70}, "longer than 64 characters"),
        ({"query": "q" * 10_001}, "'query' is longer than 10000 characters"),
    ],
)
async def test_search_memory_rejects_bad_filters(
    client: Client, args: dict[str, object], message: str
) -> None:
    assert message in await fails(client, "search_memory", **args)


async def test_delete_memory_rejects_an_empty_id(client: Client) -> None:
    assert "Invalid arguments for delete_memory: 'id' must not be empty" in await fails(
        client, "delete_memory", id=""
    )


async def test_a_tool_that_does_not_exist_is_an_error(client: Client) -> None:
    error, _ = await call(client, "forget_everything")
    assert error


async def test_save_memory_redacts_before_writing_and_says_how_many_spans(
    client: Client, settings: Settings
) -> None:
    token = "ghp_aB3dE5fG7hJ9kL1mN3pQ5rS7tU9vW1xY3zA5"
    content = f"Deploy with token {token} <private>my salary is 90k</private> via make ship"
    text = await ok(client, "save_memory", content=content, category="ops")
    memory_id = SAVED.match(text.split(" Redacted")[0]).group(1)  # type: ignore[union-attr]
    assert text == f"Saved memory [{memory_id}] (ops). Redacted 2 secrets."
    found = await ok(client, "search_memory", query="deploy make ship")
    assert f"[{memory_id}]" in found and token not in found and "salary" not in found
    assert "Deploy with token [REDACTED]  via make ship" in found
    on_disk = b"".join(p.read_bytes() for p in settings.data_dir.rglob("*") if p.is_file())
    assert token.encode() not in on_disk and b"salary is 90k" not in on_disk
    clean = await ok(client, "save_memory", content="We deploy on Tuesdays", category="ops")
    assert SAVED.match(clean), clean  # nothing redacted: the text docs/reference.md#tools pins
    one = await ok(client, "save_memory", content=f"api_key={token[:20]}xyz12", category="ops")
    assert one.endswith(" Redacted 1 secret.")
    nothing = await fails(client, "save_memory", content="<private>only this</private>")
    assert nothing.startswith("content is empty once its <private> spans and secrets are taken")


async def test_save_memory_redacts_category_and_tags_and_refuses_a_bare_secret(
    client: Client, settings: Settings
) -> None:
    """qa-turn5 LOW 10: category and tags were stored as given; a content that was only a
    secret was saved as '[REDACTED]' (issue 56 item 5)."""
    token = "ghp_aB3dE5fG7hJ9kL1mN3pQ5rS7tU9vW1xY3zA5"
    hook = "https://hooks.slack.com/services/T0123ABCD/B0456EFGH/aBcDeFgHiJkLmNoPqRsTuVwX"
    text = await ok(
        client,
        "save_memory",
        content=f"Ship on Fridays, alerts to {hook}",
        category=f"ops/{token}",
        tags=[token, "DB_PASS=Hunter2Horse9", "release"],
    )
    assert text.endswith("(ops/redacted). Redacted 4 secrets."), text
    found = await ok(client, "search_memory", query="ship fridays")
    assert "ops/redacted" in found and token not in found
    for bare in (
        token,
        f"{token} <private>x</private>",
        "SG.aBcDeFgHiJkLmNoPqRsTuV.aBcDeFgHiJkLmNoPqRsTuVwXyZ0123456789aBcDeFg",
    ):
        refused = await fails(client, "save_memory", content=bare)
        assert refused.startswith("content is empty once its <private> spans and secrets"), bare
    wm = await ok(
        client, "save_to_working_memory", key="draft", data=f"use {token}", tags=[token, "x"]
    )
    assert "draft" in wm
    on_disk = b"".join(p.read_bytes() for p in settings.data_dir.rglob("*") if p.is_file())
    assert token.encode() not in on_disk and token.lower().encode() not in on_disk
    assert b"aBcDeFgHiJkLmNoPqRsTuVwX" not in on_disk and b"Hunter2Horse9" not in on_disk
