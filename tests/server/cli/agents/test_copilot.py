"""`dreamwell install copilot` with the real Copilot CLI (tests/support/agents.py), one `-p`
run in bring-your-own-key mode against a scripted Responses API on 127.0.0.1: the
repository's memory is in the first request (Copilot's top-level `additionalContext`),
dreamwell's tools are offered, the prompt is recorded as typed naming Copilot, the tool it
used is read from its own events file, and its session end, which names no transcript,
ends the session."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.support.agent_apis import Reply, ResponsesAPI
from tests.support.agents import PROMPT, SAVED, SKILL, Session, one_session

SEARCH, SAVE = "dreamwell-search_memory", "dreamwell-save_memory"


def brain(request: dict[str, Any]) -> Reply:
    """Save a memory through dreamwell once, then answer."""
    called = [i for i in request.get("input") or [] if i.get("type") == "function_call"]
    if request.get("tools") and not called:
        return Reply(tool=SAVE, arguments={"content": SAVED})
    return Reply(text="Use make deploy-shop.")


@pytest.fixture(scope="module")
def session(tmp_path_factory: pytest.TempPathFactory) -> Session:
    with ResponsesAPI(brain) as api:
        return one_session(tmp_path_factory.mktemp("copilot"), "copilot", api)


def test_the_repository_s_memory_and_dreamwell_s_tools_are_in_the_first_request(
    session: Session,
) -> None:
    first = json.dumps(session.requests[0]["input"])
    assert session.ids["shop"] in first and session.ids["billing"] not in first
    offered = {t.get("name") for t in session.requests[0]["tools"]}  # type: ignore[attr-defined]
    assert {SEARCH, SAVE} <= offered
    # the skill install kept in ~/.agents/skills is in Copilot's own instructions
    assert session.skill_folder.is_file()
    assert SKILL in str(session.requests[0]["instructions"])


def test_the_prompt_is_recorded_as_typed_the_tool_read_and_the_session_ended(
    session: Session,
) -> None:
    assert [(t["client"], t["content"]) for t in session.turns] == [("copilot", PROMPT)]
    tools = {u["tool"]: u["client"] for u in session.usage if "tool" in u}
    assert tools.get("mcp__dreamwell__save_memory") == "copilot", session.usage
    # saved through the agent's own MCP client in the shop: the shop's memory, so every
    # agent's hook recalls it there and in no other repository
    assert session.saved[SAVED] == "github.com/acme/shop", session.saved
    assert "failed" not in session.log, session.log
    for event in ("session-start", "user-prompt", "stop", "session-end"):
        assert f"copilot:{event} ok" in session.log, session.log
    assert "Use make deploy-shop." in session.run.stdout
