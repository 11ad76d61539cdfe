"""The resident hook process with hybrid ranking (issue 54), not collected by pytest: on a
store of N memories (search_scale_bench.build: random unit vectors filed under e5's name),
the prompt hook as install writes it on POSIX (the lean client under `python -I -S`, a private
XDG_RUNTIME_DIR), with the default embedder. Prints

- how long after the first hook (which starts the resident) the resident ranks hybrid
  (`hooks.log` stops saying "keyword-only"), and the prompts answered by keywords meanwhile;
- the prompt hook's wall time as the client sees it, p50/p95 over --runs prompts, hybrid;
- the resident's RSS (VmRSS, and VmHWM its peak) once it ranks hybrid and after the prompts.

    python tests/bench/resident_bench.py [--n 10000] [--runs 40] [--store-dir DIR]
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

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from search_scale_bench import build

from dreamwell.server.hooks import client as client_module
from dreamwell.stores import DataDir, LongTermStore
from tests.support.hooks import residents

PROMPTS = ("which memory mentions the probe", "what did we decide about the release", "2+2")


def say(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def ask(data: Path, run: Path, text: str, n: int) -> float:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DREAMWELL_")}
    env["XDG_RUNTIME_DIR"] = str(run)
    raw = json.dumps({"session_id": f"b{n}", "prompt": text, "cwd": "/"}).encode()
    command = [sys.executable, "-I", "-S", client_module.__file__, "user-prompt"]
    began = time.perf_counter()
    subprocess.run(
        [*command, "--data-dir", str(data)],
        input=raw,
        env=env,
        check=True,
        capture_output=True,
        timeout=120,
    )
    return time.perf_counter() - began


def rss(pid: int) -> tuple[float, float]:
    status = dict(
        line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines()
    )
    return tuple(int(status[k].split()[0]) / 1024 for k in ("VmRSS", "VmHWM"))  # type: ignore[return-value]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=10_000)
    ap.add_argument("--runs", type=int, default=40)
    ap.add_argument("--store-dir", type=Path, default=None)
    args = ap.parse_args()
    say(f"resident hook process, N={args.n}; load average {os.getloadavg()[0]:.2f}")
    with tempfile.TemporaryDirectory() as tmp:
        data = (args.store_dir or Path(tmp)) / f"n{args.n}"
        if not (DataDir(data).lancedb.exists() and LongTermStore(data).count() == args.n):
            say(f"built {args.n} memories in {build(data, args.n):.0f} s")
        run = Path(tempfile.mkdtemp(prefix="dwb", dir="/tmp"))
        log = DataDir(data).hooks_log
        log.unlink(missing_ok=True)
        try:
            started = time.monotonic()
            first = ask(data, run, PROMPTS[0], 0)
            keyword_only, n = 0, 1
            while True:
                ask(data, run, PROMPTS[n % 3], n)
                n += 1
                last = log.read_text().splitlines()[-2:]
                if not any("keyword-only" in line for line in last):
                    break
                keyword_only += 1
            ready = time.monotonic() - started
            [pid] = residents(run)
            at_ready = rss(pid)
            times = [ask(data, run, PROMPTS[i % 3], 1000 + i) for i in range(args.runs)]
            after = rss(pid)
            say(f"  first hook (starts the resident, runs itself): {1000 * first:.0f} ms")
            say(f"  hybrid {ready:.1f} s after the first hook; {keyword_only} prompts by keywords")
            q = statistics.quantiles(times, n=20)
            say(
                f"  prompt hook, hybrid: p50 {1000 * statistics.median(times):.0f} ms, "
                f"p95 {1000 * q[18]:.0f} ms over {args.runs}"
            )
            say(
                f"  resident RSS: {at_ready[0]:.0f} MiB when hybrid, {after[0]:.0f} MiB after "
                f"the prompts (peak {after[1]:.0f} MiB)"
            )
        finally:
            for pid in residents(run):
                os.kill(pid, signal.SIGTERM)
    say(f"load average {os.getloadavg()[0]:.2f} at the end")


if __name__ == "__main__":
    main()
