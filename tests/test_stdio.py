"""The server as Claude Desktop and IDEs start it: the exact command in mcp.json, over stdio,
in both protocol eras."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from mcp import Client, StdioServerParameters

from tests.conftest import ok

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
        found = await ok(c, "search_memory", query="which city does the person live in")
        assert found.splitlines()[2].endswith("The user is based in Chicago, Illinois")
