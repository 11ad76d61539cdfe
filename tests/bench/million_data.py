"""Vectors and texts for tests/bench/million_bench.py (not collected by pytest).

Real text and real e5 vectors, cached: the LoCoMo dev split's dialogue turns, observations and
event summaries (about 4,500 texts) embedded as passages, and its 999 questions embedded as
queries. A million memories are made from pairs of them (see `memories`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
from tune_hybrid import find_shared


def _walk(node: Any, out: list[str]) -> None:
    if isinstance(node, str):
        if len(node.split()) >= 4 and not node.startswith(("session_", "D")):
            out.append(node)
    elif isinstance(node, dict):
        if "text" in node and "speaker" in node:
            out.append(f"{node['speaker']}: {node['text']}")
            return
        for value in node.values():
            _walk(value, out)
    elif isinstance(node, list):
        for value in node:
            _walk(value, out)


def texts_and_questions() -> tuple[list[str], list[str]]:
    data = json.loads((find_shared() / "data" / "locomo-dev.json").read_text())
    texts: list[str] = []
    for sample in data:
        for part in ("conversation", "observation", "event_summary"):
            _walk(sample[part], texts)
    questions = [qa["question"] for sample in data for qa in sample["qa"]]
    return list(dict.fromkeys(texts)), questions


def embedded(cache: Path) -> tuple[list[str], Any, list[str], Any]:
    """(texts, their e5 passage vectors, questions, their e5 query vectors), cached."""
    texts, questions = texts_and_questions()
    if cache.exists():
        got = np.load(cache)
        if len(got["texts"]) == len(texts):
            return texts, got["texts"], questions, got["questions"]
    from dreamwell.stores import OnnxE5

    e5 = OnnxE5()
    passages = np.asarray(e5.embed(texts), dtype=np.float32)
    asked = np.asarray([e5.embed_query(q) for q in questions], dtype=np.float32)
    cache.parent.mkdir(parents=True, exist_ok=True)
    np.savez(cache, texts=passages, questions=asked)
    return texts, passages, questions, asked


def unit(v: npt.NDArray[Any]) -> npt.NDArray[np.float32]:
    return (v / np.linalg.norm(v, axis=-1, keepdims=True)).astype(np.float32)


def memories(
    n: int, texts: list[str], vectors: npt.NDArray[np.float32], seed: int = 0
) -> tuple[list[str], npt.NDArray[np.float32]]:
    """`n` memories, each two real texts (a turn or an observation and another) saved as one:
    the text is both, the vector the normalised sum of their e5 vectors plus a little noise
    (a memory about two things lies between them; not checked against e5 of the joined
    text). Pairs are drawn at random, so neighbours spread over the space of
    real embeddings rather than sitting in a few hundred copies of each text."""
    rng = np.random.default_rng(seed)
    a = rng.integers(0, len(texts), n)
    b = (a + rng.integers(1, len(texts), n)) % len(texts)
    out = np.empty((n, vectors.shape[1]), dtype=np.float32)
    for start in range(0, n, 65536):
        s = slice(start, min(n, start + 65536))
        mixed = vectors[a[s]] + vectors[b[s]]
        mixed = mixed / np.linalg.norm(mixed, axis=1, keepdims=True)
        out[s] = unit(mixed + 0.01 * rng.standard_normal(mixed.shape))
    contents = [f"{texts[i]} {texts[j]} (m{k})" for k, (i, j) in enumerate(zip(a, b, strict=True))]
    return contents, out
