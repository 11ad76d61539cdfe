"""No door crosses projects (docs/projects.md, issue 53 goal 4): from project A, another project's
memories, categories, report lines and skills are not listed, read, recalled or deleted,
through the categories tool, the dream report resource, `delete_memory` (another project's id
answers exactly as an unknown id) and the skills' prompts, resources and recall, a skill's
project coming from its import."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError

from dreamwell.dream.report import Change, PassResult, Report, save_report
from dreamwell.server.config import Settings
from dreamwell.server.mcp.app import build_server
from dreamwell.stores import LongTermStore, SkillCatalog, import_skills
from tests.support.calls import fails, ok
from tests.support.repos import Roots, two_projects
from tests.support.skill_samples import write_skill

pytestmark = pytest.mark.anyio

ID = re.compile(r"\[([0-9a-f]{12})\]")
BILLING = "github.com/acme/billing"


@pytest.fixture
def outside(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The server process runs in a directory outside any repository."""
    here = tmp_path / "nowhere"
    here.mkdir()
    monkeypatch.chdir(here)
    return here


async def _save(client: Client, content: str, category: str) -> str:
    found = ID.search(await ok(client, "save_memory", content=content, category=category))
    assert found
    return found.group(1)


def _text(prompt: object) -> str:
    return prompt.messages[0].content.text  # type: ignore[attr-defined,no-any-return]


async def test_categories_reports_and_deletes_never_cross_projects(
    tmp_path: Path, outside: Path
) -> None:
    shop, billing = two_projects(tmp_path)
    data = tmp_path / "data"
    settings = Settings(data_dir=data, embedder="none")
    async with (
        Client(
            build_server(settings), mode="legacy", list_roots_callback=Roots(shop).callback
        ) as a,
        Client(
            build_server(settings), mode="legacy", list_roots_callback=Roots(billing).callback
        ) as b,
    ):
        mine = await _save(a, "SHOPTOKEN deploy with make deploy-shop", "shoponly")
        theirs = await _save(b, "BILLINGTOKEN rotate the invoice keys", "billingonly")
        pref = await _save(b, "The user wants short answers", "user-preferences")
        categories = await ok(a, "list_memory_categories")
        assert "shoponly (1)" in categories and "user-preferences (1)" in categories
        assert "billingonly" not in categories, categories
        assert "billingonly (1)" in await ok(b, "list_memory_categories")

        unknown = await fails(a, "delete_memory", id="0123456789ab")
        refused = await fails(a, "delete_memory", id=theirs)
        assert refused == unknown.replace("0123456789ab", theirs)  # the same answer, word for word
        assert "BILLINGTOKEN" not in refused
        assert theirs in await ok(b, "search_memory", query="BILLINGTOKEN")  # still there

    store = LongTermStore(data)
    entries = {i: store.get(i) for i in (mine, theirs, pref)}
    assert all(entries.values())
    run = "20261206T120000Z-test"
    merged = [
        Change("merge", None, entries[theirs], (theirs,)),  # billing's text
        Change(
            "archive", entries[mine], replace(entries[mine], archived_at=entries[mine].created_at)
        ),  # type: ignore[arg-type]
        Change("score", entries[pref], entries[pref]),
    ]
    save_report(
        data, Report(run, "2026-12-06T12:00:00", False, None, [PassResult("merge", changes=merged)])
    )
    async with (
        Client(
            build_server(settings), mode="legacy", list_roots_callback=Roots(shop).callback
        ) as a,
        Client(
            build_server(settings), mode="legacy", list_roots_callback=Roots(billing).callback
        ) as b,
    ):
        seen = (await a.read_resource(f"dream://reports/{run}")).contents[0].text  # type: ignore[union-attr]
        assert "BILLINGTOKEN" not in seen and theirs not in seen, seen
        assert "SHOPTOKEN" in seen and pref in seen and "1 change(s)" in seen
        assert "BILLINGTOKEN" in (await b.read_resource(f"dream://reports/{run}")).contents[0].text  # type: ignore[union-attr]


async def test_an_imported_project_skill_is_served_only_in_its_project(
    tmp_path: Path, outside: Path
) -> None:
    shop, billing = two_projects(tmp_path)
    data = tmp_path / "data"
    md = (
        "---\nname: billing-deploy\ndescription: How to deploy the billing service\n"
        f"metadata:\n  dreamwell-project: {BILLING}\n---\n\nRun make deploy-billing.\n"
    )
    folder = write_skill(tmp_path / "exported", "billing-deploy", md)
    [imported] = import_skills(SkillCatalog(data), folder)
    assert imported.project == BILLING  # the import kept the skill's project
    settings = Settings(data_dir=data, embedder="none")
    async with (
        Client(
            build_server(settings), mode="legacy", list_roots_callback=Roots(shop).callback
        ) as a,
        Client(
            build_server(settings), mode="legacy", list_roots_callback=Roots(billing).callback
        ) as b,
    ):
        assert "billing-deploy" not in {p.name for p in (await a.list_prompts()).prompts}
        assert "billing-deploy" in {p.name for p in (await b.list_prompts()).prompts}
        uri = "skill://billing-deploy/SKILL.md"
        assert uri not in {str(r.uri) for r in (await a.list_resources()).resources}
        with pytest.raises(MCPError):
            await a.read_resource(uri)
        with pytest.raises(MCPError):
            await a.get_prompt("billing-deploy")
        asked = {"message": "how do I deploy the billing service"}
        assert "billing-deploy" not in _text(await a.get_prompt("recall", asked))
        assert "billing-deploy" in _text(await b.get_prompt("recall", asked))
