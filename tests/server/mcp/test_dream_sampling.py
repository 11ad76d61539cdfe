"""The client's own model for the dream (docs/claude-code.md): with no LLM configured, the `dream`
prompt asks the invoking client's model through MCP sampling; a real in-memory MCP client plays a
scripted model. A client without sampling gets the passes that need no LLM and a note on how
to configure one; a 2026-07-28 connection (no mid-request back-channel) is told why."""

from __future__ import annotations

import json
import os
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from mcp import Client, StdioServerParameters
from mcp.types import CreateMessageRequestParams, CreateMessageResult, TextContent

from dreamwell.dream import directives
from dreamwell.server.config import Settings
from dreamwell.server.mcp.app import build_server
from dreamwell.stores import CONVERSATION, FEEDBACK, JsonlLog, LongTermStore

pytestmark = pytest.mark.anyio
CORRECTION = "Stop using find /, use ripgrep"
SAID = "NO bullet points in answers, I said!"
ANTI = {
    "antiPatterns": [
        {
            "domain": "File Operations",
            "sessions": ["s1"],
            "content": "Don't run find / to search content — instead use ripgrep",
        }
    ]
}
PREFS = {
    "preferences": [
        {
            "content": "Prefers answers without bullet points",
            "sentiment": "strong",
            "occurrences": 1,
        }
    ]
}


class ScriptedModel:
    """The client's model: answers each pass by what it was asked, and keeps every request."""

    def __init__(self) -> None:
        self.asked: list[CreateMessageRequestParams] = []

    async def __call__(
        self, _context: Any, params: CreateMessageRequestParams
    ) -> CreateMessageResult:
        self.asked.append(params)
        prompt = params.messages[0].content.text  # type: ignore[union-attr]
        answer = ANTI if prompt.startswith("Corrections:") else {}
        answer = PREFS if prompt.startswith("Conversation log:") else answer
        return CreateMessageResult(
            role="assistant", content=TextContent(type="text", text=json.dumps(answer)), model="m"
        )


HOST_RULES = "- Keep every name exactly as given.\n- Never store secrets."
OWN_PREFERENCE_PROMPT = "Find the user's lasting preferences in this log. Answer in JSON."


def seeded(data: Path) -> Settings:
    data.mkdir(parents=True, exist_ok=True)
    (data / "memory-rules.md").write_text(HOST_RULES, encoding="utf-8")
    (data / "pref-dream.md").write_text(OWN_PREFERENCE_PROMPT, encoding="utf-8")
    JsonlLog(data, FEEDBACK).append({"session": "s1", "kind": "Correction", "detail": CORRECTION})
    JsonlLog(data, CONVERSATION).append({"session": "s1", "role": "user", "content": SAID})
    return Settings(data_dir=data, embedder="none")  # no LLM configured


async def dream(client: Client) -> str:
    result = await client.get_prompt("dream", {"apply": "yes"})
    return result.messages[0].content.text  # type: ignore[union-attr]


async def test_the_dream_asks_the_clients_model_through_sampling(tmp_path: Path) -> None:
    model = ScriptedModel()
    settings = seeded(tmp_path)
    async with Client(build_server(settings), mode="legacy", sampling_callback=model) as client:
        text = await dream(client)
    asked = {p.messages[0].content.text.split(":")[0]: p for p in model.asked}  # type: ignore[union-attr]
    assert set(asked) == {"Corrections", "Conversation log"}, text
    anti, prefs = asked["Corrections"], asked["Conversation log"]
    # the same host rules: the data directory's own prompt files, then its memory rules
    assert anti.system_prompt == f"{directives.ANTI_PATTERNS}\n\n{HOST_RULES}"
    assert prefs.system_prompt == f"{OWN_PREFERENCE_PROMPT}\n\n{HOST_RULES}"
    for params in (anti, prefs):  # the same schemas, asked of the same size of answer
        assert "Answer with JSON only, shaped like:" in params.messages[0].content.text  # type: ignore[union-attr]
        assert params.max_tokens == settings.llm_max_tokens
    assert CORRECTION in anti.messages[0].content.text  # type: ignore[union-attr]
    assert SAID in prefs.messages[0].content.text  # type: ignore[union-attr]
    saved = {e.category: e.content for e in LongTermStore(tmp_path).entries()}
    assert saved == {
        "anti-patterns/file-operations": ANTI["antiPatterns"][0]["content"],
        "user-preferences/inferred": "Prefers answers without bullet points",
    }
    assert "sampling:" in text and "No LLM is configured" not in text
    assert JsonlLog(tmp_path, FEEDBACK).read() == []  # the Correction was mined: consumed


async def test_a_client_without_sampling_gets_the_no_llm_passes_and_a_note(tmp_path: Path) -> None:
    settings = seeded(tmp_path)
    async with Client(build_server(settings), mode="legacy") as client:
        text = await dream(client)
    assert "anti-patterns: skipped (no LLM: no LLM configured" in text
    last = text.splitlines()[-1]
    assert last.startswith("No LLM is configured and this client does not offer sampling")
    # the whole configuration: provider, model and endpoint, or Claude Code's own
    assert "llm_provider=openai + llm_model + llm_base_url" in last and "ollama_host" in last
    assert "--llm-provider claude-code" in last
    assert LongTermStore(tmp_path).entries() == []
    assert [r["detail"] for r in JsonlLog(tmp_path, FEEDBACK).read()] == [CORRECTION]  # kept


async def test_a_connection_without_a_back_channel_is_told_why(tmp_path: Path) -> None:
    """On 2026-07-28 (the default `auto` era in process) a server cannot ask mid-request."""
    model = ScriptedModel()
    async with Client(build_server(seeded(tmp_path)), sampling_callback=model) as client:
        text = await dream(client)
    assert model.asked == [] and "cannot ask the client's model" in text
    assert LongTermStore(tmp_path).entries() == []


async def test_an_edit_while_the_clients_model_thinks_wins_over_its_merge(tmp_path: Path) -> None:
    """The same compare-and-set as with an HTTP model: the user changes a memory while the
    client's model plans a merge of it; the merge is skipped as a conflict, the edit kept."""
    store = LongTermStore(tmp_path)
    one = store.save("Standup is at 9:30 with Priya", "work/meetings").entry
    two = store.save("Daily standup happens at 9:30, Priya runs it", "work/meetings").entry
    merged = "Standup 9:30 daily, Priya runs it"

    async def model(_context: Any, params: CreateMessageRequestParams) -> CreateMessageResult:
        prompt = params.messages[0].content.text  # type: ignore[union-attr]
        answer: dict[str, Any] = {}
        if prompt.startswith("Entries:"):  # the user edits meanwhile, from another process
            LongTermStore(tmp_path).apply([replace(two, importance=0.9)])
            answer = {
                "toDelete": [],
                "toSave": [{"content": merged, "sourceIds": [one.id, two.id]}],
            }
        text = TextContent(type="text", text=json.dumps(answer))
        return CreateMessageResult(role="assistant", content=text, model="m")

    settings = Settings(data_dir=tmp_path, embedder="none")
    async with Client(build_server(settings), mode="legacy", sampling_callback=model) as client:
        text = await dream(client)
    assert "consolidation: ran" in text and "conflict: skipped merge" in text, text
    after = {e.id: e for e in LongTermStore(tmp_path).entries()}
    assert set(after) == {one.id, two.id} and after[two.id].importance == 0.9


async def test_the_clients_model_is_asked_over_stdio(tmp_path: Path) -> None:
    """As Claude Desktop and IDEs run it: `dreamwell serve` over stdio, the client's model
    answering the sampling requests the dream sends mid-prompt."""
    model = ScriptedModel()
    seeded(tmp_path)
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "dreamwell.server", "serve", "--data-dir", str(tmp_path)],
        env={**os.environ, "DREAMWELL_EMBEDDER": "none"},
    )
    async with Client(params, mode="legacy", sampling_callback=model) as client:
        text = await dream(client)
    assert "anti-patterns: ran, 1 change(s)" in text and "preferences: ran, 1 change(s)" in text
    assert len(model.asked) == 2
