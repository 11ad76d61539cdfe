"""Embedders for the tests: deterministic, offline, and instrumented (counting what they
embed, or waiting until told to go on)."""

from __future__ import annotations

import hashlib
import math
import threading
from collections.abc import Sequence

import numpy as np
import pytest

import dreamwell.stores.longterm.mirror as mirror
from dreamwell.stores import EmbedderError, LongTermStore
from tests.support.racing import eventually


class HashEmbedder:
    """Deterministic fake: a unit vector per word bag (hashlib, never hash())."""

    def __init__(self, name: str = "fake", dim: int = 16, broken: bool = False) -> None:
        self._name, self._dim, self.broken = name, dim, broken

    @property
    def name(self) -> str:
        return self._name

    @property
    def dim(self) -> int:
        return self._dim

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        if self.broken:
            raise EmbedderError("fake embedder is down")
        out = []
        for text in texts:
            v = [0.0] * self._dim
            for word in text.lower().split():
                h = hashlib.sha256(word.encode()).digest()
                v[h[0] % self._dim] += 1.0
            norm = math.sqrt(sum(x * x for x in v)) or 1.0
            out.append([x / norm for x in v])
        return out

    def embed_query(self, text: str) -> list[float]:
        return self.embed([text])[0]


class SeededEmbedder:
    """A unit vector drawn from a generator seeded by the text (the same text, the same
    vector), in 64 dimensions: a memory searched by its own text is its own nearest."""

    name = "seeded"

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        out = []
        for text in texts:
            seed = int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "little")
            v = np.random.default_rng(seed).standard_normal(64)
            out.append((v / np.linalg.norm(v)).tolist())
        return out

    def embed_query(self, text: str) -> list[float]:
        return self.embed([text])[0]


class Counting(HashEmbedder):
    def __init__(self) -> None:
        super().__init__()
        self.seen: list[str] = []

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        self.seen.extend(texts)
        return super().embed(texts)


class Gated(Counting):
    """Each embedding says it started, then waits until it may go on."""

    def __init__(self) -> None:
        super().__init__()
        self.started, self.go = threading.Event(), threading.Event()

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        self.started.set()
        assert self.go.wait(10)
        return super().embed(texts)


def overlapping_backfills(
    saver: LongTermStore, other: LongTermStore, monkeypatch: pytest.MonkeyPatch
) -> list[str]:
    """The grace ran out while the saver was slow, so `other` (its embedder `Gated`)
    embeds the saver's memory, and the saver's own backfill logs its vector meanwhile:
    `other` then logs nothing. Returns the ids of the vector records in the log."""
    gated = other.embedder
    assert isinstance(gated, Gated)
    memory = saver.save("the harbour master retires in June").entry
    monkeypatch.setattr(mirror, "FOREIGN_GRACE", 0.0)  # the saver has been slow this long
    eventually(lambda: other.get(memory.id) is not None)
    logged: list[int] = []
    backfill = threading.Thread(target=lambda: logged.append(other.backfill()))
    backfill.start()
    assert gated.started.wait(10)  # `other` is embedding the memory now
    assert saver.backfill() == 1  # and the saver logs its vector meanwhile
    gated.go.set()
    backfill.join(30)
    assert logged == [0]
    assert gated.seen == [memory.content]
    assert other.missing_vectors() == 0
    records = saver._wal.sealed_records(0, 10**9)
    return [str(op["id"]) for r in records for op in r.ops if op["op"] == "vec"]


class Perturbed:
    """Another CPU's view of an embedder: its int8 kernels round differently, so every
    vector moves a little (here by `scale` of its length, in a direction fixed per text and
    `seed`: cosine 0.9988 with the original at 0.05), and it is still the same model."""

    def __init__(self, inner: object, scale: float, seed: int) -> None:
        self.inner, self.scale, self.seed = inner, scale, seed

    def __getattr__(self, name: str) -> object:
        return getattr(self.inner, name)

    def _moved(self, text: str, vector: Sequence[float]) -> list[float]:
        v = np.asarray(vector, dtype=np.float64)
        digest = hashlib.sha256(f"{self.seed}\0{text}".encode()).digest()
        noise = np.random.default_rng(int.from_bytes(digest[:8], "big")).normal(size=len(v))
        v = v + self.scale * np.linalg.norm(v) * noise / np.linalg.norm(noise)
        return (v / np.linalg.norm(v)).tolist()  # type: ignore[no-any-return]

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        found = self.inner.embed(texts)  # type: ignore[attr-defined]
        return [self._moved(t, v) for t, v in zip(texts, found, strict=True)]

    def embed_query(self, text: str) -> list[float]:
        return self._moved("query: " + text, self.inner.embed_query(text))  # type: ignore[attr-defined]
