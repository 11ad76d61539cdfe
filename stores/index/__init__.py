"""What search reads: the text index, the embedders and the vectors held for ranking.

Owns BM25 through Tantivy (text_index.py, the only module that imports tantivy, with
postings.py for documents not indexed yet and stopwords.py), the embedders and the
cross-encoder (embedders.py, the only module that imports onnxruntime, and its models/),
the readers' immutable view of the entries (view.py, packed_entries.py, duplicate_map.py),
the columnar mirror for top-k (row_columns.py, tagsets.py, centred_rows.py, rows.py),
vectors as held for search (held_vectors.py, sign_codes.py, ivf.py, vector_rank.py) and the
hybrid ranking as pure functions (hybrid_rank.py).

May import: the stores root only (model, errors, files). Knows nothing of logs or LanceDB.

Importing the package is cheap: each name loads its module on first use (PEP 562)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from dreamwell.stores.lazy_exports import lazy_exports

if TYPE_CHECKING:
    from dreamwell.stores.index.embedders import (
        E5_DIR,
        MODEL_DIR,
        CrossEncoderReranker,
        Embedder,
        EmbedderError,
        OllamaEmbedder,
        OnnxE5,
        OnnxMiniLM,
        Reranker,
        model_files_ok,
    )
    from dreamwell.stores.index.hybrid_rank import rank_hits
    from dreamwell.stores.index.stopwords import ENGLISH_STOPWORDS
    from dreamwell.stores.index.text_index import IndexDoc, TextIndex

_LAZY = {
    **dict.fromkeys(
        [
            "CrossEncoderReranker",
            "E5_DIR",
            "MODEL_DIR",
            "Embedder",
            "EmbedderError",
            "OllamaEmbedder",
            "OnnxE5",
            "OnnxMiniLM",
            "Reranker",
            "model_files_ok",
        ],
        "embedders",
    ),
    **dict.fromkeys(
        [
            "IndexDoc",
            "TextIndex",
        ],
        "text_index",
    ),
    "rank_hits": "hybrid_rank",
    "ENGLISH_STOPWORDS": "stopwords",
}

__getattr__, __dir__ = lazy_exports(__name__, _LAZY)

__all__ = [
    "E5_DIR",
    "ENGLISH_STOPWORDS",
    "MODEL_DIR",
    "CrossEncoderReranker",
    "Embedder",
    "EmbedderError",
    "IndexDoc",
    "OllamaEmbedder",
    "OnnxE5",
    "OnnxMiniLM",
    "Reranker",
    "TextIndex",
    "model_files_ok",
    "rank_hits",
]
