"""What the user waits for on every message: `dreamwell hook user-prompt` as Claude Code runs it
(a fresh process, JSON on stdin), on a 10,000-memory store (not collected by pytest).

Prints, in one run: the raw limits of this machine (a bare `python -c pass`, the import of what
the hook needs, and for contrast lancedb, numpy and onnxruntime), then the hook's p50/p95 with
process start included:
- BM25 only, warm: the hooks' snapshot in place (the normal case);
- BM25 only, cold: no snapshot yet (the first hook ever: it starts the refresher and finds only
  what is in the log), and how long the refresher takes;
- hybrid, cold: a fresh process that opens the store with the e5 embedder and searches (what a
  hook would cost if it did hybrid itself);
- hybrid, warm: the search inside a process that already holds the model and the vectors (what
  a resident helper or a running `serve --transport http` would spend per request), and that
  added to the measured floor of a hook process (the cost of the client side of such a helper).

    python tests/bench/hook_bench.py [--n 10000] [--runs 60]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from scale_bench import OBJECTS, SUBJECTS, VERBS, pct
from search_scale_bench import build

HOOK_IMPORTS = (
    "import dreamwell.server.cli.main, dreamwell.server.hooks.events, "
    "dreamwell.server.hooks.settings, dreamwell.stores.hooks.quick_recall, "
    "dreamwell.stores.inputs.jsonl_log; dreamwell.server.hooks.settings.read(None)"
)
DREAMWELL = str(Path(sys.executable).with_name("dreamwell"))


def timed(cmd: list[str], stdin: bytes = b"", env: dict[str, str] | None = None) -> float:
    started = time.perf_counter()
    done = subprocess.run(cmd, input=stdin, capture_output=True, env=env, check=False)
    took = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"{cmd} failed: {done.stderr.decode()[-500:]}")
    return took * 1000


def line(name: str, values: list[float]) -> str:
    return (
        f"  {name:<46} p50 {statistics.median(values):7.0f} ms   p95 {pct(values, 95):7.0f} ms"
        f"   (n={len(values)})"
    )


def raw_limits(runs: int) -> float:
    """Prints the raw limits; returns the hook's import floor (p50, ms)."""
    py = sys.executable
    sys.stdout.write("raw limits (fresh interpreter each run):\n")
    sys.stdout.write(
        line("python -c pass", [timed([py, "-c", "pass"]) for _ in range(runs)]) + "\n"
    )
    hook = [timed([py, "-c", HOOK_IMPORTS]) for _ in range(runs)]
    sys.stdout.write(line("import what the hook needs (+ its settings)", hook) + "\n")
    for module, n in (("numpy", 5), ("onnxruntime", 3), ("lancedb", 3)):
        values = [timed([py, "-c", f"import {module}"]) for _ in range(n)]
        sys.stdout.write(line(f"import {module}", values) + "\n")
    return statistics.median(hook)


def prompts(n: int) -> list[bytes]:
    rng = random.Random(5)
    out = []
    for i in range(n):
        text = f"what did {rng.choice(SUBJECTS)} say about {rng.choice(OBJECTS)}?"
        if i % 3 == 0:
            text = f"{rng.choice(VERBS)} {rng.choice(OBJECTS)} on day {i % 365}"
        payload = {"session_id": f"bench-{i}", "cwd": "/tmp", "prompt": text}
        out.append(json.dumps({**payload, "hook_event_name": "UserPromptSubmit"}).encode())
    return out


def hook_runs(data: Path, payloads: list[bytes]) -> list[float]:
    cmd = [DREAMWELL, "hook", "user-prompt", "--data-dir", str(data)]
    env = {**os.environ, "DREAMWELL_EMBEDDER": "none"}
    return [timed(cmd, p, env) for p in payloads]


def wait_refreshers(data: Path) -> None:
    from dreamwell.stores.layout import DataDir

    pids = DataDir(data).hook_refresh_pid
    for pid in map(int, pids.read_text().split()) if pids.exists() else []:
        while Path(f"/proc/{pid}").exists():
            stat = Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0]
            if stat == "Z":
                break
            time.sleep(0.05)
    pids.unlink(missing_ok=True)


def bm25(data: Path, runs: int) -> None:
    from dreamwell.server.hooks.refresh import refresh
    from dreamwell.stores.layout import DataDir

    dirs = DataDir(data)
    started = time.perf_counter()
    refresh(dirs)
    took = time.perf_counter() - started
    sys.stdout.write(f"  refresher (opens the store, writes the snapshot): {took:.1f} s\n")
    hook_runs(data, prompts(3))  # page the index and snapshot in
    sys.stdout.write(
        line("BM25 only, warm (snapshot in place)", hook_runs(data, prompts(runs))) + "\n"
    )
    cold = []
    for p in prompts(5):
        dirs.hook_entries.unlink()
        cold += hook_runs(data, [p])
        wait_refreshers(data)
    sys.stdout.write(line("BM25 only, cold (no snapshot: starts a refresher)", cold) + "\n")
    spawn = [
        timed([sys.executable, "-m", "dreamwell.server.hooks.refresh", str(data)]) for _ in range(3)
    ]
    sys.stdout.write(line("  the refresher as its own process", spawn) + "\n")


HYBRID = """
import sys, time
from dreamwell.stores import LongTermStore, OnnxE5
store = LongTermStore(sys.argv[1], embedder=OnnxE5(), keyword_weight=0.4, min_similarity=0.7)
store.load_vectors()
store.search(sys.argv[2], limit=24)
"""


def hybrid(data: Path, runs: int, floor: float) -> None:
    cold = [
        timed([sys.executable, "-c", HYBRID, str(data), "green tea on day 12"]) for _ in range(3)
    ]
    sys.stdout.write(line("hybrid, cold (fresh process opens store + e5)", cold) + "\n")
    from dreamwell.stores import LongTermStore, OnnxE5

    store = LongTermStore(data, embedder=OnnxE5(), keyword_weight=0.4, min_similarity=0.7)
    store.load_vectors()
    texts = [json.loads(p)["prompt"] for p in prompts(runs + 5)]
    for text in texts[:5]:
        store.search(text, limit=24)
    warm = []
    for text in texts[5:]:
        started = time.perf_counter()
        store.search(text, limit=24)
        warm.append((time.perf_counter() - started) * 1000)
    sys.stdout.write(line("hybrid, warm search in a resident process", warm) + "\n")
    # measured before e5 was loaded here: onnxruntime's threads spin after each search and
    # would slow any process started now
    composed = [floor + w for w in warm]
    sys.stdout.write(line("hybrid via a resident helper (hook floor + warm)", composed) + "\n")


def compiled() -> None:
    """Byte-compile dreamwell as installing a wheel does (pip compiles every module); with
    PYTHONDONTWRITEBYTECODE set, as on this machine, every hook would otherwise compile its
    modules from source (~100 ms)."""
    import compileall

    import dreamwell.server

    compileall.compile_dir(Path(dreamwell.server.__file__).parents[1], quiet=1)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=60)
    parser.add_argument("--skip-hybrid", action="store_true")
    args = parser.parse_args()
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    compiled()
    tmp = Path(tempfile.mkdtemp(prefix="hook-bench-"))
    try:
        sys.stdout.write(f"load before: {Path('/proc/loadavg').read_text().strip()}\n")
        built = build(tmp, args.n)
        sys.stdout.write(f"built {args.n} memories with vectors in {built:.0f} s\n")
        floor = raw_limits(15)
        sys.stdout.write(
            f"dreamwell hook user-prompt on {args.n} memories (process start included):\n"
        )
        bm25(tmp, args.runs)
        if not args.skip_hybrid:
            hybrid(tmp, args.runs, floor)
        sys.stdout.write(f"load after: {Path('/proc/loadavg').read_text().strip()}\n")
    finally:
        wait_refreshers(tmp)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
