"""The server as Claude Desktop and IDEs start it: the exact command in mcp.json, over stdio,
in both protocol eras."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import anyio
import pytest
from anyio.streams.text import TextReceiveStream
from mcp import Client, StdioServerParameters

from tests.conftest import initialize, ok

pytestmark = pytest.mark.anyio
ROOT = Path(__file__).resolve().parents[1]


def from_mcp_json(data_dir: Path) -> StdioServerParameters:
    entry = json.loads((ROOT / "mcp.json").read_text())["mcpServers"]["dreamwell"]
    return StdioServerParameters(
        command=entry["command"],
        args=[*entry["args"], "--data-dir", str(data_dir)],
        env={**os.environ, "DREAMWELL_EMBEDDER": "none"},
    )


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_the_mcp_json_command_serves_every_tool_over_stdio(tmp_path: Path, mode: str) -> None:
    async with Client(from_mcp_json(tmp_path), mode=mode) as c:  # type: ignore[arg-type]
        assert len((await c.list_tools()).tools) == 8
        assert {p.name for p in (await c.list_prompts()).prompts} == {"recall", "dream"}
        await ok(c, "save_memory", content="started from mcp.json", category="setup")
        assert "mcp.json" in await ok(c, "search_memory", query="started")
        await ok(c, "save_to_working_memory", key="note", data="scratch")
        assert await ok(c, "get_from_working_memory", key="note") == "scratch"


async def test_the_embedded_model_serves_hybrid_recall_over_stdio(tmp_path: Path) -> None:
    params = from_mcp_json(tmp_path)
    params.env = {k: v for k, v in (params.env or {}).items() if k != "DREAMWELL_EMBEDDER"}
    async with Client(params) as c:
        await ok(c, "save_memory", content="The user is based in Chicago, Illinois")
        await ok(c, "save_memory", content="Deploys happen on Tuesdays")
        # the saves did not wait for their vectors: the background backfill brings them
        with anyio.fail_after(60):
            while True:
                found = await ok(c, "search_memory", query="which city does the person live in")
                lines = found.splitlines()
                if len(lines) > 2 and lines[2].endswith("The user is based in Chicago, Illinois"):
                    break
                await anyio.sleep(0.1)


INIT = initialize(0, "raw")
SURROGATE_CALL = (
    b'{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"save_to_working_memory",'
    b'"arguments":{"key":"k","data":"\\ud800"}}}'
)

NOT_UTF8_CALL = (  # raw bytes 0xff 0xfe: not UTF-8 at all (not an escape)
    b'{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"save_to_working_memory",'
    b'"arguments":{"key":"k","data":"bad \xff\xfe bytes"}}}'
)


@pytest.mark.parametrize(
    ("frame", "code", "request_id"),
    [
        (SURROGATE_CALL, -32700, 7),
        (NOT_UTF8_CALL, -32700, 7),
        (b"\xc3(", -32700, None),
        (b"{oops", -32700, None),
        (b"[1,2,3]", -32600, None),
        (b"\x00", -32700, None),
        (b'{"jsonrpc":"2.0","id":8}', -32600, 8),
    ],
)
async def test_every_malformed_stdio_frame_gets_an_error_reply_and_serving_goes_on(
    tmp_path: Path, frame: bytes, code: int, request_id: int | None
) -> None:
    params = from_mcp_json(tmp_path)
    process = await anyio.open_process([params.command, *params.args], env=params.env)
    assert process.stdin is not None and process.stdout is not None
    lines = TextReceiveStream(process.stdout)
    buffered = ""

    async def reply() -> dict[str, Any]:
        nonlocal buffered
        while "\n" not in buffered:
            buffered += await lines.receive()
        line, buffered = buffered.split("\n", 1)
        answer: dict[str, Any] = json.loads(line)
        return answer

    try:
        with anyio.fail_after(30):
            if request_id is None:  # before the handshake too: the era is not chosen yet
                await process.stdin.send(frame + b"\n")
                assert (await reply())["error"]["code"] == code
            await process.stdin.send(json.dumps(INIT).encode() + b"\n")
            assert (await reply())["id"] == 0
            await process.stdin.send(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')
            await process.stdin.send(frame + b"\n")
            error = await reply()
            assert error["id"] == request_id and error["error"]["code"] == code
            assert "Traceback" not in error["error"]["message"]
            await process.stdin.send(b'{"jsonrpc":"2.0","id":9,"method":"ping"}\n')
            assert await reply() == {"jsonrpc": "2.0", "id": 9, "result": {}}
    finally:
        process.kill()
        await process.aclose()


async def test_bytes_that_are_not_utf8_are_refused_in_words_and_nothing_is_stored(
    tmp_path: Path,
) -> None:
    """They used to be decoded to U+FFFD and stored silently."""
    params = from_mcp_json(tmp_path)
    process = await anyio.open_process([params.command, *params.args], env=params.env)
    assert process.stdin is not None and process.stdout is not None
    replies = TextReceiveStream(process.stdout)
    buffered = ""

    async def reply() -> dict[str, Any]:
        nonlocal buffered
        while "\n" not in buffered:
            buffered += await replies.receive()
        line, buffered = buffered.split("\n", 1)
        answer: dict[str, Any] = json.loads(line)
        return answer

    get = {"name": "get_from_working_memory", "arguments": {"key": "k"}}
    try:
        with anyio.fail_after(30):
            await process.stdin.send(json.dumps(INIT).encode() + b"\n")
            assert (await reply())["id"] == 0
            await process.stdin.send(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')
            await process.stdin.send(NOT_UTF8_CALL + b"\n")
            error = (await reply())["error"]
            assert error["message"].startswith(
                "Parse error: the frame is not valid UTF-8 (byte 0xff"
            )
            call = {"jsonrpc": "2.0", "id": 10, "method": "tools/call", "params": get}
            await process.stdin.send(json.dumps(call).encode() + b"\n")
            answer = await reply()
            assert answer["result"]["isError"] and "\ufffd" not in json.dumps(answer)
    finally:
        process.kill()
        await process.aclose()
