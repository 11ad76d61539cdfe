"""The server as Claude Desktop and IDEs start it: the exact command in mcp.json, over stdio,
in both protocol eras."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import anyio
import pytest
from mcp import Client

from tests.support.calls import ok
from tests.support.servers import from_mcp_json
from tests.support.wire import INIT, INITIALIZED, Wire

pytestmark = pytest.mark.anyio


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


SURROGATE_CALL = (
    b'{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"save_to_working_memory",'
    b'"arguments":{"key":"k","data":"\\ud800"}}}'
)

NOT_UTF8_CALL = (  # raw bytes 0xff 0xfe: not UTF-8 at all (not an escape)
    b'{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"save_to_working_memory",'
    b'"arguments":{"key":"k","data":"bad \xff\xfe bytes"}}}'
)

# qa-turn5 LOW 9: 100k nested arrays in an argument ended the server (RecursionError)
NESTED_CALL = (
    b'{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"save_memory",'
    b'"arguments":{"content":' + b"[" * 100_000 + b"]" * 100_000 + b"}}}"
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
        (NESTED_CALL, -32700, None),
    ],
)
async def test_every_malformed_stdio_frame_gets_an_error_reply_and_serving_goes_on(
    tmp_path: Path, frame: bytes, code: int, request_id: int | None
) -> None:
    async with Wire(tmp_path) as wire:
        if request_id is None:  # before the handshake too: the era is not chosen yet
            await wire.send(frame)
            assert (await wire.reply())["error"]["code"] == code
        await wire.handshake()
        await wire.send(frame)
        error = await wire.reply()
        assert error["id"] == request_id and error["error"]["code"] == code
        assert "Traceback" not in error["error"]["message"]
        await wire.send(b'{"jsonrpc":"2.0","id":9,"method":"ping"}')
        assert await wire.reply() == {"jsonrpc": "2.0", "id": 9, "result": {}}


async def test_bytes_that_are_not_utf8_are_refused_in_words_and_nothing_is_stored(
    tmp_path: Path,
) -> None:
    """They used to be decoded to U+FFFD and stored silently."""
    get = {"name": "get_from_working_memory", "arguments": {"key": "k"}}
    async with Wire(tmp_path) as wire:
        await wire.handshake()
        await wire.send(NOT_UTF8_CALL)
        error = (await wire.reply())["error"]
        assert error["message"].startswith("Parse error: the frame is not valid UTF-8 (byte 0xff")
        await wire.call(10, get)
        answer = await wire.reply()
        assert answer["result"]["isError"] and "\ufffd" not in json.dumps(answer)


async def test_a_client_that_stops_reading_holds_up_its_replies_not_the_server(
    tmp_path: Path,
) -> None:
    """Replies are written from the event loop (server/transports/wire.py's PipeWriter). While the
    pipe is full because the client does not read, a reply waits for room without blocking the
    loop: a save sent meanwhile is still made, and every reply arrives whole once the client
    reads again (requests run at once, so replies come in the order they finish)."""
    big = "".join(f"{i:07d} " for i in range(40_000))  # 320 KB: five times a pipe's buffer
    save = {"name": "save_to_working_memory", "arguments": {"key": "big", "data": big}}
    get = {"name": "get_from_working_memory", "arguments": {"key": "big"}}
    marker = {"name": "save_to_working_memory", "arguments": {"key": "during", "data": "m4rk"}}
    async with Wire(tmp_path) as wire:
        await wire.handshake()
        await wire.call(1, save)
        assert not (await wire.reply())["result"]["isError"]
        for request_id in range(2, 6):  # 1.3 MB of replies, none read yet
            await wire.call(request_id, get)
        await wire.call(6, marker)
        segments = tmp_path / "working-memory"
        while not any("m4rk" in f.read_text() for f in segments.glob("*.json")):
            await anyio.sleep(0.05)  # the save is made while the replies before it wait
        answers = [await wire.reply() for _ in range(5)]  # each in a frame of its own
        texts = {a["id"]: a["result"]["content"][0]["text"] for a in answers}
        assert texts == {2: big, 3: big, 4: big, 5: big, 6: texts[6]}
        assert not any(a["result"]["isError"] for a in answers)


def test_a_file_for_stdin_and_stdout_is_served_as_the_sdk_serves_it(tmp_path: Path) -> None:
    """Only pipes and sockets are read and written from the event loop; a file is served
    through the SDK's worker threads, as before (`dreamwell serve < frames > replies`)."""
    frames = tmp_path / "frames"
    ping = {"jsonrpc": "2.0", "id": 3, "method": "ping"}
    frames.write_text("".join(json.dumps(f) + "\n" for f in (INIT, INITIALIZED, ping)))
    replies = tmp_path / "replies"
    params = from_mcp_json(tmp_path / "data")
    with frames.open("rb") as stdin, replies.open("wb") as stdout:
        done = subprocess.run(
            [params.command, *params.args], stdin=stdin, stdout=stdout, env=params.env, timeout=60
        )
    assert done.returncode == 0
    answers = [json.loads(line) for line in replies.read_text().splitlines()]
    assert [a["id"] for a in answers] == [0, 3] and answers[1]["result"] == {}
