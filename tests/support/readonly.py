"""A data directory the server cannot write: a read-only bind mount in a private mount
namespace when the tests run as root (chmod does not stop root), else its write permission
removed; and what it holds."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from mcp import Client, StdioServerParameters

from dreamwell.server.config import Settings
from dreamwell.server.mcp.app import build_server
from tests.support.calls import ok

NS = "patrol/readonly"


def tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*") if p.is_file()}


@contextmanager
def read_only_server(data: Path) -> Iterator[StdioServerParameters]:
    """`dreamwell serve` over stdio on `data`, which it cannot write."""
    env = {**os.environ, "DREAMWELL_EMBEDDER": "none"}
    serve = ["dreamwell", "serve", "--data-dir", str(data), "--namespace", NS]
    if os.geteuid() != 0:
        modes = {p: p.stat().st_mode for p in [data, *data.rglob("*")]}
        for p in modes:
            p.chmod(modes[p] & ~(stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH))
        try:
            yield StdioServerParameters(command=serve[0], args=serve[1:], env=env)
        finally:
            for p, mode in modes.items():
                p.chmod(mode)
        return
    unshare = shutil.which("unshare")
    probe = subprocess.run([unshare or "unshare", "-m", "true"], capture_output=True, check=False)
    if unshare is None or probe.returncode != 0:
        pytest.skip("running as root without mount namespaces: cannot make a read-only directory")
    script = 'mount --bind "$1" "$1" && mount -o remount,bind,ro "$1" "$1" && shift && exec "$@"'
    yield StdioServerParameters(
        command=unshare, args=["-m", "sh", "-c", script, "sh", str(data), *serve], env=env
    )


async def seed(data: Path) -> None:
    async with Client(build_server(Settings(data_dir=data, embedder="none", namespace=NS))) as c:
        await ok(c, "save_memory", content="Readable on a read-only disk", category="ops")
        await ok(c, "save_to_working_memory", key="k", data="working value", ttl_minutes=60)
