"""A real `dreamwell import` in a subprocess that stops after each batch until the test lets
it go, so a test can look at the window while it runs. The hold is a wrapper around the
import's progress report, set up here in the child process: nothing of it is in the product."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.support import ROOT

_CHILD = """
import sys, time
from pathlib import Path
from dreamwell.server.cli import porting
from dreamwell.server.cli.main import main

gate, batch = Path(sys.argv[1]), int(sys.argv[2])
real = porting.write_batches

def held(store, records, now, batch_=None, report=lambda done, total: None):
    def report_then_wait(done, total):
        report(done, total)
        if 0 < done < total:  # a batch written, more to come: wait for the test
            deadline = time.monotonic() + 120
            while not gate.exists() and time.monotonic() < deadline:
                time.sleep(0.01)
    return real(store, records, now, batch, report_then_wait)

porting.write_batches = held
raise SystemExit(main(sys.argv[3:]))
"""


def memories_file(path: Path, n: int, word: str = "fact") -> Path:
    path.write_text(
        "".join(
            json.dumps({"content": f"{word} number {i} of the import"}) + "\n" for i in range(n)
        ),
        encoding="utf-8",
    )
    return path


def gated_import(data: Path, source: Path, gate: Path, batch: int) -> subprocess.Popen[str]:
    """`dreamwell import SOURCE --data-dir DATA` writing `batch` records at a time and holding
    after each batch until the file `gate` exists."""
    command = ["import", str(source), "--data-dir", str(data)]
    return subprocess.Popen(
        [sys.executable, "-c", _CHILD, str(gate), str(batch), *command],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
