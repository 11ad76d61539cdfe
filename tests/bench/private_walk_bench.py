"""What making a data directory private costs at start (docs/data-directory.md, "Modes"): the
one walk that tightens a directory an older dreamwell wrote (every path 0644/0755), the same walk
when nothing is left to change (a 0755 root without the `.private` marker), and a start once it
is done (`DataDir.make_private`: two stat() calls). Prints the figures with the load average
(not collected by pytest).

    python tests/bench/private_walk_bench.py [--files 10000]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from dreamwell.stores.layout import DataDir


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--files", type=int, default=10_000)
    files = parser.parse_args().files
    top = Path(tempfile.mkdtemp(prefix="dreamwell-walk-"))
    try:
        root = top / "data"
        per = 100
        for i in range(max(1, files // per)):
            folder = root / f"f{i}"
            folder.mkdir(parents=True)
            for j in range(per):
                (folder / f"x{j}").write_bytes(b"x")
        subprocess.run(["chmod", "-R", "go+rX", str(root)], check=True)
        dirs = DataDir(root)
        sys.stdout.write(f"load average before: {os.getloadavg()}\n")
        for label in ("tighten", "walk, nothing to change", "done (marker)"):
            if label == "walk, nothing to change":
                root.chmod(0o755)
                dirs.private_marker.unlink()
            began = time.perf_counter()
            changed = dirs.make_private()
            took = time.perf_counter() - began
            sys.stdout.write(f"{label}: {changed} paths changed in {took * 1000:.2f} ms\n")
        sys.stdout.write(f"load average after: {os.getloadavg()}\n")
    finally:
        shutil.rmtree(top)


if __name__ == "__main__":
    main()
