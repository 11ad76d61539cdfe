"""Recall settings: the embedded default embedder, per-embedder tuning and opt-in reranking."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from dreamwell.server.config import Settings
from dreamwell.server.runtime import Runtime
from dreamwell.stores import CrossEncoderReranker, OnnxE5, OnnxMiniLM
from tests.support.cli import dreamwell


def test_e5_is_the_default_embedder_and_reranking_is_off(tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path)
    assert (settings.embedder, settings.rerank, settings.rerank_depth) == ("e5", False, 20)
    runtime = Runtime(settings)
    assert isinstance(runtime.embedder, OnnxE5)
    assert runtime.reranker is None


def test_each_embedded_model_has_its_own_tuning(tmp_path: Path) -> None:
    assert isinstance(Runtime(Settings(data_dir=tmp_path, embedder="minilm")).embedder, OnnxMiniLM)
    assert Runtime(Settings(data_dir=tmp_path, embedder="none")).embedder is None


def test_rerank_builds_the_cross_encoder_without_loading_it(tmp_path: Path) -> None:
    runtime = Runtime(Settings(data_dir=tmp_path, rerank=True, rerank_depth=30))
    assert isinstance(runtime.reranker, CrossEncoderReranker)


@pytest.mark.parametrize(
    ("key", "value"), [("RERANK_DEPTH", "500"), ("RERANK_DEPTH", "1"), ("EMBEDDER", "e6")]
)
def test_a_bad_recall_setting_takes_its_default_with_one_line_naming_it(
    tmp_path: Path, key: str, value: str
) -> None:
    """It exited 2, and a server that does not start switched memory off (issue 53 goal 6)."""
    done = dreamwell(
        "serve",
        "--data-dir",
        str(tmp_path),
        stdin=subprocess.DEVNULL,
        env={f"DREAMWELL_{key}": value},
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and key.lower() in lines[0] and value in lines[0], lines
    assert "using the default" in lines[0]
