"""Time `dreamwell --help` and every command's `--help` (issue 9: under 0.5 s), as a new
process each time, the way a person types it.

    python tests/bench/help_bench.py [--runs 10]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import time

from dreamwell.server.cli.parsing import HELP


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=10)
    args = parser.parse_args()
    exe = shutil.which("dreamwell") or sys.exit("dreamwell is not on PATH: pip install -e .")
    for cmd in [["--help"], ["--version"]] + [[c, "--help"] for c in HELP]:
        times = []
        for _ in range(args.runs):
            started = time.perf_counter()
            subprocess.run([exe, *cmd], check=True, capture_output=True)
            times.append(time.perf_counter() - started)
        sys.stderr.write(
            f"dreamwell {' '.join(cmd):<16} median {statistics.median(times) * 1000:4.0f} ms"
            f"  max {max(times) * 1000:4.0f} ms\n"
        )


if __name__ == "__main__":
    main()
