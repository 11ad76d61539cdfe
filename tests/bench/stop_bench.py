"""How long `dreamwell serve` over stdio takes to leave when its client stops it (not collected
by pytest): Claude Code sends SIGINT at the end of every session (SIGTERM 100 ms later) and
waits for the process; other clients close stdin. Each run starts a server on a temporary
data directory, saves one memory, waits, then stops it and times until the process is gone.

    python tests/bench/stop_bench.py [--runs 5]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import IO, Any


def send(stdin: IO[bytes], message: dict[str, Any]) -> None:
    stdin.write((json.dumps(message) + "\n").encode())
    stdin.flush()


def one(data: Path, how: str) -> float:
    """Milliseconds from the stop (SIGINT or EOF) to the process's end."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "dreamwell.server", "serve", "--data-dir", str(data)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "DREAMWELL_EMBEDDER": "none"},
    )
    assert proc.stdin is not None and proc.stdout is not None
    hello = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "b"}}
    send(proc.stdin, {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": hello})
    proc.stdout.readline()
    send(proc.stdin, {"jsonrpc": "2.0", "method": "notifications/initialized"})
    save = {"name": "save_memory", "arguments": {"content": "a fact to keep"}}
    send(proc.stdin, {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": save})
    proc.stdout.readline()
    time.sleep(0.5)
    began = time.perf_counter()
    if how == "sigint":
        proc.send_signal(signal.SIGINT)
    else:
        proc.stdin.close()
    proc.wait(30)
    took = (time.perf_counter() - began) * 1000
    proc.stdout.close()
    if not proc.stdin.closed:
        proc.stdin.close()
    return took


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    load = " ".join(Path("/proc/loadavg").read_text().split()[:3])
    sys.stdout.write(f"load before: {load}\n")
    with tempfile.TemporaryDirectory() as tmp:
        for how in ("sigint", "eof"):
            taken = [one(Path(tmp) / how, how) for _ in range(args.runs)]
            shown = ", ".join(f"{t:.0f}" for t in taken)
            median = statistics.median(taken)
            sys.stdout.write(f"  {how:<7} to exit: median {median:5.0f} ms  ({shown})\n")
    load = " ".join(Path("/proc/loadavg").read_text().split()[:3])
    sys.stdout.write(f"load after: {load}\n")


if __name__ == "__main__":
    main()
