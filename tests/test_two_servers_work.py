"""Background work under two real `dreamwell serve` processes on one data directory: each
queued memory goes to the (scripted) LLM once, and no derived memory is made twice; and a
`dreamwell dream --once` killed with SIGKILL while a pass waits for the LLM leaves its input
logs byte for byte as they were, while a finished one drops exactly what it read."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client, StdioServerParameters

from dreamwell.dream.enrichment import queue_for
from dreamwell.stores import (
    CONVERSATION,
    FEEDBACK,
    RECALL,
    JsonlLog,
    LongTermStore,
    OllamaEmbedder,
)
from tests.support.calls import ok
from tests.support.fake_ollama import fake_ollama
from tests.support.fake_openai import Script, Slow, fake_openai

pytestmark = pytest.mark.anyio
MEMORY = re.compile(r"The memory \(id=([0-9a-f]+)\):\n(.*)")


def server(data: Path, url: str) -> StdioServerParameters:
    return StdioServerParameters(
        command=sys.executable,
        args=["-m", "dreamwell.server", "serve", "--data-dir", str(data)],
        env={
            **os.environ,
            "DREAMWELL_EMBEDDER": "none",
            "DREAMWELL_LLM_PROVIDER": "openai",
            "DREAMWELL_LLM_BASE_URL": url,
            "DREAMWELL_LLM_MODEL": "fake-model",
        },
    )


class Model:
    """Splits the memory it is asked about at " and " into two facts, counting the asks per
    memory id; a little slow, as a real model is, so the two servers' rounds overlap."""

    def __init__(self) -> None:
        self.asked: Counter[str] = Counter()
        self._lock = threading.Lock()

    def __call__(self, request: dict[str, Any]) -> str:
        found = MEMORY.search(request["messages"][-1]["content"])
        assert found is not None, request
        with self._lock:
            self.asked[found.group(1)] += 1
        time.sleep(0.25)  # the model thinking; both servers' loops are awake meanwhile
        facts = [
            {"content": part.strip(), "category": "people", "tags": []}
            for part in found.group(2).strip().split(" and ")
        ]
        return json.dumps({"facts": facts})


async def test_two_servers_enrich_each_queued_memory_once(tmp_path: Path) -> None:
    data, model, n = tmp_path / "data", Model(), 24
    with fake_openai(model) as (url, _script):
        async with Client(server(data, url)) as one, Client(server(data, url)) as two:
            for i in range(n):  # saved through both servers; both queue into one queue
                await ok(
                    (one, two)[i % 2],
                    "save_memory",
                    content=f"Person{i} moved to Lisbon in May 2025 and Person{i} leads "
                    f"the payments team number {i}",
                    category="people",
                )
            store = LongTermStore(data)
            with anyio.fail_after(120):  # both servers' loops drain the queue
                while queue_for(store).read() or len(model.asked) < n:
                    await anyio.sleep(0.05)
            await ok(one, "list_memory_categories")  # both still serving
            await ok(two, "list_memory_categories")
    assert sum(model.asked.values()) == n, f"{sum(model.asked.values())} LLM calls for {n} memories"
    assert set(model.asked.values()) == {1}
    derived = [e for e in LongTermStore(data).entries() if "derived_from" in e.metadata]
    contents = Counter(e.content for e in derived)
    assert len(derived) == 2 * n and max(contents.values()) == 1


def dream_once(data: Path, url: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "dreamwell.server", "dream", "--once", "--data-dir", str(data)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={
            **os.environ,
            "DREAMWELL_EMBEDDER": "none",
            "DREAMWELL_LLM_PROVIDER": "openai",
            "DREAMWELL_LLM_BASE_URL": url,
            "DREAMWELL_LLM_MODEL": "fake-model",
        },
    )


def seed_inputs(data: Path) -> dict[str, bytes]:
    """A memory, a logged Correction, a recall and a user turn: the input logs as they are."""
    store = LongTermStore(data)
    shown = store.save("the deploy script lives in tools/deploy.sh", "ops").entry
    JsonlLog(data, FEEDBACK).append(
        {"session": "s1", "kind": "Correction", "detail": "never force-push to main"}
    )
    JsonlLog(data, RECALL).append({"caller": "s1", "query": "deploy", "ids": [shown.id]})
    JsonlLog(data, CONVERSATION).append(
        {"session": "s1", "role": "user", "content": "I prefer tabs over spaces in Go code"}
    )
    return {name: (data / name).read_bytes() for name in (FEEDBACK, RECALL, CONVERSATION)}


def wait_for_request(script: Script, count: int = 1) -> None:
    deadline = time.monotonic() + 60
    while len(script.requests) < count:
        assert time.monotonic() < deadline, "the dream never asked the LLM"
        script.stop.wait(0.02)


def test_a_dream_killed_mid_pass_leaves_its_input_logs_as_they_were(tmp_path: Path) -> None:
    data = tmp_path / "data"
    before = seed_inputs(data)
    with fake_openai(Slow(120, "{}")) as (url, script), dream_once(data, url) as proc:
        try:
            wait_for_request(script)  # a pass is waiting for the model's answer
        finally:
            proc.send_signal(signal.SIGKILL)
            proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL
    assert {name: (data / name).read_bytes() for name in before} == before


def test_a_finished_dream_drops_what_it_read_and_keeps_what_came_meanwhile(
    tmp_path: Path,
) -> None:
    data = tmp_path / "data"
    seed_inputs(data)
    late = {"session": "s2", "role": "user", "content": "a turn said while the dream ran"}

    def answer(request: dict[str, Any]) -> str:  # the user goes on talking meanwhile
        if not (data / "late").exists():
            (data / "late").touch()
            JsonlLog(data, CONVERSATION).append(late)
        # an empty plan in the question's own shape: every pass reads its inputs and runs
        schema = request["response_format"]["json_schema"]["schema"]
        return json.dumps({key: [] for key in schema.get("properties", {})})

    with fake_openai(answer) as (url, _script), dream_once(data, url) as proc:
        _out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err.decode()
    assert [
        {k: v for k, v in r.items() if k != "ts"} for r in JsonlLog(data, CONVERSATION).read()
    ] == [late]
    assert JsonlLog(data, RECALL).read() == []


def embedding_server(data: Path, host: str) -> StdioServerParameters:
    return StdioServerParameters(
        command=sys.executable,
        args=["-m", "dreamwell.server", "serve", "--data-dir", str(data)],
        env={**os.environ, "DREAMWELL_EMBEDDER": "ollama", "DREAMWELL_OLLAMA_HOST": host},
    )


async def test_two_servers_embed_each_saved_memory_once(tmp_path: Path) -> None:
    """Each server sees the other's saves (a tool call catches it up) and would backfill
    their vectors too; `backfill.lock` lets one embed while the other waits for its log."""
    data, n = tmp_path / "data", 60
    with fake_ollama() as (host, script):
        async with (
            Client(embedding_server(data, host)) as one,
            Client(embedding_server(data, host)) as two,
        ):
            for i in range(n):
                await ok((one, two)[i % 2], "save_memory", content=f"memo{i} about topic{i}")
                await ok((one, two)[(i + 1) % 2], "list_memory_categories")
            store = LongTermStore(data, embedder=OllamaEmbedder(host, "nomic-embed-text", 10))
            store.load_vectors()
            with anyio.fail_after(60):  # every vector is in the log
                while store.missing_vectors():
                    await ok(one, "list_memory_categories")
                    await ok(two, "list_memory_categories")
    embedded = Counter(
        text
        for r in script.requests
        if r["path"] == "/api/embed"
        for text in r.get("input") or []
        if "about topic" in text
    )
    assert len(embedded) == n and sum(embedded.values()) == n, embedded.most_common(3)
