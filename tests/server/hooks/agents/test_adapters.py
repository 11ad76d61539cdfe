"""One hook core, each agent's own edges (server/hooks/agents/): each agent's real stdin (as
Codex 0.171.0, Gemini CLI 0.61.0 and Copilot CLI 1.0.102 sent it, captured from the binaries)
through the same hook, the output in the shape that agent reads, the prompt recorded as the
user typed it and naming the agent, and each agent's own transcript lines read for the user's
turns and the tools and skills used."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path
from typing import Any

import pytest

from dreamwell.server.hooks.agents.table import HOOK_EVENTS, agent_of
from dreamwell.server.hooks.events import hook_output
from dreamwell.server.hooks.settings import HookSettings
from dreamwell.server.hooks.transcript import read_new
from dreamwell.stores.inputs import SKILL_USAGE, JsonlLog
from tests.support.hooks import DEPLOY, log_lines, seeded, turns

PROMPT = "How do we deploy the api?"


def run(data: Path, event: str, payload: dict[str, Any]) -> str:
    return hook_output(HookSettings(data_dir=data), event, None, json.dumps(payload).encode())


def stdin(agent: str, event: str, cwd: Path, **more: Any) -> dict[str, Any]:
    """What each agent sent on its hook's stdin (keys and order as captured)."""
    base: dict[str, Any] = {"session_id": f"{agent}-1", "cwd": str(cwd)}
    if agent != "copilot" or event not in ("session-start", "user-prompt", "session-end"):
        base["transcript_path"] = str(cwd / "transcript.jsonl")
    return {**base, **more}


def test_every_agent_gets_the_recalled_memory_in_the_shape_it_reads(tmp_path: Path) -> None:
    data = tmp_path / "data"
    seeded(data)
    shapes = {
        "user-prompt": lambda out: out,  # Claude Code: plain text
        "codex:user-prompt": lambda out: out,
        "gemini:user-prompt": lambda out: json.loads(out)["hookSpecificOutput"][
            "additionalContext"
        ],
        "copilot:user-prompt": lambda out: json.loads(out)["additionalContext"],
    }
    for event, context in shapes.items():
        agent, _ = agent_of(event)
        out = run(data, event, stdin(agent.name, "user-prompt", tmp_path, prompt=PROMPT))
        assert DEPLOY in context(out), (event, out)
        if agent.name == "gemini":
            inner = json.loads(out)["hookSpecificOutput"]
            assert inner["hookEventName"] == "BeforeAgent" and set(json.loads(out)) == {
                "hookSpecificOutput"
            }
    recorded = {r["client"]: r["content"] for r in turns(data)}
    assert recorded == dict.fromkeys(["claude-code", "codex", "gemini", "copilot"], PROMPT)


def test_gemini_s_echoed_session_context_is_not_searched_with_nor_recorded(
    tmp_path: Path,
) -> None:
    data = tmp_path / "data"
    seeded(data)
    start = run(data, "gemini:session-start", stdin("gemini", "session-start", tmp_path))
    shown = json.loads(start)["hookSpecificOutput"]
    assert shown["hookEventName"] == "SessionStart" and shown["additionalContext"]
    # in `-p` runs Gemini CLI prepends that context to the prompt its BeforeAgent hook gets
    echoed = f"<hook_context>{shown['additionalContext']}</hook_context>\n\n{PROMPT}"
    out = run(data, "gemini:user-prompt", stdin("gemini", "user-prompt", tmp_path, prompt=echoed))
    assert DEPLOY in json.loads(out)["hookSpecificOutput"]["additionalContext"]
    assert [r["content"] for r in turns(data)] == [PROMPT]


def test_copilot_s_wrapped_prompt_is_recorded_as_typed(tmp_path: Path) -> None:
    data = tmp_path / "data"
    wrapped = (
        "<current_datetime>2026-12-06T20:08:02.920+00:00</current_datetime>\n\n"
        f"{PROMPT}\n\n<system_reminder>\nsomething we said\n</system_reminder>"
    )
    run(data, "copilot:user-prompt", stdin("copilot", "user-prompt", tmp_path, prompt=wrapped))
    assert [(r["client"], r["content"]) for r in turns(data)] == [("copilot", PROMPT)]


@pytest.mark.parametrize("event", ["codex:stop", "gemini:stop", "copilot:stop"])
def test_the_silent_events_print_nothing_in_every_agent(tmp_path: Path, event: str) -> None:
    agent, _ = agent_of(event)
    assert run(tmp_path, event, stdin(agent.name, "stop", tmp_path)) == ""
    assert f"{event} ok" in log_lines(tmp_path)[-1]


def test_a_copilot_session_end_without_a_transcript_ends_the_session(tmp_path: Path) -> None:
    given = {"hook_event_name": "SessionEnd", "session_id": "c1", "cwd": str(tmp_path)}
    assert run(tmp_path, "copilot:session-end", given | {"reason": "complete"}) == ""
    assert "copilot:session-end ok" in log_lines(tmp_path)[-1]


def test_an_unknown_agent_or_event_is_logged_and_prints_nothing(tmp_path: Path) -> None:
    assert "cursor:user-prompt" not in HOOK_EVENTS
    assert run(tmp_path, "cursor:user-prompt", {"session_id": "x", "prompt": "hi"}) == ""
    assert "unknown hook event 'cursor:user-prompt'" in log_lines(tmp_path)[-1]


# ---- transcripts: lines as each binary wrote them (shortened) ----------------------------
CODEX_LINES = [
    {
        "type": "response_item",
        "payload": {
            "type": "message",
            "role": "user",
            "content": [{"type": "input_text", "text": "<environment_context>…"}],
        },
    },
    {
        "timestamp": "2026-12-06T20:07:51.214Z",
        "type": "event_msg",
        "payload": {
            "type": "item_completed",
            "item": {
                "type": "UserMessage",
                "content": [{"type": "text", "text": PROMPT, "text_elements": []}],
            },
        },
    },
    {
        "type": "response_item",
        "payload": {
            "type": "function_call",
            "name": "search_memory",
            "namespace": "mcp__dreamwell",
            "arguments": '{"query": "deploy"}',
            "call_id": "call_3",
        },
    },
    {
        "type": "response_item",
        "payload": {
            "type": "function_call",
            "name": "exec_command",
            "arguments": '{"cmd": "sed -n 1,200p /home/u/.agents/skills/release/SKILL.md"}',
        },
    },
]
GEMINI_CALL = {
    "id": "mcp_dreamwell_search_memory_1",
    "name": "mcp_dreamwell_search_memory",
    "args": {"query": "deploy"},
}
GEMINI_SKILL = {"id": "s1", "name": "activate_skill", "args": {"name": "release"}}
GEMINI_LINES = [
    {"sessionId": "g1", "kind": "main"},
    {"type": "user", "content": [{"text": "<session_context>\nThis is the Gemini CLI…"}]},
    {"timestamp": "2026-12-06T20:07:20.712Z", "type": "user", "content": [{"text": PROMPT}]},
    {"id": "m1", "type": "gemini", "content": ""},
    {"id": "m1", "type": "gemini", "content": "", "toolCalls": [GEMINI_CALL]},
    {"id": "m1", "type": "gemini", "content": "", "toolCalls": [GEMINI_CALL, GEMINI_SKILL]},
    {"type": "user", "content": [{"functionResponse": {"name": "mcp_dreamwell_search_memory"}}]},
]
COPILOT_LINES = [
    {"type": "session.start", "data": {"sessionId": "c1"}},
    {
        "type": "user.message",
        "timestamp": "2026-12-06T20:08:02.920Z",
        "data": {
            "content": PROMPT,
            "transformedContent": f"<current_datetime>…</current_datetime>\n\n{PROMPT}",
        },
    },
    {"type": "system.message", "data": {"role": "system", "content": "You are the GitHub…"}},
    {
        "type": "tool.execution_start",
        "data": {
            "toolCallId": "call_3",
            "toolName": "dreamwell-search_memory",
            "mcpServerName": "dreamwell",
            "mcpToolName": "search_memory",
        },
    },
    {"type": "tool.execution_start", "data": {"toolCallId": "c4", "toolName": "bash"}},
    {"type": "skill.invoked", "data": {"name": "release", "path": "/x/SKILL.md"}},
]
SEARCH = "mcp__dreamwell__search_memory"


@pytest.mark.parametrize(
    ("agent", "lines", "tools", "skills"),
    [
        ("codex", CODEX_LINES, {SEARCH: 1, "exec_command": 1}, ["release"]),
        ("gemini", GEMINI_LINES, {SEARCH: 1, "activate_skill": 1}, ["release"]),
        ("copilot", COPILOT_LINES, {SEARCH: 1, "bash": 1}, ["release"]),
    ],
)
def test_each_agent_s_transcript_gives_the_user_s_turns_tools_and_skills(
    tmp_path: Path,
    agent: str,
    lines: list[dict[str, Any]],
    tools: dict[str, int],
    skills: list[str],
) -> None:
    path = tmp_path / "transcript.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    found, _ = agent_of(f"{agent}:stop")
    news = read_new(path, 0, found.reader)
    assert [text for _, text in news.user_turns] == [PROMPT]
    assert dict(news.tools) == tools and news.skills == skills
    # through the hook: recorded once (the prompt hook's turn and the transcript's are one)
    data = tmp_path / "data"
    run(data, f"{agent}:user-prompt", stdin(agent, "user-prompt", tmp_path, prompt=PROMPT))
    run(data, f"{agent}:stop", stdin(agent, "stop", tmp_path))
    assert [(r["client"], r["content"]) for r in turns(data)] == [(agent, PROMPT)]
    used = JsonlLog(data, SKILL_USAGE).read()
    assert {r["tool"] for r in used if "tool" in r} == set(tools)
    assert {r["client"] for r in used} == {agent}


def test_two_hooks_of_one_session_at_once_lose_nothing(tmp_path: Path) -> None:
    """Copilot CLI runs its session start and its prompt's hook at the same time: the one
    that loaded the session's state second must not save over what the first recorded."""
    import threading

    from dreamwell.stores import DataDir
    from dreamwell.stores.hooks import HookSessions
    from dreamwell.stores.hooks.sessions import turn_hash

    dirs = DataDir(tmp_path)
    dirs.ensure()
    sessions = HookSessions(dirs)
    given = stdin("copilot", "user-prompt", tmp_path, prompt=PROMPT)
    prompt_hook = threading.Thread(target=run, args=(tmp_path, "copilot:user-prompt", given))
    with sessions.held("copilot-1"):  # the session start's hook, between its load and save
        state = sessions.load("copilot-1")
        prompt_hook.start()
        prompt_hook.join(timeout=1.0)  # done here unless it waits for the session
        state.injected = ["a1a1a1a1a1a1"]
        sessions.save(state)
    prompt_hook.join(timeout=30)
    final = sessions.load("copilot-1")
    assert final.injected == ["a1a1a1a1a1a1"] and turn_hash(PROMPT) in final.recorded


def test_every_agent_s_sessions_count_toward_the_dream_and_stats_name_each(
    tmp_path: Path,
) -> None:
    from dreamwell.server.hooks.stats import hook_lines
    from dreamwell.stores import DataDir
    from tests.support.hooks import wait_for_pid

    data = tmp_path / "data"
    seeded(data)
    settings = HookSettings(data_dir=data, dream_auto_sessions=2)

    def hook_of(event: str, payload: dict[str, Any]) -> str:
        return hook_output(settings, event, None, json.dumps(payload).encode())

    hook_of("codex:user-prompt", stdin("codex", "user-prompt", tmp_path, prompt=PROMPT))
    hook_of("codex:session-end", stdin("codex", "session-end", tmp_path, reason="other"))
    assert not DataDir(data).auto_dream_started.exists()  # one session: not yet
    hook_of("copilot:user-prompt", stdin("copilot", "user-prompt", tmp_path, prompt=PROMPT))
    hook_of("copilot:session-end", stdin("copilot", "session-end", tmp_path, reason="complete"))
    pid = int(DataDir(data).auto_dream_started.read_text())
    assert f"session-end started a dream (pid {pid})" in "\n".join(log_lines(data))
    lines = hook_lines(DataDir(data))
    assert any(line.strip().startswith("codex codex-1: 1 turn") for line in lines), lines
    assert any(line.strip().startswith("copilot copilot-1: 1 turn") for line in lines), lines
    os.kill(pid, signal.SIGTERM)  # the dream it started: its own tests run one through
    wait_for_pid(pid)


def test_each_agent_is_told_how_it_loads_a_listed_skill(tmp_path: Path) -> None:
    from dreamwell.server.hooks.agents.core import CLAUDE_SKILL_HINT
    from dreamwell.server.hooks.events import SKILLS_HEADER

    assert CLAUDE_SKILL_HINT in SKILLS_HEADER
    said = {
        "gemini": "activate_skill",
        "copilot": "the skill tool",
        "codex": "SKILL.md",
        "claude-code": "the Skill tool",
    }
    for name, how in said.items():
        agent, _ = agent_of("session-start" if name == "claude-code" else f"{name}:session-start")
        out = agent.output("session-start", f"{SKILLS_HEADER}\n- x: y")
        assert how in out and (name == "claude-code" or CLAUDE_SKILL_HINT not in out), out
