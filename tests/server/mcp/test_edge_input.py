"""Lenient and malformed input at the MCP edge: refused in plain sentences, in both protocol
eras, with nothing written."""

from __future__ import annotations

from pathlib import Path

import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError

from dreamwell.server.config import Settings
from dreamwell.server.mcp.app import build_server
from dreamwell.server.mcp.tools import text_result
from tests.support.calls import fails, ok

pytestmark = pytest.mark.anyio
INTERNALS = (
    "constrained",
    "Input should",
    "String should",
    "Field required",
    "Traceback",
    "[type=",
)


def plain(text: str) -> str:
    for word in INTERNALS:
        assert word not in text, text
    return text


@pytest.mark.parametrize(
    ("ttl", "wording"),
    [
        (True, "'ttl_minutes' must be a whole number"),
        ("5", "'ttl_minutes' must be a whole number"),
        (2.5, "'ttl_minutes' must be a whole number"),
        (0, "'ttl_minutes' must be at least 1"),
    ],
)
async def test_ttl_minutes_must_be_a_real_integer(
    client: Client, ttl: object, wording: str
) -> None:
    text = plain(await fails(client, "save_to_working_memory", key="k", data="v", ttl_minutes=ttl))
    assert wording in text and text.endswith("Nothing was changed.")
    assert await ok(client, "list_working_memory") == "Working memory is empty."


@pytest.mark.parametrize("content", ["\x00", "\x00\x01\x02", "\x1b\n\t\x7f", " \u200b\x00 "])
async def test_content_made_only_of_control_characters_is_refused(
    client: Client, content: str
) -> None:
    text = plain(await fails(client, "save_memory", content=content))
    assert "no visible text" in text
    assert (await ok(client, "search_memory")).startswith("No memories")


async def test_unknown_arguments_are_refused_by_name(client: Client) -> None:
    text = plain(await fails(client, "save_memory", content="kept?", importance=1, colour="red"))
    assert "unknown arguments 'colour', 'importance'" in text
    assert "save_memory takes content, category, tags" in text
    assert (await ok(client, "search_memory")).startswith("No memories")
    text = await fails(client, "save_to_working_memory", key="k", data="v", ttl=5)
    assert "unknown argument 'ttl'" in text
    assert await ok(client, "list_working_memory") == "Working memory is empty."


@pytest.mark.parametrize(
    ("tool", "args", "wording"),
    [
        ("save_memory", {"content": "x", "tags": [1]}, "'tags' must be text like 'a, b'"),
        ("save_memory", {"content": "x", "tags": ["t" * 65]}, "'tags' must be text like 'a, b'"),
        ("save_memory", {"content": "x", "category": 3}, "'category' must be text"),
        ("search_working_memory", {"namespace": ["a"]}, "'namespace' must be text"),
        ("delete_memory", {"id": None}, "'id' must be text"),
        ("get_from_working_memory", {}, "'key' is required"),
    ],
)
async def test_refusals_never_show_validator_internals(
    client: Client, tool: str, args: dict[str, object], wording: str
) -> None:
    assert wording in plain(await fails(client, tool, **args))


@pytest.mark.parametrize("mode", ["auto", "legacy"])
@pytest.mark.parametrize(
    ("prompt", "args", "wording"),
    [
        ("nope", {}, "Unknown prompt 'nope'. Prompts: dream, recall."),
        ("recall", {}, "Prompt 'recall' needs the argument 'message'."),
        ("recall", {"message": "hi", "bogus": "1"}, "Prompt 'recall' has no argument 'bogus'"),
        ("recall", {"message": "x" * 10_001}, "message is 10001 characters; the limit is 10000"),
        ("dream", {"apply": "maybe"}, "apply must be yes or no"),
    ],
)
async def test_prompt_errors_say_what_is_wrong_in_both_protocol_eras(
    tmp_path: Path, mode: str, prompt: str, args: dict[str, str], wording: str
) -> None:
    settings = Settings(data_dir=tmp_path, embedder="none")
    async with Client(build_server(settings), mode=mode) as c:  # type: ignore[arg-type]
        with pytest.raises(MCPError) as caught:
            await c.get_prompt(prompt, args)
        assert wording in str(caught.value)
        assert "Internal server error" not in str(caught.value)
        # the session still serves
        assert "Nothing recalled" in (
            (await c.get_prompt("recall", {"message": "anything"})).messages[0].content.text  # type: ignore[union-attr]
        )


def test_a_reply_is_always_valid_unicode() -> None:
    result = text_result("value \ud800 from a damaged file")
    assert result.content[0].text == "value \ufffd from a damaged file"  # type: ignore[union-attr]
    assert "\ufffd" in result.model_dump_json()  # raised before: surrogates not allowed


async def test_text_that_looks_like_json_stays_text(client: Client) -> None:
    """Issue 45: the SDK pre-parsed `"[1, 2, 3]"` into a list and refused it with its raw
    validation error; a query, a category or a key is text, whatever it looks like."""
    for text in ('{"theme": "dark"}', "[1, 2, 3]", "42", "null"):
        await ok(client, "save_memory", content=text)
        assert text in await ok(client, "search_memory", query=text)
        await ok(client, "save_to_working_memory", key="k", data=text)
        assert await ok(client, "get_from_working_memory", key="k") == text
    assert "category" in plain(await fails(client, "save_memory", content="x", category="{}"))
    assert "category" in plain(await fails(client, "search_memory", query="x", category="[1]"))
    tagged = await ok(client, "save_memory", content="tagged as json", tags='["a", "b"]')
    assert "Saved" in tagged  # tags as JSON text is still taken as a list
