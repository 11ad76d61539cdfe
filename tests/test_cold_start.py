"""Cold start (issue 8): `dreamwell serve` answers the handshake and tools/list before it
imports a store library or the dream layer, and opens the stores only after that answer.

Not timed. The server runs from the exact mcp.json command with Python's import-time report
on (PYTHONPROFILEIMPORTTIME) and its stderr joined to its stdout, so the report's line for a
module (written when that module finishes importing) lands before or after the tools/list
reply in the order the two really happened. Then the test makes the server open its stores,
embed and dream, and checks that every module it watched does show up after the reply: the
report is on and the names are spelt right, so an empty "before" means something."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import anyio
import pytest
from anyio.abc import Process
from anyio.streams.buffered import BufferedByteReceiveStream

from dreamwell.stores import LongTermStore
from tests.support import ROOT
from tests.support.calls import initialize

pytestmark = pytest.mark.anyio
# What a tools/list must not wait for, each with what loads it once the session is under way.
AFTER_THE_HANDSHAKE = {
    "lancedb": "search_memory",
    "pyarrow": "search_memory",
    "numpy": "search_memory",
    "tantivy": "search_memory",
    "dreamwell.stores.longterm.store": "search_memory",
    "onnxruntime": "the embedder, loaded after the handshake",
    "dreamwell.dream": "the dream prompt",
    "dreamwell.dream.cycle": "the dream prompt",
    "httpx": "the dream prompt (its LLM client)",
}
# Only the remote transports load these; stdio never does. (starlette and uvicorn themselves
# are imported by the MCP SDK's own package __init__, whatever the transport.)
NEVER_ON_STDIO = ("dreamwell.server.transports.http", "dreamwell.server.ui.app")
# (the report's times go negative when two threads import at once; the names stay right)
IMPORTED = re.compile(rb"^import time:\s+-?\d+ \|\s+-?\d+ \| *(\S+)\s*$")
STORES_OPENED = b"opened stores in"


def handshake() -> bytes:
    messages: list[dict[str, Any]] = [
        initialize(1, "cold-start-test"),
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
    ]
    return b"".join(json.dumps(m).encode() + b"\n" for m in messages)


def request(rid: int, method: str, params: dict[str, Any]) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": rid, "method": method, "params": params}).encode()


def reply_id(line: bytes) -> int | None:
    if not line.startswith(b"{"):
        return None
    found = json.loads(line).get("id")
    return found if isinstance(found, int) else None


async def read_until(lines: BufferedByteReceiveStream, done: Any, seen: list[bytes]) -> list[bytes]:
    """Lines of the joined stdout/stderr, appended to `seen`, until `done(seen)`."""
    while not done(seen):
        seen.append(await lines.receive_until(b"\n", 1 << 22))
    return seen


def imported(lines: list[bytes]) -> set[str]:
    return {m.group(1).decode() for line in lines if (m := IMPORTED.match(line))}


async def start(data_dir: Path) -> Process:
    entry = json.loads((ROOT / "mcp.json").read_text())["mcpServers"]["dreamwell"]
    env = {k: v for k, v in os.environ.items() if not k.startswith("DREAMWELL_")}
    env |= {"PYTHONPROFILEIMPORTTIME": "1", "DREAMWELL_LOG_LEVEL": "INFO"}
    return await anyio.open_process(
        [entry["command"], *entry["args"], "--data-dir", str(data_dir)],
        env=env,
        stderr=subprocess.STDOUT,
    )


def test_the_watched_names_are_real_modules() -> None:
    for name in [*AFTER_THE_HANDSHAKE, *NEVER_ON_STDIO]:
        assert importlib.util.find_spec(name) is not None, name


async def test_tools_list_is_answered_before_the_stores_the_embedder_or_the_dream_load(
    tmp_path: Path,
) -> None:
    proc = await start(tmp_path)
    try:
        assert proc.stdin is not None and proc.stdout is not None
        lines = BufferedByteReceiveStream(proc.stdout)
        with anyio.fail_after(60):
            await proc.stdin.send(handshake())
            before = await read_until(lines, lambda s: s and reply_id(s[-1]) == 2, [])
        tools = json.loads(before[-1])["result"]["tools"]
        assert len(tools) == 8
        early = imported(before)
        assert {"mcp", "dreamwell.server.mcp.app", "dreamwell.stores"} <= early  # the report is on
        assert early & {*AFTER_THE_HANDSHAKE, *NEVER_ON_STDIO} == set()
        assert not any(STORES_OPENED in line for line in before)

        await proc.stdin.send(request(3, "tools/call", {"name": "search_memory"}) + b"\n")
        await proc.stdin.send(
            request(4, "prompts/get", {"name": "dream", "arguments": {"apply": "no"}}) + b"\n"
        )

        def all_loaded(seen: list[bytes]) -> bool:
            answered = {reply_id(line) for line in seen}
            return {3, 4} <= answered and set(AFTER_THE_HANDSHAKE) <= imported(seen)

        with anyio.fail_after(120):
            after = await read_until(lines, all_loaded, [])
        assert any(STORES_OPENED in line for line in after)
        assert imported(after) & set(NEVER_ON_STDIO) == set()
        await proc.stdin.aclose()
        with anyio.fail_after(30):
            await proc.wait()
    finally:
        if proc.returncode is None:
            proc.kill()
            with anyio.fail_after(10):
                await proc.wait()


class LoadingEmbedder:
    """An embedder whose model is still loading: every call waits until `loaded` is set, as
    the embedded ONNX models' calls wait on their load lock while the server warms them."""

    name = "loading-fake"
    dim = 4

    def __init__(self) -> None:
        self.loaded = threading.Event()

    @property
    def ready(self) -> bool:
        return self.loaded.is_set()

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        self.loaded.wait()
        return [[1.0, 0.0, 0.0, 0.0] for _ in texts]

    def embed_query(self, text: str) -> list[float]:
        return self.embed([text])[0]


def test_a_search_while_the_embedder_is_still_loading_answers_with_keywords(
    tmp_path: Path,
) -> None:
    ready = LoadingEmbedder()
    ready.loaded.set()
    first = LongTermStore(tmp_path, embedder=ready, embed_on_save=False)
    first.save("the harbour master keeps a logbook")
    assert first.backfill() == 1
    loading = LoadingEmbedder()  # the next start: vectors on disk, model not loaded yet
    store = LongTermStore(tmp_path, embedder=loading, wait_for_model=False)  # as the server
    store.load_vectors()  # what the server's backfill does first once the store is open
    found: list[str] = []
    worker = threading.Thread(
        target=lambda: found.extend(h.entry.content for h in store.search("harbour")),
        daemon=True,
    )
    worker.start()
    try:
        worker.join(timeout=5)
        assert not worker.is_alive(), "the search waited for the embedder's model to load"
        assert found == ["the harbour master keeps a logbook"]
    finally:
        loading.loaded.set()
        worker.join(timeout=30)
