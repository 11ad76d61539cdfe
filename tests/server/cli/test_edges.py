"""The rough edges a new user hit on the command line: each answers with one clear line (or
nothing, for a closed pipe), never a traceback; and requests piped to `serve` before stdin
closes are carried out, not dropped; `dreamwell ui` fills missing vectors as `serve` does."""

from __future__ import annotations

import json
import os
import pty
import subprocess
import sys
import time
from pathlib import Path

import httpx2

from dreamwell.stores import DataDir, LongTermStore
from tests.support.calls import initialize
from tests.support.cli import dreamwell, interrupted
from tests.support.fake_ollama import fake_ollama
from tests.support.ui_browser import base_of, bearer_of, ui_process

ENV = {**os.environ, "DREAMWELL_EMBEDDER": "none"}


def seeded(tmp_path: Path, n: int = 300) -> Path:
    data = tmp_path / "d"
    store = LongTermStore(data, embedder=None)
    for i in range(n):
        store.save(f"memory number {i} " + "x" * 200)
    return data


def test_export_into_a_closed_pipe_is_quiet(tmp_path: Path) -> None:
    data = seeded(tmp_path)
    export = [sys.executable, "-m", "dreamwell.server", "export", "--data-dir", str(data)]
    first = subprocess.Popen(export, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=ENV)
    assert first.stdout is not None and first.stderr is not None
    assert first.stdout.readline()  # `head -1`: read one line, then leave
    first.stdout.close()
    err = first.stderr.read().decode()
    first.stderr.close()
    first.wait(timeout=60)
    assert "Traceback" not in err and "BrokenPipe" not in err, err
    assert first.returncode == 0


def test_export_to_a_missing_directory_is_one_line(tmp_path: Path) -> None:
    data = seeded(tmp_path, 1)
    out = tmp_path / "missing" / "dir" / "x.jsonl"
    done = dreamwell("export", "--data-dir", str(data), "-o", str(out))
    assert done.returncode == 1
    assert done.stderr.strip() == f"dreamwell: cannot write {out}: no directory {out.parent}"


def test_doctor_names_a_missing_tenant_and_a_data_dir_that_is_a_file(tmp_path: Path) -> None:
    data = seeded(tmp_path, 1)
    nosuch = dreamwell("doctor", "--data-dir", str(data), "--tenant", "nosuch")
    assert nosuch.returncode == 1 and "all good" not in nosuch.stdout
    assert "no tenant 'nosuch'" in nosuch.stdout
    a_file = tmp_path / "passwd"
    a_file.write_text("root:x:0:0\n")
    filed = dreamwell("doctor", "--data-dir", str(a_file))
    assert "is a file, not a directory" in filed.stdout and "mkdir" not in filed.stdout


def test_log_refuses_empty_text_and_unknown_kinds(tmp_path: Path) -> None:
    data = tmp_path / "d"
    empty = dreamwell("log", "feedback", "", "--data-dir", str(data))
    assert empty.returncode == 2 and "empty" in empty.stderr and "Traceback" not in empty.stderr
    bogus = dreamwell("log", "feedback", "wrong answer", "--kind", "Bogus", "--data-dir", str(data))
    assert bogus.returncode == 2 and "'Bogus' is not one of Correction" in bogus.stderr
    ok = dreamwell("log", "feedback", "good", "--kind", "HELPFUL", "--data-dir", str(data))
    assert ok.returncode == 0
    (line,) = DataDir(data).root.joinpath("feedback.jsonl").read_text().splitlines()
    assert json.loads(line)["kind"] == "helpful"
    assert not DataDir(data).root.joinpath("conversation.jsonl").exists()


def test_dream_once_says_it_waits_for_quiet(tmp_path: Path) -> None:
    data = seeded(tmp_path, 2)
    marker = DataDir(data).activity
    marker.touch()  # an agent's tool call just now
    proc = subprocess.Popen(
        [sys.executable, "-m", "dreamwell.server", "dream", "--once", "--data-dir", str(data)],
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        text=True,
        env=ENV,
    )
    try:
        assert proc.stderr is not None
        line = proc.stderr.readline()
        assert "waiting until it has been quiet for 30 s" in line, line
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        if proc.stderr is not None:
            proc.stderr.close()


def test_serve_on_a_terminal_says_what_it_waits_for(tmp_path: Path) -> None:
    leader, follower = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "dreamwell.server", "serve", "--data-dir", str(tmp_path / "d")],
        stdin=follower,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=ENV,
    )
    try:
        assert proc.stderr is not None
        line = proc.stderr.readline()
        assert "waiting for an MCP client" in line and "README.md" in line, line
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        os.close(leader)
        os.close(follower)
        if proc.stderr is not None:
            proc.stderr.close()


def test_requests_piped_before_stdin_closes_are_carried_out(tmp_path: Path) -> None:
    """`printf '<initialize>\\n<initialized>\\n<save_memory>\\n' | dreamwell serve` saves."""
    save = {"name": "save_memory", "arguments": {"content": "piped in before EOF"}}
    frames = [
        initialize(),
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": save},
    ]
    piped = "".join(json.dumps(f) + "\n" for f in frames)
    data = tmp_path / "d"
    started = time.monotonic()
    done = dreamwell("serve", "--data-dir", str(data), stdin=piped)
    took = time.monotonic() - started
    assert done.returncode == 0, done.stderr
    answer = json.loads(done.stdout.splitlines()[-1])
    assert "result" in answer, (answer, done.stderr)
    assert answer["id"] == 2 and "Saved memory" in answer["result"]["content"][0]["text"]
    assert [e.content for e in LongTermStore(data, embedder=None).entries()] == [
        "piped in before EOF"
    ]
    assert took < 60


def test_ui_fills_missing_vectors_like_serve(tmp_path: Path) -> None:
    data = tmp_path / "d"
    store = LongTermStore(data, embedder=None)
    store.save("a memory saved without an embedder")
    before = store.change_seq()
    with (
        fake_ollama() as (host, script),
        ui_process(data, "ollama", DREAMWELL_OLLAMA_HOST=host) as url,
    ):
        opened = httpx2.get(f"{base_of(url)}ui/api/memories", headers=bearer_of(url), timeout=60)
        assert opened.status_code == 200  # opens the store
        deadline = time.monotonic() + 60
        while LongTermStore(data, embedder=None).change_seq() == before:  # the vector, logged
            assert time.monotonic() < deadline, "the ui never embedded the memory"
            time.sleep(0.1)
        assert any(r.get("path") == "/api/embed" for r in script.requests)


def test_every_command_refuses_an_unknown_tenant_naming_the_known_ones(tmp_path: Path) -> None:
    """Issue 44: a mistyped --tenant made a tenant silently in dream, import and log."""
    data = seeded(tmp_path, 1)
    LongTermStore(data / "tenants" / "team", embedder=None).save("the team's memory")
    source = tmp_path / "m.jsonl"
    source.write_text(json.dumps({"content": "imported"}) + "\n")
    for command in (
        ["dream", "--once"],
        ["import", str(source)],
        ["log", "conversation", "hello", "--session", "s"],
        ["export"],
        ["skills", "list"],
    ):
        done = dreamwell(*command, "--tenant", "taem", "--data-dir", str(data), env=ENV)
        assert done.returncode != 0, command
        assert done.stderr == (
            f"dreamwell: no tenant 'taem' in {data} (tenants: team); check --tenant, or leave "
            "it out for the root store\n"
        ), command
    assert sorted(p.name for p in (data / "tenants").iterdir()) == ["team"]


def test_serve_over_http_says_where_it_answers_and_the_browser_has_its_own_port(
    tmp_path: Path,
) -> None:
    """Issue 44: `serve --transport http` printed nothing, and `ui` took the same default
    port, so starting the browser beside it failed "Address already in use"."""
    import socket

    from dreamwell.server.config import Settings
    from dreamwell.server.flags import UI_PORT

    assert Settings.model_fields["port"].default != UI_PORT
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    served = interrupted(
        "serve",
        "--transport",
        "http",
        "--port",
        str(port),
        "--data-dir",
        str(tmp_path / "d"),
        when="Ctrl-C stops it",
        env={"DREAMWELL_EMBEDDER": "none"},
    )
    first = served.stderr.splitlines()[0]
    assert first == (
        f"dreamwell serve: MCP at http://127.0.0.1:{port}/mcp, the memory browser at "
        f"http://127.0.0.1:{port}/ (Ctrl-C stops it)"
    )
    assert "Traceback" not in served.stderr
