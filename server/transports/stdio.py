"""stdio with an answer to every frame.

The SDK's stdio transport turns a frame it cannot parse into an exception on the read stream,
and its dispatcher drops those silently: a client that sent invalid JSON, a lone UTF-16
surrogate, `[1,2,3]` or a NUL byte waited for its own time-out. Here each such frame gets a
JSON-RPC error reply (-32700 parse error, -32600 invalid request), with the request's id when
one can be read, and the server goes on serving. A frame holding bytes that are not UTF-8 is a
parse error too (the SDK decoded them to U+FFFD, and the damaged text was stored silently).
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable
from types import TracebackType
from typing import Any

import anyio
from mcp.server.mcpserver import MCPServer
from mcp.server.stdio import stdio_server
from mcp.shared.message import SessionMessage
from mcp.types import INVALID_REQUEST, PARSE_ERROR, ErrorData, JSONRPCError, JSONRPCNotification
from pydantic import ValidationError

from dreamwell.server.mcp import sdk
from dreamwell.server.mcp.handshake import ACKNOWLEDGED
from dreamwell.server.transports.early import Handover, sent_key
from dreamwell.server.transports.early_lists import of_request
from dreamwell.server.transports.wire import PipeReader, claimed_stdin, claimed_stdout

logger = logging.getLogger(__name__)

NOT_JSON = "Parse error: the frame is not valid JSON ({detail}); send one JSON object per line."
SURROGATE = (
    "Parse error: the frame holds a lone UTF-16 surrogate escape (such as \\ud800), which is "
    "not valid Unicode; send valid UTF-8 text."
)
NOT_UTF8 = (
    "Parse error: the frame is not valid UTF-8 (byte 0x{byte:02x} at offset {offset}); send "
    "UTF-8 text."
)
# stdin is decoded with surrogateescape: a byte that is not UTF-8 arrives as one of these
# (the SDK's own decoding replaced it with U+FFFD, and the damaged text was stored silently)
RAW_BYTE = re.compile("[\udc80-\udcff]")
NOT_A_MESSAGE = (
    "Invalid request: a frame must be one JSON-RPC 2.0 object with 'jsonrpc', 'method' and, "
    "for a request, 'id' (batches are not supported)."
)


def _request_id(value: Any) -> str | int | None:
    if isinstance(value, dict):
        found = value.get("id")
        if isinstance(found, str) or (isinstance(found, int) and not isinstance(found, bool)):
            return found
    return None


def error_reply(exc: Exception) -> JSONRPCError | None:
    """The JSON-RPC error for a frame the transport could not read (None: a blank line)."""
    if not isinstance(exc, ValidationError):
        return JSONRPCError(
            jsonrpc="2.0",
            id=None,
            error=ErrorData(code=PARSE_ERROR, message=NOT_JSON.format(detail="unreadable frame")),
        )
    errors = exc.errors(include_url=False)
    raw_input = errors[0].get("input") if errors else None
    if isinstance(raw_input, str) and (bad := RAW_BYTE.search(raw_input)) is not None:
        return _not_utf8(raw_input, bad.start())
    if errors and errors[0]["type"] == "json_invalid":
        first = errors[0]
        raw = first.get("input")
        if isinstance(raw, str) and not raw.strip("\r\n\t "):
            return None
        try:  # Python's parser accepts lone surrogates, so it can still find the id
            parsed = json.loads(raw) if isinstance(raw, str) else None
        except (ValueError, RecursionError):  # nested too deeply is a parse error too
            detail = str(first.get("ctx", {}).get("error", "malformed JSON"))
            message, rid = NOT_JSON.format(detail=detail), None
        else:
            message, rid = SURROGATE, _request_id(parsed)
        return JSONRPCError(
            jsonrpc="2.0", id=rid, error=ErrorData(code=PARSE_ERROR, message=message)
        )
    rid = next((r for e in errors if (r := _request_id(e.get("input"))) is not None), None)
    return JSONRPCError(
        jsonrpc="2.0", id=rid, error=ErrorData(code=INVALID_REQUEST, message=NOT_A_MESSAGE)
    )


def _not_utf8(raw: str, at: int) -> JSONRPCError:
    offset = len(raw[:at].encode("utf-8", "surrogateescape"))
    byte = raw[at].encode("utf-8", "surrogateescape")[0]
    try:  # Python's parser takes the escaped bytes, so the request's id can still be read
        rid = _request_id(json.loads(raw))
    except (ValueError, RecursionError):
        rid = None
    message = NOT_UTF8.format(byte=byte, offset=offset)
    return JSONRPCError(jsonrpc="2.0", id=rid, error=ErrorData(code=PARSE_ERROR, message=message))


DRAIN_SECONDS = 15.0  # at EOF, how long requests already read may take to be answered (a
# cold first save opens the store: seconds on a loaded machine)
# a dream asked for over MCP may wait minutes on its LLM: at EOF it is cancelled, not awaited
# (a cycle is safe to cancel between steps and can be asked for again)
# `subscriptions/listen` stays open for as long as the client listens: never awaited either
LONG_METHODS = {("prompts/get", "dream"), ("subscriptions/listen", None)}


def _request_id_of(item: Any, method: bool) -> Any:
    """The id of a request (method=True) or of a response (False) in a SessionMessage."""
    message = getattr(item, "message", None)
    if (getattr(message, "method", None) is not None) != method:
        return None
    return getattr(message, "id", None)


def _long(item: Any) -> bool:
    message = item.message
    params = getattr(message, "params", None) or {}
    return (
        message.method,
        params.get("name") if isinstance(params, dict) else None,
    ) in LONG_METHODS


_LIST_CHANGED = {
    "toolsListChanged": "notifications/tools/list_changed",
    "promptsListChanged": "notifications/prompts/list_changed",
    "resourcesListChanged": "notifications/resources/list_changed",
}
_KIND_OF_LIST = {
    "tools/list": "toolsListChanged",
    "prompts/list": "promptsListChanged",
    "resources/list": "resourcesListChanged",
    "resources/templates/list": "resourcesListChanged",
}


def _changed_meanwhile(ack: Any, body: dict[str, Any], kinds: set[str] | None = None) -> list[Any]:
    """The list-changed notifications, on the acknowledged listen stream, of every kind the
    acknowledgement `body` (of the message `ack`) honoured (of `kinds` only, when given)."""
    params = body.get("params") or {}
    meta = params.get("_meta") or {}
    honoured = [k for k, on in (params.get("notifications") or {}).items() if on]
    message = type(ack.message)
    return [
        SessionMessage(
            message.model_validate(
                {"jsonrpc": "2.0", "method": _LIST_CHANGED[k], "params": {"_meta": meta}}
            ),
            ack.metadata,
        )
        for k in honoured
        if k in _LIST_CHANGED and (kinds is None or k in kinds)
    ]


def _changed_2025(kind: str) -> SessionMessage:
    """The 2025 notification that the `kind` list changed (our `initialize` answer declared
    `listChanged` for it)."""
    return SessionMessage(JSONRPCNotification(jsonrpc="2.0", method=_LIST_CHANGED[kind]))


class AnsweringWriteStream:
    """The transport's write stream, noting which requests have been answered; a reply to a
    request answered before the SDK loaded (`early`) is not sent twice."""

    def __init__(
        self,
        inner: Any,
        pending: set[Any],
        early: Handover | None = None,
        lists_asked: dict[Any, tuple[str, str]] | None = None,
    ) -> None:
        self._inner = inner
        self._pending = pending
        self._early = early
        self._catch_up: list[Any] = []
        self._lists_asked = lists_asked if lists_asked is not None else {}
        self._ack: tuple[Any, dict[str, Any]] | None = None  # the SDK's listen acknowledgement
        self._stale: set[str] = set()  # kinds answered early that the SDK answers otherwise

    async def send(self, item: Any) -> None:
        if self._early is None or not self._early.answered or not self._answered_early(item):
            await self._inner.send(item)
        await self.send_caught_up()
        answered = _request_id_of(item, method=False)
        self._pending.discard(answered)
        if answered is not None and answered in self._lists_asked:
            self._keep_list(self._lists_asked.pop(answered), item)

    def _keep_list(self, wanted: tuple[str, str], item: Any) -> None:
        """The SDK's answer to a list request, kept for the next server to answer from while
        it loads (server/transports/early_lists.py)."""
        if self._early is not None and self._early.lists is not None:
            ours = json.loads(item.message.model_dump_json(by_alias=True, exclude_unset=True))
            self._early.lists.record(wanted, ours.get("result"))

    def _answered_early(self, item: Any) -> bool:
        """Whether this message went out before the SDK loaded (then it is not sent again)."""
        assert self._early is not None
        ours = json.loads(item.message.model_dump_json(by_alias=True, exclude_unset=True))
        sent = self._early.take(sent_key(ours))
        listed = self._early.listed.pop(ours.get("id"), None) if sent is not None else None
        if listed is not None:  # answered from the last server's lists: announce a change
            if sent != ours and self._early.legacy:  # as a 2025 server announces one
                self._catch_up = [_changed_2025(_KIND_OF_LIST[listed])]
            elif sent != ours and self._ack is not None:
                self._catch_up = _changed_meanwhile(*self._ack, {_KIND_OF_LIST[listed]})
            elif sent != ours:  # before the SDK acknowledged the listen: announced then
                self._stale.add(_KIND_OF_LIST[listed])
        elif sent is not None and sent != ours:
            logger.warning("the handshake answered early differed from the SDK's: %s", ours)
        if sent is not None and ours.get("method") == ACKNOWLEDGED:
            self._ack = (item, ours)
            # the lists answered early are compared with the SDK's own answers instead
            early_kinds = {_KIND_OF_LIST[m] for m in self._early.listed.values()}
            kinds = (set(_LIST_CHANGED) - early_kinds) | self._stale
            self._catch_up = _changed_meanwhile(item, ours, kinds)
        return sent is not None

    async def send_caught_up(self) -> None:
        """After the SDK's own acknowledgement of a listen answered early: the client was told
        it listens before the server could hear a change, so what changed meanwhile (a skill
        written while the SDK loaded) is announced once, as the lists it asked to hear of;
        a list answered early from the last server's (early_lists.py) is announced only when
        the SDK's own answer differs (a client told of a change asks again, and Claude Code
        asking while it stops a short session waited seconds for a server gone)."""
        catch_up, self._catch_up = self._catch_up, []
        for notification in catch_up:
            await self._inner.send(notification)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    async def __aenter__(self) -> AnsweringWriteStream:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self._inner.aclose()


class ReplyingReadStream:
    """The transport's read stream, minus unreadable frames, which are answered instead.
    When stdin closes, requests already read are answered before the end is passed on
    (`printf '<initialize>\\n<save>\\n' | dreamwell serve` saves), for DRAIN_SECONDS at most."""

    def __init__(
        self,
        inner: Any,
        write: Any,
        on_eof: Callable[[], None] | None = None,
        pending: set[Any] | None = None,
        lists_asked: dict[Any, tuple[str, str]] | None = None,
    ) -> None:
        self._inner = inner
        self._write = write
        self._on_eof = on_eof
        self._pending = pending if pending is not None else set()
        self._lists_asked = lists_asked if lists_asked is not None else {}

    async def _drain(self) -> None:
        with anyio.move_on_after(DRAIN_SECONDS):
            while self._pending:
                await anyio.sleep(0.01)

    @property
    def last_context(self) -> Any:
        return getattr(self._inner, "last_context", None)

    async def receive(self) -> Any:
        while True:
            try:
                item = await self._inner.receive()
            except (anyio.EndOfStream, anyio.ClosedResourceError):
                await self._drain()  # stdin closed: answer what was read, then go
                if self._on_eof is not None:
                    self._on_eof()
                raise
            if not isinstance(item, Exception):
                if (rid := _request_id_of(item, method=True)) is not None and not _long(item):
                    self._pending.add(rid)
                    self._note_list(rid, item)
                return item
            reply = error_reply(item)
            if reply is not None:
                logger.info("answered an unreadable stdio frame: %s", reply.error.message)
                await self._write.send(SessionMessage(reply))

    def _note_list(self, rid: Any, item: Any) -> None:
        message = item.message
        frame = {"id": rid, "method": message.method, "params": getattr(message, "params", None)}
        wanted = of_request(frame)
        if wanted is not None:
            self._lists_asked[rid] = wanted

    async def aclose(self) -> None:
        await self._inner.aclose()

    def __aiter__(self) -> ReplyingReadStream:
        return self

    async def __anext__(self) -> Any:
        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    async def __aenter__(self) -> ReplyingReadStream:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc_val: BaseException | None,
        exc_tb: TracebackType | None,
    ) -> bool | None:
        await self.aclose()
        return None


async def run_stdio(
    mcp: MCPServer[Any],
    on_eof: Callable[[], None] | None = None,
    early: Handover | None = None,
) -> None:
    """What `MCPServer.run_stdio_async` does, with every unreadable frame answered; `on_eof`
    runs as soon as stdin closes (handlers still running may keep `run` from returning).
    `early`: what was read and answered before the SDK loaded (server/transports/early.py)."""
    lowlevel = sdk.lowlevel(mcp)
    pending: set[Any] = set()
    lists_asked: dict[Any, tuple[str, str]] = {}  # list requests' ids (early_lists.py)
    first = early.data if early is not None else b""
    with claimed_stdin(first) as stdin, claimed_stdout() as stdout:
        if first and not isinstance(stdin, PipeReader):
            raise RuntimeError("stdin was read early, but the SDK's stdio cannot be served")
        async with stdio_server(stdin=stdin, stdout=stdout) as (read_stream, write_stream):
            await lowlevel.run(
                ReplyingReadStream(read_stream, write_stream, on_eof, pending, lists_asked),
                AnsweringWriteStream(write_stream, pending, early, lists_asked),
                lowlevel.create_initialization_options(),
            )
