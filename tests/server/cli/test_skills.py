"""`dreamwell skills …` and the skills lines of `dreamwell stats`, as a user runs them; and a
CLI import reaching a running stdio server's client as list_changed."""

from __future__ import annotations

from pathlib import Path

import anyio
import anyio.to_thread
import pytest
from mcp import Client

from dreamwell.stores import SkillUsage
from tests.support.cli import dreamwell
from tests.support.notify import BOUND, SLACK, Recorder
from tests.support.servers import from_mcp_json
from tests.support.skill_samples import RELEASE_MD, release_skill, simple_md, write_skill


def test_import_list_show_export_and_status_changes(tmp_path: Path) -> None:
    data = ["--data-dir", str(tmp_path / "d")]
    src = release_skill(tmp_path / "src")
    done = dreamwell("skills", "import", str(src), *data)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "imported cut-release (revision 1, active)\n"
    listed = dreamwell("skills", "list", *data).stdout
    assert listed.startswith("cut-release  [active]  uses 0, last never  — Cut a release")
    shown = dreamwell("skills", "show", "cut-release", *data).stdout
    assert "scripts/bump.sh (" in shown and shown.endswith(RELEASE_MD)
    out = tmp_path / "claude-skills"
    assert dreamwell("skills", "export", "--to", str(out), *data).returncode == 0
    exported = (out / "cut-release" / "SKILL.md").read_text()
    assert exported.startswith(RELEASE_MD.split("metadata:")[0]) and "dreamwell-id:" in exported
    assert (out / "cut-release" / "scripts" / "bump.sh").read_bytes() == (
        src / "scripts" / "bump.sh"
    ).read_bytes()
    for action, word in [("archive", "archived"), ("restore", "restored"), ("pin", "pinned")]:
        done = dreamwell("skills", action, "cut-release", *data)
        assert done.stdout == f"{word} cut-release\n", done.stderr
    assert "[active pinned]" in dreamwell("skills", "list", *data).stdout


def test_candidates_wait_for_approval(tmp_path: Path) -> None:
    data = ["--data-dir", str(tmp_path / "d")]
    folder = write_skill(tmp_path / "src", "brew-tea", simple_md("brew-tea", "Steep tea"))
    dreamwell("skills", "import", str(folder), "--candidate", *data)
    assert "[candidate]" in dreamwell("skills", "list", "--status", "candidate", *data).stdout
    assert dreamwell("skills", "approve", "brew-tea", *data).returncode == 0
    again = dreamwell("skills", "approve", "brew-tea", *data)
    assert again.returncode == 1
    assert again.stderr == (
        "dreamwell: skill 'brew-tea' is not a candidate; only candidates are approved\n"
    )


@pytest.mark.parametrize(
    ("text", "words"),
    [
        (simple_md("Bad-Name", "x"), "[rule: name-format]"),
        (simple_md("claude-tool", "x"), "must not contain 'claude' [rule: name-reserved]"),
        ("---\nname: no-desc\n---\n", "[rule: description-required]"),
    ],
)
def test_bad_skills_are_one_line_and_write_nothing(tmp_path: Path, text: str, words: str) -> None:
    name = text.split("name: ")[1].split("\n")[0]
    folder = write_skill(tmp_path / "src", name, text)
    done = dreamwell("skills", "import", str(folder), "--data-dir", str(tmp_path / "d"))
    assert done.returncode != 0 and "Traceback" not in done.stderr
    assert done.stderr.count("\n") == 1 and words in done.stderr
    assert not (tmp_path / "d" / "skills").exists()


def test_unknown_skill_is_one_line(tmp_path: Path) -> None:
    done = dreamwell("skills", "show", "nope", "--data-dir", str(tmp_path))
    assert done.returncode == 1
    assert done.stderr == "dreamwell: no skill named 'nope'; `dreamwell skills list` shows them\n"


def test_stats_shows_uses_last_use_and_co_used_pairs(tmp_path: Path) -> None:
    data = tmp_path / "d"
    for name in ("alpha", "beta"):
        folder = write_skill(tmp_path / "src", name, simple_md(name, name))
        dreamwell("skills", "import", str(folder), "--data-dir", str(data))
    usage = SkillUsage(data)
    for session in ("s1", "s2"):
        usage.record_use(session, "alpha", "prompt")
        usage.record_use(session, "beta", "resource")
    out = dreamwell("stats", "--data-dir", str(data), "--embedder", "none").stdout
    assert "  skills: 2 active, 0 candidate, 0 archived" in out
    assert "    alpha: 2 uses in 30 days, last " in out
    assert "    used together: alpha + beta (2 sessions)" in out


def test_skill_folders_follow_the_cli_and_stats_and_doctor_name_a_clash(tmp_path: Path) -> None:
    from dreamwell.stores import DataDir
    from dreamwell.stores.skills import enable_sync

    data, folders = tmp_path / "d", tmp_path / "claude-skills"
    write_skill(folders, "beta", simple_md("beta", "the user's own beta"))
    enable_sync(DataDir(data), folders)
    for name in ("alpha", "beta"):
        folder = write_skill(tmp_path / "src", name, simple_md(name, name))
        done = dreamwell("skills", "import", str(folder), "--data-dir", str(data))
        assert done.returncode == 0, done.stderr
    assert (folders / "alpha" / "SKILL.md").exists()  # at once, no server running
    assert f"not written: {folders}/beta: a folder dreamwell did not write" in done.stdout
    assert "the user's own beta" in (folders / "beta" / "SKILL.md").read_text()
    out = dreamwell("stats", "--data-dir", str(data), "--embedder", "none").stdout
    assert f"    kept as Claude Code skill folders in {folders}: 1\n" in out
    assert f"    not written: {folders}/beta: a folder dreamwell did not write" in out
    doctor = dreamwell("doctor", "--data-dir", str(data), "--embedder", "none")
    assert doctor.returncode == 1
    assert f"FAIL [default] skill beta is not a Claude Code skill folder: {folders}/beta" in (
        doctor.stdout
    )
    dreamwell("skills", "archive", "alpha", "--data-dir", str(data))
    assert not (folders / "alpha").exists()


@pytest.mark.anyio
async def test_a_cli_import_reaches_a_running_stdio_servers_client(tmp_path: Path) -> None:
    recorder = Recorder()
    folder = write_skill(tmp_path / "src", "brew-tea", simple_md("brew-tea", "Steep tea"))
    async with Client(from_mcp_json(tmp_path / "d"), mode="legacy", message_handler=recorder) as c:
        await c.list_prompts()
        done = await anyio.to_thread.run_sync(
            lambda: dreamwell("skills", "import", str(folder), "--data-dir", str(tmp_path / "d"))
        )
        assert done.returncode == 0, done.stderr
        with anyio.fail_after(BOUND + SLACK):
            await recorder.changed.wait()
        assert "brew-tea" in {p.name for p in (await c.list_prompts()).prompts}
