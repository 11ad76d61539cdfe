"""Each call's project (docs/projects.md) over MCP: the client's roots, a change of roots, the
pinned setting, the server's working directory; saves record it, searches and `recall` see their
project's memories and global ones, never another project's."""

from __future__ import annotations

import re
import warnings
from pathlib import Path

import anyio
import pytest
from mcp import Client
from mcp.shared.exceptions import MCPDeprecationWarning, MCPError

from dreamwell.server.config import Settings
from dreamwell.server.mcp.app import build_server
from dreamwell.server.runtime import Runtime
from dreamwell.stores import NEW, PROJECT, PROJECT_NAME, LongTermStore, SkillCatalog, SkillChange
from tests.support.calls import ok
from tests.support.repos import Roots, make_repo, two_projects

pytestmark = pytest.mark.anyio

ID = re.compile(r"\[([0-9a-f]{12})\]")


@pytest.fixture
def outside(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The server process runs in a directory outside any repository."""
    here = tmp_path / "nowhere"
    here.mkdir()
    monkeypatch.chdir(here)
    return here


async def _save(client: Client, content: str, **args: object) -> str:
    found = ID.search(await ok(client, "save_memory", content=content, **args))
    assert found
    return found.group(1)


async def test_a_project_s_search_and_recall_never_show_another_project_s_memories(
    tmp_path: Path, outside: Path
) -> None:
    shop, billing = two_projects(tmp_path)
    server = build_server(Settings(data_dir=tmp_path / "data", embedder="none"))
    in_shop, in_billing = Roots(shop), Roots(billing)
    async with (
        Client(server, mode="legacy", list_roots_callback=in_shop.callback) as a,
        Client(server, mode="legacy", list_roots_callback=in_billing.callback) as b,
    ):
        mine = await _save(a, "Deploy with make deploy-shop")
        theirs = await _save(b, "Deploy with kubectl apply -f billing.yaml")
        pref = await _save(
            b, "The user wants short deploy notes", category="user-preferences/style"
        )
        found = await ok(a, "search_memory", query="deploy")
        assert mine in found and pref in found and theirs not in found
        recent = await ok(a, "search_memory")
        assert theirs not in recent and mine in recent
        prompt = await a.get_prompt("recall", {"message": "how do we deploy?"})
        text = prompt.messages[0].content.text  # type: ignore[union-attr]
        assert mine in text and theirs not in text
    assert in_shop.asked == 1  # asked once per connection, not per call
    store = LongTermStore(tmp_path / "data")
    assert store.get(mine).metadata == {PROJECT: "github.com/acme/shop", PROJECT_NAME: "shop"}  # type: ignore[union-attr]
    assert PROJECT not in store.get(pref).metadata  # type: ignore[union-attr]


async def test_a_change_of_roots_moves_the_caller_to_the_new_project(
    tmp_path: Path, outside: Path
) -> None:
    shop, billing = two_projects(tmp_path)
    roots = Roots(shop)
    async with Client(
        build_server(Settings(data_dir=tmp_path / "data", embedder="none")),
        mode="legacy",
        list_roots_callback=roots.callback,
    ) as client:
        in_shop = await _save(client, "run the tests with pytest -q")
        roots.folders = [billing]
        with warnings.catch_warnings():  # roots are deprecated only from 2026-07-28 on
            warnings.simplefilter("ignore", MCPDeprecationWarning)
            await client.send_roots_list_changed()
        with anyio.fail_after(10):  # a notification has no answer: until it was handled
            while in_shop in await ok(client, "search_memory", query="tests"):
                await anyio.sleep(0.01)
        in_billing = await _save(client, "run the tests with go test ./...")
        found = await ok(client, "search_memory", query="tests")
        assert in_billing in found and in_shop not in found


async def test_with_no_project_a_caller_sees_everything_and_saves_globally(
    tmp_path: Path, outside: Path
) -> None:
    shop, _ = two_projects(tmp_path)
    data = tmp_path / "data"
    async with Client(
        build_server(Settings(data_dir=data, embedder="none")),
        mode="legacy",
        list_roots_callback=Roots(shop).callback,
    ) as a:
        mine = await _save(a, "Deploy with make deploy-shop")
    async with Client(build_server(Settings(data_dir=data, embedder="none"))) as nowhere:
        plain = await _save(nowhere, "Deploy notes live in the wiki")
        found = await ok(nowhere, "search_memory", query="deploy")
        assert mine in found and plain in found
    assert LongTermStore(data).get(plain).metadata == {}  # type: ignore[union-attr]


async def test_without_roots_the_server_s_working_directory_is_the_project(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    shop, billing = two_projects(tmp_path)
    data = tmp_path / "data"
    monkeypatch.chdir(billing)
    async with Client(build_server(Settings(data_dir=data, embedder="none"))) as b:
        theirs = await _save(b, "Deploy with kubectl")
    monkeypatch.chdir(shop)
    async with Client(build_server(Settings(data_dir=data, embedder="none"))) as a:
        mine = await _save(a, "Deploy with make")
        found = await ok(a, "search_memory", query="deploy")
        assert mine in found and theirs not in found


async def test_a_pinned_project_wins_over_the_roots(tmp_path: Path, outside: Path) -> None:
    shop, billing = two_projects(tmp_path)
    settings = Settings(data_dir=tmp_path / "data", embedder="none", project=str(billing))
    async with Client(
        build_server(settings), mode="legacy", list_roots_callback=Roots(shop).callback
    ) as client:
        saved = await _save(client, "Deploy with kubectl")
    entry = LongTermStore(tmp_path / "data").get(saved)
    assert entry is not None and entry.metadata[PROJECT] == "github.com/acme/billing"


async def test_categories_named_global_are_seen_from_every_project(
    tmp_path: Path, outside: Path
) -> None:
    shop, billing = two_projects(tmp_path)
    settings = Settings(data_dir=tmp_path / "data", embedder="none", global_categories="team")
    runtime = Runtime(settings)
    server = build_server(settings, runtime)
    async with (
        Client(server, mode="legacy", list_roots_callback=Roots(shop).callback) as a,
        Client(server, mode="legacy", list_roots_callback=Roots(billing).callback) as b,
    ):
        team = await _save(a, "Reviews need two approvals", category="team/reviews")
        person = await _save(a, "Ana owns the release calendar", category="people/ana")
        assert team in await ok(b, "search_memory", query="reviews approvals")
        assert person in await ok(b, "search_memory", query="release calendar")


async def test_the_same_text_in_two_projects_is_two_memories(tmp_path: Path, outside: Path) -> None:
    shop, billing = two_projects(tmp_path)
    server = build_server(Settings(data_dir=tmp_path / "data", embedder="none"))
    async with (
        Client(server, mode="legacy", list_roots_callback=Roots(shop).callback) as a,
        Client(server, mode="legacy", list_roots_callback=Roots(billing).callback) as b,
    ):
        first = await ok(a, "save_memory", content="Run make check before pushing")
        other = await ok(b, "save_memory", content="Run make check before pushing")
        again = await ok(a, "save_memory", content="run make check before pushing.")
    assert other.startswith("Saved memory") and ID.search(first).group(1) != ID.search(other).group(
        1
    )  # type: ignore[union-attr]
    assert again.startswith("Reinforced memory") and ID.search(first).group(1) in again  # type: ignore[union-attr]


def _project_skill(data: Path, name: str, project: str | None) -> None:
    md = f"---\nname: {name}\ndescription: How to release {name}\n---\n\nRun make release.\n"
    SkillCatalog(data).apply(
        [SkillChange(name, NEW, {"SKILL.md": md.encode()}, status="active", project=project)]
    )


async def test_a_project_s_skill_is_served_only_to_callers_in_that_project(
    tmp_path: Path, outside: Path
) -> None:
    shop, billing = two_projects(tmp_path)
    data = tmp_path / "data"
    _project_skill(data, "billing-release", "github.com/acme/billing")
    _project_skill(data, "any-release", None)
    server = build_server(Settings(data_dir=data, embedder="none"))
    async with (
        Client(server, mode="legacy", list_roots_callback=Roots(shop).callback) as a,
        Client(server, mode="legacy", list_roots_callback=Roots(billing).callback) as b,
    ):
        in_shop = {p.name for p in (await a.list_prompts()).prompts}
        in_billing = {p.name for p in (await b.list_prompts()).prompts}
        assert "billing-release" in in_billing and "any-release" in in_billing
        assert "billing-release" not in in_shop and "any-release" in in_shop
        shop_files = {str(r.uri) for r in (await a.list_resources()).resources}
        assert "skill://billing-release/SKILL.md" not in shop_files
        with pytest.raises(MCPError):
            await a.read_resource("skill://billing-release/SKILL.md")
        recalled = await a.get_prompt("recall", {"message": "how to release billing"})
        assert "billing-release" not in recalled.messages[0].content.text  # type: ignore[union-attr]
        recalled = await b.get_prompt("recall", {"message": "how to release billing"})
        assert "billing-release" in recalled.messages[0].content.text  # type: ignore[union-attr]


async def test_a_repository_with_a_malformed_remote_is_no_project_and_every_tool_works(
    tmp_path: Path, outside: Path
) -> None:
    """qa-turn5 LOW 11: a remote `https://[bad/acme/x` made every tool call started there fail
    with the bare "Error executing tool save_memory"."""
    bad = make_repo(tmp_path / "bad", {"origin": "https://[bad/acme/x"})
    data = tmp_path / "data"
    async with Client(
        build_server(Settings(data_dir=data, embedder="none")),
        mode="legacy",
        list_roots_callback=Roots(bad).callback,
    ) as client:
        saved = await _save(client, "Deploy the bad repository with make ship")
        assert saved in await ok(client, "search_memory", query="deploy ship")
        await ok(client, "save_to_working_memory", key="draft", data="scratch")
    assert LongTermStore(data).get(saved).metadata == {}  # type: ignore[union-attr]
