"""The public surface: exactly the eight tools, their parameters, and a small tools/list."""

from __future__ import annotations

import json

import pytest
from mcp import Client

from dreamwell.server.config import Settings
from dreamwell.server.mcp.app import build_server

pytestmark = pytest.mark.anyio

TOOLS = {
    "save_memory": ({"content", "category", "tags"}, {"content"}),
    "search_memory": ({"query", "category", "tags"}, set()),
    "delete_memory": ({"id"}, {"id"}),
    "list_memory_categories": (set(), set()),
    "save_to_working_memory": ({"key", "data", "ttl_minutes", "category", "tags"}, {"key", "data"}),
    "get_from_working_memory": ({"key"}, {"key"}),
    "list_working_memory": ({"namespace"}, set()),
    "search_working_memory": ({"query", "category", "tags", "namespace"}, set()),
}


async def test_exactly_the_eight_documented_tools_with_their_parameters(client: Client) -> None:
    tools = (await client.list_tools()).tools
    assert {t.name for t in tools} == set(TOOLS)
    for tool in tools:
        params, required = TOOLS[tool.name]
        schema = tool.input_schema
        assert set(schema.get("properties", {})) == params, tool.name
        assert set(schema.get("required", [])) == required, tool.name
        assert tool.description and len(tool.description) < 120
        assert tool.output_schema is None, "results are plain text"
        for prop in schema.get("properties", {}).values():
            assert prop.get("description"), (tool.name, prop)


async def test_limits_are_declared_in_the_schemas(client: Client) -> None:
    tools = {t.name: t.input_schema["properties"] for t in (await client.list_tools()).tools}
    assert tools["save_memory"]["content"]["maxLength"] == 32_000
    assert tools["save_memory"]["content"]["minLength"] == 1
    ttl = tools["save_to_working_memory"]["ttl_minutes"]["anyOf"][0]
    assert (ttl["minimum"], ttl["maximum"]) == (1, 10_080)
    assert tools["save_to_working_memory"]["key"]["maxLength"] == 256
    tags = {t["type"]: t for t in tools["save_memory"]["tags"]["anyOf"]}
    assert set(tags) == {"string", "array", "null"}
    assert tags["array"]["maxItems"] == 32 and tags["array"]["items"]["maxLength"] == 64


async def test_tools_list_stays_under_its_token_budget(client: Client) -> None:
    listing = await client.list_tools()
    text = json.dumps(listing.model_dump(mode="json", by_alias=True, exclude_none=True))
    assert len(text) < 10_000, len(text)  # ≈ 2,500 tokens


async def test_the_2025_11_25_handshake_sees_the_same_tools_and_results(settings: Settings) -> None:
    async with Client(build_server(settings), mode="legacy") as legacy:
        assert {t.name for t in (await legacy.list_tools()).tools} == set(TOOLS)
        saved = await legacy.call_tool("save_memory", {"content": "legacy era works"})
        assert not saved.is_error
        found = await legacy.call_tool("search_memory", {"query": "legacy"})
        assert "legacy era works" in found.content[0].text  # type: ignore[union-attr]
        missing = await legacy.call_tool("delete_memory", {"id": "nope"})
        assert missing.is_error
