"""Cold start of `dreamwell serve` over stdio: process start to the first tools/list answer
(not collected by pytest). Also the server's CPU time (user + system) up to that answer, which
other load on the machine disturbs far less than the wall time.

    python tests/bench/cold_start_bench.py [--runs 5] [--data-dir DIR]

--data-dir serves an existing store (say one with 10,000 memories from `dreamwell import`);
the default is a fresh empty directory."""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time


def once(data_dir: str) -> tuple[float, float, int]:
    messages = [
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": {"name": "cold-start", "version": "1"},
            },
        },
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
    ]
    started = time.perf_counter()
    with subprocess.Popen(
        ["dreamwell", "serve", "--data-dir", data_dir],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    ) as proc:
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write("".join(json.dumps(m) + "\n" for m in messages).encode())
        proc.stdin.flush()
        size = 0
        for line in proc.stdout:
            if b'"id":2' in line:
                size = len(json.dumps(json.loads(line)["result"]))
                break
        elapsed = time.perf_counter() - started
        proc.kill()  # now: its CPU time is what it spent before the answer
        _, _, usage = os.wait4(proc.pid, 0)
        proc.returncode = -9
    return elapsed, usage.ru_utime + usage.ru_stime, size


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--data-dir", help="an existing data directory (default: a fresh one)")
    args = parser.parse_args()
    times, cpu, size = [], [], 0
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(args.runs):
            elapsed, used, size = once(args.data_dir or tmp)
            times.append(elapsed)
            cpu.append(used)
    load = os.getloadavg()[0]
    sys.stdout.write(
        f"cold start to first tools/list: median {statistics.median(times):.2f} s, "
        f"min {min(times):.2f} s, max {max(times):.2f} s over {args.runs} runs "
        f"(server CPU median {statistics.median(cpu):.2f} s; load {load:.2f}); "
        f"tools/list result {size} characters\n"
    )


if __name__ == "__main__":
    main()
