"""save_memory enrichment: with an LLM configured, a saved note is queued (the reply never
waits), expanded in the background into atomic facts with derived_from, the original archived
only when covered; reported and undoable; a user edit meanwhile wins; the queue survives a
restart; without an LLM nothing is queued."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from mcp import Client

from dreamwell.dream import undo
from dreamwell.dream.enrichment import enrich_queued, queue_for
from dreamwell.dream.llm import OpenAILLM
from dreamwell.server.config import Settings
from dreamwell.server.mcp.app import build_server
from dreamwell.stores import LongTermStore
from tests.support.calls import ok
from tests.support.fake_openai import fake_openai

pytestmark = pytest.mark.anyio

NOTE = "Priya moved to Berlin in May 2025 and she leads the payments team"
FACTS = json.dumps(
    {
        "facts": [
            {"content": "Priya moved to Berlin in May 2025", "category": "people", "tags": []},
            {"content": "Priya leads the payments team", "category": "people", "tags": []},
        ]
    }
)


def settings(data: Path, url: str) -> Settings:
    return Settings(
        data_dir=data, embedder="none", llm_provider="openai", llm_base_url=url, llm_model="m"
    )


async def test_a_saved_note_is_expanded_archived_when_covered_and_undoable(tmp_path: Path) -> None:
    with fake_openai(FACTS) as (url, _script):
        async with Client(build_server(settings(tmp_path, url))) as client:
            saved = await ok(client, "save_memory", content=NOTE, category="people")
        store = LongTermStore(tmp_path)
        original = store.entries()[0]
        assert original.id in saved and [r["id"] for r in queue_for(store).read()] == [original.id]
        before = {e.id: e for e in store.entries(include_archived=True)}
        report = enrich_queued(LongTermStore(tmp_path), OpenAILLM(url, "m", 10))
    assert report is not None and queue_for(store).read() == []
    live = {e.content: e for e in LongTermStore(tmp_path).entries()}
    assert set(live) == {"Priya moved to Berlin in May 2025", "Priya leads the payments team"}
    assert all(e.metadata["derived_from"] == original.id for e in live.values())
    assert not LongTermStore(tmp_path).get(original.id).live  # type: ignore[union-attr]
    undo(LongTermStore(tmp_path), report.run)
    assert {e.id: e for e in LongTermStore(tmp_path).entries(include_archived=True)} == before


async def test_an_edit_before_the_enrichment_wins(tmp_path: Path) -> None:
    store = LongTermStore(tmp_path)
    entry = store.save(NOTE, "people").entry
    queue_for(store).append({"id": entry.id})

    def edit_meanwhile(_request: object) -> str:  # the user edits while the LLM thinks
        LongTermStore(tmp_path).apply([replace(entry, importance=0.9)])
        return FACTS

    with fake_openai(edit_meanwhile) as (url, _script):
        report = enrich_queued(LongTermStore(tmp_path), OpenAILLM(url, "m", 10))
    assert report is not None and report.changes() == []
    assert any("conflict" in n for p in report.passes for n in p.notes)
    assert [e.content for e in LongTermStore(tmp_path).entries()] == [NOTE]


async def test_the_queue_survives_a_restart_and_nothing_is_queued_without_an_llm(
    tmp_path: Path,
) -> None:
    async with Client(build_server(Settings(data_dir=tmp_path, embedder="none"))) as client:
        await ok(client, "save_memory", content=NOTE)
    assert queue_for(LongTermStore(tmp_path)).read() == []
    with fake_openai(FACTS) as (url, _script):
        async with Client(build_server(settings(tmp_path / "b", url))) as client:
            await ok(client, "save_memory", content=NOTE + " (again)")
    # a new process finds the pending work where the old one left it
    assert len(queue_for(LongTermStore(tmp_path / "b")).read()) == 1
