"""The dream respects projects (docs/projects.md): no merge joins two projects' memories (exact
duplicates, LLM consolidation, supersession), a project's merged memory stays that project's,
and a skill learned only from one project's sessions belongs to that project."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

from dreamwell.dream import DreamOptions, run_cycle
from dreamwell.dream.passes import ConsolidationPlan, apply_plan, consolidation_prompts
from dreamwell.stores import (
    CONVERSATION,
    PROJECT,
    JsonlLog,
    LongTermStore,
    MemoryEntry,
    export_skills,
    utcnow,
)
from dreamwell.stores.skills.catalog import SkillCatalog
from tests.support.dreams import dream, model, new_skill
from tests.support.fake_openai import fake_openai

SHOP, BILLING = "github.com/acme/shop", "github.com/acme/billing"
NOW = utcnow()


def entry(i: str, text: str, project: str | None, days: int = 1) -> MemoryEntry:
    at = NOW - timedelta(days=days)
    meta = {PROJECT: project} if project else {}
    return MemoryEntry(i * 12, text, "deploy", (), at, at, at, metadata=meta)


def test_exact_duplicates_merge_within_a_project_and_never_across(tmp_path: Path) -> None:
    store = LongTermStore(tmp_path)
    store.apply(
        [
            entry("a", "Deploy with make ship", SHOP, 3),
            entry("b", "deploy with make ship.", SHOP, 2),
            entry("c", "Deploy with make ship", BILLING),
            entry("d", "Deploy with make ship", None),
        ]
    )
    run_cycle(store, None, options=DreamOptions(quiet_seconds=0))
    live = {e.metadata.get(PROJECT): e for e in store.entries()}
    assert sorted(live, key=str) == sorted([SHOP, BILLING, None], key=str)
    assert len(store.entries()) == 3
    assert live[SHOP].reinforcement_count == 2 and live[SHOP].metadata["merged_from"]
    assert live[BILLING].id == "c" * 12 and live[None].id == "d" * 12


def test_a_consolidation_prompt_never_shows_two_projects() -> None:
    mixed = [entry(f"{i:x}", f"deploy note {i}", [SHOP, BILLING, None][i % 3]) for i in range(9)]
    for vectors in (None, {e.id: [1.0, 0.0] for e in mixed}):
        for prompt in consolidation_prompts(mixed, vectors):
            assert len({e.metadata.get(PROJECT) for e in prompt}) == 1


def test_a_plan_merging_or_superseding_across_projects_is_refused() -> None:
    a, b = (
        entry("a", "Deploy with make ship", SHOP, 3),
        entry("b", "Deploy with make ship", BILLING),
    )
    plan = ConsolidationPlan.model_validate(
        {
            "toSave": [{"content": "Deploy with make ship", "sourceIds": [a.id, b.id]}],
            "toDelete": [{"id": a.id, "supersededBy": b.id}],
        }
    )
    changes, notes = apply_plan(plan, {a.id: a, b.id: b}, NOW)
    assert changes == []
    assert any("different projects" in n for n in notes)
    assert any("belongs to another project" in n for n in notes)


def _said(data: Path, session: str, text: str, project: str | None) -> None:
    record: dict[str, Any] = {"session": session, "role": "user", "content": text}
    JsonlLog(data, CONVERSATION).append(record | ({"project": project} if project else {}))


def test_a_skill_learned_from_one_project_s_sessions_is_that_project_s(tmp_path: Path) -> None:
    _said(tmp_path, "s1", "Cut a release of the billing service with make release", BILLING)
    _said(tmp_path, "s2", "Please cut the billing release again, make release as usual", BILLING)
    _said(tmp_path, "s3", "Cut a release of the shop with make release", SHOP)
    _said(tmp_path, "s4", "Cut the shop release, make release please", None)
    answer = {
        "toSave": [
            new_skill("cut-billing-release", ["s1", "s2"]),
            new_skill("cut-any-release", ["s3", "s4"]),
        ]
    }
    with fake_openai(model(gap=lambda _r: answer)) as (url, _):
        dream(tmp_path, url)
    skills = {s.name: s for s in SkillCatalog(tmp_path).list()}
    assert skills["cut-billing-release"].project == BILLING
    assert skills["cut-any-release"].project is None  # not one project's alone
    exported = tmp_path / "out"
    export_skills(
        SkillCatalog(tmp_path), exported, names=["cut-billing-release"], status="candidate"
    )
    text = (exported / "cut-billing-release" / "SKILL.md").read_text()
    assert f'dreamwell-project: "{BILLING}"' in text
