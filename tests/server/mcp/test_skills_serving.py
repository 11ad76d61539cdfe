"""Skills served to a client (docs/skills.md): prompts, skill:// resources, the Skills Extension,
the recall prompt's skills, usage recorded per caller session — through the in-memory client."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError
from mcp.types import Request
from pydantic import TypeAdapter

from dreamwell.server.config import Settings
from dreamwell.server.mcp.app import build_server
from dreamwell.stores import SkillCatalog, SkillUsage, import_skills
from tests.support.calls import ok
from tests.support.skill_samples import release_skill, simple_md, write_skill

pytestmark = pytest.mark.anyio


@pytest.fixture
def data(tmp_path: Path) -> Path:
    catalog = SkillCatalog(tmp_path / "data")
    import_skills(catalog, release_skill(tmp_path / "src"))
    folder = write_skill(tmp_path / "src2", "brew-tea", simple_md("brew-tea", "Steep green tea"))
    import_skills(catalog, folder, status="candidate")
    return tmp_path / "data"


async def raw(client: Client, method: str, **params: Any) -> dict[str, Any]:
    request = Request[dict[str, Any], str](method=method, params=params)
    return await client.session.send_request(request, TypeAdapter(dict[str, Any]))  # type: ignore[arg-type]


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_each_active_skill_is_a_prompt_and_its_files_are_resources(
    data: Path, mode: str
) -> None:
    settings = Settings(data_dir=data, embedder="none")
    async with Client(build_server(settings), mode=mode) as c:  # type: ignore[arg-type]
        prompts = {p.name: p for p in (await c.list_prompts()).prompts}
        assert {"recall", "dream", "cut-release"} <= prompts.keys()
        assert "brew-tea" not in prompts  # a candidate is served to no client
        assert [a.name for a in prompts["cut-release"].arguments or []] == ["task"]
        got = await c.get_prompt("cut-release", {"task": "ship 1.4.0"})
        text = got.messages[0].content.text  # type: ignore[union-attr]
        assert "scripts/bump.sh 1.4.0" in text and text.endswith("Task: ship 1.4.0")
        assert "skill://cut-release/scripts/bump.sh" in text
        uris = {str(r.uri) for r in (await c.list_resources()).resources}
        assert {
            "skill://cut-release/SKILL.md",
            "skill://cut-release/scripts/bump.sh",
            "skill://cut-release/assets/logo.png",
        } <= uris
        templates = (await c.list_resource_templates()).resource_templates
        assert "skill://{name}/SKILL.md" in [t.uri_template for t in templates]
        md = await c.read_resource("skill://cut-release/SKILL.md")
        assert md.contents[0].text.startswith("---\nname: cut-release")  # type: ignore[union-attr]
        logo = await c.read_resource("skill://cut-release/assets/logo.png")
        assert logo.contents[0].blob  # type: ignore[union-attr]
        with pytest.raises(MCPError, match=r"Unknown resource skill://brew-tea/SKILL\.md"):
            await c.read_resource("skill://brew-tea/SKILL.md")
        with pytest.raises(MCPError, match="one optional argument: task"):
            await c.get_prompt("cut-release", {"version": "1"})
    stats = SkillUsage(data).stats()
    assert stats.uses_30d == {"cut-release": 2}  # one prompt get, one SKILL.md read


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_the_skills_extension_is_declared_with_list_and_get(data: Path, mode: str) -> None:
    settings = Settings(data_dir=data, embedder="none")
    async with Client(build_server(settings), mode=mode) as c:  # type: ignore[arg-type]
        extensions = c.server_capabilities.extensions or {}
        # `capabilities.extensions` is a 2026-07-28 field: a 2025-11-25 handshake drops it,
        # and the methods are served all the same
        assert ("io.modelcontextprotocol/skills" in extensions) == (mode == "auto")
        assert c.server_capabilities.prompts and c.server_capabilities.prompts.list_changed
        listed = await raw(c, "skills/list")
        [entry] = listed["skills"]
        assert entry["uri"] == "skill://cut-release/SKILL.md"
        assert entry["frontmatter"]["license"] == "Apache-2.0"
        sizes = {r["uri"]: r["size"] for r in entry["resources"]}
        assert sizes["skill://cut-release/assets/logo.png"] == 1024
        assert all(r["digest"].startswith("sha256:") for r in entry["resources"])
        got = await raw(c, "skills/get", uri="skill://cut-release/SKILL.md")
        assert got["skill"] == entry
        with pytest.raises(MCPError, match="Unknown skill"):
            await raw(c, "skills/get", uri="skill://nope/SKILL.md")


async def test_recall_injects_relevant_skills_once_per_session(data: Path) -> None:
    settings = Settings(data_dir=data, embedder="none")
    async with Client(build_server(settings)) as c:
        first = await c.get_prompt("recall", {"message": "please ship a billing release"})
        text = first.messages[0].content.text  # type: ignore[union-attr]
        assert "- cut-release: Cut a release" in text
        assert "(skill://cut-release/SKILL.md)" in text and "scripts/bump.sh 1.4.0" in text
        again = await c.get_prompt("recall", {"message": "ship billing release again"})
        assert "cut-release" not in again.messages[0].content.text  # type: ignore[union-attr]
        tea = await c.get_prompt("recall", {"message": "steep green tea"})
        assert "brew-tea" not in tea.messages[0].content.text  # type: ignore[union-attr]


async def test_recall_leaves_the_body_out_when_the_budget_is_small(data: Path) -> None:
    settings = Settings(data_dir=data, embedder="none")
    async with Client(build_server(settings)) as c:
        got = await c.get_prompt("recall", {"message": "billing release", "max_tokens": "80"})
        text = got.messages[0].content.text  # type: ignore[union-attr]
        assert "(skill://cut-release/SKILL.md)" in text and "bump.sh" not in text


async def test_tools_are_unchanged(data: Path) -> None:
    async with Client(build_server(Settings(data_dir=data, embedder="none"))) as c:
        assert len((await c.list_tools()).tools) == 8
        await ok(c, "save_memory", content="skills do not change the tools")


async def test_a_file_name_with_a_space_or_accent_is_listed_as_a_valid_uri(
    tmp_path: Path,
) -> None:
    """Issue 45: resources/list gave `skill://…/with space.txt` raw (not a valid URI) and
    refused its percent-encoded form."""
    catalog = SkillCatalog(tmp_path / "data")
    files = {"references/with space.txt": b"spaced", "über-notes.md": b"umlaut"}
    import_skills(
        catalog, write_skill(tmp_path / "src", "odd-names", simple_md("odd-names", "x"), files)
    )
    async with Client(build_server(Settings(data_dir=tmp_path / "data", embedder="none"))) as c:
        uris = sorted(str(r.uri) for r in (await c.list_resources()).resources)
        assert "skill://odd-names/references/with%20space.txt" in uris
        assert "skill://odd-names/%C3%BCber-notes.md" in uris
        for uri, text in [
            ("skill://odd-names/references/with%20space.txt", "spaced"),
            ("skill://odd-names/%C3%BCber-notes.md", "umlaut"),
        ]:
            read = await c.read_resource(uri)
            assert read.contents[0].text == text  # type: ignore[union-attr]
        for bad in ("skill://odd-names/%2e%2e/x", "skill://odd-names/../SKILL.md"):
            with pytest.raises(MCPError, match="Unknown resource"):
                await c.read_resource(bad)
