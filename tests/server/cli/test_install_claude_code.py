"""`dreamwell install claude-code` with the real Claude Code binary (tests/support/claude_code.py)
against a scripted Anthropic Messages API on 127.0.0.1: what install writes is what makes the
loop work — a memory saved in one session reaches the next session's first model request, and
Claude Code lets the model call dreamwell's tools without asking."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from dreamwell.server.transports.early_lists import METHODS
from dreamwell.stores import SkillUsage
from tests.support.anthropic_api import (
    AnthropicAPI,
    Turn,
    all_tool_results,
    is_main,
    messages_text,
    tool_names,
    tool_uses,
)
from tests.support.claude_code import ClaudeHome

SAVE = "mcp__dreamwell__save_memory"
FACT = "We deploy the billing service with make ship-billing, never by hand."


def saving_brain(request: dict[str, Any]) -> Turn:
    """Load the save tool through ToolSearch, save the fact as a preference, then say what
    the save answered."""
    if not is_main(request):
        return Turn(text="A title")
    called = [name for name, _ in tool_uses(request)]
    if "ToolSearch" not in called:
        return Turn(tools=[("ToolSearch", {"query": f"select:{SAVE}"})])
    if SAVE not in called:
        if SAVE not in tool_names(request):
            return Turn(text="The save tool never arrived.")
        return Turn(tools=[(SAVE, {"content": FACT, "category": "user-preferences/deploy"})])
    return Turn(text=all_tool_results(request)[-1])


def test_a_memory_saved_in_one_session_reaches_the_next_sessions_first_request(
    tmp_path: Path,
) -> None:
    home = ClaudeHome(tmp_path)
    installed = home.dreamwell("install", "claude-code")
    # the server answered its lists once, for the first session to get them while it loads
    assert "answered its tools, prompts and resources once" in installed.stdout
    kept = json.loads((home.data_dir / "mcp-lists.json").read_text())["answers"]
    assert sorted(kept) == sorted(f"{m} 2026-07-28" for m in METHODS)
    with AnthropicAPI(saving_brain) as api:
        first = home.claude(api, "Remember how we deploy billing.")
    assert first.returncode == 0, first.stderr
    assert first.json.get("permission_denials") == [], first.json
    assert str(first.json.get("result")).startswith("Saved memory ["), first.json
    with AnthropicAPI(lambda r: Turn(text="OK" if is_main(r) else "A title")) as api:
        second = home.claude(api, "What do we do next?")
        opening = api.main_requests()[0]
    assert second.returncode == 0, second.stderr
    assert FACT in messages_text(opening)
    # the first session's first hook found no resident and started one: the second session's
    # hooks were answered by it (server/hooks/resident.py)
    log = (home.data_dir / "hooks.log").read_text().splitlines()
    assert not log[0].endswith("(resident)"), log
    started = [line for line in log if " session-start ok: " in line]
    assert len(started) == 2 and started[1].endswith("(resident)"), log


RELEASE = (
    "---\nname: go-release\ndescription: Cut a release of the Go service and tag it\n---\n\n"
    "1. Run `make release VERSION=x` on a clean main.\n2. Push the tag.\n"
)


def skill_brain(request: dict[str, Any]) -> Turn:
    """Load go-release through the Skill tool, then try two names that are not skills."""
    if not is_main(request):
        return Turn(text="A title")
    tries = ["go-release", "dreamwell:go-release", "no-such-skill"]
    done = [u.get("skill") for name, u in tool_uses(request) if name == "Skill"]
    if len(done) < len(tries):
        return Turn(tools=[("Skill", {"skill": tries[len(done)]})])
    return Turn(text=" | ".join(all_tool_results(request)))


def test_an_imported_skill_loads_through_claude_codes_skill_tool(tmp_path: Path) -> None:
    home = ClaudeHome(tmp_path)
    source = tmp_path / "src" / "go-release"
    source.mkdir(parents=True)
    (source / "SKILL.md").write_text(RELEASE)
    home.dreamwell("skills", "import", str(source.parent))
    installed = home.dreamwell("install", "claude-code")
    assert f"kept the active skills as folders in {home.home}/.claude/skills" in installed.stdout
    with AnthropicAPI(skill_brain) as api:
        run = home.claude(api, "Ship the Go service.")
        opening = messages_text(api.main_requests()[0])
    assert run.returncode == 0, run.stderr
    loaded, *failed = str(run.json.get("result")).split(" | ")
    assert "go-release" in opening  # listed by the session-start hook, and loadable
    assert "Launching skill: go-release" in loaded, run.json
    assert all("Unknown skill" in f for f in failed), failed
    bodies = messages_text(api.requests[-1])
    assert "make release VERSION=x" in bodies
    usage = SkillUsage(home.data_dir).stats()  # the session-end hook read the transcript
    assert usage.uses_30d == {"go-release": 1}  # the failed calls and the alias count nothing


def test_claude_mcp_list_is_no_hook_failure(tmp_path: Path) -> None:
    home = ClaudeHome(tmp_path)
    home.dreamwell("install", "claude-code")
    with AnthropicAPI(lambda r: Turn(text="OK" if is_main(r) else "A title")) as api:
        assert home.claude(api, "Hello").returncode == 0  # its session start starts a resident
    listed = home.run("mcp", "list")
    assert listed.returncode == 0 and "dreamwell" in listed.stdout, listed.stderr
    log = (home.data_dir / "hooks.log").read_text()
    # it ran (through the HTTP door, as the session's did), with no transcript
    assert log.count("session-end ok") == 2 and "failed" not in log, log
    stats = home.dreamwell("stats").stdout
    assert "failures" not in stats or ", 0 failures" in stats


def test_an_edit_in_the_skill_folder_comes_back_as_a_new_revision(tmp_path: Path) -> None:
    home = ClaudeHome(tmp_path)
    source = tmp_path / "src" / "go-release"
    source.mkdir(parents=True)
    (source / "SKILL.md").write_text(RELEASE)
    home.dreamwell("skills", "import", str(source.parent))
    home.dreamwell("install", "claude-code")
    skill_md = home.home / ".claude" / "skills" / "go-release" / "SKILL.md"
    skill_md.write_text(skill_md.read_text().replace("Push the tag.", "Push the tag; tell #ops."))
    with AnthropicAPI(lambda r: Turn(text="OK" if is_main(r) else "A title")) as api:
        run = home.claude(api, "Hello")  # its session-start hook syncs the folders
    assert run.returncode == 0, run.stderr
    shown = home.dreamwell("skills", "show", "go-release").stdout
    assert "revision 2" in shown and "Push the tag; tell #ops." in shown
    assert "dreamwell-id:" in skill_md.read_text()  # written again, as dreamwell's own
