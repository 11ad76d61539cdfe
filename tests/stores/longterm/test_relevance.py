"""Search returns only hits relevant enough (issue 44): with the shipped e5 embedder a query
nothing stored answers (gibberish, a topic never saved) finds nothing, where it found 20;
the answer to a real question is still found. Real stores and the real model."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from dreamwell.stores import DataDir, LongTermStore, OnnxE5
from dreamwell.stores.hooks import QuickRecall
from dreamwell.stores.index.relevance import Baseline
from tests.support.everyday import ANSWERABLE, GIBBERISH, UNANSWERABLE, everyday_memories


@pytest.fixture(scope="module")
def everyday(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LongTermStore]:
    store = LongTermStore(
        tmp_path_factory.mktemp("everyday"),
        embedder=OnnxE5(),
        min_similarity=0.7,
        keyword_weight=0.4,
    )
    for content, category in everyday_memories():
        store.save(content, category, caller="assistant")
    while store.backfill(batch=256):
        pass
    store.checkpoint()
    yield store


@pytest.mark.parametrize("query", GIBBERISH)
def test_gibberish_finds_nothing(everyday: LongTermStore, query: str) -> None:
    assert everyday.search(query) == []


def test_a_topic_never_stored_finds_at_most_two(everyday: LongTermStore) -> None:
    found = {q: len(everyday.search(q)) for q in UNANSWERABLE}
    assert sum(found.values()) / len(found) <= 2, found


@pytest.mark.parametrize(("question", "answer"), ANSWERABLE)
def test_a_stored_answer_is_still_found(
    everyday: LongTermStore, question: str, answer: str
) -> None:
    assert any(answer in h.entry.content for h in everyday.search(question)[:5])


def test_without_the_rule_every_query_fills_the_page(tmp_path: Path) -> None:
    """What search did before: the best 20, whatever they were (relevance=None)."""
    store = LongTermStore(tmp_path, relevance=None)
    for content, category in everyday_memories():
        store.save(content, category)
    assert len(store.search("lorem ipsum dolor sit amet for the tennis club")) == 20


def test_a_hit_sharing_one_word_of_several_is_not_relevant(tmp_path: Path) -> None:
    """By keywords alone (no embedder): a memory holding one word of a four-word query, or
    only its stop-words, is not returned; one holding most of them is."""
    store = LongTermStore(tmp_path)
    store.save("Sit up straight at the desk")
    store.save("The torque wrench for the bicycle is in the garage")
    assert store.search("lorem ipsum dolor sit amet") == []
    assert store.search("what is the and of it") == []
    assert [h.entry.content for h in store.search("torque wrench bicycle forklift")] == [
        "The torque wrench for the bicycle is in the garage"
    ]
    assert store.search("Sit") != []  # a one-word query held whole is relevant


def test_the_hooks_recall_by_the_same_rule(tmp_path: Path) -> None:
    store = LongTermStore(tmp_path)
    store.save("Sit up straight at the desk")
    store.save("The torque wrench for the bicycle is in the garage")
    store.checkpoint()
    recall = QuickRecall(DataDir(tmp_path))
    try:
        assert recall.search("lorem ipsum dolor sit amet", 10) == []
        assert [e.content for e in recall.search("where is the torque wrench", 10)] == [
            "The torque wrench for the bicycle is in the garage"
        ]
    finally:
        recall.close()


def test_a_memory_is_judged_against_the_others_not_against_itself(tmp_path: Path) -> None:
    """A two-memory store, embedded one memory at a time as a server's backfill may: the
    answer's own cosine sat in the baseline it was judged by (one of 44 cosines, beside the
    reference sentences) and "which city does the person live in" found nothing (3.10
    spreads above it, 3.25 asked); the stdio test failed in CI whenever the backfill did
    not take both memories in one batch. Judged against the others, it stands 3.49 above."""
    store = LongTermStore(tmp_path, embedder=OnnxE5(), min_similarity=0.7, keyword_weight=0.4)
    for content in ("The user is based in Chicago, Illinois", "Deploys happen on Tuesdays"):
        store.save(content)
        while store.backfill():
            pass
    found = store.search("which city does the person live in")
    assert [h.entry.content for h in found] == ["The user is based in Chicago, Illinois"]


def test_a_sampled_memory_is_left_out_of_its_own_baseline() -> None:
    import numpy as np

    others = np.linspace(0.70, 0.80, 20, dtype=np.float32)
    cosines = np.concatenate([np.asarray([0.95], dtype=np.float32), others])
    floor = Baseline(cosines, ["answer"])
    alone = Baseline(others)
    assert floor.above(0.95, "answer") == pytest.approx(alone.above(0.95))
    assert floor.above(0.95, "answer") > floor.above(0.95, "not sampled") > 0
    assert Baseline(cosines[:7]).above(0.95) == float("-inf")  # too few to say
