"""One exit-code convention for every command (docs/reference.md "Exit codes"): 0 done, 1 the
operation failed, 2 a usage error, 130 interrupted; each failure one line on stderr, never a
traceback (issue 56 item 3)."""

from __future__ import annotations

import os
import pty
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from dreamwell.server.flags import COMMANDS
from tests.support.cli import NO_EMBEDDER, dreamwell, exit_code

# every command that opens the data directory, as a user would run it
ON_A_DATA_DIR = [
    ("dream", "--once"),
    ("dream", "--report"),
    ("log", "conversation", "hello"),
    ("export",),
    ("import", "{source}"),
    ("stats",),
    ("reindex",),
    ("skills", "list"),
    ("skills", "export", "--to", "{tmp}/skills"),
    ("serve",),
    ("ui", "--port", "0"),
]


def one_line(stderr: str) -> str:
    assert "Traceback" not in stderr, stderr
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1, stderr
    return lines[0]


def test_the_cases_below_cover_every_command() -> None:
    named = {args[0] for args in ON_A_DATA_DIR} | {"doctor", "hook", "install", "config"}
    assert named == set(COMMANDS)


@pytest.mark.parametrize("args", ON_A_DATA_DIR, ids=" ".join)
def test_a_data_directory_that_is_a_file_is_one_line_and_exit_1(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    args: tuple[str, ...],
) -> None:
    monkeypatch.setenv("DREAMWELL_EMBEDDER", "none")
    a_file = tmp_path / "notes.txt"
    a_file.write_text("not a data directory\n")
    source = tmp_path / "one.jsonl"
    source.write_text('{"content": "hello"}\n')
    given = [a.format(source=source, tmp=tmp_path) for a in args]
    if args[0] in ("serve", "ui"):  # servers: a process of their own
        done = dreamwell(*given, "--data-dir", str(a_file), stdin=subprocess.DEVNULL)
        code, err = done.returncode, done.stderr
    else:
        code, err = exit_code(*given, "--data-dir", str(a_file)), capsys.readouterr().err
    assert code == 1, err
    assert one_line(err) == (
        f"dreamwell: the data directory {a_file} is a file, not a directory; choose a "
        "directory with --data-dir (or DREAMWELL_DATA_DIR)"
    )
    assert a_file.read_text() == "not a data directory\n"


@pytest.mark.parametrize(
    ("args", "said"),
    [
        ((), "usage: dreamwell"),
        (("dream",), "dreamwell dream: one of the arguments --once --every --report --undo is"),
        (("dream", "--every", "banana"), "dreamwell: --every: 'banana' is not an interval"),
        (("dream", "--once", "--tenant", "tpyo"), "dreamwell: no tenant 'tpyo'"),
        (("export", "--tenant", "tpyo"), "dreamwell: no tenant 'tpyo'"),
        (("skills", "list", "--tenant", "tpyo"), "dreamwell: no tenant 'tpyo'"),
        (("stats", "--embedder", "e6"), "dreamwell: bad setting embedder='e6'"),
        (("stats", "--data-dirr", "x"), "dreamwell stats: unknown argument --data-dirr"),
        (("install", "nosuchclient"), "dreamwell install: argument client: invalid choice"),
        (("log", "feedback", ""), "dreamwell: the feedback text is empty"),
    ],
    ids=lambda v: " ".join(v) if isinstance(v, tuple) else "",
)
def test_usage_errors_are_one_line_and_exit_2(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    args: tuple[str, ...],
    said: str,
) -> None:
    given = [*args, "--data-dir", str(tmp_path / "d")] if args else []
    code = exit_code(*given)
    err = capsys.readouterr().err
    assert code == 2, err
    if args:
        assert one_line(err).startswith(said), err
    else:  # a bare `dreamwell`: the help, not "the following arguments are required"
        assert err.startswith(said) and "COMMAND" in err and "required" not in err, err


def test_export_to_an_existing_directory_is_one_line_and_exit_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DREAMWELL_EMBEDDER", "none")
    data = tmp_path / "d"
    source = tmp_path / "one.jsonl"
    source.write_text('{"content": "hello"}\n')
    assert exit_code("import", str(source), "--data-dir", str(data)) == 0
    capsys.readouterr()
    folder = tmp_path / "out"
    folder.mkdir()
    code = exit_code("export", "--data-dir", str(data), "-o", str(folder))
    err = capsys.readouterr().err
    assert code == 1
    assert (
        one_line(err) == f"dreamwell: cannot write {folder}: it is a directory; name a file in it"
    )
    assert list(folder.iterdir()) == []


def test_ctrl_c_at_a_terminal_stops_serve_with_one_line_and_130(tmp_path: Path) -> None:
    """`serve` exited 0 silently while `ui` said one line and 130; a client's SIGINT (stdin
    a pipe, as Claude Code stops it every session) stays quiet and 0."""
    leader, follower = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "dreamwell.server", "serve", "--data-dir", str(tmp_path / "d")],
        stdin=follower,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, **NO_EMBEDDER},
    )
    try:
        assert proc.stderr is not None
        assert "waiting for an MCP client" in proc.stderr.readline()
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(leader)
        os.close(follower)
    assert proc.returncode == 130, err
    assert one_line(err) == "dreamwell: interrupted (Ctrl-C); the server is stopped"
