"""Fixtures of the memory browser's tests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.ui_browser import seed, ui_process


@pytest.fixture
def ui_server(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    data = tmp_path / "data"
    seed(data)
    with ui_process(data) as url:
        yield url, data
