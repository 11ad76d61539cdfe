"""`dreamwell serve` over stdio, spoken to frame by frame, and the frames Claude Code sends.

    async with Wire(tmp_path) as wire:          # the exact command of mcp.json
        await wire.send_json(CLAUDE_CODE.discover("server-discover-probe-1"))
        answer = await wire.reply()
    wire.stderr()                               # what the server logged

The CLAUDE_CODE frames are the ones Claude Code 2.1.328 writes (captured from its stdin to a
server): a `server/discover` probe, `subscriptions/listen`, and the `initialize` it falls back
to when the probe is not answered within ~2.8 s.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import anyio
from anyio.streams.text import TextReceiveStream

from tests.support.calls import initialize
from tests.support.servers import from_mcp_json

INIT = initialize(0, "raw")
INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}


class ClaudeCodeFrames:
    """What Claude Code 2.1.328 sends a stdio server, in both protocol eras."""

    def __init__(self) -> None:
        self.info = {
            "name": "claude-code",
            "title": "Claude Code",
            "version": "2.1.328",
            "description": "Anthropic's agentic coding tool",
            "websiteUrl": "https://claude.com/claude-code",
        }
        self.capabilities = {"roots": {"listChanged": True}, "elicitation": {"form": {}, "url": {}}}

    def envelope(self) -> dict[str, Any]:
        return {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientInfo": self.info,
            "io.modelcontextprotocol/clientCapabilities": self.capabilities,
        }

    def discover(self, request_id: str | int) -> dict[str, Any]:
        params = {"_meta": self.envelope()}
        return {"jsonrpc": "2.0", "id": request_id, "method": "server/discover", "params": params}

    def listen(self, request_id: str | int) -> dict[str, Any]:
        wanted = {
            "toolsListChanged": True,
            "promptsListChanged": True,
            "resourcesListChanged": True,
        }
        params = {"_meta": self.envelope(), "notifications": wanted}
        return {
            "jsonrpc": "2.0",
            "id": request_id,
            "method": "subscriptions/listen",
            "params": params,
        }

    def request(self, request_id: int, method: str, **params: Any) -> dict[str, Any]:
        """A 2026-era request (the envelope in `_meta`)."""
        params = {**params, "_meta": self.envelope()}
        return {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}

    def initialize(self, request_id: int) -> dict[str, Any]:
        params = {
            "protocolVersion": "2025-11-25",
            "capabilities": self.capabilities,
            "clientInfo": self.info,
        }
        return {"jsonrpc": "2.0", "id": request_id, "method": "initialize", "params": params}


CLAUDE_CODE = ClaudeCodeFrames()


class Wire:
    """`dreamwell serve` as mcp.json starts it (`prefix`: a command it runs under, such as
    another user's), spoken to frame by frame; its stderr is kept in `data_dir`'s sibling."""

    def __init__(
        self,
        data_dir: Path,
        *args: str,
        env: dict[str, str] | None = None,
        prefix: tuple[str, ...] = (),
        timeout: float = 60,
    ) -> None:
        self._params = from_mcp_json(data_dir)
        self._args = [*prefix, self._params.command, *self._params.args, *args]
        self._env = {**(self._params.env or {}), **(env or {})}
        self._err = data_dir.parent / f"{data_dir.name}.stderr"
        self._buffered = ""
        self._timeout = timeout

    async def __aenter__(self) -> Wire:
        with self._err.open("wb") as err:
            self._process = await anyio.open_process(self._args, env=self._env, stderr=err)
        assert self._process.stdin is not None and self._process.stdout is not None
        self._stdin = self._process.stdin
        self._lines = TextReceiveStream(self._process.stdout)
        self._deadline = anyio.fail_after(self._timeout)
        self._deadline.__enter__()
        return self

    async def __aexit__(self, *exc: object) -> None:
        try:
            self._deadline.__exit__(*exc)  # type: ignore[arg-type]
        finally:
            if self._process.returncode is None:
                self._process.kill()
            await self._process.aclose()

    async def send(self, frame: bytes) -> None:
        await self._stdin.send(frame + b"\n")

    async def send_json(self, *frames: dict[str, Any]) -> None:
        """Frames written at once, as a client that does not wait for answers writes them."""
        await self._stdin.send(b"".join(json.dumps(f).encode() + b"\n" for f in frames))

    async def call(self, request_id: int, params: dict[str, Any]) -> None:
        call = {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}
        await self.send(json.dumps(call).encode())

    async def handshake(self) -> None:
        await self.send(json.dumps(INIT).encode())
        assert (await self.reply())["id"] == 0
        await self.send(json.dumps(INITIALIZED).encode())

    async def reply(self) -> dict[str, Any]:
        """The server's next frame; its `roots/list` requests (it asks which project the client
        is in) are answered as a client with no roots answers them, and skipped."""
        while True:
            while "\n" not in self._buffered:
                self._buffered += await self._lines.receive()
            line, self._buffered = self._buffered.split("\n", 1)
            answer: dict[str, Any] = json.loads(line)
            if answer.get("method") != "roots/list" or "id" not in answer:
                return answer
            await self.send_json({"jsonrpc": "2.0", "id": answer["id"], "result": {"roots": []}})

    async def close(self) -> list[dict[str, Any]]:
        """Close stdin, as a client that leaves does; every frame the server wrote after the
        ones read, until it exited."""
        await self._stdin.aclose()
        rest: list[dict[str, Any]] = []
        while True:
            try:
                rest.append(await self.reply())
            except anyio.EndOfStream:
                await self._process.wait()
                return rest

    @property
    def returncode(self) -> int | None:
        return self._process.returncode

    def stderr(self) -> str:
        return self._err.read_text(errors="replace") if self._err.exists() else ""


def as_another_user() -> tuple[str, ...]:
    """A prefix that runs a command as an unprivileged user when the tests run as root (for
    whom permissions do not apply); empty otherwise."""
    if os.geteuid() != 0:
        return ()
    return ("setpriv", "--reuid=65534", "--regid=65534", "--clear-groups")


async def sdk_answers(data_dir: Path, *frames: dict[str, Any]) -> list[dict[str, Any]]:
    """What the SDK itself writes for `frames` (as dreamwell's server, in this process), as
    the stdio transport would put it on the wire: each request's reply and notifications."""
    from mcp.shared.message import SessionMessage
    from mcp.types import jsonrpc_message_adapter

    from dreamwell.server.config import Settings
    from dreamwell.server.mcp import sdk
    from dreamwell.server.mcp.app import build_server

    lowlevel = sdk.lowlevel(build_server(Settings(data_dir=data_dir, embedder="none")))
    send_in, read_in = anyio.create_memory_object_stream[Any](100)
    send_out, read_out = anyio.create_memory_object_stream[Any](100)
    written: list[dict[str, Any]] = []
    with anyio.fail_after(30):
        async with send_in, read_in, send_out, read_out, anyio.create_task_group() as tg:
            options = lowlevel.create_initialization_options()
            tg.start_soon(lowlevel.run, read_in, send_out, options)
            for frame in frames:
                message = jsonrpc_message_adapter.validate_json(json.dumps(frame), by_name=False)
                await send_in.send(SessionMessage(message))
                while "id" in frame:  # until its reply (a listen's: its acknowledgement)
                    item = await read_out.receive()
                    dumped = item.message.model_dump_json(by_alias=True, exclude_unset=True)
                    written.append(json.loads(dumped))
                    if "method" not in written[-1] or frame["method"] == "subscriptions/listen":
                        break
            tg.cancel_scope.cancel()
    return written
