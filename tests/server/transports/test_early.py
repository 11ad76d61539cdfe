"""Start fast (docs/claude-code.md#starting-fast): `dreamwell serve` answers the handshake before it
loads the MCP SDK or any store library, accepts the `initialize` Claude Code falls back to after a
probe it gave up on, and a server that cannot start says why in its answer to the handshake.

Each test runs the exact command of mcp.json over stdio. How fast is measured in
tests/bench/claude_code_bench.py, not here."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from tests.support.wire import CLAUDE_CODE, INIT, INITIALIZED, Wire, as_another_user

pytestmark = pytest.mark.anyio

LOADED = re.compile(r"answered the handshake before loading the server; of (.+), loaded then: (.+)")
PROBE = "server-discover-probe-1"


async def test_the_handshake_is_answered_before_the_sdk_or_any_store_library_is_loaded(
    tmp_path: Path,
) -> None:
    """The server logs which of the MCP SDK, LanceDB, pyarrow, onnxruntime, numpy and Tantivy
    it had loaded when its first reply went out; the line exists only when the reply was
    written before the SDK took over. Claude Code's whole opening is answered, and nothing
    twice (the SDK reads the same frames again once loaded)."""
    async with Wire(tmp_path / "data", "--log-level", "INFO") as wire:
        await wire.send_json(CLAUDE_CODE.discover(PROBE))
        found = await wire.reply()
        assert found["id"] == PROBE and found["result"]["supportedVersions"] == ["2026-07-28"]
        listen = CLAUDE_CODE.listen("listen:0")
        await wire.send_json(listen, CLAUDE_CODE.discover(0), CLAUDE_CODE.request(1, "tools/list"))
        ack = await wire.reply()
        assert ack["method"] == "notifications/subscriptions/acknowledged"
        assert ack["params"]["_meta"] == {"io.modelcontextprotocol/subscriptionId": "listen:0"}
        frames = [await wire.reply() for _ in range(2)]
        while "result" not in frames[-1] or "tools" not in frames[-1]["result"]:
            frames.append(await wire.reply())
        rest = frames + await wire.close()
    assert [f.get("id") for f in rest if "id" in f and f.get("id") != "listen:0"] == [0, 1]
    assert len(frames[-1]["result"]["tools"]) == 8
    # once the SDK has taken the listen over, what changed while it loaded is announced once
    # on that stream (the client was told it listens before the server could hear)
    announced = [f for f in rest if "method" in f]
    assert all(
        f["method"].endswith("/list_changed")
        and f["params"]["_meta"] == {"io.modelcontextprotocol/subscriptionId": "listen:0"}
        for f in announced
    ), announced
    assert len(announced) == len({f["method"] for f in announced})  # each kind once
    logged = LOADED.search(wire.stderr())
    assert logged is not None, wire.stderr()
    watched = "mcp, lancedb, pyarrow, onnxruntime, numpy, tantivy, pydantic, dreamwell.stores"
    assert logged.group(1) == watched
    # a first start (no lists kept) waits for its settings to be read, and for nothing else
    assert set(logged.group(2).split(", ")) <= {"pydantic", "dreamwell.stores"}, logged.group(2)


async def test_an_initialize_after_an_abandoned_discover_is_accepted(tmp_path: Path) -> None:
    """Claude Code probes with `server/discover`, gives up after ~2.8 s and sends
    `initialize` without waiting for the probe's answer; that `initialize` was refused with
    -32022 ("connection is serving the 2026-07-28 protocol"). The client chose the 2025
    handshake: the connection serves it."""
    async with Wire(tmp_path / "data") as wire:
        await wire.send_json(CLAUDE_CODE.discover(PROBE), CLAUDE_CODE.initialize(0))
        answers = {a["id"]: a for a in [await wire.reply(), await wire.reply()]}
        assert answers[0]["result"]["protocolVersion"] == "2025-11-25", answers[0]
        tools_list = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
        await wire.send_json(INITIALIZED, tools_list)
        assert len((await wire.reply())["result"]["tools"]) == 8
        save = {"name": "save_memory", "arguments": {"content": "Fell back and saved"}}
        await wire.call(2, save)
        saved = await wire.reply()
        assert saved["id"] == 2 and not saved["result"]["isError"], saved


def _file(data: Path) -> tuple[dict[str, str], tuple[str, ...], str]:
    data.write_text("not a directory")
    return {}, (), f"the data directory {data} is a file, not a directory"


def _unreadable(data: Path) -> tuple[dict[str, str], tuple[str, ...], str]:
    data.mkdir()
    data.chmod(0)
    return {}, as_another_user(), "cannot be read by this user (Permission denied)"


def _bad_setting(data: Path) -> tuple[dict[str, str], tuple[str, ...], str]:
    """A setting that cannot take its default instead: a damaged tokens file (a server with
    fewer tenants than configured must not start). Other bad values take their default and
    the server starts (tests/server/test_settings_file.py)."""
    tokens = data.parent / "tokens.json"
    tokens.write_text("{oops")
    return {"DREAMWELL_TOKENS_FILE": str(tokens)}, (), f"tokens file {tokens} is not valid JSON"


@pytest.mark.parametrize("case", [_file, _unreadable, _bad_setting], ids=lambda c: c.__name__)
async def test_a_server_that_cannot_start_answers_the_handshake_with_the_cause(
    tmp_path: Path, case: Any
) -> None:
    """It used to leave with a closed connection ("File exists", a bad setting) or answer
    `initialize` with `[Errno 13] …/remote.json` (code 0) and a traceback. Now every request
    gets one error naming the cause, and stderr holds one line. On a machine too loaded to
    check the data directory or read the settings within the handshake's hold
    (server/transports/early.py), the handshake is answered and the next request says why."""
    data = tmp_path / "data"
    env, prefix, cause = case(data)
    try:
        async with Wire(data, env=env, prefix=prefix) as wire:
            await wire.send_json(INIT)
            answer = await wire.reply()
            if "result" in answer:  # a machine too loaded to judge within the hold
                await wire.send_json(INITIALIZED, {"jsonrpc": "2.0", "id": 1, "method": "ping"})
                answer = await wire.reply()
            error = answer["error"]
            assert error["code"] == -32603 and error["message"].startswith(
                "dreamwell cannot start: "
            )
            assert cause in error["message"]
            await wire.close()
            assert wire.returncode in (1, 2)
    finally:
        if data.is_dir():
            data.chmod(0o755)
    assert wire.stderr().splitlines() == [f"dreamwell: {error['message'][24:]}"]
