"""server/mcp/handshake.py answers the handshake before the SDK is loaded: its replies must be
exactly the SDK's (the SDK reads the same frames again once loaded, and its own replies to
them are dropped), and it leaves to the SDK whatever it does not recognise."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from dreamwell.server.mcp import handshake
from tests.support.calls import initialize
from tests.support.wire import CLAUDE_CODE, sdk_answers

pytestmark = pytest.mark.anyio


def _at(version: str) -> dict[str, Any]:
    frame = initialize(3)
    frame["params"]["protocolVersion"] = version
    return frame


@pytest.mark.parametrize(
    "frame",
    [
        CLAUDE_CODE.discover("server-discover-probe-1"),
        CLAUDE_CODE.discover(0),
        CLAUDE_CODE.initialize(0),
        _at("2024-11-05"),
        _at("2025-06-18"),
        _at("2031-01-01"),  # a version it does not know: the SDK offers its latest
    ],
    ids=["claude-code-probe", "discover", "claude-code-initialize", "2024", "2025-06", "unknown"],
)
async def test_the_early_reply_is_the_sdks_own(tmp_path: Path, frame: dict[str, Any]) -> None:
    assert handshake.reply(frame) == (await sdk_answers(tmp_path, frame))[0]


async def test_the_early_acknowledgement_of_a_listen_is_the_sdks_own(tmp_path: Path) -> None:
    probe, listen = CLAUDE_CODE.discover(0), CLAUDE_CODE.listen("listen:0")
    written = await sdk_answers(tmp_path, probe, listen)
    assert handshake.acknowledgement(listen) == written[1]


@pytest.mark.parametrize(
    "frame",
    [
        {"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": {}},
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 5}},
        {**initialize(1), "extra": True},
        {**initialize(1), "id": True},
        {"jsonrpc": "2.0", "method": "initialize", "params": initialize(1)["params"]},
        {"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
        [initialize(1)],
        "initialize",
    ],
)
def test_anything_but_a_plain_handshake_is_left_to_the_sdk(frame: Any) -> None:
    assert handshake.reply(frame) is None
    assert handshake.acknowledgement(frame) is None
