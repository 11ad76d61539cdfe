"""Text embedders and the cross-encoder reranker.  The offline default is e5-small-v2 (int8).

``OnnxE5`` runs the shipped ``models/e5-small-v2-int8/model.onnx`` (int8 e5-small-v2, 384-d;
memories are embedded as ``passage: …`` and queries as ``query: …``, so ``embed_query`` is a
separate path); ``OnnxMiniLM`` runs ``models/minilm-l6-v2-int8/model.onnx`` (BERT encoder with
mean pooling and L2 normalisation fused in).  ``CrossEncoderReranker`` scores (query, passage)
pairs with ``models/ms-marco-minilm-l12/model.onnx``.  All run with onnxruntime on the CPU: no
torch and no network at run time.  Importing this module and constructing the models are cheap;
onnxruntime and tokenizers are imported on first use (or ``warm()``).  The MiniLM file comes
from ``tests/dev/export_minilm_onnx.py``, the e5 and reranker files from
``tests/dev/extract_vectrix_models.py``; ``model_files_ok()`` checks a folder against its
``reference.json``.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from tokenizers import Encoding, Tokenizer

MODELS = Path(__file__).parent / "models"
MODEL_DIR = MODELS / "minilm-l6-v2-int8"
E5_DIR = MODELS / "e5-small-v2-int8"
RERANKER_DIR = MODELS / "ms-marco-minilm-l12"
MAX_TOKENS = 256  # sentence-transformers' max_seq_length for MiniLM
E5_MAX_TOKENS = 512  # e5-small-v2 and the reranker were trained up to 512 positions
# A batch's activations grow with its count x its longest text (attention with its square):
# 64 texts of 512 tokens in batches of 32 took 2.3 GB. Long texts go in smaller batches.
BATCH_CHARS = 16_384  # ~4,000 tokens of English
# Each text is run alone (batches of one): the int8 models quantise their activations over
# the whole batch, so a text batched beside others got another vector than alone (cosine
# 0.9974 for a 38-character memory beside any other text), and whether a two-memory store
# answered "which city does the person live in" with "The user is based in Chicago,
# Illinois" depended on whether the backfill embedded both in one round (3.34 spreads above
# the baseline) or one at a time (3.10; the relevance rule asks 3.25). Alone is as fast on
# one thread: 256 LoCoMo turns (137 characters on average) took 18.7-22.0 ms a text for e5
# and 10.1-11.0 for MiniLM, against 19.8-23.7 and 11.8-12.6 in batches of 32.
BATCH_SIZE = 1
# An embedder runs each call on the calling thread alone (no ORT pool): a query's embedding
# then never waits behind a backfill batch in the same session, and a backfill on a thread of
# lower priority (server/background.py) really runs at that priority. One e5 query: 4.7 ms
# alone and 4.8 beside a busy core; with a pool of 2, 3.4 alone and 9.0 beside it.
EMBED_THREADS = 1


class EmbedderError(Exception):
    """The embedder (or reranker) could not load its model or process the input."""


class Embedder(Protocol):
    @property
    def name(self) -> str:
        """Identifies the model; recorded with the vector table."""
        ...

    @property
    def dim(self) -> int: ...

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """One L2-normalised vector per stored text (memory); may raise EmbedderError."""
        ...

    def embed_query(self, text: str) -> list[float]:
        """The L2-normalised vector of a search query; may raise EmbedderError."""
        ...


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def model_files_ok(model_dir: Path = MODEL_DIR) -> bool:
    """True when model.onnx and tokenizer.json match the checksums in reference.json."""
    try:
        ref = json.loads((model_dir / "reference.json").read_text(encoding="utf-8"))
        return bool(
            _sha256(model_dir / "model.onnx") == ref["model_sha256"]
            and _sha256(model_dir / "tokenizer.json") == ref["tokenizer_sha256"]
        )
    except (OSError, ValueError, KeyError, TypeError):
        return False


def _refuse_string(texts: Sequence[str]) -> None:
    if isinstance(texts, str):
        raise TypeError("embed() takes a sequence of strings, not a string")


class _OnnxModel:
    """One ONNX graph and its tokenizer, loaded on first use, once, under a lock."""

    def __init__(self, model_dir: Path, label: str, threads: int, max_tokens: int) -> None:
        self.model_dir = Path(model_dir)
        self._label = label
        self._threads = threads
        self._max_tokens = max_tokens
        self._lock = threading.Lock()
        self._session: Any = None
        self._tokenizer: Tokenizer | None = None

    @property
    def loaded(self) -> bool:
        return self._session is not None and self._tokenizer is not None

    def load(self) -> tuple[Any, Tokenizer]:
        with self._lock:
            if self._session is None or self._tokenizer is None:
                try:
                    from tokenizers import Tokenizer

                    tokenizer = Tokenizer.from_file(str(self.model_dir / "tokenizer.json"))
                    tokenizer.enable_truncation(max_length=self._max_tokens)
                    tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")  # to the longest
                    os.environ.setdefault("ORT_DISABLE_TELEMETRY", "1")
                    import onnxruntime as ort

                    opts = ort.SessionOptions()
                    opts.intra_op_num_threads = self._threads
                    opts.inter_op_num_threads = 1
                    # ORT's pool threads spin after each run, which on a shared machine takes
                    # the core another process's search needs (e5 query p50 3.4 -> 9.0 ms
                    # beside one busy core with 2 spinning threads; 4.8 with 1 thread)
                    opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
                    # ORT's arena keeps a process's largest batch's activations for good
                    # (+2.3 GB RSS after 64 texts of 512 tokens; +133 MB without it);
                    # without it short texts embed as fast (tests/bench/embedder_bench.py)
                    opts.enable_cpu_mem_arena = False
                    self._session = ort.InferenceSession(
                        str(self.model_dir / "model.onnx"),
                        sess_options=opts,
                        providers=["CPUExecutionProvider"],
                    )
                    self._tokenizer = tokenizer
                except Exception as exc:  # missing package, missing/corrupt file, ...
                    raise EmbedderError(f"cannot load {self._label}: {exc}") from exc
            return self._session, self._tokenizer


def _batches(lengths: Sequence[int], size: int, chars: int = BATCH_CHARS) -> list[list[int]]:
    """Indices grouped by similar length, so little compute goes to padding: at most `size`
    texts a batch, and fewer long ones (the batch's longest text x its count <= `chars`)."""
    order = sorted(range(len(lengths)), key=lambda i: lengths[i])
    out: list[list[int]] = []
    for i in order:
        if out and len(out[-1]) < size and (len(out[-1]) + 1) * lengths[i] <= chars:
            out[-1].append(i)
        else:
            out.append([i])
    return out


def _arrays(encodings: Sequence[Encoding], *, type_ids: bool) -> dict[str, Any]:
    import numpy as np

    feed = {
        "input_ids": np.array([e.ids for e in encodings], dtype=np.int64),
        "attention_mask": np.array([e.attention_mask for e in encodings], dtype=np.int64),
    }
    if type_ids:
        feed["token_type_ids"] = np.array([e.type_ids for e in encodings], dtype=np.int64)
    return feed


def _check_sizes(threads: int, batch_size: int) -> None:
    if threads < 1 or batch_size < 1:
        raise ValueError("threads and batch_size must be >= 1")


class _OnnxEmbedder:
    """What the embedded ONNX models share: lazy thread-safe loading, 384-d output, texts
    batched by similar length; subclasses say how one batch becomes vectors."""

    name = ""
    _max_tokens = MAX_TOKENS

    def __init__(
        self, model_dir: Path, *, threads: int = EMBED_THREADS, batch_size: int = BATCH_SIZE
    ) -> None:
        _check_sizes(threads, batch_size)
        self._model = _OnnxModel(model_dir, self.name, threads, self._max_tokens)
        self._batch_size = batch_size

    @property
    def dim(self) -> int:
        return 384

    def warm(self) -> None:
        """Load the model now (e.g. from a background task) instead of on first embed."""
        self._model.load()

    @property
    def ready(self) -> bool:
        """Whether the model is loaded (a call now will not wait for it to load)."""
        return self._model.loaded

    def _run(self, texts: Sequence[str]) -> list[list[float]]:
        if not texts:
            return []
        session, tokenizer = self._model.load()
        out: list[list[float]] = [[] for _ in texts]
        try:
            for idx in _batches([len(t) for t in texts], self._batch_size):
                encodings = tokenizer.encode_batch([texts[i] for i in idx])
                for i, vector in zip(idx, self._vectors(session, encodings), strict=True):
                    out[i] = vector
        except Exception as exc:
            raise EmbedderError(f"{self.name} failed to embed: {exc}") from exc
        return out

    def _vectors(self, session: Any, encodings: Any) -> list[list[float]]:
        raise NotImplementedError


class OnnxMiniLM(_OnnxEmbedder):
    """all-MiniLM-L6-v2 (384-d), int8 ONNX via onnxruntime; loads lazily and thread-safely.

    Each text is run alone by default (``BATCH_SIZE``), so its vector never depends on the
    texts embedded beside it.  Symmetric: a query is embedded like a memory.
    """

    name = "minilm-l6-v2-int8"

    def __init__(
        self,
        model_dir: Path = MODEL_DIR,
        *,
        threads: int = EMBED_THREADS,
        batch_size: int = BATCH_SIZE,
    ) -> None:
        super().__init__(model_dir, threads=threads, batch_size=batch_size)

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        _refuse_string(texts)
        return self._run(texts)

    def embed_query(self, text: str) -> list[float]:
        return self.embed([text])[0]

    def _vectors(self, session: Any, encodings: Any) -> list[list[float]]:
        (vectors,) = session.run(["embedding"], _arrays(encodings, type_ids=False))
        return vectors.tolist()  # type: ignore[no-any-return]


class OnnxE5(_OnnxEmbedder):
    """e5-small-v2 (384-d), int8 ONNX via onnxruntime; loads lazily and thread-safely.

    Asymmetric, as the model was trained: memories are embedded as ``passage: {text}`` and
    queries as ``query: {text}``.  The graph returns token states (``last_hidden_state``);
    they are mean-pooled over the attention mask and L2-normalised here in numpy.
    """

    name = "e5-small-v2-int8"
    _max_tokens = E5_MAX_TOKENS

    def __init__(
        self,
        model_dir: Path = E5_DIR,
        *,
        threads: int = EMBED_THREADS,
        batch_size: int = BATCH_SIZE,
    ) -> None:
        super().__init__(model_dir, threads=threads, batch_size=batch_size)

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        _refuse_string(texts)
        return self._run([f"passage: {t}" for t in texts])

    def embed_query(self, text: str) -> list[float]:
        return self._run([f"query: {text}"])[0]

    def _vectors(self, session: Any, encodings: Any) -> list[list[float]]:
        import numpy as np

        feed = _arrays(encodings, type_ids=True)
        (hidden,) = session.run(["last_hidden_state"], feed)
        mask = feed["attention_mask"][:, :, None].astype(np.float32)
        pooled = (hidden * mask).sum(axis=1) / np.maximum(mask.sum(axis=1), 1e-9)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        return (pooled / np.maximum(norms, 1e-12)).tolist()  # type: ignore[no-any-return]


class Reranker(Protocol):
    def score(self, query: str, texts: Sequence[str]) -> list[float]:
        """Relevance of each text to `query` (higher is better); may raise EmbedderError."""
        ...


class CrossEncoderReranker:
    """ms-marco-MiniLM-L-12-v2 cross-encoder, int8 ONNX; loads lazily and thread-safely.

    ``score`` reads each (query, text) pair together and returns the model's relevance logit
    (higher is more relevant; comparable within one query).  About 20 ms per pair on 2 cores,
    so it is for re-ordering a short candidate list, not for search.
    """

    name = "ms-marco-minilm-l12"

    def __init__(
        self, model_dir: Path = RERANKER_DIR, *, threads: int = 2, batch_size: int = 16
    ) -> None:
        _check_sizes(threads, batch_size)
        self._model = _OnnxModel(model_dir, self.name, threads, E5_MAX_TOKENS)
        self._batch_size = batch_size

    def warm(self) -> None:
        self._model.load()

    def score(self, query: str, texts: Sequence[str]) -> list[float]:
        """One relevance score per text, in the order given; may raise EmbedderError."""
        _refuse_string(texts)
        if not texts:
            return []
        session, tokenizer = self._model.load()
        out = [0.0] * len(texts)
        try:
            for idx in _batches([len(t) for t in texts], self._batch_size):
                pairs = [(query, texts[i]) for i in idx]
                feed = _arrays(tokenizer.encode_batch(pairs), type_ids=True)
                (logits,) = session.run(["logits"], feed)
                for i, value in zip(idx, logits[:, 0].tolist(), strict=True):
                    out[i] = float(value)
        except Exception as exc:
            raise EmbedderError(f"{self.name} failed to score: {exc}") from exc
        return out


class OllamaEmbedder:
    """Embeddings from an Ollama server (e.g. nomic-embed-text) through the `ollama` client.

    Never called on the save path: saves store no vector and a background backfill embeds
    them, so a slow or absent Ollama delays only the vector half of recall."""

    def __init__(self, host: str, model: str = "nomic-embed-text", timeout: float = 30.0) -> None:
        self._host = host
        self._model = model
        self._timeout = timeout
        self._client: Any = None
        self._dim = 0

    @property
    def name(self) -> str:
        return f"ollama:{self._model}"

    @property
    def dim(self) -> int:
        return self._dim

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        if not texts:
            return []
        try:
            import ollama

            if self._client is None:
                self._client = ollama.Client(host=self._host, timeout=self._timeout)
            response = self._client.embed(model=self._model, input=list(texts))
            vectors = [_unit([float(x) for x in v]) for v in response.embeddings]
        except Exception as exc:  # connection refused, timeout, HTTP error, bad payload
            raise EmbedderError(f"{self.name} at {self._host} failed: {exc}") from exc
        if len(vectors) != len(texts) or len({len(v) for v in vectors}) != 1:
            raise EmbedderError(f"{self.name} returned {len(vectors)} vectors for {len(texts)}")
        self._dim = len(vectors[0])
        return vectors

    def embed_query(self, text: str) -> list[float]:
        return self.embed([text])[0]


def _unit(vector: list[float]) -> list[float]:
    norm = sum(x * x for x in vector) ** 0.5
    return [x / norm for x in vector] if norm > 0 else vector
