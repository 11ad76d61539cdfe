"""Ctrl-C (SIGINT) in the commands a person runs at a terminal: one line, exit status 130,
never a traceback; an interrupted import says how far it got and finishes when run again,
with nothing half-written (issue 44)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

from dreamwell.stores import LongTermStore
from tests.support.cli import NO_EMBEDDER, dreamwell, interrupted


def one_line(stderr: str, after: str = "") -> str:
    """The lines stderr has after the line holding `after` (all of them without), progress
    lines ("imported 10000/15000") aside: exactly one, with no traceback anywhere."""
    assert "Traceback" not in stderr and "KeyboardInterrupt" not in stderr, stderr
    lines = [line for line in stderr.splitlines() if not re.fullmatch(r"imported \d+/\d+", line)]
    if after:
        lines = lines[next(i for i, line in enumerate(lines) if after in line) + 1 :]
    assert len(lines) == 1, stderr
    return lines[0]


def records(path: Path, n: int) -> Path:
    path.write_text(
        "".join(
            json.dumps({"content": f"memory {i}: the tomatoes in bed {i % 40}", "category": "g"})
            + "\n"
            for i in range(n)
        )
    )
    return path


def test_an_interrupted_import_says_how_far_it_got_and_a_second_run_finishes(
    tmp_path: Path,
) -> None:
    source, data = records(tmp_path / "m.jsonl", 15_000), tmp_path / "d"
    stopped = interrupted(
        "import", str(source), "--data-dir", str(data), when="imported 5000/15000", env=NO_EMBEDDER
    )
    assert stopped.returncode == 130
    line = one_line(stopped.stderr)
    assert re.fullmatch(
        r"dreamwell: interrupted: (5,000|10,000) of 15,000 records written; run the same "
        r"import again to finish the rest .*",
        line,
    ), line
    written = int(line.split()[2].replace(",", ""))
    assert LongTermStore(data).count() == written  # whole batches, nothing half-written
    again = dreamwell("import", str(source), "--data-dir", str(data), env=NO_EMBEDDER)
    assert again.returncode == 0, again.stderr
    assert f"{written} already there" in again.stdout
    assert LongTermStore(data).count() == 15_000


def browser(tmp_path: Path) -> tuple[str, ...]:
    """`dreamwell ui`'s arguments: a data directory of its own, any free port."""
    return ("ui", "--data-dir", str(tmp_path / "d"), "--port", "0")


def test_ctrl_c_in_the_browser_is_one_line(tmp_path: Path) -> None:
    stopped = interrupted(
        *browser(tmp_path),
        when="Ctrl-C stops it",
        env=NO_EMBEDDER,
    )
    assert stopped.returncode == 130
    assert "interrupted" in one_line(stopped.stderr, after="Ctrl-C stops it")


def test_ctrl_c_in_an_export_is_one_line(tmp_path: Path) -> None:
    data = tmp_path / "d"
    assert (
        dreamwell(
            "import",
            str(records(tmp_path / "m.jsonl", 12_000)),
            "--data-dir",
            str(data),
            env=NO_EMBEDDER,
        ).returncode
        == 0
    )
    stopped = interrupted(
        "export", "--data-dir", str(data), when="memory", watch="stdout", env=NO_EMBEDDER
    )
    assert stopped.returncode == 130
    assert one_line(stopped.stderr) == "dreamwell: interrupted (Ctrl-C)"


def test_ctrl_c_between_dream_cycles_is_one_line(tmp_path: Path) -> None:
    data = tmp_path / "d"
    LongTermStore(data).save("the tomatoes need water")
    stopped = interrupted(
        "dream",
        "--every",
        "1h",
        "--data-dir",
        str(data),
        when="Dream report",
        watch="stdout",
        env=NO_EMBEDDER,
    )
    assert stopped.returncode == 130
    assert one_line(stopped.stderr) == "dreamwell: interrupted (Ctrl-C)"


def self_interrupting(tmp_path: Path, setup: str, *args: str) -> subprocess.CompletedProcess[str]:
    """`dreamwell ARGS` in a process that sends itself SIGINT at the moment `setup` (Python
    run first, with `os`, `signal` and `sys` imported and `ctrl_c()` defined) arranges:
    a Ctrl-C at one exact instant, where a test that signals from outside would only
    sometimes hit it. Run by `python -m`, as tests.support.cli runs `dreamwell` (how the
    interpreter ends differs from a script's)."""
    (tmp_path / "ctrl_c_at.py").write_text(
        "import os, signal, sys\n"
        "def ctrl_c():\n"
        "    os.kill(os.getpid(), signal.SIGINT)\n"
        f"{setup}\n"
        "sys.argv = ['dreamwell', *sys.argv[1:]]\n"
        "from dreamwell.server.cli.main import run\n"
        "run()\n"
    )
    path = os.pathsep.join([str(tmp_path), *sys.path])
    return subprocess.run(
        [sys.executable, "-m", "ctrl_c_at", *args],
        capture_output=True,
        text=True,
        env={**os.environ, **NO_EMBEDDER, "PYTHONPATH": path},
        timeout=120,
        check=False,
    )


def test_ctrl_c_while_a_command_is_still_loading_is_one_line(tmp_path: Path) -> None:
    # the moment the command line is read: before the command runs, after ~all imports
    stopped = self_interrupting(
        tmp_path,
        "import dreamwell.server.heap as heap\nheap.steady_malloc = ctrl_c",
        "stats",
        "--data-dir",
        str(tmp_path / "d"),
    )
    assert stopped.returncode == 130, stopped.stderr
    assert one_line(stopped.stderr) == "dreamwell: interrupted (Ctrl-C)"


def test_ctrl_c_the_moment_the_browser_says_it_stops_it_stops_it(tmp_path: Path) -> None:
    # the address and "Ctrl-C stops it" are printed only once a Ctrl-C does stop it
    stopped = self_interrupting(
        tmp_path,
        "class Said:\n"
        "    def __init__(self, stream): self.stream = stream\n"
        "    def __getattr__(self, name): return getattr(self.stream, name)\n"
        "    def write(self, text):\n"
        "        self.stream.write(text)\n"
        "        if 'Ctrl-C stops it' in text: self.stream.flush(); ctrl_c()\n"
        "        return len(text)\n"
        "sys.stderr = Said(sys.stderr)",
        *browser(tmp_path),
    )
    assert stopped.returncode == 130, stopped.stderr
    assert one_line(stopped.stderr, after="Ctrl-C stops it") == (
        "dreamwell: interrupted (Ctrl-C); the browser is stopped"
    )


def test_ctrl_c_while_the_browser_starts_is_one_line_and_130(tmp_path: Path) -> None:
    # a KeyboardInterrupt that passed through an exec of text (as each dataclass made while
    # anyio loads does) and was caught still made CPython end the process by SIGINT (-2)
    stopped = self_interrupting(
        tmp_path,
        "import dreamwell.server.ui.secret as secret\n"
        "made = secret.new_secret\n"
        "def new_secret():\n"
        "    exec('ctrl_c()\\nfor _ in range(100): pass', {'ctrl_c': ctrl_c})\n"
        "    return made()\n"
        "secret.new_secret = new_secret",
        *browser(tmp_path),
    )
    assert stopped.returncode == 130, stopped.stderr
    assert one_line(stopped.stderr) == "dreamwell: interrupted (Ctrl-C)"
