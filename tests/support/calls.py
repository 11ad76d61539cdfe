"""Calling the server's tools through an MCP client, and raw JSON-RPC for tests that speak the
protocol by hand."""

from __future__ import annotations

from typing import Any

from mcp import Client


async def call(client: Client, tool: str, **args: object) -> tuple[bool, str]:
    """(is_error, text) of one tool call."""
    result = await client.call_tool(tool, dict(args))
    texts = [c.text for c in result.content if getattr(c, "type", "") == "text"]
    assert len(texts) == 1, result
    return bool(result.is_error), texts[0]


async def ok(client: Client, tool: str, **args: object) -> str:
    error, text = await call(client, tool, **args)
    assert not error, text
    return text


async def fails(client: Client, tool: str, **args: object) -> str:
    error, text = await call(client, tool, **args)
    assert error, text
    return text


def initialize(request_id: int = 1, client: str = "test") -> dict[str, Any]:
    """A raw JSON-RPC `initialize` request, for tests that speak the protocol by hand."""
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": client, "version": "1"},
        },
    }


async def own_namespace(client: Client) -> str:
    text = await ok(client, "save_to_working_memory", key="probe", data="x")
    return text.split("'")[1].rsplit("/", 1)[0]


INIT = initialize(1, "t")
