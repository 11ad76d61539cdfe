"""What feeds the dream over MCP, with the eight tools unchanged: the `recall` prompt records
each user message as the conversation log (per caller, bounded, a setting turns it off), and
`dreamwell dream` dreams the root store and every tenant, each with its own report."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

import pytest
from mcp import Client

from dreamwell.dream.report import list_reports
from dreamwell.server.config import Settings
from dreamwell.server.mcp.app import build_server
from dreamwell.stores import CONVERSATION, JsonlLog, LongTermStore, MemoryEntry, utcnow
from tests.support.cli import dreamwell

pytestmark = pytest.mark.anyio


async def test_the_recall_prompt_records_each_user_message_per_caller(tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path, embedder="none", namespace="session/alice")
    async with Client(build_server(settings)) as client:
        await client.get_prompt("recall", {"message": "No, don't use bullet points, I told you"})
        await client.get_prompt("recall", {"message": "   "})  # nothing to record
        await client.get_prompt("recall", {"message": "I prefer prose answers"})
    records = JsonlLog(tmp_path, CONVERSATION).read()
    assert [r["content"] for r in records] == [
        "No, don't use bullet points, I told you",
        "I prefer prose answers",
    ]
    assert all(r["session"] == "session/alice" and r["role"] == "user" and r["ts"] for r in records)


async def test_recording_the_conversation_can_be_turned_off(tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path, embedder="none", record_conversation=False)
    async with Client(build_server(settings)) as client:
        await client.get_prompt("recall", {"message": "keep this to yourself"})
    assert JsonlLog(tmp_path, CONVERSATION).read() == []


def test_the_conversation_log_is_bounded_and_keeps_the_newest_turns(tmp_path: Path) -> None:
    log = JsonlLog(tmp_path, CONVERSATION, max_bytes=20_000)
    for i in range(400):
        log.append({"session": "s", "role": "user", "content": f"turn {i:03d} " + "x" * 80})
    assert (tmp_path / CONVERSATION).stat().st_size <= 20_000 + 200
    kept = [r["content"][:8] for r in log.read()]
    assert kept[-1] == "turn 399" and "turn 000" not in kept
    assert kept == sorted(kept)  # the newest, in order, no torn lines


def old(i: int) -> MemoryEntry:
    when = utcnow() - timedelta(days=200)
    return MemoryEntry(f"{i:012d}", f"an old fact {i}", None, (), when, when, when)


def test_dream_once_dreams_the_root_store_and_every_tenant(tmp_path: Path) -> None:
    tenants = [tmp_path, tmp_path / "tenants" / "alice", tmp_path / "tenants" / "bob"]
    for i, data in enumerate(tenants):
        LongTermStore(data).apply([old(i)])
    done = dreamwell("dream", "--once", "--data-dir", str(tmp_path))
    assert done.returncode == 0, done.stderr
    assert "[tenant alice]" in done.stdout and "[root store]" in done.stdout
    for i, data in enumerate(tenants):
        assert len(list_reports(data)) == 1
        decayed = LongTermStore(data).get(f"{i:012d}")
        assert decayed is not None and decayed.importance < 0.5
    only = dreamwell("dream", "--once", "--tenant", "bob", "--data-dir", str(tmp_path))
    assert only.returncode == 0, only.stderr
    assert [len(list_reports(d)) for d in tenants] == [1, 1, 2]
    logged = dreamwell(
        "log", "conversation", "I like tea", "--tenant", "alice", "--data-dir", str(tmp_path)
    )
    assert logged.returncode == 0, logged.stderr
    assert json.loads((tenants[1] / CONVERSATION).read_text())["content"] == "I like tea"
    assert not (tmp_path / CONVERSATION).exists()
    bad = dreamwell("dream", "--once", "--tenant", "../x", "--data-dir", str(tmp_path))
    assert bad.returncode != 0 and "Traceback" not in bad.stderr


def test_reindex_rebuilds_every_store_and_a_cycle_reports_its_progress(tmp_path: Path) -> None:
    from dreamwell.dream import DreamOptions, run_cycle

    for i, data in enumerate([tmp_path, tmp_path / "tenants" / "alice"]):
        store = LongTermStore(data)
        store.apply([old(i)])
        store.checkpoint()
    done = dreamwell("reindex", "--data-dir", str(tmp_path))
    assert done.returncode == 0, done.stderr
    assert "reindexed root store: 1 memories" in done.stderr
    assert "reindexed tenant alice: 1 memories" in done.stderr
    for i, data in enumerate([tmp_path, tmp_path / "tenants" / "alice"]):
        reopened = LongTermStore(data)
        assert reopened.index_in_step() and reopened.search(f"old fact {i}")
    seen: list[str] = []
    run_cycle(
        LongTermStore(tmp_path), None, options=DreamOptions(quiet_seconds=0, progress=seen.append)
    )
    assert seen == [
        "skill-gap",
        "skill-consolidation",
        "skill-optimisation",
        "decay",
        "exact-duplicates",
        "consolidation",
        "anti-patterns",
        "preferences",
        "scoring",
        "pruning",
        "maintenance",
    ]
