"""The command line as a user runs it: `python -m dreamwell.server ARGS` in a subprocess
(`dreamwell`), or its `main` in this process (`exit_code`)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterable, Mapping, Sequence
from typing import IO

import pytest

from dreamwell.server.cli.main import main


def dreamwell(
    *args: str,
    stdin: str | int | IO[str] | None = None,
    env: Mapping[str, str] | None = None,
    unset: Iterable[str] = (),
    timeout: float = 120,
    prefix: Sequence[str] = (),
) -> subprocess.CompletedProcess[str]:
    """Run `dreamwell ARGS` to its end and give back its exit code and output as text; a
    non-zero exit is returned, never raised.

    stdin: text to pipe in, or what subprocess takes as stdin (subprocess.DEVNULL, a file);
    None inherits the test's. env: variables set over this process's environment; unset:
    variables removed from it. timeout: seconds before subprocess.TimeoutExpired. prefix: a
    command it runs under (tests.support.wire.as_another_user)."""
    environ = None
    if env or unset:
        environ = {**os.environ, **(env or {})}
        for name in unset:
            environ.pop(name, None)
    piped = {"input": stdin} if isinstance(stdin, str) else {"stdin": stdin}
    return subprocess.run(
        [*prefix, sys.executable, "-m", "dreamwell.server", *args],
        capture_output=True,
        text=True,
        env=environ,
        timeout=timeout,
        check=False,
        **piped,
    )


NO_EMBEDDER = {"DREAMWELL_EMBEDDER": "none"}  # env= for commands that need no vectors


def exit_code(*args: str) -> int:
    """Run `dreamwell ARGS` in this process (`main`, as the console script does) and give
    back the exit code it leaves with; its output goes to the test's capsys."""

    with pytest.raises(SystemExit) as exit_:
        main(list(args))
    code = exit_.value.code
    assert isinstance(code, int)
    return code


def interrupted(
    *args: str,
    when: str,
    watch: str = "stderr",
    env: Mapping[str, str] | None = None,
    timeout: float = 120,
) -> subprocess.CompletedProcess[str]:
    """Run `dreamwell ARGS`, send it SIGINT (Ctrl-C) once a line of its `watch` stream
    ("stderr" or "stdout"; the other must stay within a pipe's buffer) contains `when`, and
    give back its exit code and output (every line, `when`'s included). A process that
    ends, or never says `when`, within `timeout` seconds is reported as it is (killed at the
    deadline)."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "dreamwell.server", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
        env={**os.environ, **(env or {})},
    )
    deadline = threading.Timer(timeout, proc.kill)
    deadline.start()
    try:
        stream = proc.stderr if watch == "stderr" else proc.stdout
        assert stream is not None
        seen = []
        for line in stream:
            seen.append(line)
            if when in line:
                proc.send_signal(signal.SIGINT)
                break
        out, err = proc.communicate()
    finally:
        deadline.cancel()
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    if watch == "stderr":
        err = "".join(seen) + err
    else:
        out = "".join(seen) + out
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)
