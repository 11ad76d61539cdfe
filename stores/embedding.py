"""Text embedders.  The offline default is all-MiniLM-L6-v2 as one int8 ONNX graph.

``OnnxMiniLM`` runs the shipped ``models/minilm-l6-v2-int8/model.onnx`` (BERT encoder with
mean pooling and L2 normalisation fused in, int8 per-channel weights) with onnxruntime on
the CPU: no torch and no network at run time.  Importing this module and constructing the
embedder are cheap; onnxruntime and tokenizers are imported on first use (or ``warm()``).
The file comes from ``tests/dev/export_minilm_onnx.py``; ``model_files_ok()`` checks it
against ``reference.json``.
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
    from tokenizers import Tokenizer

MODEL_DIR = Path(__file__).parent / "models" / "minilm-l6-v2-int8"
MAX_TOKENS = 256  # sentence-transformers' max_seq_length for this model


class EmbedderError(Exception):
    """The embedder could not load its model or embed the input."""


class Embedder(Protocol):
    @property
    def name(self) -> str:
        """Identifies the model; recorded with the vector table."""
        ...

    @property
    def dim(self) -> int: ...

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """One L2-normalised vector per text; may raise EmbedderError."""
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


class OnnxMiniLM:
    """all-MiniLM-L6-v2 (384-d), int8 ONNX via onnxruntime; loads lazily and thread-safely.

    Activations are quantised per batch, so a text's vector moves slightly with the texts
    batched beside it (cosine >= ~0.98 to the same text embedded alone); ``batch_size=1``
    makes vectors batch-independent at about a third less throughput.
    """

    def __init__(
        self, model_dir: Path = MODEL_DIR, *, threads: int = 2, batch_size: int = 32
    ) -> None:
        if threads < 1 or batch_size < 1:
            raise ValueError("threads and batch_size must be >= 1")
        self._model_dir = Path(model_dir)
        self._threads = threads
        self._batch_size = batch_size
        self._lock = threading.Lock()
        self._session: Any = None
        self._tokenizer: Tokenizer | None = None

    @property
    def name(self) -> str:
        return "minilm-l6-v2-int8"

    @property
    def dim(self) -> int:
        return 384

    def warm(self) -> None:
        """Load the model now (e.g. from a background task) instead of on first embed."""
        self._load()

    def _load(self) -> tuple[Any, Tokenizer]:
        with self._lock:
            if self._session is None or self._tokenizer is None:
                try:
                    from tokenizers import Tokenizer

                    tokenizer = Tokenizer.from_file(str(self._model_dir / "tokenizer.json"))
                    tokenizer.enable_truncation(max_length=MAX_TOKENS)
                    tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")
                    os.environ.setdefault("ORT_DISABLE_TELEMETRY", "1")
                    import onnxruntime as ort

                    opts = ort.SessionOptions()
                    opts.intra_op_num_threads = self._threads
                    opts.inter_op_num_threads = 1
                    self._session = ort.InferenceSession(
                        str(self._model_dir / "model.onnx"),
                        sess_options=opts,
                        providers=["CPUExecutionProvider"],
                    )
                    self._tokenizer = tokenizer
                except Exception as exc:  # missing package, missing/corrupt file, ...
                    raise EmbedderError(f"cannot load {self.name}: {exc}") from exc
            return self._session, self._tokenizer

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        if isinstance(texts, str):
            raise TypeError("embed() takes a sequence of strings, not a string")
        if not texts:
            return []
        session, tokenizer = self._load()
        import numpy as np

        # Batch texts of similar length together so little compute goes to padding.
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        out: list[list[float]] = [[] for _ in texts]
        try:
            for start in range(0, len(order), self._batch_size):
                idx = order[start : start + self._batch_size]
                encodings = tokenizer.encode_batch([texts[i] for i in idx])
                ids = np.array([e.ids for e in encodings], dtype=np.int64)
                mask = np.array([e.attention_mask for e in encodings], dtype=np.int64)
                (vectors,) = session.run(["embedding"], {"input_ids": ids, "attention_mask": mask})
                for i, vector in zip(idx, vectors.tolist(), strict=True):
                    out[i] = vector
        except Exception as exc:
            raise EmbedderError(f"{self.name} failed to embed: {exc}") from exc
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


def _unit(vector: list[float]) -> list[float]:
    norm = sum(x * x for x in vector) ** 0.5
    return [x / norm for x in vector] if norm > 0 else vector
