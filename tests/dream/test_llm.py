"""LLM passes with the real `ollama` client against a fake Ollama on 127.0.0.1: good plans,
bad plans, broken answers, errors and time-outs. Nothing may be lost in any of them."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

from dreamwell.dream import DreamOptions, OllamaLLM, backoff, directives, feeding, passes, run_cycle
from dreamwell.stores import CONVERSATION, FEEDBACK, JsonlLog, LongTermStore, MemoryEntry, utcnow
from tests.support.fake_ollama import fake_ollama, unreachable_host

QUIET = DreamOptions(quiet_seconds=0)
A, B, C, D = "a" * 12, "b" * 12, "c" * 12, "d" * 12


def seeded(tmp_path: Path) -> LongTermStore:
    store = LongTermStore(tmp_path)
    now = utcnow() - timedelta(days=2)
    store.apply(
        [
            MemoryEntry(
                A, "Standup is at 9:30 with Priya", "work/meetings", ("standup",), now, now, now
            ),
            MemoryEntry(
                B,
                "Daily standup happens at 9:30, Priya runs it",
                "work/meetings",
                (),
                now,
                now,
                now + timedelta(hours=1),
                reinforcement_count=2,
            ),
            MemoryEntry(C, "Flight to Lisbon on 12 May 2024", "travel", (), now, now, now),
            MemoryEntry(
                D,
                "The user's AWS account id is 1234-5678",
                "work/cloud",
                (),
                now,
                now,
                now,
                importance=0.9,
            ),
        ]
    )
    return store


def plan(to_save: list[dict[str, object]], to_delete: list[str] | None = None) -> str:
    return json.dumps({"toDelete": to_delete or [], "toSave": to_save})


def live_contents(store: LongTermStore) -> set[str]:
    return {e.content for e in store.entries()}


def all_ids(store: LongTermStore) -> set[str]:
    return {e.id for e in store.entries(include_archived=True)}


def dream(store: LongTermStore, host: str, timeout: float = 5.0) -> dict[str, str]:
    report = run_cycle(store, OllamaLLM(host, "fake", timeout), options=QUIET)
    return {p.name: f"{p.status} {p.reason}".strip() for p in report.passes}


def test_a_good_plan_merges_with_host_arithmetic_and_archives_sources(tmp_path: Path) -> None:
    store = seeded(tmp_path)
    good = plan(
        [
            {
                "content": "Daily standup at 9:30, run by Priya",
                "category": "work/meetings",
                "tags": ["standup"],
                "sourceIds": [A, B],
                "importance": 0.7,
            }
        ]
    )
    with fake_ollama(good) as (host, script):
        status = dream(store, host)
    assert status["consolidation"] == "ran"
    merged = [e for e in store.entries() if e.category == "work/meetings"]
    assert len(merged) == 1 and merged[0].content == "Daily standup at 9:30, run by Priya"
    m = merged[0]
    assert m.reinforcement_count == 3 and m.importance == 0.7
    assert m.last_seen_at == store.get(B).last_seen_at  # type: ignore[union-attr]
    assert not store.get(A).live and not store.get(B).live  # type: ignore[union-attr]
    assert script.requests[0]["format"]["properties"]  # JSON-schema structured output
    prompt = script.requests[0]["messages"][1]["content"]
    assert f"id={A}" in prompt and "reinforced=2×" in prompt and "first=" in prompt


def test_unknown_ids_are_ignored_and_nothing_else_changes(tmp_path: Path) -> None:
    store = seeded(tmp_path)
    before = live_contents(store)
    bad = plan([{"content": "made up", "sourceIds": ["ffffffffffff"]}], ["eeeeeeeeeeee"])
    with fake_ollama(bad) as (host, _):
        assert dream(store, host)["consolidation"] == "ran"
    assert live_contents(store) == before


def test_a_merge_that_drops_a_number_or_name_is_rejected(tmp_path: Path) -> None:
    store = seeded(tmp_path)
    before = live_contents(store)
    lossy = plan([{"content": "Daily standup with the team", "sourceIds": [A, B]}])
    with fake_ollama(lossy) as (host, _):
        dream(store, host)
    assert live_contents(store) == before


def test_deletions_need_a_newer_related_successor_and_spare_high_value(tmp_path: Path) -> None:
    store = seeded(tmp_path)
    deletions = [
        {"id": D, "supersededBy": B},  # high value: kept
        {"id": C, "supersededBy": A},  # a flight is not superseded by a standup: refused
        {"id": C, "supersededBy": ""},  # no successor: refused
    ]
    with fake_ollama(json.dumps({"toDelete": deletions, "toSave": []})) as (host, _):
        dream(store, host)
    assert {e.id for e in store.entries()} == {A, B, C, D}


def test_a_superseded_entry_is_archived_naming_its_successor(tmp_path: Path) -> None:
    store = seeded(tmp_path)
    later = utcnow()
    store.apply(
        [
            MemoryEntry(
                "e" * 12, "Flight to Lisbon moved to 14 May 2024", "travel", (), later, later, later
            )
        ]
    )
    answer = json.dumps({"toDelete": [{"id": C, "supersededBy": "e" * 12}], "toSave": []})
    with fake_ollama(answer) as (host, _):
        assert dream(store, host)["consolidation"] == "ran"
    gone = store.get(C)
    assert gone is not None and not gone.live  # archived, restorable


def test_think_preambles_and_snake_case_keys_are_accepted(tmp_path: Path) -> None:
    store = seeded(tmp_path)
    answer = "<think>They look alike {not json}</think> Sure: " + json.dumps(
        {
            "to_delete": [],
            "to_save": [{"content": "Standup 9:30 daily, Priya runs it", "source_ids": [A, B]}],
        }
    )
    with fake_ollama(answer) as (host, _):
        assert dream(store, host)["consolidation"] == "ran"
    assert "Standup 9:30 daily, Priya runs it" in live_contents(store)


def test_broken_answers_errors_and_time_outs_change_nothing(tmp_path: Path) -> None:
    for i, answer in enumerate(['{"toDelete": [', "no json at all", 500, (3.0, plan([]))]):
        store = seeded(tmp_path / str(i))
        before = store.entries(include_archived=True)
        with fake_ollama(answer) as (host, _):
            status = dream(store, host, timeout=1.0)
        assert status["consolidation"].startswith("failed"), (answer, status)
        assert status["decay"] == "ran" and status["maintenance"] == "ran"
        assert store.entries(include_archived=True) == before


def test_an_unreachable_ollama_skips_llm_passes_with_the_reason(tmp_path: Path) -> None:
    store = seeded(tmp_path)
    status = dream(store, unreachable_host())
    assert status["consolidation"].startswith("skipped no LLM:")
    assert "unreachable" in status["consolidation"]
    assert status["exact-duplicates"] == "ran"


def test_anti_patterns_are_mined_from_corrections(tmp_path: Path) -> None:
    store = LongTermStore(tmp_path)
    JsonlLog(tmp_path, FEEDBACK).append(
        {"session": "s1", "kind": "Correction", "detail": "Stop using find /, use ripgrep"}
    )
    answer = json.dumps(
        {
            "antiPatterns": [
                {
                    "domain": "File Operations",
                    "sessions": ["s1", "s-unknown"],
                    "content": "Don't run find / to search content — instead use ripgrep",
                }
            ]
        }
    )
    with fake_ollama(answer) as (host, _):
        assert dream(store, host)["anti-patterns"] == "ran"
    [entry] = store.entries()
    assert entry.category == "anti-patterns/file-operations"
    assert entry.tags == ("anti-pattern",) and entry.metadata["derived_from"] == "s1"
    assert JsonlLog(tmp_path, FEEDBACK).read() == []


def test_preferences_follow_the_thresholds_and_flag_sensitive_ones(tmp_path: Path) -> None:
    store = LongTermStore(tmp_path)
    log = JsonlLog(tmp_path, CONVERSATION)
    log.append({"session": "s1", "role": "user", "content": "NO bullet points, I said!"})
    for session in ("s2", "s3"):
        said = "Please confirm card payments with me first"
        log.append({"session": session, "role": "user", "content": said})
    answer = json.dumps(
        {
            "preferences": [
                {
                    "content": "Prefers prose to bullet points",
                    "sentiment": "strong",
                    "occurrences": 1,
                },
                {"content": "Likes short answers", "sentiment": "casual", "occurrences": 2},
                {
                    "content": "Wants card payments confirmed first",
                    "sentiment": "mild",
                    "occurrences": 2,
                    "sensitive": False,
                },
            ]
        }
    )
    with fake_ollama(answer) as (host, _):
        assert dream(store, host)["preferences"] == "ran"
    saved = {e.content: e for e in store.entries()}
    assert set(saved) == {"Prefers prose to bullet points", "Wants card payments confirmed first"}
    pref = saved["Prefers prose to bullet points"]
    assert pref.category == "user-preferences/inferred" and pref.tags == ("inferred",)
    assert pref.metadata == {"source": "inferred"}
    assert (
        saved["Wants card payments confirmed first"].metadata["requires_user_permission"] == "true"
    )
    # the anti-pattern and skill-gap passes failed on this answer: what they read stays
    assert len(log.read()) == 3


def test_the_conversation_log_is_kept_when_the_llm_fails(tmp_path: Path) -> None:
    store = LongTermStore(tmp_path)
    JsonlLog(tmp_path, CONVERSATION).append({"session": "s", "role": "user", "content": "hi"})
    with fake_ollama(500) as (host, _):
        assert dream(store, host)["preferences"].startswith("failed")
    assert [r["content"] for r in JsonlLog(tmp_path, CONVERSATION).read()] == ["hi"]


def test_directive_files_replace_the_built_in_prompts(tmp_path: Path) -> None:
    store = seeded(tmp_path)
    (tmp_path / "dream.md").write_text("CUSTOM CONSOLIDATION RULES")
    (tmp_path / "memory-rules.md").write_text("CUSTOM MEMORY RULES")
    with fake_ollama(plan([])) as (host, script):
        dream(store, host)
    system = script.requests[0]["messages"][0]["content"]
    assert system == "CUSTOM CONSOLIDATION RULES\n\nCUSTOM MEMORY RULES"


def test_one_bad_chunk_no_longer_fails_the_pass(tmp_path: Path) -> None:
    store = seeded(tmp_path)
    now = utcnow()
    snapshot = {e.id: e for e in sorted(store.entries(), key=lambda e: e.id, reverse=True)}
    vectors = {A: [1.0, 0.0, 0.0], B: [0.98, 0.2, 0.0], C: [0.0, 1.0, 0.0], D: [0.0, 0.98, 0.2]}
    good = plan(
        [{"content": "Daily standup at 9:30, run by Priya", "sourceIds": [A, B], "tags": []}]
    )
    with fake_ollama("{broken", "{still broken", good) as (host, script):
        llm = OllamaLLM(host, "fake", 5.0)
        result = passes.consolidation_pass(snapshot, llm, tmp_path, [], now, vectors, None, 2)
    assert result.status == "ran" and len(script.requests) == 3
    assert "rejected" in script.requests[1]["messages"][1]["content"]  # the retry quotes it
    assert any("skipped a chunk of 2 entries" in n for n in result.notes)
    assert f"id={C}" in script.requests[0]["messages"][1]["content"]  # {C, D} went first
    assert [c.kind for c in result.changes] == ["merge", "archive", "archive"]


def test_the_anti_pattern_pass_has_its_own_system_prompt(tmp_path: Path) -> None:
    store = LongTermStore(tmp_path)
    (tmp_path / "anti-patterns.md").write_text("CUSTOM ANTI")
    corrections = [{"session": "s1", "kind": "Correction", "detail": "Stop using find /"}]
    answer = json.dumps({"antiPatterns": []})
    with fake_ollama(answer) as (host, script):
        llm = OllamaLLM(host, "fake", 5.0)
        passes.anti_pattern_pass({}, llm, tmp_path, corrections, utcnow())
    system, user = (m["content"] for m in script.requests[0]["messages"])
    assert system.startswith("CUSTOM ANTI") and "toDelete" not in system
    assert "Stop using find /" in user
    assert store.entries() == []


def test_pref_dream_md_replaces_the_preference_prompt_entirely(tmp_path: Path) -> None:
    (tmp_path / "pref-dream.md").write_text("CUSTOM PREFS")
    log = [{"session": "s", "role": "user", "content": "no emojis please"}]
    with fake_ollama(json.dumps({"preferences": []})) as (host, script):
        passes.preference_pass({}, OllamaLLM(host, "fake", 5.0), tmp_path, log, utcnow())
    system, user = (m["content"] for m in script.requests[0]["messages"])
    assert system.startswith("CUSTOM PREFS")
    assert directives.PREFERENCES[:40] not in system + user


def test_the_preference_guard_refuses_what_the_user_never_said(tmp_path: Path) -> None:
    log = [
        {"session": "s", "role": "user", "content": "NO emojis in commit messages, ever!"},
        {"session": "s", "role": "user", "content": "write me a haiku about commits"},
    ]
    prefs = [
        ("<the preference, in the user's own words>", "strong"),
        ("strong|mild|casual", "strong"),
        ("Write me a haiku about commits", "strong"),
        ("No emojis", "strong"),
        ("Prefers dark mode in the editor", "strong"),
        ("No emojis in commit messages", "strong"),
    ]
    answer = json.dumps(
        {
            "preferences": [
                {"content": c, "sentiment": s, "occurrences": 1, "sensitive": False}
                for c, s in prefs
            ]
        }
    )
    with fake_ollama(answer) as (host, _):
        result = passes.preference_pass({}, OllamaLLM(host, "fake", 5.0), tmp_path, log, utcnow())
    assert [c.after.content for c in result.changes if c.after] == ["No emojis in commit messages"]
    assert len(result.notes) == 5


def test_the_judge_turns_recalls_and_follow_ups_into_feedback(tmp_path: Path) -> None:
    store = seeded(tmp_path)
    snapshot = {e.id: e for e in store.entries()}
    recalls = [
        {"ts": "2026-01-01T10:00:00+00:00", "caller": "c1", "ids": [A, C]},
        {"ts": "2026-01-01T12:00:00+00:00", "caller": "c2", "ids": [D]},  # nothing followed
    ]
    conversation = [
        {
            "ts": "2026-01-01T10:01:00+00:00",
            "caller": "c1",
            "role": "user",
            "content": "No, the standup moved to 10",
        },
        {
            "ts": "2026-01-01T10:02:00+00:00",
            "caller": "c9",
            "role": "user",
            "content": "other caller",
        },
    ]
    answer = json.dumps(
        {
            "judgements": [
                {"id": A, "verdict": "harmful", "reason": "user said the standup moved to 10"},
                {"id": C, "verdict": "unclear", "reason": "not mentioned"},
                {"id": "id", "verdict": "helpful", "reason": "copied placeholder id"},
            ]
        }
    )
    assert feeding.judge_recalls(None, snapshot, recalls, conversation) == []
    with fake_ollama(answer) as (host, script):
        judged = feeding.judge_recalls(
            OllamaLLM(host, "fake", 5.0), snapshot, recalls, conversation
        )
    assert len(script.requests) == 1
    prompt = script.requests[0]["messages"][1]["content"]
    assert "standup moved to 10" in prompt and "other caller" not in prompt
    assert judged == [
        {
            "kind": "harmful",
            "memory_id": A,
            "session": "c1",
            "detail": "user said the standup moved to 10",
            "source": "judge",
        }
    ]
    result = passes.scoring_pass(snapshot, judged, [])
    assert [c.after.score < 0 for c in result.changes if c.after] == [True]


def test_enrich_splits_a_long_note_into_facts_derived_from_it(tmp_path: Path) -> None:
    now = utcnow()
    note = MemoryEntry(
        "n" * 12,
        "Priya moved to Berlin in May 2025 and she leads the payments team",
        "people",
        (),
        now,
        now,
        now,
    )
    facts = {
        "facts": [
            {
                "content": "Priya moved to Berlin in May 2025",
                "category": "people/priya",
                "tags": ["move"],
            },
            {
                "content": "Priya leads the payments team",
                "category": "<category/subcategory>",
                "tags": [],
            },
            {"content": "Priya earns 90000 EUR", "category": "people", "tags": []},  # invented
        ]
    }
    with fake_ollama(json.dumps(facts)) as (host, script):
        derived = feeding.enrich(note, OllamaLLM(host, "fake", 5.0), "RULES", now)
    assert script.requests[0]["messages"][1]["content"].startswith("RULES")
    assert [d.content for d in derived] == [
        "Priya moved to Berlin in May 2025",
        "Priya leads the payments team",
    ]
    assert [d.category for d in derived] == ["people/priya", "people"]
    assert all(d.metadata == {"derived_from": note.id, "source": "enrich"} for d in derived)
    assert feeding.covered(note, derived) and not feeding.covered(note, derived[:1])


def test_a_rate_limited_ollama_is_asked_once_a_cycle_and_nothing_is_booked_as_spent(
    tmp_path: Path,
) -> None:
    """The breaker of every backend (dream/budget.py): the first 429 without retry-after ends
    the cycle's questions; the passes after it are skipped and keep their inputs; the next
    automatic cycle is told to wait longer."""
    store = seeded(tmp_path)
    JsonlLog(tmp_path, CONVERSATION).append({"session": "s", "role": "user", "content": "hi"})
    JsonlLog(tmp_path, FEEDBACK).append({"kind": "Correction", "detail": "no, use tabs"})
    before = store.entries(include_archived=True)
    with fake_ollama(429) as (host, script):
        report = run_cycle(store, OllamaLLM(host, "fake", 5.0), options=QUIET)
    chats = [r for r in script.requests if r["path"] == "/api/chat"]
    assert len(chats) == 1
    assert "429" in report.llm_stopped
    assert (report.llm_calls, report.llm_failed, report.llm_tokens) == (1, 1, 0)
    status = {p.name: f"{p.status} {p.reason}" for p in report.passes}
    assert status["consolidation"].startswith("failed") and "429" in status["consolidation"]
    assert status["preferences"] == "skipped LLM stopped after a failure earlier in this cycle"
    assert store.entries(include_archived=True) == before
    assert len(JsonlLog(tmp_path, CONVERSATION).read()) == 1  # kept for a later cycle
    assert backoff.read(tmp_path).failures == 1
