"""Processes the server and the hooks start and leave running (the automatic dream, the hooks'
snapshot refresher): stdin and output on /dev/null, a session (a process group) of their own,
no inherited file descriptors, one BLAS thread. The hooks' resident process is started by
server/hooks/client.py itself, which may use only the standard library's builtins."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import threading


def start_detached(command: list[str], lowest_priority: bool = False) -> int:
    """Start `command` detached and give its pid; `lowest_priority`: under `nice -n 19` on
    POSIX, the idle priority class on Windows. A thread reaps it if this process outlives it
    (a hook exits first: init reaps it then)."""
    nice = shutil.which("nice") if lowest_priority and os.name == "posix" else None
    if nice:
        command = [nice, "-n", "19", *command]
    # Windows: the idle priority class, a process group of its own
    flags = 0x00000040 | 0x00000200 if lowest_priority and sys.platform == "win32" else 0
    child = subprocess.Popen(
        command,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
        close_fds=True,
        env={**os.environ, "OPENBLAS_NUM_THREADS": "1"},
        creationflags=flags,
    )
    threading.Thread(target=child.wait, name="detached-reaper", daemon=True).start()
    return child.pid
