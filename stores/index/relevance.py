"""Whether a hit is relevant enough to return at all (issue 44), as pure functions.

Ranking orders candidates; it never says "nothing here". An embedder's cosines sit in a band
of their own (e5: about 0.7-0.9 for any two texts), so a fixed cosine floor either filters
nothing or too much, and BM25 returns whatever shares one word with the query. A hit is
kept when either side says it is clearly relevant:

- **meaning**: its cosine stands out from what unrelated text scores against the same query.
  The baseline is the query's cosines with a fixed sample of the store's own memories (most
  of which are unrelated to any one query) and with `REFERENCES`, everyday sentences on
  unrelated subjects (which carry a small store); a hit is kept when its cosine is at least
  `VECTOR_MARGIN` times the baseline's spread above the baseline's median. The spread is the
  embedder's own scale, so one margin serves every embedder.
- **words**: the query's words it holds weigh at least `KEYWORD_SHARE` of the query's words
  by inverse document frequency (a word no memory holds weighs most), and are two or more
  unless the query has one. A memory that shares only a stop-word, or one word of several (a
  typo that happens to match), does not answer a query by its words; one that holds the one
  word of a one-word query does.

Measured on 300 everyday memories and the LoCoMo dev questions: tests/bench/precision_bench.py.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from statistics import NormalDist
from typing import TYPE_CHECKING

from dreamwell.stores.redact import MARK

MARK_WORD = MARK.strip("[]").lower()  # the index term of redaction's mark

if TYPE_CHECKING:  # numpy only when a search has vectors: the hooks never import it
    import numpy as np
    import numpy.typing as npt

# baseline spreads above the baseline's median (precision_bench.py): gibberish and unstored
# topics reached 3.0 against 300 everyday memories (a margin of 3.0 let 4 gibberish hits a
# query through); a paraphrase answering a question in a two-memory store, judged against
# the other memory and the reference sentences, 3.49 (e5) and 4.47 (MiniLM)
VECTOR_MARGIN = 2.5
# spreads by which the best hit's cosine must beat the best reference sentence's (REFERENCES)
# to answer a query by meaning (less what chance gives the best of a large store), and by
# which a hit kept beside it must not trail it. Measured with e5 (issue 54): gibberish
# -0.05 at most (5 and 300 memories), everyday coding prompts -0.41, questions never stored
# 0.41 at most (and some of those are neighbours: Fortran's compiler flags found the
# TypeScript memory); "which city does the person live in" in a two-memory store 0.57,
# "which postgres version is staging on" 2.2-3.1. Before, the rule asked 3.25 spreads above
# the median alone: gibberish reached 3.27 against 300 memories here (20 hits), 3.97 against
# five, and the best of 100,000 unrelated memories lies 4.3 above by chance alone.
REFERENCE_GAP = 0.3
KEEP_GAP = 0.0
# spreads behind the nearest reference sentence at which a memory's words answer nothing:
# its meaning is further from the query than everyday sentences on unrelated subjects are.
# Measured with e5 (issue 54): LoCoMo dev questions answered by their words alone, the best
# such hit -1.13 at the lowest (760 questions); everyday coding prompts against chat memories
# that share two of their words ("why does this test fail" / "John fails his aptitude test")
# -1.54 to -1.83
WORDS_FLOOR = -1.5
KEYWORD_SHARE = 0.15  # of the query's words, weighed by inverse document frequency
HIT_MARGIN = 1.5  # the same, for a hit of a query that is answered
HIT_SHARE = 0.1
CONTEXT_SHARE = 0.5  # a word held only by a neighbour's text counts half (its BM25 boost)
SAMPLE = 256  # the store's memories the baseline reads

REFERENCES = (
    "The committee will review the budget proposal next quarter.",
    "Photosynthesis converts light energy into chemical energy in plants.",
    "The striker scored twice in the second half of the match.",
    "Preheat the oven before you put the tray in.",
    "The train was delayed by forty minutes because of a signal failure.",
    "Interest rates rose for the third time this year.",
    "She painted the bedroom walls a pale shade of blue.",
    "The museum reopened after a long renovation.",
    "Our team migrated the database to a new server over the weekend.",
    "A strong wind knocked down several trees in the park.",
    "He practised the violin for two hours every evening.",
    "The hospital hired twenty new staff this spring.",
    "Volcanic ash closed the airport for two days.",
    "The novel follows a family across three generations.",
    "Remember to renew the car insurance before it expires.",
    "The children built a sandcastle at the beach.",
    "The software update fixed a bug in the login page.",
    "Wheat prices fell after a record harvest.",
    "The choir performed at the cathedral on Christmas Eve.",
    "A new species of frog was discovered in the rainforest.",
    "The landlord agreed to repair the leaking roof.",
    "Tickets for the show sold out within an hour.",
    "The parade route passes through the old town.",
    "He forgot his umbrella on the bus again.",
    "The satellite entered orbit around Mars.",
    "Our neighbours adopted a puppy from the shelter.",
    "The lecture covered the causes of the First World War.",
    "Please send the invoice by the end of the month.",
    "The river flooded the fields after heavy rain.",
    "She is learning Japanese with an app on her phone.",
    "The factory switched to solar power last year.",
    "The detective found a fingerprint on the glass.",
    "My grandmother knits scarves for the whole family.",
    "The bridge will be closed for maintenance on Sunday.",
    "The startup raised money from two investors.",
    "A cold front will bring snow to the mountains.",
    "The election results will be announced tomorrow.",
    "We stayed in a small hotel near the harbour.",
    "The printer on the second floor is out of toner.",
    "The band released their first album in 1998.",
    "The package was delivered to the wrong address.",
    "Astronomers observed a supernova in a distant galaxy.",
    # what a coding agent is asked all day, which no memory of a project answers as such:
    # against everyday sentences alone, any memory about software stood out from them for
    # any coding question ("refactor this function" recalled the frontend's framework)
    "Add structured logging to the background worker.",
    "Cache the results of the expensive lookup for five minutes.",
    "Paginate the API response so it returns fifty items at a time.",
    "The Docker image is too large; slim it down.",
    "The CI pipeline times out on the integration job.",
    "Write a database migration that adds a nullable column.",
    "Return a 404 status when the resource does not exist.",
    "Two threads update the counter at the same time.",
    "The service leaks memory after a few hours of traffic.",
    "Format the timestamp as an ISO 8601 string in UTC.",
    "Center the button horizontally with flexbox.",
    "Upgrade the dependency to its latest major version.",
    "Update the README with the new installation steps.",
    "Review this pull request and suggest improvements.",
    "Profile the function to find where the time goes.",
    "Read the port number from an environment variable.",
    "Validate the request body against the JSON schema.",
    "The websocket connection drops every thirty seconds.",
    "Decode the file as UTF-8 and replace invalid bytes.",
    "The script fails with permission denied when writing the file.",
    "Schedule the cleanup job to run every night at two.",
    "Put the new checkout flow behind a feature flag.",
    "Fix the lint warnings about unused imports.",
    "Limit each client to a hundred requests per minute.",
)


@dataclass(frozen=True)
class Meaning:
    """How a hit's cosine stands: spreads above what unrelated text scores (`above`), and
    beyond the reference sentence closest to the query, less what chance alone gives the
    best of a store that many times larger than the references (`beyond`)."""

    above: float = float("-inf")
    beyond: float = float("-inf")


def expected_best(n: int) -> float:
    """The expected largest of `n` draws of a standard normal, in spreads (Blom's formula):
    the best of 100,000 unrelated memories lies 4.3 spreads above their median, the best
    of 70 reference sentences 2.4."""
    if n < 2:
        return 0.0
    return NormalDist().inv_cdf((n - 0.375) / (n + 0.25))


class Baseline:
    """What unrelated text scores against one query: the median of its cosines and their
    spread (standard deviation). None of either: no vector side (fewer than MIN_BASELINE
    cosines). A memory of the store's sample is judged against the others alone: in a small
    store a memory that answers the query raised the bar it was judged by (in a two-memory
    store, one of 44 cosines: 3.10 spreads above the baseline with itself in it, 3.49
    without)."""

    def __init__(
        self,
        cosines: npt.NDArray[np.float32] | None = None,
        sampled: Sequence[str] = (),
        references: int = 0,
        population: int = 0,
    ) -> None:
        """`sampled[k]`: the memory whose cosine is `cosines[k]` (the store's sample first);
        the last `references` cosines are the reference sentences'; `population`: the
        memories a search ranks by meaning (the best of many lies higher by chance)."""
        self._values = cosines
        self._at = {entry_id: k for k, entry_id in enumerate(sampled)}
        self.centre, self.spread = _centre_and_spread(cosines)
        self.best_reference: float | None = None
        if cosines is not None and 0 < references <= len(cosines):
            self.best_reference = float(max(cosines[-references:]))
        self.chance = max(0.0, expected_best(population) - expected_best(references))

    def meaning(self, cosine: float | None, entry_id: str | None = None) -> Meaning:
        """Where `cosine` (of the memory `entry_id`) stands (`Meaning`)."""
        above = self.above(cosine, entry_id)
        if cosine is None or self.best_reference is None or above == float("-inf"):
            return Meaning(above)
        beyond = (cosine - self.best_reference) / max(self.spread, 1e-6) - self.chance
        return Meaning(above, beyond)

    def above(self, cosine: float | None, entry_id: str | None = None) -> float:
        """How many spreads `cosine` (of the memory `entry_id`) lies above what the other
        texts score (-inf: unknown)."""
        centre, spread = self.centre, self.spread
        at = self._at.get(entry_id) if entry_id is not None else None
        if at is not None and self._values is not None:
            import numpy as np

            centre, spread = _centre_and_spread(np.delete(self._values, at))
        if centre is None or cosine is None:
            return float("-inf")
        return (cosine - centre) / max(spread, 1e-6)


MIN_BASELINE = 8  # fewer cosines than this say nothing about a query's baseline


def _centre_and_spread(cosines: npt.NDArray[np.float32] | None) -> tuple[float | None, float]:
    if cosines is None or len(cosines) < MIN_BASELINE:
        return None, 0.0
    import numpy as np

    values = np.asarray(cosines, dtype=np.float64)
    return float(np.median(values)), float(values.std())


@dataclass(frozen=True)
class Rule:
    """Which hits are relevant enough. A query is answered at all when one of its best hits
    is clearly relevant (`vector_margin` spreads above the baseline, or `keyword_share` of
    the query's words); then its hits are those that are relevant at all (`hit_margin`,
    `hit_share`). So nothing is returned for a query nothing answers, and a question the
    store answers keeps the weaker hits around its answer that ranking put beside it."""

    vector_margin: float = VECTOR_MARGIN
    keyword_share: float = KEYWORD_SHARE
    hit_margin: float = HIT_MARGIN
    hit_share: float = HIT_SHARE
    reference_gap: float = REFERENCE_GAP
    keep_gap: float = KEEP_GAP
    words_floor: float = WORDS_FLOOR

    def answers(self, meaning: Meaning, words: Words) -> bool:
        """By meaning (clearly above unrelated text, and clearly closer than the nearest
        reference sentence), or by words: enough of them, and two of them unless the query
        has one (a stray word of several, a typo that happens to match, answers nothing),
        unless its meaning is known and stands `words_floor` behind the nearest reference."""
        unrelated = float("-inf") < meaning.beyond < self.words_floor
        by_words = (
            words.share >= self.keyword_share
            and (words.held >= 2 or words.asked == 1)
            and not unrelated
        )
        by_meaning = meaning.above >= self.vector_margin and meaning.beyond >= self.reference_gap
        return by_meaning or by_words

    def keeps(self, meaning: Meaning, words: Words) -> bool:
        by_meaning = meaning.above >= self.hit_margin and meaning.beyond >= self.keep_gap
        return by_meaning or words.share >= self.hit_share


@dataclass(frozen=True)
class Words:
    """How much of a query's words a document holds: their share by weight, how many of
    them, and how many the query has."""

    share: float = 0.0
    held: int = 0
    asked: int = 0


def keyword_share(
    weights: Mapping[str, float], body: Mapping[str, int], context: Mapping[str, int]
) -> Words:
    """The query's words (`weights`: term → idf) a document holds, a word only in its
    neighbours' text (`context`) at CONTEXT_SHARE of its weight."""
    total = sum(weights.values())
    if total <= 0:
        return Words(asked=len(weights))
    parts = [
        w if body.get(t) else CONTEXT_SHARE * w if context.get(t) else 0.0
        for t, w in weights.items()
    ]
    return Words(sum(parts) / total, sum(1 for p in parts if p > 0), len(weights))


def topical(weights: Mapping[str, float], text: str) -> dict[str, float]:
    """The query's words that say what it is about: a number of one or two digits says
    nothing of a topic ("what is 2+2" recalled every memory holding a "2": versions, counts,
    dates), unless the query is nothing but numbers (a search for "[1, 2, 3]" or "42"); nor
    does the mark redaction left where a secret was."""
    if not any(c.isalpha() for c in text):
        return dict(weights)
    found = {t: w for t, w in weights.items() if not (t.isdigit() and len(t) <= 2)}
    if MARK in text and MARK_WORD not in text.replace(MARK, "").lower():
        found.pop(MARK_WORD, None)  # our mark where a secret was: no word of the user's
    return found


def select(
    rule: Rule,
    ranked: Sequence[tuple[str, float]],
    judge: Callable[[str], tuple[Meaning, Words]],
    limit: int,
) -> list[tuple[str, float]]:
    """The best `limit` of `ranked` that `rule` keeps, none if no hit among the best
    `2 × limit` answers the query. `judge(id)` gives a hit's (where its cosine stands,
    the query's words it holds); it is asked only of the hits looked at."""
    kept: list[tuple[str, float]] = []
    answered = False
    for n, (entry_id, score) in enumerate(ranked):
        if len(kept) >= limit and (answered or n >= 2 * limit):
            break
        above, words = judge(entry_id)
        answered = answered or (n < 2 * limit and rule.answers(above, words))
        if rule.keeps(above, words):
            kept.append((entry_id, score))
    return kept if answered else []
