"""The one module that reaches into the MCP SDK's private attributes.

`MCPServer` (mcp 2.x) keeps its low-level server, its tool and prompt managers and its
subscription bus private; dreamwell needs each: the low-level server to add request
middleware, declare `listChanged` and run stdio with an answer to every frame; the managers
to check a call's arguments against the registered tool or prompt before a handler runs, and
to keep text arguments text (`keep_text`); the bus to publish list changes to 2026-era
clients. Touching them here alone means an SDK
upgrade that renames one breaks this module, which tests/server/mcp/test_sdk.py pins."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mcp.server.lowlevel.server import Server
    from mcp.server.mcpserver import MCPServer
    from mcp.server.mcpserver.prompts.base import Prompt
    from mcp.server.mcpserver.tools.base import Tool
    from mcp.server.subscriptions import SubscriptionBus


def lowlevel(mcp: MCPServer[Any]) -> Server[Any]:
    """The low-level server under `mcp` (its middleware, initialization options, `run`)."""
    return mcp._lowlevel_server


def tool(mcp: MCPServer[Any], name: str) -> Tool | None:
    """The registered tool called `name`, None if there is none."""
    return mcp._tool_manager.get_tool(name)


def prompt(mcp: MCPServer[Any], name: str) -> Prompt | None:
    """The registered prompt called `name`, None if there is none."""
    return mcp._prompt_manager.get_prompt(name)


def prompts(mcp: MCPServer[Any]) -> list[Prompt]:
    """Every registered prompt."""
    return mcp._prompt_manager.list_prompts()


def subscriptions(mcp: MCPServer[Any]) -> SubscriptionBus:
    """The bus that `subscriptions/listen` streams (2026-era list-changed notifications)."""
    return mcp._subscriptions


def keep_text(mcp: MCPServer[Any], fields: Callable[[str], bool]) -> None:
    """Stop the SDK from pre-parsing JSON-looking text in the arguments `fields(name)` picks,
    of every registered tool: it turns a query `"[1, 2, 3]"` into a list and then refuses it
    (its pre-parsing is for clients that send lists as JSON text, as some do for `tags`)."""
    for registered in mcp._tool_manager.list_tools():
        meta = registered.fn_metadata
        parse = meta.pre_parse_json

        def pre_parse(data: dict[str, Any], parse: Any = parse) -> dict[str, Any]:
            parsed: dict[str, Any] = parse(data)
            return {
                k: data[k] if fields(k) and isinstance(data[k], str) else v
                for k, v in parsed.items()
            }

        object.__setattr__(meta, "pre_parse_json", pre_parse)


def connection(session: Any) -> Any:
    """The client connection a request's session belongs to (one object per connection, for
    as long as it lasts: the SDK builds a new session object per request)."""
    return session._connection
