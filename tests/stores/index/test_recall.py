"""Hybrid recall: ranking rules, vectors beside the records, backfill, embedder switching and
the `recall` prompt — through real stores and a real MCP client."""

from __future__ import annotations

import itertools
import math
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from mcp import Client

from dreamwell.server.config import Settings
from dreamwell.server.mcp.app import build_server
from dreamwell.stores import LongTermStore, OnnxMiniLM, rank_hits
from dreamwell.stores.index.hybrid_rank import minmax
from tests.support.embedders import HashEmbedder

ids = st.text(alphabet="abcdef0123456789", min_size=1, max_size=4)
bm25_scores = st.integers(0, 5000).map(lambda x: x / 100)  # BM25 scores as Tantivy gives them
scored = st.lists(st.tuples(ids, bm25_scores), max_size=12, unique_by=lambda t: t[0])
cosines = st.lists(st.tuples(ids, st.floats(-1.0, 1.0)), max_size=12, unique_by=lambda t: t[0])


@given(scored, cosines, st.floats(0.0, 1.0))
def test_hybrid_ranks_the_union_of_both_searches_best_first(
    bm25: list[tuple[str, float]], cos: list[tuple[str, float]], min_sim: float
) -> None:
    ranked = rank_hits(bm25, cos, {}, min_sim)
    kept = {i for i, s in cos if s >= min_sim}
    assert {i for i, _ in ranked} == {i for i, _ in bm25} | kept
    scores = [s for _, s in ranked]
    assert scores == sorted(scores, reverse=True)
    assert all(0.0 <= s <= 1.0 for s in scores)


@given(scored)
def test_without_vectors_the_order_is_plain_bm25(bm25: list[tuple[str, float]]) -> None:
    raw = dict(bm25)
    ranked = [i for i, _ in rank_hits(bm25, [], {})]
    assert all(raw[a] >= raw[b] for a, b in itertools.pairwise(ranked))


@given(scored, st.floats(0.0, 1.0), st.floats(0.0, 1.0))
def test_importance_scales_the_score_between_half_and_full(
    bm25: list[tuple[str, float]], low: float, high: float
) -> None:
    if not bm25:
        return
    low, high = sorted((low, high))
    target = bm25[0][0]
    a = dict(rank_hits(bm25, [], {target: low}))[target]
    b = dict(rank_hits(bm25, [], {target: high}))[target]
    assert a <= b + 1e-12
    assert math.isclose(
        dict(rank_hits(bm25, [], {target: 1.0}))[target],
        2 * dict(rank_hits(bm25, [], {target: 0.0}))[target],
    )


def old_rank_hits(
    bm25: list[tuple[str, float]], cos: list[tuple[str, float]], min_sim: float, w: float
) -> dict[str, float]:
    """The two-list rule before contextual cosines were added, as it was written."""
    keyword = minmax(bm25)
    vector = minmax([(i, s) for i, s in cos if s >= min_sim])
    if not vector:
        w = 1.0
    elif not keyword:
        w = 0.0
    return {
        i: (w * keyword.get(i, 0.0) + (1 - w) * vector.get(i, 0.0)) * 0.75
        for i in keyword.keys() | vector.keys()
    }


@given(scored, cosines, st.floats(0.0, 1.0), st.floats(0.0, 1.0))
def test_without_contextual_cosines_ranking_is_the_two_list_rule(
    bm25: list[tuple[str, float]], cos: list[tuple[str, float]], min_sim: float, w: float
) -> None:
    ranked = dict(rank_hits(bm25, cos, {}, min_sim, keyword_weight=w))
    want = old_rank_hits(bm25, cos, min_sim, w)
    assert ranked.keys() == want.keys()
    assert all(math.isclose(ranked[i], want[i], abs_tol=1e-9) for i in want)


@given(scored, cosines, cosines, st.floats(0.0, 1.0), st.floats(0.0, 0.6), st.floats(0.0, 0.4))
def test_three_lists_rank_their_union_best_first_within_zero_one(
    bm25: list[tuple[str, float]],
    cos: list[tuple[str, float]],
    ctx: list[tuple[str, float]],
    min_sim: float,
    wk: float,
    wc: float,
) -> None:
    ranked = rank_hits(bm25, cos, {}, min_sim, wk, contextual=ctx, context_weight=wc)
    kept = {i for i, s in [*cos, *ctx] if s >= min_sim}
    assert {i for i, _ in ranked} == {i for i, _ in bm25} | kept
    scores = [s for _, s in ranked]
    assert scores == sorted(scores, reverse=True)
    assert all(0.0 <= s <= 1.0 + 1e-12 for s in scores)


def test_contextual_cosine_breaks_a_tie_towards_the_memory_read_in_context() -> None:
    bm25 = [("a", 2.0), ("b", 2.0), ("c", 1.0)]
    cos = [("a", 0.8), ("b", 0.8), ("c", 0.5)]
    ctx = [("a", 0.4), ("b", 0.9), ("c", 0.3)]
    assert rank_hits(bm25, cos, {}, contextual=ctx)[0][0] == "b"
    assert rank_hits(bm25, cos, {})[0][0] == "a"  # tie broken by id without context


def test_weights_are_keyword_cosine_and_context_as_given() -> None:
    bm25 = [("a", 3.0), ("z", 1.0)]
    cos = [("b", 0.9), ("z", 0.1)]
    ctx = [("c", 0.9), ("z", 0.1)]
    ranked = dict(rank_hits(bm25, cos, {}, 0.0, 0.4, contextual=ctx, context_weight=0.3))
    assert ranked["a"] == pytest.approx(0.4 * 0.75)
    assert ranked["b"] == pytest.approx(0.3 * 0.75)
    assert ranked["c"] == pytest.approx(0.3 * 0.75)
    assert ranked["z"] == 0.0


def test_a_part_without_candidates_gives_its_weight_to_the_others_in_proportion() -> None:
    cos = [("b", 0.9), ("z", 0.1)]
    ctx = [("c", 0.9), ("z", 0.1)]
    ranked = dict(rank_hits([], cos, {}, 0.0, 0.4, contextual=ctx, context_weight=0.2))
    assert ranked["b"] == pytest.approx(0.4 / 0.6 * 0.75)  # cosine 0.4 of the remaining 0.6
    assert ranked["c"] == pytest.approx(0.2 / 0.6 * 0.75)


def test_the_context_weight_yields_to_the_keyword_weight() -> None:
    bm25 = [("a", 3.0), ("z", 1.0)]
    ctx = [("c", 0.9), ("z", 0.1)]
    ranked = dict(rank_hits(bm25, [], {}, 0.0, 0.8, contextual=ctx, context_weight=0.5))
    assert ranked["a"] == pytest.approx(0.8 * 0.75)  # context gets only the 0.2 left
    assert ranked["c"] == pytest.approx(0.2 * 0.75)
    bm25_only = rank_hits(bm25, [("b", 0.9)], {}, 0.0, 1.0, contextual=ctx)
    assert bm25_only[0] == ("a", 0.75)
    assert all(s == 0.0 for i, s in bm25_only if i != "a")


@pytest.mark.parametrize(("wk", "wc"), [(-0.1, 0.0), (0.5, -0.1), (1.1, 0.0), (0.5, 1.5)])
def test_weights_outside_zero_one_are_refused(wk: float, wc: float) -> None:
    with pytest.raises(ValueError, match="must lie in \\[0, 1\\]"):
        rank_hits([("a", 1.0)], [], {}, 0.0, wk, context_weight=wc)


def test_minmax_maps_candidates_onto_zero_one() -> None:
    assert minmax([("a", 2.0), ("b", 4.0), ("c", 3.0)]) == {"a": 0.0, "b": 1.0, "c": 0.5}
    assert minmax([("a", 0.3)]) == {"a": 1.0}
    assert minmax([]) == {}


def test_a_failing_embedder_never_blocks_a_save_and_backfill_catches_up(tmp_path: Path) -> None:
    fake = HashEmbedder(broken=True)
    store = LongTermStore(tmp_path, embedder=fake)
    store.save("the cat sat on the mat")
    assert store.missing_vectors() == 1
    assert [h.entry.content for h in store.search("cat")] == ["the cat sat on the mat"]
    fake.broken = False
    assert store.backfill() == 1 and store.missing_vectors() == 0


def test_backfill_after_a_restart_embeds_what_was_saved_without_vectors(tmp_path: Path) -> None:
    plain = LongTermStore(tmp_path)  # no embedder: BM25 only
    for i in range(5):
        plain.save(f"fact {i} about harbours")
    store = LongTermStore(tmp_path, embedder=HashEmbedder(), embed_on_save=False)
    assert store.missing_vectors() == 5
    assert store.backfill(batch=3) == 3 and store.backfill(batch=3) == 2
    again = LongTermStore(tmp_path, embedder=HashEmbedder())
    assert again.missing_vectors() == 0


def test_switching_embedder_ignores_old_vectors_and_reembeds_without_mixing(tmp_path: Path) -> None:
    first = LongTermStore(tmp_path, embedder=HashEmbedder("small", dim=8))
    first.save("penguins live in antarctica")
    switched = LongTermStore(tmp_path, embedder=HashEmbedder("large", dim=32))
    assert switched.missing_vectors() == 1
    assert [h.entry.content for h in switched.search("penguins")] == ["penguins live in antarctica"]
    assert switched.backfill() == 1
    switched.save("emperor penguins huddle")
    assert len(switched.search("penguins")) == 2


def test_vector_recall_finds_a_paraphrase_keywords_miss(tmp_path: Path) -> None:
    store = LongTermStore(tmp_path, embedder=OnnxMiniLM(), min_similarity=0.2)
    store.save("The user is based in Chicago, Illinois", "user-preferences/location")
    store.save("Deploys happen on Tuesdays", "project-context/release")
    assert store.backfill() == 2  # what the server's background backfill does
    hits = store.search("which city does the person live in")
    assert hits and hits[0].entry.content.startswith("The user is based in Chicago")


def test_vector_search_applies_filters_before_top_k(tmp_path: Path) -> None:
    store = LongTermStore(tmp_path, embedder=HashEmbedder(), embed_on_save=True)
    for i in range(30):
        store.save(f"ocean waves note {i}", "noise")
    store.save("ocean waves", "rare", "keep")
    hits = store.search("ocean waves", category="rare", tags="keep")
    assert [h.entry.content for h in hits] == ["ocean waves"]


# ---- the recall prompt ------------------------------------------------------------------------
async def recall_text(client: Client, message: str, max_tokens: str | None = None) -> str:
    args = (
        {"message": message}
        if max_tokens is None
        else {"message": message, "max_tokens": max_tokens}
    )
    result = await client.get_prompt("recall", args)
    assert len(result.messages) == 1
    return result.messages[0].content.text  # type: ignore[union-attr]


@pytest.mark.anyio
async def test_recall_injects_each_memory_once_per_caller(tmp_path: Path) -> None:
    data = tmp_path / "data"
    server = build_server(Settings(data_dir=data, embedder="none"))
    async with Client(server) as one:
        await one.call_tool(
            "save_memory",
            {"content": "User is in Chicago (UTC-6)", "category": "user-preferences/timezone"},
        )
        await one.call_tool("save_memory", {"content": "Oolong is the favourite drink"})
        first = await recall_text(one, "Chicago timezone")
        assert first.startswith("Recalled from long-term memory (relevant to this message):\n")
        assert "(user-preferences/timezone): User is in Chicago (UTC-6)" in first
        again = await recall_text(one, "Chicago timezone again")
        assert "User is in Chicago" not in again
        assert "Oolong" not in first
        tea = await recall_text(one, "oolong")
        assert "(general): Oolong is the favourite drink" in tea
    other = build_server(Settings(data_dir=data, embedder="none", namespace="session/other"))
    async with Client(other) as two:
        assert "User is in Chicago" in await recall_text(two, "Chicago timezone")


@pytest.mark.anyio
async def test_a_first_turn_nothing_answers_recalls_nothing(tmp_path: Path) -> None:
    """Only what is relevant (issue 54): a first message no memory answers is not given the
    most recent memories (it was given 5)."""
    async with Client(build_server(Settings(data_dir=tmp_path, embedder="none"))) as c:
        for i in range(7):
            await c.call_tool("save_memory", {"content": f"fact number {i}"})
        assert "Recalled" not in await recall_text(c, "zebra")
        assert "Recalled" in await recall_text(c, "fact number")


@pytest.mark.anyio
async def test_recall_lists_working_memory_keys_never_values(tmp_path: Path) -> None:
    data = tmp_path / "data"
    patrol = build_server(Settings(data_dir=data, embedder="none", namespace="patrol/heartbeat"))
    async with Client(patrol) as p:
        await p.call_tool(
            "save_to_working_memory",
            {"key": "latest_alert", "data": "SECRET-42", "ttl_minutes": 240, "category": "finding"},
        )
    async with Client(build_server(Settings(data_dir=data, embedder="none"))) as c:
        await c.call_tool(
            "save_to_working_memory", {"key": "draft", "data": "VALUE-7", "tags": "email"}
        )
        block = await recall_text(c, "anything")
        assert "Working memory (scratch space" in block and "/draft: expires in 4m" in block
        assert "tags: email" in block
        assert "Patrol findings in working memory" in block
        assert "- patrol/heartbeat/latest_alert: expires in 3h59m, category: finding" in block
        assert "SECRET-42" not in block and "VALUE-7" not in block


@pytest.mark.anyio
async def test_recall_fits_its_token_budget_and_collapses_duplicates(tmp_path: Path) -> None:
    async with Client(build_server(Settings(data_dir=tmp_path, embedder="none"))) as c:
        for i in range(8):
            await c.call_tool("save_memory", {"content": f"alpha detail {i} " + "x" * 150})
        await c.call_tool("save_memory", {"content": "Alpha twin", "category": "a"})
        await c.call_tool("save_memory", {"content": "alpha twin!", "category": "b"})
        block = await recall_text(c, "alpha twin", max_tokens="100")
        assert len(block) <= 400
        assert block.count("lpha twin") == 1
        with pytest.raises(Exception, match="max_tokens must be a whole number"):
            await recall_text(c, "alpha", max_tokens="lots")


def test_ollama_embeddings_never_block_saves_and_arrive_by_backfill(tmp_path: Path) -> None:
    from dreamwell.stores import OllamaEmbedder
    from tests.support.fake_ollama import fake_ollama, unreachable_host

    down = LongTermStore(
        tmp_path, embedder=OllamaEmbedder(unreachable_host(), timeout=1), embed_on_save=False
    )
    down.save("saved while Ollama is down")
    assert [h.entry.content for h in down.search("Ollama")] == ["saved while Ollama is down"]
    assert down.backfill() == 0 and down.missing_vectors() == 1
    with fake_ollama() as (host, script):
        up = LongTermStore(tmp_path, embedder=OllamaEmbedder(host, timeout=5), embed_on_save=False)
        assert up.backfill() == 1 and up.missing_vectors() == 0
        assert script.requests[-1]["path"] == "/api/embed"
        assert script.requests[-1]["model"] == "nomic-embed-text"
        assert [h.entry.content for h in up.search("down")] == ["saved while Ollama is down"]
