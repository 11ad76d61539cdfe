"""server/mcp/sdk.py is the one module that reads the MCP SDK's private attributes; these tests
pin each of them on the installed SDK, so an upgrade that renames one fails here, by name."""

from __future__ import annotations

from mcp.server.lowlevel.server import Server

from dreamwell.server.config import Settings
from dreamwell.server.mcp import sdk
from dreamwell.server.mcp.app import build_server


def test_the_low_level_server_and_its_middleware(settings: Settings) -> None:
    lowlevel = sdk.lowlevel(build_server(settings))
    assert isinstance(lowlevel, Server)
    assert isinstance(lowlevel.middleware, list) and lowlevel.middleware  # ours are in it
    assert callable(lowlevel.create_initialization_options)


def test_tools_and_prompts_are_found_by_name_and_unknown_ones_are_none(settings: Settings) -> None:
    mcp = build_server(settings)
    found = sdk.tool(mcp, "save_memory")
    assert found is not None and found.name == "save_memory"
    assert sdk.tool(mcp, "no_such_tool") is None
    recall = sdk.prompt(mcp, "recall")
    assert recall is not None and recall.name == "recall"
    assert sdk.prompt(mcp, "no_such_prompt") is None
    assert {"recall", "dream"} <= {p.name for p in sdk.prompts(mcp)}


def test_the_subscription_bus_publishes(settings: Settings) -> None:
    bus = sdk.subscriptions(build_server(settings))
    assert callable(bus.publish)
