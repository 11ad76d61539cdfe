"""Skills kept as folders a client loads (stores/skills/sync.py): written when on, rewritten
when the skill changes, removed on archive, never over a folder dreamwell did not write (a
clash, reported), a user's edit brought back as a new revision, project skills only in their
project's folder."""

from __future__ import annotations

from pathlib import Path

from dreamwell.stores.layout import DataDir
from dreamwell.stores.skills import (
    SkillCatalog,
    disable_sync,
    enable_sync,
    loadable,
    make_folder,
    read_skills,
    sync_clashes,
    sync_skills,
)
from dreamwell.stores.skills.porting import import_skills
from tests.support.skill_samples import assert_runnable, runnable_skill

RELEASE = (
    "---\nname: go-release\ndescription: Cut a release of the Go service and tag it\n---\n\n"
    "1. Run `make release VERSION=x`.\n2. Push the tag.\n"
)
TEA = "---\nname: brew-tea\ndescription: Brew green tea\n---\n\nHeat water to 80 degrees.\n"


def catalog_with(tmp_path: Path, *texts: str) -> SkillCatalog:
    catalog = SkillCatalog(tmp_path / "data")
    for text in texts:
        name = text.split("name: ")[1].split("\n")[0]
        catalog.put(make_folder(name, {"SKILL.md": text.encode()}, name))
    return catalog


def on(catalog: SkillCatalog, target: Path) -> None:
    enable_sync(DataDir(catalog.layout.root), target)


def test_nothing_is_written_until_the_sync_is_turned_on(tmp_path: Path) -> None:
    catalog = catalog_with(tmp_path, RELEASE)
    assert sync_skills(catalog) == []
    assert loadable(catalog.layout) == set()


def test_active_skills_become_folders_and_leave_on_archive(tmp_path: Path) -> None:
    catalog = catalog_with(tmp_path, RELEASE, TEA)
    catalog.set_status("brew-tea", "candidate")
    target = tmp_path / "claude" / "skills"
    on(catalog, target)
    [report] = sync_skills(catalog)
    assert report.written == ["go-release"] and not (target / "brew-tea").exists()
    [folder] = read_skills(target)
    assert folder.name == "go-release" and folder.body == catalog.get("go-release").body
    assert "dreamwell-id:" in (target / "go-release" / "SKILL.md").read_text()
    assert loadable(catalog.layout) == {"go-release"}
    record = catalog.layout.skills_sync.stat().st_mtime_ns
    assert sync_skills(catalog)[0].written == []  # in step: nothing to do, nothing written
    assert catalog.layout.skills_sync.stat().st_mtime_ns == record
    catalog.archive("go-release")
    assert sync_skills(catalog)[0].removed == ["go-release"]
    assert not (target / "go-release").exists() and loadable(catalog.layout) == set()


def test_a_changed_skill_is_written_again(tmp_path: Path) -> None:
    catalog = catalog_with(tmp_path, RELEASE)
    on(catalog, tmp_path / "skills")
    sync_skills(catalog)
    skill = catalog.get("go-release")
    new = RELEASE.replace("Push the tag.", "Push the tag and announce it.")
    catalog.put(make_folder("go-release", {"SKILL.md": new.encode()}, "x"), skill.revision)
    assert sync_skills(catalog)[0].written == ["go-release"]
    assert "announce it" in (tmp_path / "skills" / "go-release" / "SKILL.md").read_text()


def test_a_folder_dreamwell_did_not_write_is_never_overwritten(tmp_path: Path) -> None:
    catalog = catalog_with(tmp_path, RELEASE, TEA)
    target = tmp_path / "skills"
    mine = target / "go-release" / "SKILL.md"
    mine.parent.mkdir(parents=True)
    mine.write_text(RELEASE.replace("Push the tag.", "My own way."))
    (target / "brew-tea").mkdir()
    (target / "brew-tea" / "SKILL.md").write_text(TEA)  # the same files: an earlier export
    on(catalog, target)
    [report] = sync_skills(catalog)
    assert report.clashes == {"go-release": "a folder dreamwell did not write is in the way"}
    assert "My own way." in mine.read_text()
    assert loadable(catalog.layout) == {"brew-tea"}
    assert sync_clashes(catalog.layout) == {str(target): report.clashes}
    mine.parent.joinpath("SKILL.md").unlink()
    mine.parent.rmdir()
    assert sync_skills(catalog)[0].written == ["go-release"]
    assert sync_clashes(catalog.layout) == {}


def test_a_users_edit_comes_back_as_a_new_revision(tmp_path: Path) -> None:
    catalog = catalog_with(tmp_path, RELEASE)
    target = tmp_path / "skills"
    on(catalog, target)
    sync_skills(catalog)
    before = catalog.get("go-release")
    path = target / "go-release" / "SKILL.md"
    path.write_text(path.read_text().replace("Push the tag.", "Push the tag, then tell #ops."))
    (target / "go-release" / "notes.md").write_text("Ops channel: #ops\n")
    [report] = sync_skills(catalog)
    assert report.revised == ["go-release"] and report.clashes == {}
    after = catalog.get("go-release")
    assert after.revision == before.revision + 1 and "tell #ops" in after.body
    assert after.files["notes.md"] == b"Ops channel: #ops\n"
    assert "dreamwell-id:" not in after.skill_md  # bookkeeping stays out of the record
    assert sync_skills(catalog)[0].revised == []  # taken once


def test_a_synced_folder_keeps_the_executable_bit_and_a_chmod_there_is_an_edit(
    tmp_path: Path,
) -> None:
    catalog = SkillCatalog(tmp_path / "data")
    import_skills(catalog, runnable_skill(tmp_path / "src"))
    target = tmp_path / "skills"
    on(catalog, target)
    assert sync_skills(catalog)[0].written == ["run-tests"]
    assert_runnable(target / "run-tests")
    assert sync_skills(catalog)[0].revised == []  # as written: not an edit
    (target / "run-tests" / "notes.md").chmod(0o755)  # the user's `chmod +x notes.md`
    [report] = sync_skills(catalog)
    assert report.revised == ["run-tests"] and report.clashes == {}
    after = catalog.get("run-tests")
    assert after.revision == 2 and after.executable == {"scripts/run.sh", "notes.md"}
    assert (target / "run-tests" / "notes.md").stat().st_mode & 0o100
    assert sync_skills(catalog)[0].revised == []  # taken once


def test_an_edit_that_breaks_the_skill_is_left_and_reported(tmp_path: Path) -> None:
    catalog = catalog_with(tmp_path, RELEASE)
    target = tmp_path / "skills"
    on(catalog, target)
    sync_skills(catalog)
    (target / "go-release" / "SKILL.md").write_text("no front matter at all\n")
    [report] = sync_skills(catalog)
    assert "no longer a valid skill" in report.clashes["go-release"]
    assert (target / "go-release" / "SKILL.md").read_text() == "no front matter at all\n"
    assert catalog.get("go-release").revision == 1


def test_a_project_skill_goes_only_to_its_projects_folder(tmp_path: Path) -> None:
    scoped = RELEASE.replace(
        "---\n\n", "metadata:\n  dreamwell-project: github.com/acme/go\n---\n\n"
    )
    catalog = catalog_with(tmp_path, scoped, TEA)
    home, project = tmp_path / "home-skills", tmp_path / "acme-go"
    on(catalog, home)
    assert [r.written for r in sync_skills(catalog)] == [["brew-tea"]]
    reports = sync_skills(catalog, ("github.com/acme/go", project))
    assert [r.written for r in reports] == [[], ["go-release"]]
    assert (project / ".claude" / "skills" / "go-release" / "SKILL.md").exists()
    assert not (home / "go-release").exists()
    other = sync_skills(catalog, ("github.com/acme/other", tmp_path / "other"))
    assert [r.written for r in other] == [[], []]
    assert loadable(catalog.layout, ("github.com/acme/go", project)) == {"brew-tea", "go-release"}
    assert loadable(catalog.layout) == {"brew-tea"}


def test_turning_it_off_removes_only_untouched_folders(tmp_path: Path) -> None:
    catalog = catalog_with(tmp_path, RELEASE, TEA)
    target = tmp_path / "skills"
    on(catalog, target)
    sync_skills(catalog)
    (target / "brew-tea" / "SKILL.md").write_text(TEA.replace("80", "75"))
    assert disable_sync(catalog.layout) == ["go-release"]
    assert not (target / "go-release").exists() and (target / "brew-tea").exists()
    assert sync_skills(catalog) == []


def test_claude_code_s_folder_and_the_other_agents_are_kept_and_let_go_apart(
    tmp_path: Path,
) -> None:
    """`~/.claude/skills` for Claude Code, `~/.agents/skills` (and a project's
    `.agents/skills`) for Codex, Gemini CLI and Copilot CLI: both kept, and uninstalling the
    other agents removes only theirs."""
    catalog = catalog_with(tmp_path, RELEASE)
    dirs = DataDir(catalog.layout.root)
    claude, agents = (
        tmp_path / "home" / ".claude" / "skills",
        tmp_path / "home" / ".agents" / "skills",
    )
    enable_sync(dirs, claude)
    enable_sync(dirs, agents, ".agents/skills")
    repo = tmp_path / "repo"
    repo.mkdir()
    sync_skills(catalog, ("github.com/acme/shop", repo))
    assert (claude / "go-release" / "SKILL.md").is_file()
    assert (agents / "go-release" / "SKILL.md").is_file()
    assert loadable(dirs) == {"go-release"}
    assert disable_sync(dirs, agents, ".agents/skills") == ["go-release"]
    assert not (agents / "go-release").exists() and (claude / "go-release" / "SKILL.md").is_file()
    catalog.put(make_folder("brew-tea", {"SKILL.md": TEA.encode()}, "brew-tea"))
    sync_skills(catalog, ("github.com/acme/shop", repo))
    assert (claude / "brew-tea").is_dir() and not (agents / "brew-tea").exists()
    assert not (repo / ".agents").exists()
