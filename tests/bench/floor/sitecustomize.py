"""The floor of a hybrid search, as one request (search_scale_bench.py; not product code).

With this folder on PYTHONPATH and DREAMWELL_EMBEDDER=none, a `dreamwell serve` process embeds
each search's query with the default e5 model, discards the vector and runs the BM25-only
search: the raw query embedding and the BM25-only search over stdio, paid in one request.
Timed as separate requests, their sum leaves out what a longer request costs the transport
(on the benchmark machine a request that computes 7 ms more came back about 9 ms later).
"""

import sys

if "serve" in sys.argv:
    from dreamwell.stores.index.embedders import OnnxE5
    from dreamwell.stores.longterm.store import LongTermStore

    _e5 = OnnxE5()
    _search = LongTermStore.search

    def _embedded_then_keywords(self, query=None, *args, **kwargs):  # type: ignore[no-untyped-def]
        if query:
            _e5.embed_query(query)
        return _search(self, query, *args, **kwargs)

    LongTermStore.search = _embedded_then_keywords  # type: ignore[method-assign]
