"""Skills through the Claude Code hooks: a skill imported with `dreamwell skills import`
is listed at session start and offered for a relevant prompt, each once per session, within
hook_max_chars, and recorded in the recall log; candidates and archived skills never are, nor
skills the client cannot load (not kept as its skill folders: the sync off, or a clash)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from dreamwell.stores import SkillCatalog
from dreamwell.stores.hooks.sessions import HookSessions
from dreamwell.stores.layout import DataDir
from dreamwell.stores.skills import enable_sync
from tests.support.cli import dreamwell
from tests.support.hooks import event, hook, prompt, recalls

RELEASE = (
    "---\nname: cut-release\ndescription: Cut a release of the billing service and tag it\n"
    "---\n\n1. On a clean `main`, run `scripts/bump.sh`.\n2. Push the tag.\n"
)
TEA = (
    "---\nname: brew-tea\ndescription: Brew green tea at the right temperature\n---\n\n"
    "Heat the water to 80 degrees and steep for two minutes.\n"
)


def write_skill(root: Path, name: str, text: str) -> Path:
    folder = root / name
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_text(text)
    return folder


def imported(data: Path, tmp_path: Path, sync: bool = True) -> None:
    """Two skills through the real CLI, as a user would add them (kept as the client's
    skill folders in tmp_path/claude-skills unless not `sync`)."""
    if sync:
        enable_sync(DataDir(data), tmp_path / "claude-skills")
    source = tmp_path / "src"
    write_skill(source, "cut-release", RELEASE)
    write_skill(source, "brew-tea", TEA)
    done = dreamwell("skills", "import", str(source), "--data-dir", str(data))
    assert done.returncode == 0, done.stderr
    assert {s.name for s in SkillCatalog(data).list("active")} == {"cut-release", "brew-tea"}


def test_session_start_lists_the_active_skills_once(tmp_path: Path) -> None:
    data = tmp_path / "data"
    imported(data, tmp_path)
    start = event("s1", "SessionStart", tmp_path / "t.jsonl", source="startup")
    first = hook("session-start", start, data)
    assert first.returncode == 0 and first.stderr == ""
    assert "Skills available" in first.stdout
    assert "- cut-release: Cut a release of the billing service and tag it" in first.stdout
    assert "- brew-tea: Brew green tea" in first.stdout
    [shown] = recalls(data)
    assert sorted(shown["skills"]) == ["brew-tea", "cut-release"]
    assert sorted(HookSessions(DataDir(data)).load("s1").skills) == ["brew-tea", "cut-release"]
    again = hook("user-prompt", prompt("s1", "cut a release of billing"), data)
    assert "cut-release" not in again.stdout  # already in this session's context
    budget = {"DREAMWELL_HOOK_MAX_CHARS": "200"}
    for i in range(8):  # more skills than 200 characters can list
        text = RELEASE.replace("cut-release", f"cut-release-{i}")
        write_skill(tmp_path / "more", f"cut-release-{i}", text)
    cli = [sys.executable, "-m", "dreamwell.server", "skills", "import", str(tmp_path / "more")]
    subprocess.run([*cli, "--data-dir", str(data)], check=True, capture_output=True, timeout=120)
    small = hook("session-start", start | {"session_id": "s2"}, data, env=budget)
    assert 0 < len(small.stdout) <= 200 and "cut-release-7" not in small.stdout
    [*_, listed] = recalls(data)  # only what was shown is recorded as shown
    assert listed["session"] == "s2" and all(f"- {n}:" in small.stdout for n in listed["skills"])


def test_a_relevant_prompt_gets_the_skill_once_per_session(tmp_path: Path) -> None:
    data = tmp_path / "data"
    imported(data, tmp_path)
    first = hook("user-prompt", prompt("s1", "how do I cut a release for billing?"), data)
    assert first.returncode == 0 and first.stderr == ""
    assert "Skills available" in first.stdout and "- cut-release:" in first.stdout
    assert "brew-tea" not in first.stdout  # not relevant
    again = hook("user-prompt", prompt("s1", "cut the release now"), data)
    assert "cut-release" not in again.stdout
    other = hook("user-prompt", prompt("s2", "release the billing service"), data)
    assert "- cut-release:" in other.stdout
    by_session = {r["session"]: r["skills"] for r in recalls(data) if r["skills"]}
    assert by_session == {"s1": ["cut-release"], "s2": ["cut-release"]}
    tea = hook("user-prompt", prompt("s1", "green tea temperature"), data)
    assert "- brew-tea:" in tea.stdout


def test_candidates_and_archived_skills_are_never_offered(tmp_path: Path) -> None:
    data = tmp_path / "data"
    imported(data, tmp_path)
    catalog = SkillCatalog(data)
    catalog.archive("cut-release")
    catalog.set_status("brew-tea", "candidate")
    start = hook("session-start", event("s1", "SessionStart", tmp_path / "t.jsonl"), data)
    asked = hook("user-prompt", prompt("s1", "cut a release, then brew green tea"), data)
    for done in (start, asked):
        assert done.returncode == 0
        assert "cut-release" not in done.stdout and "brew-tea" not in done.stdout


def test_only_skills_the_client_can_load_are_offered(tmp_path: Path) -> None:
    data = tmp_path / "data"
    imported(data, tmp_path, sync=False)
    start = event("s1", "SessionStart", tmp_path / "t.jsonl", source="startup")
    off = hook("session-start", start, data)
    asked = hook("user-prompt", prompt("s1", "how do I cut a release for billing?"), data)
    assert "cut-release" not in off.stdout + asked.stdout  # no folder: Skill() cannot load it
    clash = tmp_path / "claude-skills" / "cut-release"
    write_skill(clash.parent, "cut-release", RELEASE.replace("Push the tag.", "Mine."))
    enable_sync(DataDir(data), clash.parent)
    on = hook("session-start", start | {"session_id": "s2"}, data)
    assert "- brew-tea:" in on.stdout and "cut-release" not in on.stdout
    assert (tmp_path / "claude-skills" / "brew-tea" / "SKILL.md").exists()
    assert "Mine." in (clash / "SKILL.md").read_text()


def test_a_skill_use_counts_once_on_success_under_its_own_name(tmp_path: Path) -> None:
    from dreamwell.stores import SkillUsage
    from tests.support.hooks import Transcript

    data = tmp_path / "data"
    imported(data, tmp_path)
    t = Transcript(tmp_path / "session.jsonl", "s1")
    t.tool("Skill", {"skill": "cut-release"}, "Launching skill: cut-release")
    unknown = "<tool_use_error>Unknown skill: dreamwell:cut-release</tool_use_error>"
    t.tool("Skill", {"skill": "dreamwell:cut-release"}, unknown, error=True)
    t.tool("Skill", {"skill": "no-such-skill"}, "<tool_use_error>Unknown skill: no-such-skill")
    t.user("<command-message>brew-tea</command-message>\n<command-name>/brew-tea</command-name>")
    t.user("<command-name>/mcp__dreamwell__cut-release</command-name>")
    t.user("/nope-skill")  # a slash command Claude Code did not know stays plain text
    assert hook("stop", event("s1", "Stop", t.path), data).returncode == 0
    usage = SkillUsage(data).stats()
    assert usage.uses_30d == {"cut-release": 2, "brew-tea": 1}
    assert usage.co_used == [("brew-tea", "cut-release", 1)]
