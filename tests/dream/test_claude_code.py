"""The dream through the user's own Claude Code (`llm_provider=claude-code`, docs/dreaming.md), with
the real `claude` binary against a scripted Anthropic Messages API on 127.0.0.1: the API sees
the pass's schema as Claude Code's StructuredOutput tool and answers with a call of it.
Each `claude` run costs about a second, so each test asks for as few as it can."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

from dreamwell.stores import LongTermStore, MemoryEntry, utcnow
from tests.support.anthropic_api import (
    AnthropicAPI,
    Turn,
    messages_text,
    structured,
    structured_schema,
    tool_names,
)
from tests.support.claude_code import ClaudeHome

A, B = "a" * 12, "b" * 12
MERGED = "Daily standup at 9:30, run by Priya"


def two_duplicates(data: Path) -> dict[str, MemoryEntry]:
    store = LongTermStore(data, embedder=None)
    when = utcnow() - timedelta(days=2)
    store.apply(
        [
            MemoryEntry(A, "Standup is at 9:30 with Priya", "work/meetings", (), when, when, when),
            MemoryEntry(
                B,
                "Daily standup happens at 9:30, Priya runs it",
                "work/meetings",
                (),
                when,
                when,
                when,
            ),
        ]
    )
    return everything(data)


def everything(data: Path) -> dict[str, MemoryEntry]:
    return {e.id: e for e in LongTermStore(data, embedder=None).entries(include_archived=True)}


def merge_the_two(request: dict[str, Any]) -> Turn:
    """A model that merges the two shown entries when asked to consolidate, and proposes
    nothing to any other pass (every list its schema asks for, empty)."""
    schema = structured_schema(request)
    if schema is None:
        return Turn(text="A title")
    keys = list(schema.get("properties", {}))
    if "toSave" in keys and "toDelete" in keys and "sourceNames" not in str(schema):
        plan = {"content": MERGED, "category": "work/meetings", "tags": ["standup"]}
        plan |= {"sourceIds": [A, B], "importance": 0.7}
        return structured({"toDelete": [], "toSave": [plan]})
    return structured({k: [] for k in keys})


def test_the_dream_asks_claude_code_merges_two_duplicates_and_undoes_exactly(
    tmp_path: Path,
) -> None:
    home = ClaudeHome(tmp_path)
    home.dreamwell("install", "claude-code")  # dreamwell's hooks are there: none may fire
    before = two_duplicates(home.data_dir)
    with AnthropicAPI(merge_the_two) as api:
        done = home.dreamwell(
            "dream", "--once", "--llm-provider", "claude-code", "--claude-path",
            str(home.binary), api=api,
        )  # fmt: skip
        asked = [r for r in api.requests if structured_schema(r) is not None]
    out = done.stdout
    assert "LLM: claude-code:haiku, 1 call, " in out, out
    assert "- consolidation: ran, 3 change(s)" in out, out
    live = [e for e in everything(home.data_dir).values() if e.live]
    assert [e.content for e in live] == [MERGED]
    # one question, with the pass's own system prompt, the schema as the only real tool
    assert len(asked) == 1
    names = tool_names(asked[0])
    assert "StructuredOutput" in names and not [n for n in names if n.startswith("mcp__")]
    assert "Bash" not in names and "Read" not in names
    assert "consolidat" in messages_text(asked[0]).lower()
    assert asked[0]["model"].startswith("claude-haiku")
    # the dream's own claude ran no hook: no hooks.log line, no conversation recorded
    assert not (home.data_dir / "hooks.log").exists()
    assert not (home.data_dir / "conversation.jsonl").exists()
    assert not list((home.home / ".claude" / "projects").glob("**/*.jsonl"))  # no session
    run = out.split("Dream report ", 1)[1].split(" ", 1)[0]
    home.dreamwell("dream", "--undo", run)
    assert everything(home.data_dir) == before


def test_a_budget_of_one_token_runs_no_claude_and_names_the_passes_it_skipped(
    tmp_path: Path,
) -> None:
    home = ClaudeHome(tmp_path)
    before = two_duplicates(home.data_dir)
    with AnthropicAPI(merge_the_two) as api:
        done = home.dreamwell(
            "dream", "--once", "--llm-provider", "claude-code", "--claude-path",
            str(home.binary), "--dream-budget-tokens", "1", api=api,
        )  # fmt: skip
        assert api.requests == []
    out = done.stdout
    assert "LLM: claude-code:haiku, 0 calls, 0 of 1 tokens" in out, out
    assert "- consolidation: skipped (token budget spent: 0 of 1 tokens)" in out, out
    assert everything(home.data_dir) == before


def test_an_answer_without_structured_output_changes_nothing(tmp_path: Path) -> None:
    """The model answers in text, twice: Claude Code exits 0 with no `structured_output`;
    the pass fails with a bad answer and writes nothing."""
    home = ClaudeHome(tmp_path)
    before = two_duplicates(home.data_dir)
    with AnthropicAPI(lambda request: Turn(text="I would merge them.")) as api:
        done = home.dreamwell(
            "dream", "--once", "--llm-provider", "claude-code", "--claude-path",
            str(home.binary), api=api,
        )  # fmt: skip
    out = done.stdout
    assert "- consolidation: failed" in out and "without structured output" in out, out
    assert everything(home.data_dir) == before
