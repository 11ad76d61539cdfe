"""search_memory and the recall prompt over MCP with the shipped e5 embedder (issue 44):
gibberish finds nothing ("No memories found…", where it was "Found 20 memory entries"),
and the recall prompt injects no unrelated memory."""

from __future__ import annotations

from pathlib import Path

import pytest
from mcp import Client

from dreamwell.server.config import Settings
from dreamwell.server.mcp.app import build_server
from dreamwell.server.runtime import Runtime
from dreamwell.stores import LongTermStore, OnnxE5
from tests.support.calls import ok
from tests.support.everyday import everyday_memories

pytestmark = pytest.mark.anyio

NOTHING = "No memories found matching the search criteria."


async def test_gibberish_finds_nothing_over_mcp_with_e5(tmp_path: Path) -> None:
    data = tmp_path / "data"
    store = LongTermStore(data, embedder=OnnxE5())
    for content, category in everyday_memories():
        store.save(content, category, caller="assistant")
    while store.backfill(batch=256):
        pass
    store.checkpoint()
    settings = Settings(data_dir=data, embedder="e5")
    runtime = Runtime(settings)
    tenant = await runtime.tenant()
    tenant.longterm.load_vectors()  # what the server's background loop does after start-up
    async with Client(build_server(settings, runtime)) as client:
        found = await ok(client, "search_memory", query="Who is allergic to peanuts?")
        assert found.startswith("Found ") and "allergic to peanuts" in found
        for query in ("qwertyuiopasdf", "lorem ipsum dolor sit amet"):
            assert await ok(client, "search_memory", query=query) == NOTHING
        # the first turn with no hit shows the newest memories (docs/recall.md); after it, a message
        # nothing answers recalls nothing
        await client.get_prompt("recall", {"message": "who plays tennis?"})
        prompt = await client.get_prompt("recall", {"message": "lorem ipsum dolor sit amet"})
        text = prompt.messages[0].content.text  # type: ignore[union-attr]
        assert "relevant to this message" not in text, text
