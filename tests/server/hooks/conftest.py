"""Fixtures of the hooks' tests."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.hooks import stop_residents


@pytest.fixture
def run() -> Iterator[Path]:
    """A short XDG_RUNTIME_DIR (a socket's path has at most ~107 bytes), its residents
    stopped after the test."""
    where = Path(tempfile.mkdtemp(prefix="dw", dir="/tmp"))
    yield where
    stop_residents(where)
