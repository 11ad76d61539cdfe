"""Two real stdio server processes on one data directory, and a process killed mid-write."""

from __future__ import annotations

import json
import logging
import os
import random
import re
import signal
import subprocess
import sys
from pathlib import Path

import anyio
import pytest
from mcp import Client

from dreamwell.stores import LongTermStore
from tests.support import mixed_load
from tests.support.calls import initialize, ok
from tests.support.servers import stdio_params

pytestmark = pytest.mark.anyio
logger = logging.getLogger(__name__)


async def visible(client: Client, query: str, needle: str) -> None:
    """Wait (at most 1 s) until a search in `client` returns `needle`."""
    with anyio.fail_after(1.0):
        while needle not in await ok(client, "search_memory", query=query):
            await anyio.sleep(0.01)


async def test_two_servers_on_one_data_dir_see_every_write_within_a_second(tmp_path: Path) -> None:
    data = tmp_path / "data"
    async with Client(stdio_params(data)) as one, Client(stdio_params(data)) as two:
        clients = (one, two)
        for client in clients:  # both have opened their stores before the clock starts
            await ok(client, "list_memory_categories")
        for i in range(200):
            writer, reader = clients[i % 2], clients[(i + 1) % 2]
            await ok(writer, "save_memory", content=f"shared fact number{i}", category="mp")
            await visible(reader, f"number{i}", f"shared fact number{i}")
        for client in clients:
            assert await ok(client, "list_memory_categories") == "Memory categories:\n- mp (200)"
    assert len(LongTermStore(data).entries()) == 200


def _rpc(proc: subprocess.Popen[bytes], message: dict[str, object]) -> None:
    assert proc.stdin is not None
    proc.stdin.write((json.dumps(message) + "\n").encode())
    proc.stdin.flush()


@pytest.mark.parametrize("round_", range(5))
def test_a_server_killed_during_1000_pipelined_saves_keeps_every_acknowledged_one(
    tmp_path: Path, round_: int
) -> None:
    """kill -9 lands while hundreds of saves are in flight: every acknowledged save is
    present exactly once and searchable by its own token after a restart, and the
    unacknowledged ones are present at most once."""
    data = tmp_path / "data"
    acked: dict[str, str] = {}  # id -> its unique token
    with subprocess.Popen(
        [sys.executable, "-m", "dreamwell.server", "serve", "--data-dir", str(data)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "DREAMWELL_EMBEDDER": "none"},
    ) as proc:
        _rpc(proc, initialize(0, "kill-test"))
        assert proc.stdout is not None
        assert b'"id":0' in proc.stdout.readline()
        _rpc(proc, {"jsonrpc": "2.0", "method": "notifications/initialized"})
        for i in range(1, 1001):  # pipelined: many writes are in flight when the kill lands
            _rpc(
                proc,
                {
                    "jsonrpc": "2.0",
                    "id": i,
                    "method": "tools/call",
                    "params": {
                        "name": "save_memory",
                        "arguments": {"content": f"durable fact tok{round_}x{i}z"},
                    },
                },
            )
        stop_after = 150 + 150 * round_  # kill at a different point each round
        while len(acked) < stop_after:
            reply = json.loads(proc.stdout.readline())
            text = reply.get("result", {}).get("content", [{}])[0].get("text", "")
            match = re.search(r"Saved memory \[([0-9a-f]{12})\]", text)
            if match:
                acked[match.group(1)] = f"tok{round_}x{reply['id']}z"
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
    store = LongTermStore(data)
    entries = store.entries()
    contents = [e.content for e in entries]
    assert len(contents) == len(set(contents)), "a save is present twice"
    ids = {e.id for e in entries}
    assert set(acked) <= ids, f"lost {len(set(acked) - ids)} acknowledged saves"
    for entry_id, token in acked.items():  # first; its neighbours follow (contextual)
        assert next(h.entry.id for h in store.search(token)) == entry_id
    store.save("after the crash")
    assert [h.entry.content for h in store.search("crash")] == ["after the crash"]


async def test_two_servers_and_a_dream_sidecar_keep_every_acked_save_once_and_the_index_in_step(
    tmp_path: Path,
) -> None:
    """10,000 mixed operations pipelined over two stdio servers on one data directory (one
    of them stopped and started again mid-run) while a third process dreams over and over:
    every acknowledged, undeleted save is present exactly once, no acknowledged delete comes
    back, the dream's merges, decay and pruning are exactly what its reports say, and after a
    checkpoint the Tantivy index agrees with LanceDB (each entry found by its unique token)."""
    data = tmp_path / "data"
    rng = random.Random(12)
    seeds = mixed_load.seed(data, rng, aged=400, pairs=50, harmful=200)
    load = mixed_load.Load(rng, seeds, total=10_000, restart_at=rng.randrange(3000, 7000))
    with anyio.fail_after(600):
        await mixed_load.run_load(data, load)
    restarts = load.counts.pop("server restart")
    assert load.counts.total() == load.total and restarts == 1
    facts = mixed_load.check(data, load)
    logger.info("%s", {**load.counts, **facts, "seconds": round(load.finished - load.started)})
