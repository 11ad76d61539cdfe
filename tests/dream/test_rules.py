"""The host's dream rules as pure functions: decay, merge arithmetic, fact preservation,
scoring and pruning."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from hypothesis import given, settings
from hypothesis import strategies as st

from dreamwell.dream.feeding import covered, mine_corrections
from dreamwell.dream.grouping import GROUP_PROMPT, neighbour_groups, pack_prompts
from dreamwell.dream.passes import consolidation_prompts
from dreamwell.dream.rules import (
    DecayPolicy,
    decay,
    dropped_facts,
    grounded,
    high_value,
    merge_subject_time,
    merged,
    placeholder,
    prunable,
    scored,
    task_request,
    too_short,
)
from dreamwell.stores import MemoryEntry

T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)


def entry(
    content: str = "fact", importance: float = 0.9, seen: datetime = T0, **kw: object
) -> MemoryEntry:
    return MemoryEntry(
        kw.pop("id", "a" * 12),
        content,
        kw.pop("category", None),  # type: ignore[arg-type]
        (),
        seen,
        seen,
        seen,
        importance=importance,
        **kw,
    )  # type: ignore[arg-type]


def run_decay(start: MemoryEntry, step: timedelta, until: datetime) -> MemoryEntry:
    current, now = start, T0
    while now < until:
        now = min(now + step, until)
        current = decay(current, now, DecayPolicy())
    return current


@settings(max_examples=40, deadline=None)
@given(st.floats(0.11, 1.0), st.integers(0, 400))
def test_decay_is_the_same_daily_weekly_or_twice_a_day(importance: float, seen_days: int) -> None:
    start = entry(importance=importance, seen=T0 - timedelta(days=seen_days))
    year = T0 + timedelta(days=365)
    daily = run_decay(start, timedelta(days=1), year).importance
    weekly = run_decay(start, timedelta(days=7), year).importance
    twice = run_decay(start, timedelta(hours=12), year).importance
    once = decay(start, year, DecayPolicy()).importance
    assert abs(daily - weekly) < 1e-9 and abs(daily - twice) < 1e-9 and abs(daily - once) < 1e-9


def test_decay_respects_grace_half_life_and_floor() -> None:
    e = entry(importance=0.8)
    policy = DecayPolicy()
    assert decay(e, T0 + timedelta(days=30), policy) == e  # inside the grace window
    after = decay(e, T0 + timedelta(days=75), policy)  # 45 days past grace: one half-life
    assert abs(after.importance - 0.4) < 1e-12 and after.decayed_at == T0 + timedelta(days=75)
    assert decay(e, T0 + timedelta(days=3000), policy).importance == 0.10
    off = DecayPolicy(half_life=timedelta(0))
    assert decay(e, T0 + timedelta(days=3000), off) == e


def test_reinforcement_restarts_the_grace_window() -> None:
    e = decay(entry(importance=0.8), T0 + timedelta(days=75), DecayPolicy())
    seen_again = MemoryEntry(
        e.id,
        e.content,
        None,
        (),
        e.created_at,
        e.updated_at,
        T0 + timedelta(days=80),
        importance=e.importance,
        decayed_at=e.decayed_at,
    )
    assert decay(seen_again, T0 + timedelta(days=100), DecayPolicy()) == seen_again


stamps = st.datetimes(
    min_value=datetime(2020, 1, 1), max_value=datetime(2030, 1, 1), timezones=st.just(timezone.utc)
)


@given(
    st.lists(st.tuples(stamps, stamps, st.integers(1, 50), st.floats(0, 1)), min_size=1, max_size=8)
)
def test_merge_arithmetic_takes_min_created_max_seen_and_sums_reinforcement(
    rows: list[tuple[datetime, datetime, int, float]],
) -> None:
    sources = [
        MemoryEntry(f"{i:012x}", "x", None, (), min(a, b), min(a, b), max(a, b), n, imp)
        for i, (a, b, n, imp) in enumerate(rows)
    ]
    m = merged(sources, "x", None, (), None, T0)
    assert m.created_at == min(s.created_at for s in sources)
    assert m.last_seen_at == max(s.last_seen_at for s in sources)
    assert m.reinforcement_count == sum(s.reinforcement_count for s in sources)
    assert m.importance == max(s.importance for s in sources)
    assert m.metadata["merged_from"].split(",") == [s.id for s in sources]


def test_subject_time_merge_keeps_the_most_specific_point_and_widens_the_range() -> None:
    a = entry(metadata={"subjectTime": "2024-05", "subjectTimeStart": "2024-05-01"})
    b = entry(metadata={"subjectTime": "2024-05-12", "subjectTimeEnd": "2024-05-20"})
    c = entry(metadata={"subjectTimeStart": "2024-04-28", "subjectTimeEnd": "2024-05-03"})
    assert merge_subject_time([a, b, c]) == {
        "subjectTime": "2024-05-12",
        "subjectTimeStart": "2024-04-28",
        "subjectTimeEnd": "2024-05-20",
    }


def test_a_merge_that_drops_a_name_number_or_date_is_caught() -> None:
    sources = [
        entry("Met Priya in Lisbon on 12 March 2024 about the v2.3 launch"),
        entry("The launch budget is 40,000 EUR"),
    ]
    assert (
        dropped_facts(
            sources, "Met Priya in Lisbon on 12 March 2024 about the v2.3 launch; budget 40,000 EUR"
        )
        == []
    )
    lost = dropped_facts(sources, "Met Priya about the launch; budget 40,000 EUR")
    assert {"Lisbon", "12", "march", "2024", "2.3"} <= set(lost)
    assert dropped_facts([entry("We may go hiking. It rained.")], "Hiking maybe; rain") == []


def test_ema_scores_stay_between_the_targets() -> None:
    score = 0.0
    for _ in range(50):
        score = scored(score, helpful=False)
    assert -3.0 < score <= -2.99
    assert scored(0.0, helpful=True) == 0.6


def test_pruning_thresholds_are_reachable_and_spare_high_value_entries() -> None:
    score = 0.0
    for _ in range(5):
        score = scored(score, helpful=False)
    bad = entry(importance=0.5, score=score)
    assert prunable(bad, T0)
    assert not prunable(entry(importance=0.5, score=-1.6), T0 + timedelta(days=30))
    assert prunable(entry(importance=0.5, score=-1.6), T0 + timedelta(days=200))
    assert not prunable(entry(importance=0.85, score=-2.9), T0)
    five = MemoryEntry(
        "b" * 12, "x", None, (), T0, T0, T0, reinforcement_count=5, importance=0.2, score=-2.9
    )
    assert high_value(five) and not prunable(five, T0)


def test_sources_that_each_carry_their_own_date_or_name_are_distinct_episodes() -> None:
    from dreamwell.dream.rules import distinct_episodes, unrelated_sources

    trips = [entry("Trip to Lisbon in May 2024"), entry("Trip to Lisbon in May 2025")]
    assert distinct_episodes(trips) == ("2024", "2025")
    talks = [entry("Priya presented the roadmap"), entry("Marco presented the roadmap")]
    assert distinct_episodes(talks) == ("Priya", "Marco")
    same = [entry("Standup is at 9:30 with Priya"), entry("Daily standup at 9:30, Priya runs it")]
    assert distinct_episodes(same) is None  # one side adds detail: still one fact
    assert unrelated_sources([entry("Priya likes Rust"), entry("The Oslo office closes at 5")])
    assert not unrelated_sources(same)


def spread(n: int) -> list[MemoryEntry]:
    """n unrelated entries, each alone in its own category (so category order spreads them)."""
    return [
        entry(f"fact number {i}", id=f"{i:012d}", category=f"c{i:03d}", seen=T0 + timedelta(i))
        for i in range(n)
    ]


def one_hot(i: int, dims: int = 64, noise: float = 0.0) -> list[float]:
    v = [0.0] * dims
    v[i % dims] = 1.0
    v[(i + 1) % dims] = noise
    return v


def test_neighbour_groups_bring_duplicates_from_far_categories_and_chunks_together() -> None:
    entries = spread(50)
    vectors = {e.id: one_hot(i) for i, e in enumerate(entries)}
    first, last = entries[0], entries[49]  # categories c000 and c049: chunks 1 and 2 of 40
    vectors[last.id] = one_hot(0, noise=0.3)  # cosine 0.96 with `first`
    vectors[entries[45].id] = one_hot(0, noise=-0.9)  # cosine 0.74: same group
    by_category = consolidation_prompts(entries, None)
    assert not any({first.id, last.id} <= {e.id for e in p} for p in by_category)
    prompts = consolidation_prompts(entries, vectors)
    [group] = [p for p in prompts if first in p]
    assert {e.id for e in group} == {first.id, last.id, entries[45].id}
    assert all(len(p) <= GROUP_PROMPT for p in prompts)


def test_entries_without_a_vector_still_get_prompts_and_loners_are_left_out() -> None:
    entries = spread(5)
    vectors = {e.id: one_hot(i) for i, e in enumerate(entries[:3])}  # all unrelated
    prompts = consolidation_prompts(entries, vectors)
    assert [sorted(e.id for e in p) for p in prompts] == [[entries[3].id, entries[4].id]]


def test_large_groups_are_cut_and_small_ones_packed_within_the_bound() -> None:
    entries = spread(40)
    vectors = {e.id: one_hot(0, noise=0.01 * i) for i, e in enumerate(entries[:35])}
    vectors |= {e.id: one_hot(10, noise=0.01 * i) for i, e in enumerate(entries[35:])}
    groups = neighbour_groups(entries, vectors)
    assert sorted(len(g) for g in groups) == [5, 35]
    prompts = pack_prompts(groups, 16)
    assert sorted(len(p) for p in prompts) == [8, 16, 16]  # 16+16+3 of one, 5 of the other
    assert sum(len(p) for p in prompts) == 40 and max(len(p) for p in prompts) <= 16


def test_guards_catch_placeholders_task_requests_short_and_ungrounded_text() -> None:
    for text in ("id", "...", "strong|mild|casual", "<the preference>", "  ", "content"):
        assert placeholder(text), text
    assert not placeholder("Prefers answers without bullet points")
    assert task_request("Write me a poem about spring") and task_request("Can you fix it?")
    assert not task_request("Prefers prose to bullet points")
    assert too_short("Likes it") and not too_short("Prefers metric units always")
    said = "no bullet points please, I hate bullet points"
    assert grounded("Prefers prose to bullet points", said)
    assert not grounded("Prefers dark mode in editors", said)


def test_corrections_are_mined_from_user_turns_only() -> None:
    log = [
        {"caller": "c1", "role": "user", "content": "No, don't use find / for that", "ts": "t"},
        {"caller": "c1", "role": "user", "content": "I told you to use ripgrep"},
        {"caller": "c1", "role": "assistant", "content": "No problem, I will stop"},
        {"caller": "c2", "role": "user", "content": "Nothing to fix, thanks"},
        {"caller": "c2", "role": "user", "content": "What is the notation for this?"},
    ]
    mined = mine_corrections(log)
    assert [m["detail"] for m in mined] == [
        "No, don't use find / for that",
        "I told you to use ripgrep",
    ]
    assert mined[0] == {
        "session": "c1",
        "kind": "Correction",
        "detail": "No, don't use find / for that",
        "ts": "t",
        "source": "conversation",
    }


def test_coverage_keeps_an_original_whose_facts_are_not_all_carried() -> None:
    original = entry("Priya moved to Berlin in May 2025 and leads the payments team")
    full = [
        entry("Priya moved to Berlin in May 2025"),
        entry("Priya leads the payments team"),
    ]
    assert covered(original, full)
    assert not covered(original, full[:1])  # the team is lost
    assert not covered(original, [entry("Priya moved to Berlin; leads the payments team")])
    assert not covered(original, [])
