"""Who the server is, and its answer to a client's first handshake message, without the MCP SDK.

Importing the SDK costs a new process 1-4 s on a loaded machine (its pydantic models), and
Claude Code gives up on its `server/discover` probe after ~2.8 s
(docs/claude-code.md#starting-fast). So the stdio transport answers the handshake from here
(server/transports/early.py) while the SDK loads, then hands the same frames to the SDK, which is
the server from then on. The replies here are the SDK's own, byte for byte as JSON values:
tests/server/mcp/test_handshake.py compares them with what the SDK answers for the same frames.
Anything this module does not recognise as a plain handshake is left to the SDK (`reply` returns
None).

Standard library only: nothing here may import the SDK, pydantic or the stores."""

from __future__ import annotations

TYPE_CHECKING = False  # `typing` is not imported: the first reply waits for every import
if TYPE_CHECKING:
    from typing import Any

NAME = "dreamwell"
VERSION = "0.1.0"
INSTRUCTIONS = (
    "dreamwell is your memory. search_memory before answering questions about the user or past "
    "work; save_memory for durable facts, preferences and lessons; working memory is short-lived "
    "scratch space in your own namespace."
)
# the SDK's HANDSHAKE_PROTOCOL_VERSIONS and MODERN_PROTOCOL_VERSIONS (mcp 2.3)
HANDSHAKE_VERSIONS = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")
MODERN_VERSIONS = ("2026-07-28",)
MODERN = MODERN_VERSIONS[0]  # from this version on, no mid-request server requests
META_VERSION = "io.modelcontextprotocol/protocolVersion"
META_CLIENT = "io.modelcontextprotocol/clientInfo"
META_CAPABILITIES = "io.modelcontextprotocol/clientCapabilities"
META_SERVER = "io.modelcontextprotocol/serverInfo"
SKILLS_EXTENSION = "io.modelcontextprotocol/skills"
INTERNAL_ERROR = -32603


def _request_id(frame: dict[str, Any]) -> str | int | None:
    found = frame.get("id")
    if isinstance(found, str) or (isinstance(found, int) and not isinstance(found, bool)):
        return found
    return None


def _client_info(value: Any) -> bool:
    """A clientInfo the SDK accepts without a doubt: a name and a version, both text."""
    return (
        isinstance(value, dict)
        and isinstance(value.get("name"), str)
        and isinstance(value.get("version"), str)
    )


def _initialize(params: Any) -> dict[str, Any] | None:
    if not isinstance(params, dict) or set(params) - {
        "protocolVersion",
        "capabilities",
        "clientInfo",
    }:
        return None
    requested = params.get("protocolVersion")
    if not isinstance(requested, str) or not isinstance(params.get("capabilities"), dict):
        return None
    if not _client_info(params.get("clientInfo")):
        return None
    version = requested if requested in HANDSHAKE_VERSIONS else HANDSHAKE_VERSIONS[-1]
    return {
        "capabilities": {
            "prompts": {"listChanged": True},
            "resources": {"listChanged": True, "subscribe": False},
            "tools": {"listChanged": False},
        },
        "instructions": INSTRUCTIONS,
        "protocolVersion": version,
        "serverInfo": {"name": NAME, "version": VERSION},
    }


def _discover(params: Any) -> dict[str, Any] | None:
    if not _envelope(params):
        return None
    return {
        "cacheScope": "private",
        "capabilities": {
            "extensions": {SKILLS_EXTENSION: {"directoryRead": False}},
            "prompts": {"listChanged": True},
            "resources": {"listChanged": True, "subscribe": True},
            "tools": {"listChanged": True},
        },
        "instructions": INSTRUCTIONS,
        "resultType": "complete",
        "supportedVersions": list(MODERN_VERSIONS),
        "ttlMs": 0,
        "_meta": {META_SERVER: {"name": NAME, "version": VERSION}},
    }


def _envelope(params: Any, *allowed: str) -> bool:
    """params holding a 2026 envelope the SDK accepts without a doubt, and only `allowed`."""
    if not isinstance(params, dict) or set(params) - {"_meta", *allowed}:
        return False
    meta = params.get("_meta")
    if not isinstance(meta, dict) or set(meta) - {META_VERSION, META_CLIENT, META_CAPABILITIES}:
        return False
    if meta.get(META_VERSION) not in MODERN_VERSIONS:
        return False
    if not isinstance(meta.get(META_CAPABILITIES), dict):
        return False
    return META_CLIENT not in meta or _client_info(meta[META_CLIENT])


def method(frame: Any) -> str | None:
    """The method of a request frame (None for a notification, a response or garbage)."""
    if not isinstance(frame, dict) or frame.get("jsonrpc") != "2.0":
        return None
    found = frame.get("method")
    return found if isinstance(found, str) and _request_id(frame) is not None else None


def reply(frame: Any) -> dict[str, Any] | None:
    """The SDK's reply to `frame` when it is a plain `initialize` or `server/discover`
    request; None for anything else (the SDK will answer it)."""
    called = method(frame)
    if called == "initialize":
        result = _initialize(frame.get("params"))
    elif called == "server/discover":
        result = _discover(frame.get("params"))
    else:
        return None
    if result is None or set(frame) - {"jsonrpc", "id", "method", "params"}:
        return None
    return {"jsonrpc": "2.0", "id": frame["id"], "result": result}


def refusal(frame: Any, cause: str) -> dict[str, Any] | None:
    """The error every request gets from a server that could not start: `cause` says why
    (Claude Code shows it as the server's failure: `claude mcp list`, `/mcp`)."""
    if method(frame) is None:
        return None
    message = f"dreamwell cannot start: {cause}"
    return {
        "jsonrpc": "2.0",
        "id": frame["id"],
        "error": {"code": INTERNAL_ERROR, "message": message},
    }


LISTENED = ("toolsListChanged", "promptsListChanged", "resourcesListChanged")
ACKNOWLEDGED = "notifications/subscriptions/acknowledged"
SUBSCRIPTION_ID = "io.modelcontextprotocol/subscriptionId"


def acknowledgement(frame: Any) -> dict[str, Any] | None:
    """The SDK's first frame on a plain 2026 `subscriptions/listen` (the list-changed kinds
    only): its acknowledgement, which Claude Code waits for before it goes on. None for
    anything else. The stream itself is the SDK's, once it has loaded."""
    if method(frame) != "subscriptions/listen" or set(frame) - {
        "jsonrpc",
        "id",
        "method",
        "params",
    }:
        return None
    params = frame.get("params")
    if not _envelope(params, "notifications"):
        return None
    wanted = params.get("notifications")
    if not isinstance(wanted, dict) or set(wanted) - set(LISTENED):
        return None
    if not all(isinstance(v, bool) for v in wanted.values()):
        return None
    honored = {k: True for k in LISTENED if wanted.get(k)}
    meta = {SUBSCRIPTION_ID: frame["id"]}
    return {
        "jsonrpc": "2.0",
        "method": ACKNOWLEDGED,
        "params": {"_meta": meta, "notifications": honored},
    }
