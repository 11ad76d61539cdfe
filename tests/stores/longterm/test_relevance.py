"""Search returns only hits relevant enough (issue 44): with the shipped e5 embedder a query
nothing stored answers (gibberish, a topic never saved) finds nothing, where it found 20;
the answer to a real question is still found. Real stores and the real model."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from dreamwell.stores import DataDir, LongTermStore, OnnxE5
from dreamwell.stores.hooks import QuickRecall
from dreamwell.stores.index.relevance import Baseline, Meaning, Rule, Words, expected_best
from dreamwell.stores.index.rows import cosines
from tests.support.embedders import Perturbed
from tests.support.everyday import (
    ANSWERABLE,
    CODING_PROMPTS,
    GIBBERISH,
    PROJECT_MEMORIES,
    UNANSWERABLE,
    everyday_memories,
)

E5 = OnnxE5()  # one model for the module (its vectors are the same for every store)


@pytest.fixture(scope="module")
def everyday(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LongTermStore]:
    store = LongTermStore(
        tmp_path_factory.mktemp("everyday"),
        embedder=E5,
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
    store = LongTermStore(tmp_path, embedder=E5, min_similarity=0.7, keyword_weight=0.4)
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


NOTHING_ANSWERS = (*GIBBERISH, *CODING_PROMPTS)


@pytest.mark.parametrize(("scale", "seed"), [(0.0, 0), (0.05, 1), (0.05, 2), (0.05, 3)])
def test_a_small_store_answers_nothing_unrelated_on_any_cpu(
    tmp_path: Path, scale: float, seed: int
) -> None:
    """A new user's five memories, vectors and queries moved as another CPU's int8 kernels
    would move them: gibberish and everyday coding prompts find nothing (gibberish found 5
    of a 7-memory store, "what is 2+2" every memory holding a "2"), the questions they
    answer still find them."""
    model = Perturbed(E5, scale, seed)
    store = LongTermStore(tmp_path, embedder=model, min_similarity=0.7, keyword_weight=0.4)  # type: ignore[arg-type]
    for content in PROJECT_MEMORIES:
        store.save(content, "projects/web")
    while store.backfill():
        pass
    assert {q: store.search(q) for q in NOTHING_ANSWERS} == {q: [] for q in NOTHING_ANSWERS}
    for question, phrase in (
        ("which postgres version is staging on", "Postgres 15"),
        ("what time zone is the user in", "Europe/Berlin"),
    ):
        assert phrase in store.search(question)[0].entry.content


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_three_hundred_memories_answer_no_gibberish_on_any_cpu(
    everyday: LongTermStore, seed: int
) -> None:
    """The 300-memory store's queries and reference sentences moved as another CPU would
    (`aaaaaaaaaaaaaaaa` stood 3.27 spreads above the baseline here, 3.25 asked: 20 hits on
    one CPU, none on another); the answers are still found."""
    searcher = everyday._searcher
    kept = searcher.embedder, searcher._references
    searcher.embedder, searcher._references = Perturbed(E5, 0.05, seed), None  # type: ignore[assignment]
    try:
        assert {q: everyday.search(q) for q in GIBBERISH} == {q: [] for q in GIBBERISH}
        for question, answer in ANSWERABLE:
            assert any(answer in h.entry.content for h in everyday.search(question)[:5])
    finally:
        searcher.embedder, searcher._references = kept


def test_the_best_of_many_unrelated_memories_is_expected_higher() -> None:
    """Chance alone puts the best of 100,000 unrelated memories 4.3 spreads above their
    median: the rule asks that much more of a hit in such a store than in a small one."""
    assert expected_best(5) == pytest.approx(1.18, abs=0.01)
    assert expected_best(100_000) == pytest.approx(4.3, abs=0.1)
    import numpy as np

    cosines = np.linspace(0.70, 0.80, 70, dtype=np.float32)
    small = Baseline(cosines, (), references=20, population=10)
    large = Baseline(cosines, (), references=20, population=100_000)
    assert small.meaning(0.9).beyond - large.meaning(0.9).beyond == pytest.approx(
        expected_best(100_000) - expected_best(20)
    )


def test_words_answer_nothing_when_the_meaning_stands_far_behind_unrelated_text() -> None:
    """At 5,000 and 100,000 chat memories, 4 of 8 everyday coding prompts injected memories
    sharing two of their words ("why does this test fail with KeyError" / "John fails his
    aptitude test"), their meaning 1.5-1.8 spreads behind the nearest reference sentence;
    LoCoMo questions answered by their words alone stood at -1.17 at the lowest. Without a
    vector side (a hook by keywords), words alone still answer."""
    rule = Rule()
    shared = Words(share=0.57, held=2, asked=3)
    assert not rule.answers(Meaning(above=2.6, beyond=-1.8), shared)
    assert rule.answers(Meaning(above=2.0, beyond=-1.2), shared)
    assert rule.answers(Meaning(), shared)  # no vector side: the words decide
    assert rule.keeps(Meaning(above=2.6, beyond=-1.8), shared)  # beside an answer, kept


def test_a_keyword_hit_beyond_the_vector_candidates_is_judged_by_its_cosine_too(
    tmp_path: Path,
) -> None:
    """The rows give the cosine of any memory with a vector, not only of the vector
    search's best 100 (a keyword hit in a large store is rarely among them)."""
    store = LongTermStore(tmp_path, embedder=E5, embed_on_save=True)
    store.load_vectors()
    saved = [store.save(f"note {k} about the garden shed").entry.id for k in range(3)]
    vector = E5.embed_query("garden shed")
    found = cosines(store._rows, vector, [*saved, "nosuchid0000"])
    assert set(found) == set(saved)
    import numpy as np

    for entry_id in saved:
        stored = np.asarray(E5.embed([store.get(entry_id).content])[0])  # type: ignore[union-attr]
        assert found[entry_id] == pytest.approx(float(stored @ np.asarray(vector)), abs=0.02)
