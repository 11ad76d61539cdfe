"""What a message recalls into an agent's context: the one function every injecting path
calls (the client hooks' prompt and session start, the `recall` prompt, every agent's hook
adapter), so that what is injected is what `search_memory` finds.

A `Ranker` gives the relevant hits of a query, best first: the long-term store's hybrid
search with its relevance rule (`StoreRanker`, what `search_memory` calls) or, where no
embedder is at hand (a hook in its own process, a resident whose model is still loading),
`QuickRecall`'s keywords under the same rule. Both are asked for SEARCH_LIMIT hits, as
`search_memory` asks: the relevance rule decides on the same best hits, so the injection is
`search_memory`'s own list, in its order, less what the session was already shown and
repeated text. A session's budget of characters bounds what it injects in all.

Imports nothing heavy: the store is handed in."""

from __future__ import annotations

from collections.abc import Container, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from dreamwell.stores.model import MemoryEntry, fold_text

if TYPE_CHECKING:
    from dreamwell.stores.longterm import LongTermStore

SEARCH_LIMIT = 20  # what search_memory asks for (server/mcp/tools.py)
MAX_RECALLED = 8  # memories a message injects at most
SESSION_BUDGET = 4000  # characters a session's hooks inject in all, by default


class Ranker(Protocol):
    """The relevant live entries for `text`, best first (of `project` or global, if given;
    under one of `prefixes`, if given)."""

    def ranked(
        self, text: str, limit: int, project: str | None = None, prefixes: Sequence[str] = ()
    ) -> list[MemoryEntry]: ...


@dataclass(frozen=True)
class StoreRanker:
    """The long-term store's hybrid search, as `search_memory` runs it."""

    store: LongTermStore

    def ranked(
        self, text: str, limit: int, project: str | None = None, prefixes: Sequence[str] = ()
    ) -> list[MemoryEntry]:
        found = self.store.search(text, prefixes, limit=limit, project=project)
        return [h.entry for h in found]


def recalled(
    ranker: Ranker,
    text: str,
    project: str | None = None,
    shown: Container[str] = (),
    limit: int = MAX_RECALLED,
    prefixes: Sequence[str] = (),
) -> list[MemoryEntry]:
    """Up to `limit` memories relevant to `text`, best first: the ranker's SEARCH_LIMIT hits
    less those in `shown` and those repeating an earlier one's text."""
    if not text.strip():
        return []
    out: list[MemoryEntry] = []
    folded: set[str] = set()
    for entry in ranker.ranked(text, SEARCH_LIMIT, project, prefixes):
        key = fold_text(entry.content)
        if entry.id in shown or key in folded:
            continue
        folded.add(key)
        out.append(entry)
        if len(out) >= limit:
            break
    return out


def within_budget(lines: Sequence[str], room: int) -> int:
    """How many of `lines` (in order) fit in `room` characters, a newline each."""
    used = 0
    for n, line in enumerate(lines):
        used += len(line) + 1
        if used > room:
            return n
    return len(lines)
