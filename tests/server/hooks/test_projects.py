"""The hooks know the project from the hook input's `cwd` (docs/projects.md): the prompt hook and
session start inject the project's memories and global ones, never another project's, and
each recorded turn says which project it came from."""

from __future__ import annotations

from pathlib import Path

from dreamwell.server.hooks.refresh import refresh
from dreamwell.stores import NEW, PROJECT, DataDir, LongTermStore, SkillCatalog, SkillChange
from dreamwell.stores.skills import enable_sync
from tests.support.hooks import hook, prompt, turns
from tests.support.repos import two_projects

SHOP, BILLING = {PROJECT: "github.com/acme/shop"}, {PROJECT: "github.com/acme/billing"}


def _seed(data: Path, checkpoint: bool) -> dict[str, str]:
    store = LongTermStore(data)
    ids = {
        "shop": store.save("Deploy the shop with make deploy-shop", metadata=SHOP).entry.id,
        "billing": store.save("Deploy billing with kubectl apply", metadata=BILLING).entry.id,
        "pref": store.save("Keep deploy notes short", "user-preferences/style").entry.id,
    }
    for i in range(120):  # billing outnumbers the shop for every deploy question
        store.save(f"deploy deploy billing step {i}", metadata=BILLING)
    if checkpoint:
        assert store.checkpoint()
        refresh(DataDir(data))
    return ids


def test_the_prompt_hook_injects_the_cwd_s_project_and_never_another_s(tmp_path: Path) -> None:
    shop, billing = two_projects(tmp_path / "src")
    for checkpoint in (True, False):
        data = tmp_path / f"data-{checkpoint}"
        ids = _seed(data, checkpoint)
        out = hook("user-prompt", prompt("s1", "how do I deploy?", cwd=str(shop / "web")), data)
        assert ids["shop"] in out.stdout and ids["billing"] not in out.stdout
        assert "billing" not in out.stdout.lower()
        other = hook("user-prompt", prompt("s2", "deploy with kubectl?", cwd=str(billing)), data)
        assert ids["shop"] not in other.stdout and ids["billing"] in other.stdout


def test_a_prompt_in_a_project_recalls_that_project_s_memories(tmp_path: Path) -> None:
    """And a prompt nothing answers recalls nothing (it got the project's most recent)."""
    shop, _ = two_projects(tmp_path / "src")
    data = tmp_path / "data"
    ids = _seed(data, checkpoint=True)
    assert hook("user-prompt", prompt("s1", "zzz qqq", cwd=str(shop)), data).stdout == ""
    out = hook("user-prompt", prompt("s1", "how do we deploy?", cwd=str(shop)), data)
    assert ids["shop"] in out.stdout and "billing" not in out.stdout.lower()


def test_a_hook_outside_any_repository_sees_every_project(tmp_path: Path) -> None:
    data = tmp_path / "data"
    ids = _seed(data, checkpoint=True)
    out = hook("user-prompt", prompt("s1", "deploy the shop", cwd=str(tmp_path)), data)
    assert ids["shop"] in out.stdout


def test_a_recorded_turn_names_its_project(tmp_path: Path) -> None:
    shop, _ = two_projects(tmp_path / "src")
    data = tmp_path / "data"
    hook("user-prompt", prompt("s1", "ship it", cwd=str(shop)), data)
    hook("user-prompt", prompt("s2", "ship it now", cwd=str(tmp_path)), data)
    first, second = turns(data)
    assert first["project"] == "github.com/acme/shop" and first["project_root"] == str(shop)
    assert "project" not in second


def test_a_pinned_project_wins_over_the_cwd(tmp_path: Path) -> None:
    shop, billing = two_projects(tmp_path / "src")
    data = tmp_path / "data"
    ids = _seed(data, checkpoint=True)
    out = hook(
        "user-prompt",
        prompt("s1", "deploy with kubectl", cwd=str(shop)),
        data,
        env={"DREAMWELL_PROJECT": str(billing)},
    )
    assert ids["billing"] in out.stdout and ids["shop"] not in out.stdout


def test_session_start_and_the_prompt_hook_list_a_project_s_skill_only_in_that_project(
    tmp_path: Path,
) -> None:
    shop, billing = two_projects(tmp_path / "src")
    data = tmp_path / "data"
    md = b"---\nname: billing-release\ndescription: Release billing\n---\n\nRun make release.\n"
    change = SkillChange(
        "billing-release", NEW, {"SKILL.md": md}, status="active", project=BILLING[PROJECT]
    )
    SkillCatalog(data).apply([change])
    user_skills = tmp_path / "home" / ".claude" / "skills"
    enable_sync(DataDir(data), user_skills)  # as `install claude-code` does
    start = {"session_id": "s1", "hook_event_name": "SessionStart", "source": "startup"}
    in_shop = hook("session-start", start | {"cwd": str(shop)}, data)
    in_billing = hook("session-start", start | {"session_id": "s2", "cwd": str(billing)}, data)
    assert "billing-release" in in_billing.stdout and "billing-release" not in in_shop.stdout
    # the seam with Claude Code's Skill tool: the folder is kept in that project's own
    # .claude/skills/ only, never in the user's folder or another project's
    assert (billing / ".claude" / "skills" / "billing-release" / "SKILL.md").is_file()
    assert not (user_skills / "billing-release").exists()
    assert not (shop / ".claude" / "skills" / "billing-release").exists()
    asked = hook("user-prompt", prompt("s3", "release billing", cwd=str(shop)), data)
    assert "billing-release" not in asked.stdout
