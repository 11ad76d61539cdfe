"""`dreamwell install codex` with the real Codex CLI (tests/support/agents.py), one
`codex exec` against a scripted Responses API on 127.0.0.1, with CODEX_HOME set (install
writes there, Codex reads there) and in a clone of the repository (another folder, the same
remote) where a real Claude Code session saved a memory: the hooks run with no
`--dangerously-bypass-hook-trust` (install wrote their trust hashes), the repository's
memories, Claude Code's too, are in the first request, dreamwell's tools are offered in it
(`required = true`) and may be called in `exec` (`default_tools_approval_mode = "approve"`),
the prompt is recorded as typed naming Codex, and the tool it used is read from its own
rollout file."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.support.agent_apis import Reply, ResponsesAPI
from tests.support.agents import (
    CLAUDE_PROMPT,
    PROMPT,
    SAVED,
    SKILL,
    AgentHome,
    Session,
    one_session,
)

NAMESPACE = "mcp__dreamwell"


def brain(request: dict[str, Any]) -> Reply:
    """Save a memory through dreamwell once, then answer."""
    called = [i for i in request.get("input") or [] if i.get("type") == "function_call"]
    if request.get("tools") and not called:
        return Reply(tool="save_memory", namespace=NAMESPACE, arguments={"content": SAVED})
    return Reply(text="Use make deploy-shop.")


@pytest.fixture(scope="module")
def session(tmp_path_factory: pytest.TempPathFactory) -> Session:
    root = tmp_path_factory.mktemp("codex")
    home = AgentHome(root, "codex", codex_home=root / "codex-home")
    with ResponsesAPI(brain) as api:
        return one_session(root, "codex", api, home, claude=True, clone=True)


def test_the_repository_s_memory_and_dreamwell_s_tools_are_in_the_first_request(
    session: Session,
) -> None:
    first = json.dumps(session.requests[0]["input"])
    assert session.ids["shop"] in first and session.ids["billing"] not in first
    assert session.ids["claude"] in first  # saved in Claude Code, in the repository's other clone
    # installed where CODEX_HOME says, and nothing in ~/.codex
    assert "mcp_servers.dreamwell" in (session.root / "codex-home" / "config.toml").read_text()
    assert (session.root / "codex-home" / "hooks.json").is_file()
    assert not (session.root / "home" / ".codex").exists()
    # and the server answered Codex's tools/list once, so that even this first session gets
    # it from the kept lists, as Codex starts the server (the shell's DREAMWELL_* left out)
    assert "the server answered its tools once" in session.installed
    spaces = {t.get("name"): t for t in session.requests[0]["tools"]}  # type: ignore[attr-defined]
    offered = {f["name"] for f in spaces[NAMESPACE]["tools"]}
    assert {"search_memory", "save_memory"} <= offered
    assert "clamping" not in session.run.stderr  # the session end's timeout is Codex's 3 s
    # the skill install kept in ~/.agents/skills is in Codex's own list of skills
    assert session.skill_folder.is_file()
    listed = [i for i in session.requests[0]["input"] if "<skills_instructions>" in json.dumps(i)]  # type: ignore[attr-defined]
    assert SKILL in json.dumps(listed)


def test_the_prompt_is_recorded_as_typed_and_the_tool_call_allowed_and_read(
    session: Session,
) -> None:
    turns = [(t["client"], t["content"]) for t in session.turns]
    assert turns == [("claude-code", CLAUDE_PROMPT), ("codex", PROMPT)]
    results = [
        i
        for r in session.requests
        for i in r["input"]
        if i.get("type") == "function_call_output"  # type: ignore[attr-defined]
    ]
    assert results and "requires approval" not in json.dumps(results), results
    tools = {u["tool"]: u["client"] for u in session.usage if "tool" in u}
    assert tools.get("mcp__dreamwell__save_memory") == "codex", session.usage
    # saved through the agent's own MCP client in the shop: the shop's memory, so every
    # agent's hook recalls it there and in no other repository
    assert session.saved[SAVED] == "github.com/acme/shop", session.saved
    assert "failed" not in session.log, session.log
    for event in ("session-start", "user-prompt", "stop", "session-end"):
        assert f"codex:{event} ok" in session.log, session.log
    assert "Use make deploy-shop." in session.run.stdout
