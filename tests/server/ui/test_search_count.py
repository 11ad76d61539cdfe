"""The browser's search count follows search's relevance rule (issue 44): a query that
shares one stray word with a memory shows no match, and "Zürich" counts the memories about
Zürich only."""

from __future__ import annotations

from pathlib import Path

from dreamwell.server.ui.memories import find
from dreamwell.stores import LongTermStore
from tests.support.everyday import everyday_memories


def test_the_count_is_of_relevant_memories_only(tmp_path: Path) -> None:
    store = LongTermStore(tmp_path)
    for content, category in everyday_memories():
        store.save(content, category)
    store.save("Sit by the window on the long flight")
    nothing = find(store, {"q": "lorem ipsum dolor sit amet"})
    assert (nothing["memories"], nothing["more"]) == ([], False)
    zurich = find(store, {"q": "Zürich"})
    about = [c for c, _ in everyday_memories() if "Zürich" in c]
    assert sorted(m["content"] for m in zurich["memories"]) == sorted(about)
