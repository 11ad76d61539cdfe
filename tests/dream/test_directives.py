"""The directive files a user puts in the data directory (`dream.md`, …): read when they are
regular UTF-8 files, the built-in prompt otherwise, never waited on."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from dreamwell.dream.directives import DREAM, MAX_DIRECTIVE_BYTES, directive


def _within(seconds: float, data_dir: Path) -> str:
    """directive() on a thread: a read that never ends fails the test instead of hanging it."""
    got: list[str] = []
    worker = threading.Thread(
        target=lambda: got.append(directive(data_dir, "dream.md", DREAM)), daemon=True
    )
    worker.start()
    worker.join(seconds)
    assert got, f"dream.md still being read after {seconds} s"
    return got[0]


@pytest.mark.parametrize("kind", ["fifo", "dev-zero", "not-utf8", "directory"])
def test_a_dream_md_that_cannot_be_a_prompt_gives_the_built_in_one_at_once(
    tmp_path: Path, kind: str, caplog: pytest.LogCaptureFixture
) -> None:
    """qa-turn5 LOW 12: a FIFO dream.md hung the dream (> 120 s, holding the dream lock);
    /dev/zero ended in MemoryError, bytes that are not UTF-8 in a traceback."""
    path = tmp_path / "dream.md"
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "dev-zero":
        path.symlink_to("/dev/zero")
    elif kind == "directory":
        path.mkdir()
    else:
        path.write_bytes(b"Merge \xff\xfe duplicates")
    assert _within(10, tmp_path) == DREAM
    assert "dream.md" in caplog.text and "the built-in prompt is used" in caplog.text


def test_a_regular_dream_md_replaces_the_prompt_and_only_its_first_mebibyte_is_read(
    tmp_path: Path,
) -> None:
    (tmp_path / "dream.md").write_text("  Merge duplicates; keep dates.\n")
    assert directive(tmp_path, "dream.md", DREAM) == "Merge duplicates; keep dates."
    (tmp_path / "dream.md").write_text("a" * MAX_DIRECTIVE_BYTES + "TAIL")
    assert directive(tmp_path, "dream.md", DREAM) == "a" * MAX_DIRECTIVE_BYTES
    assert directive(tmp_path, "missing.md", DREAM) == DREAM
