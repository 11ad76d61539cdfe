"""BM25 through the real Tantivy index in RAM: query-side English stop-words."""

from __future__ import annotations

import pytest

from dreamwell.stores.index.stopwords import ENGLISH_STOPWORDS
from dreamwell.stores.index.text_index import IndexDoc, TextIndex


@pytest.fixture
def index() -> TextIndex:
    idx = TextIndex(None)
    docs = {
        "answer": "Caroline went to an LGBTQ support group on 7 May",
        # Full of the question's function words, none of its content words.
        "noise": "when did she do that, the one that was the best of the year, and who was it",
        "who": "The Who played at the festival",
    }
    with idx.writing() as writer:
        for doc_id, text in docs.items():
            writer.upsert(IndexDoc(doc_id, text, None, ()))
    return idx


def test_query_terms_drop_english_stop_words(index: TextIndex) -> None:
    assert index.terms("When did Caroline go to the LGBTQ support group?") == [
        "carolin",
        "go",
        "lgbtq",
        "support",
        "group",
    ]


def test_stop_words_in_a_query_no_longer_outrank_its_content_words(index: TextIndex) -> None:
    hits = index.search("When did she go to the support group, and who was it?", 10)
    assert hits[0][0] == "answer"
    assert "noise" not in dict(hits)


def test_a_query_made_only_of_stop_words_keeps_them(index: TextIndex) -> None:
    assert index.terms("The Who") == ["the", "who"]
    assert index.search("the who", 10)[0][0] == "who"


def test_stored_text_keeps_every_word(index: TextIndex) -> None:
    # A stop-word-only query finds every document holding those words: none was dropped
    # when the text was indexed.
    assert {i for i, _ in index.search("who was it", 10)} == {"noise", "who"}


def test_the_stop_word_list_is_lowercase_single_tokens() -> None:
    assert {"the", "when", "did", "t", "don"} <= ENGLISH_STOPWORDS
    assert all(w.isascii() and w.isalpha() and w == w.lower() for w in ENGLISH_STOPWORDS)
    assert not {"caroline", "support", "may", "group"} & ENGLISH_STOPWORDS
