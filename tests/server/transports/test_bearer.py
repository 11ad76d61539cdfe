"""`serve` over HTTP or SSE is never open by default (issue 53, goal 1): without `--token` it
answered every local user — all eight tools, and the memory browser's API. Now it makes a token
of its own, kept 0600 in the data directory, and says where; `--no-token` opens it on purpose."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from dreamwell.server.config import Settings
from dreamwell.server.transports.bearer import with_token
from dreamwell.stores import DataDir, LongTermStore, MemoryEntry, StoreError, new_id, utcnow
from tests.support.calls import INIT, ok
from tests.support.cli import NO_EMBEDDER
from tests.support.other_user import as_other_user, other_user_or_skip, traversable_dir
from tests.support.servers import http

# as uid 65534: the handshake, a search_memory call (in the handshake's session if it got
# one), one with a guessed token, and the kept token's file; every status
_ATTACK = """
import json, sys, urllib.request, urllib.error
url, init, kept = sys.argv[1], json.loads(sys.argv[2]), sys.argv[3]
def post(body, headers):
    headers = {"content-type": "application/json",
               "accept": "application/json, text/event-stream", **headers}
    request = urllib.request.Request(url, json.dumps(body).encode(), headers)
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            return answer.status, dict(answer.headers), answer.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, dict(exc.headers), exc.read().decode()
got = {}
got["initialize"], headers, _ = post(init, {})
session = {k: v for k, v in headers.items() if k.lower() == "mcp-session-id"}
if session:
    post({"jsonrpc": "2.0", "method": "notifications/initialized"}, session)
call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": "search_memory", "arguments": {"query": "Chicago"}}}
got["search"], _, found = post(call, {**session, "mcp-protocol-version": "2025-11-25"})
got["guess"], _, guessed = post(call, {"authorization": "Bearer guess-guess-guess"})
got["leaked"] = "Chicago" in found + guessed
try:
    open(kept).read()
    got["read_token"] = True
except OSError:
    got["read_token"] = False
print(json.dumps(got))
"""


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _wait_for(proc: subprocess.Popen[bytes], log: Path, port: int, text: str) -> list[str]:
    """The server's stderr lines once one contains `text` and the port accepts."""
    deadline = time.monotonic() + 90
    while True:
        assert proc.poll() is None, log.read_text()
        assert time.monotonic() < deadline, log.read_text()
        lines = log.read_text().splitlines()
        if any(text in line for line in lines):
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    return lines
        time.sleep(0.05)


@pytest.mark.anyio
async def test_serve_over_http_without_a_token_refuses_another_user_and_answers_its_token() -> None:
    other_user_or_skip()
    with traversable_dir() as home:  # as a real /home: uid 65534 may walk up to the data dir
        data = home / "data"
        now = utcnow()
        chicago = MemoryEntry(new_id(), "User is in Chicago (UTC-6)", "user", (), now, now, now)
        LongTermStore(data, embedder=None).apply([chicago])
        port, log = _free_port(), home / "serve.log"
        command = [sys.executable, "-m", "dreamwell.server", "serve", "--transport", "http"]
        with open(log, "wb") as out:
            proc = subprocess.Popen(
                [*command, "--port", str(port), "--data-dir", str(data)],
                stdin=subprocess.DEVNULL,
                stderr=out,
                env={**os.environ, **NO_EMBEDDER},
            )
        try:
            lines = _wait_for(proc, log, port, "Ctrl-C stops it")
            kept = DataDir(data).serve_token
            url = f"http://127.0.0.1:{port}"
            attack = as_other_user(_ATTACK, f"{url}/mcp", json.dumps(INIT), str(kept))
            assert attack == {
                "initialize": 401,
                "search": 401,
                "guess": 401,
                "leaked": False,
                "read_token": False,
            }
            assert lines[1] == (
                "dreamwell serve: clients must send 'Authorization: Bearer <token>' with the "
                f"token kept in {kept} (yours only; --token sets your own)"
            )
            assert kept.stat().st_mode & 0o777 == 0o600
            token = kept.read_text().strip()
            async with http(url, {"Authorization": f"Bearer {token}"}) as client:
                assert "Chicago" in await ok(client, "search_memory", query="Chicago")
        finally:
            proc.terminate()
            proc.wait(timeout=30)


def _settings(data: Path, **more: object) -> Settings:
    return Settings(data_dir=data, transport="sse", port=0, embedder="none", **more)  # type: ignore[arg-type]


def test_the_kept_token_survives_a_restart_and_a_given_token_makes_none(tmp_path: Path) -> None:
    first, line = with_token(_settings(tmp_path))
    again, _ = with_token(_settings(tmp_path))  # the next start of `serve`
    kept = DataDir(tmp_path).serve_token
    assert first.token is not None and len(first.token) >= 32
    assert again.token == first.token == kept.read_text().strip()
    assert line is not None and str(kept) in line and "Authorization: Bearer" in line
    assert kept.stat().st_mode & 0o777 == 0o600

    given, said = with_token(_settings(tmp_path / "given", token="my-own-token"))
    assert (given.token, said) == ("my-own-token", None)
    assert not DataDir(tmp_path / "given").serve_token.exists()
    stdio = Settings(data_dir=tmp_path / "stdio", embedder="none")
    assert with_token(stdio) == (stdio, None)


def test_a_token_others_could_read_is_replaced_and_a_foreign_path_is_refused(
    tmp_path: Path,
) -> None:
    before = with_token(_settings(tmp_path))[0].token
    kept = DataDir(tmp_path).serve_token
    kept.chmod(0o644)  # e.g. written by an older tool under a loose umask: it may be known
    after = with_token(_settings(tmp_path))[0].token
    assert after != before and kept.stat().st_mode & 0o777 == 0o600

    makers = (lambda p: p.symlink_to(tmp_path / "elsewhere"), lambda p: p.mkdir())
    for n, make in enumerate(makers):
        other = tmp_path / f"other{n}"
        other.mkdir()
        make(DataDir(other).serve_token)
        with pytest.raises(StoreError, match="must be a regular file of yours"):
            with_token(_settings(other))
        assert not (tmp_path / "elsewhere").exists()  # nothing written through the link


def test_no_token_serves_openly_only_when_asked_and_says_so(tmp_path: Path) -> None:
    settings, line = with_token(_settings(tmp_path, no_token=True))
    assert settings.token is None and settings.tenant_tokens() == {}
    assert line is not None and "every local user" in line
    assert not DataDir(tmp_path).serve_token.exists()
