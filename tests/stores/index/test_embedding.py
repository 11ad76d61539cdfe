"""The shipped offline embedder: all-MiniLM-L6-v2, int8 ONNX, run by onnxruntime."""

from __future__ import annotations

import hashlib
import json
import math
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from dreamwell.stores.index.embedders import (
    MODEL_DIR,
    Embedder,
    EmbedderError,
    OnnxMiniLM,
    model_files_ok,
)

REFERENCE: dict[str, Any] = json.loads((MODEL_DIR / "reference.json").read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def embedder() -> OnnxMiniLM:
    model = OnnxMiniLM()
    model.warm()
    return model


def cosine(a: list[float], b: list[float]) -> float:
    dot = sum(x * y for x, y in zip(a, b, strict=True))
    return dot / (math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b)))


def test_model_and_tokenizer_checksums_match_reference_json() -> None:
    for name, key in (("model.onnx", "model_sha256"), ("tokenizer.json", "tokenizer_sha256")):
        digest = hashlib.sha256((MODEL_DIR / name).read_bytes()).hexdigest()
        assert digest == REFERENCE[key], name
    assert model_files_ok()


def test_model_files_ok_is_false_when_the_files_are_missing(tmp_path: Path) -> None:
    assert not model_files_ok(tmp_path)


def test_the_licence_and_notice_ship_with_the_model() -> None:
    assert "Apache License" in (MODEL_DIR / "LICENSE").read_text(encoding="utf-8")
    notice = (MODEL_DIR / "NOTICE").read_text(encoding="utf-8")
    assert "Nils Reimers" in notice
    assert REFERENCE["model_sha256"] in notice


@pytest.mark.parametrize("item", REFERENCE["vectors"], ids=lambda v: repr(v["text"][:20]))
def test_reference_vectors_are_reproduced(embedder: OnnxMiniLM, item: dict[str, Any]) -> None:
    # int8 vectors vary slightly across onnxruntime versions and CPUs, hence the tolerance.
    (vector,) = embedder.embed([item["text"]])
    head = vector[:8]
    for got, want in zip(head, item["head"], strict=True):
        assert abs(got - want) < 0.02
    assert cosine(head, item["head"]) > 0.98


def test_the_int8_model_stayed_close_to_the_torch_reference_when_exported() -> None:
    assert len(REFERENCE["torch_cosine"]) == len(REFERENCE["vectors"]) == 5
    assert min(REFERENCE["torch_cosine"]) > 0.98


def test_embedder_reports_its_name_and_dimension(embedder: OnnxMiniLM) -> None:
    as_protocol: Embedder = embedder
    assert as_protocol.name == "minilm-l6-v2-int8"
    assert as_protocol.dim == 384


def test_vectors_are_unit_length_one_per_text(embedder: OnnxMiniLM) -> None:
    texts = ["The user lives in Chicago", "short", "a somewhat longer sentence " * 5]
    vectors = embedder.embed(texts)
    assert len(vectors) == len(texts)
    for vector in vectors:
        assert len(vector) == embedder.dim
        assert math.sqrt(sum(x * x for x in vector)) == pytest.approx(1.0, abs=1e-4)


def test_paraphrases_score_higher_than_unrelated_sentences(embedder: OnnxMiniLM) -> None:
    fact, paraphrase, unrelated = embedder.embed(
        ["The user lives in Chicago", "User is based in Chicago, Illinois", "I like pizza"]
    )
    assert cosine(fact, paraphrase) > cosine(fact, unrelated) + 0.3


def test_a_text_gets_the_same_vector_whatever_is_embedded_beside_it(
    embedder: OnnxMiniLM,
) -> None:
    texts = [f"note {i}: " + "the meeting moved to Friday " * (i % 7) for i in range(70)]
    texts[5] = "The cat sat on the mat"
    texts[66] = "Quarterly revenue grew by ten percent"
    batched = embedder.embed(texts)
    for i in (5, 66):
        (alone,) = embedder.embed([texts[i]])
        assert batched[i] == alone


@pytest.mark.parametrize(
    "text",
    ["", "München, 東京, Київ — naïve café 🚀", "x" * 10_000, "word " * 2_000],
    ids=["empty", "non-ascii", "10k-chars", "2k-words"],
)
def test_unusual_inputs_embed_without_crashing(embedder: OnnxMiniLM, text: str) -> None:
    (vector,) = embedder.embed([text])
    assert len(vector) == 384
    assert all(math.isfinite(x) for x in vector)


def test_embedding_no_texts_returns_no_vectors(embedder: OnnxMiniLM) -> None:
    assert embedder.embed([]) == []


def test_a_bare_string_is_refused(embedder: OnnxMiniLM) -> None:
    with pytest.raises(TypeError, match="sequence of strings"):
        embedder.embed("not a list")


def test_a_missing_model_raises_embedder_error(tmp_path: Path) -> None:
    with pytest.raises(EmbedderError, match="cannot load minilm-l6-v2-int8"):
        OnnxMiniLM(tmp_path).embed(["hello"])


def test_concurrent_first_use_loads_once_and_agrees() -> None:
    model = OnnxMiniLM(threads=1)
    results: list[list[float]] = []
    lock = threading.Lock()

    def work() -> None:
        (vector,) = model.embed(["The user lives in Chicago"])
        with lock:
            results.append(vector)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert len(results) == 4
    assert all(r == results[0] for r in results)


def test_constructing_the_embedder_does_not_load_onnxruntime() -> None:
    code = (
        "import sys\n"
        "from dreamwell.stores.index.embedders import OnnxMiniLM\n"
        "OnnxMiniLM()\n"
        "assert 'onnxruntime' not in sys.modules, 'onnxruntime imported'\n"
        "assert 'tokenizers' not in sys.modules, 'tokenizers imported'\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
