"""The command line as a user runs it: `python -m dreamwell.server ARGS` in a subprocess
(`dreamwell`), or its `main` in this process (`exit_code`)."""

from __future__ import annotations

import os
import subprocess
import sys
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
