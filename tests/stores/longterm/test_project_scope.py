"""A search limited to a project (docs/projects.md) returns that project's memories and global ones,
filtered before the top-k in the keyword and the vector search alike (docs/recall.md)."""

from __future__ import annotations

from pathlib import Path

import pytest

from dreamwell.stores import PROJECT, LongTermStore
from tests.support.embedders import HashEmbedder

A, B = {PROJECT: "github.com/acme/a"}, {PROJECT: "github.com/acme/b"}


def _crowded(store: LongTermStore) -> tuple[str, str]:
    """150 of B's memories outrank A's only one for 'deploy', and a global one."""
    for i in range(150):
        store.save(f"deploy deploy deploy with kubectl apply {i}", metadata=B)
    mine = store.save("deploy with make release", metadata=A).entry.id
    shared = store.save("the user likes short deploy notes", "user-preferences/style").entry.id
    return mine, shared


@pytest.mark.parametrize("checkpointed", [False, True])
def test_a_project_s_keyword_search_finds_its_memory_under_another_project_s_crowd(
    tmp_path: Path, checkpointed: bool
) -> None:
    store = LongTermStore(tmp_path)
    mine, shared = _crowded(store)
    if checkpointed:
        assert store.checkpoint()
    found = {h.entry.id for h in store.search("deploy", project=A[PROJECT])}
    assert found == {mine, shared}
    assert mine not in {h.entry.id for h in store.search("deploy")}  # unfiltered: the crowd


def test_a_project_s_vector_search_filters_before_the_top_k(tmp_path: Path) -> None:
    store = LongTermStore(  # every hit, relevant or not: the filter alone is what is checked
        tmp_path, embedder=HashEmbedder(), embed_on_save=True, keyword_weight=0.0, relevance=None
    )
    store.load_vectors()
    mine, shared = _crowded(store)
    assert mine not in {h.entry.id for h in store.search("deploy kubectl")}
    found = [h.entry.id for h in store.search("deploy kubectl", project=A[PROJECT])]
    assert set(found) == {mine, shared}
    assert all(
        h.entry.metadata.get(PROJECT) != B[PROJECT] for h in store.search("kubectl", project="x")
    )


def test_the_most_recent_of_a_project_skip_another_project_s_newer_memories(tmp_path: Path) -> None:
    store = LongTermStore(tmp_path)
    mine = store.save("run tests with pytest -q", metadata=A).entry.id
    for i in range(60):
        store.save(f"run tests with go test {i}", metadata=B)
    assert [h.entry.id for h in store.search(None, project=A[PROJECT], limit=5)] == [mine]


def test_the_same_text_saved_in_two_projects_is_two_memories(tmp_path: Path) -> None:
    store = LongTermStore(tmp_path)
    one = store.save("Deploy with make deploy", metadata=A)
    two = store.save("deploy with make deploy.", metadata=B)
    again = store.save("deploy with MAKE deploy", metadata=A)
    assert not two.reinforced and two.entry.id != one.entry.id
    assert again.reinforced and again.entry.id == one.entry.id
    assert store.get(two.entry.id).reinforcement_count == 1  # type: ignore[union-attr]
    reopened = LongTermStore(tmp_path)  # the duplicate map rebuilt from the records
    assert reopened.save("deploy with make deploy", metadata=B).entry.id == two.entry.id


def test_a_project_no_memory_names_sees_only_global_memories(tmp_path: Path) -> None:
    store = LongTermStore(tmp_path)
    store.save("deploy with kubectl", metadata=B)
    plain = store.save("deploy notes from before projects").entry.id
    assert [h.entry.id for h in store.search("deploy", project="elsewhere")] == [plain]


def test_a_project_ranks_in_a_shared_directory_as_in_a_directory_of_its_own(
    tmp_path: Path,
) -> None:
    """Its terms are weighed by what its search can return: a word every one of its memories
    holds is no rarity because the other projects lack it."""
    mine = [
        "alice alice alice talks about the weather",
        "alice mentions the garden",
        *(f"alice note {i}" for i in range(6)),
    ]
    alone, shared = LongTermStore(tmp_path / "alone"), LongTermStore(tmp_path / "shared")
    for text in mine:
        alone.save(text)
        shared.save(text, metadata=A)
    for i in range(60):
        shared.save(f"the garden needs water {i}", metadata=B)
    assert alone.checkpoint() and shared.checkpoint()
    for query in ("alice garden", "alice weather"):  # the best one (many tie behind it)
        expected = [h.entry.content for h in alone.search(query)][:1]
        assert [h.entry.content for h in shared.search(query, project=A[PROJECT])][:1] == expected
