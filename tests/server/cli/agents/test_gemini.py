"""`dreamwell install gemini` with the real Gemini CLI (tests/support/agents.py), one `-p` run
against a scripted Gemini API on 127.0.0.1: the repository's memory is in the first request
that offers tools (JSON hook output, not shown to the user), dreamwell's tools are offered
(`"trust": true`), the prompt is recorded as typed naming Gemini (the session start's
echoed `<hook_context>` taken out), and the tool it used is read from its own transcript."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from tests.support.agent_apis import GeminiAPI, Reply
from tests.support.agents import PROMPT, SAVED, SKILL, Session, one_session

SEARCH, SAVE = "mcp_dreamwell_search_memory", "mcp_dreamwell_save_memory"


def brain(request: dict[str, Any]) -> Reply:
    """Save a memory through dreamwell once, then answer."""
    called = [
        p["functionCall"]["name"]
        for c in request.get("contents") or []
        for p in c.get("parts") or []
        if "functionCall" in p
    ]
    if request.get("tools") and SAVE not in called:
        return Reply(tool=SAVE, arguments={"content": SAVED})
    return Reply(text="Use make deploy-shop.")


@pytest.fixture(scope="module")
def session(tmp_path_factory: pytest.TempPathFactory) -> Session:
    with GeminiAPI(brain) as api:
        return one_session(tmp_path_factory.mktemp("gemini"), "gemini", api)


def texts(request: dict[str, Any]) -> str:
    parts = [p for c in request.get("contents") or [] for p in c.get("parts") or []]
    return "\n".join(str(p.get("text", "")) for p in parts)


def test_the_repository_s_memory_and_dreamwell_s_tools_are_in_the_first_request(
    session: Session,
) -> None:
    first = session.requests[0]
    assert session.ids["shop"] in texts(first) and session.ids["billing"] not in texts(first)
    offered = {f["name"] for t in first["tools"] for f in t.get("functionDeclarations", [])}  # type: ignore[attr-defined]
    assert {SEARCH, SAVE} <= offered
    assert "Hook system message" not in session.run.stdout + session.run.stderr
    # the skill install kept in ~/.agents/skills is in Gemini's own system instruction
    assert session.skill_folder.is_file()
    assert SKILL in json.dumps(first["systemInstruction"])


def test_the_prompt_is_recorded_as_typed_and_the_tool_use_read_from_its_transcript(
    session: Session,
) -> None:
    # the session start said something (the skill), which Gemini echoes into the prompt
    # as <hook_context>…</hook_context>: recorded without it
    assert re.search(r"gemini:session-start ok: [1-9]\d* chars", session.log), session.log
    assert [(t["client"], t["content"]) for t in session.turns] == [("gemini", PROMPT)]
    tools = {u["tool"]: u["client"] for u in session.usage if "tool" in u}
    assert tools.get("mcp__dreamwell__save_memory") == "gemini", session.usage
    # saved through the agent's own MCP client in the shop: the shop's memory, so every
    # agent's hook recalls it there and in no other repository
    assert session.saved[SAVED] == "github.com/acme/shop", session.saved
    assert "failed" not in session.log, session.log
    for event in ("session-start", "user-prompt", "stop", "session-end"):
        assert f"gemini:{event} ok" in session.log, session.log
    assert json.loads(session.run.stdout)["response"] == "Use make deploy-shop."
