"""Another local user (uid 65534 through `setpriv`) for the attacks that need one, and a folder
that user can traverse (as a real /home is: pytest's tmp root is 0700, so a victim's files laid
under it would prove nothing). Skipped with the reason when not root or without `setpriv`."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

NOBODY = 65534
SETPRIV = shutil.which("setpriv")
PYTHON = shutil.which("python3") or "/usr/bin/python3"  # the system's: the venv may be private


def other_user_or_skip() -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root to run a program as another user (setpriv)")
    if SETPRIV is None:
        pytest.skip("needs setpriv (util-linux) to run a program as another user")


@contextmanager
def traversable_dir() -> Iterator[Path]:
    """A new folder in the system's temp folder, 0755; removed afterwards."""
    folder = Path(tempfile.mkdtemp(prefix="dreamwell-other-user-"))
    try:
        folder.chmod(0o755)
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def as_other_user(script: str, *args: str, timeout: float = 60) -> Any:
    """Run Python `script` as uid 65534 (no groups) with `args` in sys.argv[1:]; the JSON it
    prints last."""
    assert SETPRIV is not None
    command = [SETPRIV, f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups"]
    done = subprocess.run(
        [*command, PYTHON, "-I", "-S", "-c", script, *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd="/",
        env={"PATH": "/usr/bin:/bin", "HOME": "/nonexistent"},
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.splitlines()[-1])


_READ = """
import json, os, sys
got = []
for path in sys.argv[1:]:
    try:
        if os.path.isdir(path):
            os.listdir(path)
        else:
            with open(path, "rb") as fh:
                fh.read(16)
        got.append(path)
    except OSError:
        pass
print(json.dumps(got))
"""


def readable_by_other_user(paths: list[Path]) -> list[str]:
    """Which of `paths` (files read, folders listed) uid 65534 can read."""
    return list(as_other_user(_READ, *map(str, paths)))
