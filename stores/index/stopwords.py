"""English stop-words dropped from BM25 queries (never from stored text).

Function words in a question ("when did she go to the ...") match nearly every memory and
push the words that matter down the BM25 ranking.  Measured on the LoCoMo dev split
(tests/bench/tune_hybrid.py).  The list is the usual English function words, the way
tokens come out of the analyser's tokenizer (lowercase, split at apostrophes: "don't" is
"don" and "t").
"""

from __future__ import annotations

_WORDS = """
    a about above after again against all am an and any are aren as at
    be because been before being below between both but by
    can couldn d did didn do does doesn doing don down during
    each few for from further
    had hadn has hasn have haven having he her here hers herself him himself his how
    i if in into is isn it its itself just ll m ma me mightn more most mustn my myself
    needn no nor not now o of off on once only or other our ours ourselves out over own
    re s same shan she should shouldn so some such
    t than that the their theirs them themselves then there these they this those through
    to too under until up ve very
    was wasn we were weren what when where which while who whom why will with won would
    wouldn y you your yours yourself yourselves
"""
ENGLISH_STOPWORDS: frozenset[str] = frozenset(_WORDS.split())
