"""The hooks' cost, this checkout against another git revision, in one run (not collected by
pytest): on a loaded machine only figures taken side by side, alternating, compare.

Prints, with the load average before and after:
- the interpreter's floor here: `python -S -c pass`, `python -c pass` (site: the venv's .pth
  files), and the console script's own `import re`;
- `dreamwell hook EVENT` as a process (the JSON on stdin, 10,000 memories, the hooks'
  snapshot in place), each event run by the revision's code and this checkout's in turn;
- with `--pairs N`: what the real Claude Code waited for each hook (`claude -p "Say OK"`, its
  `--debug-file` timeline), a home whose hooks run the revision's code and one whose hooks run
  this checkout's, in pairs alternating which goes first. Both homes run this checkout's MCP
  server, so the hooks compete for the CPU with the same server start.

    python tests/bench/hook_ab_bench.py [--against HEAD] [--runs 15] [--pairs 5] [--n 10000]
        [--no-server]

The revision's code is `git archive REV` in a temp folder, laid out as the package (dreamwell/
server, stores, dream) and put first on sys.path by a copy of the console script.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).parent))
from scale_bench import pct  # noqa: E402
from search_scale_bench import build  # noqa: E402

from tests.support.anthropic_api import AnthropicAPI, Turn  # noqa: E402
from tests.support.claude_code import ClaudeHome, close_all, hook_waits  # noqa: E402

HOOKS = {"SessionStart": "session-start", "UserPromptSubmit": "user-prompt", "Stop": "stop"}
# the console script pip writes, with the code's folder first on sys.path
SCRIPT = """#!{python}
import re
import sys
sys.path.insert(0, {path!r})
from dreamwell.server.cli.main import run
if __name__ == '__main__':
    sys.argv[0] = re.sub(r'(-script\\.pyw|\\.exe)?$', '', sys.argv[0])
    sys.exit(run())
"""


def load() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def row(name: str, values: list[float]) -> str:
    if not values:
        return f"  {name:<40} (none)"
    return (
        f"  {name:<40} p50 {statistics.median(values):6.0f} ms   p95 {pct(values, 0.95):6.0f} ms"
        f"   (n={len(values)})"
    )


def program(tmp: Path, name: str, code: Path) -> Path:
    """A `dreamwell` console script that runs the package laid out under `code`."""
    path = tmp / name / "dreamwell"
    path.parent.mkdir(parents=True)
    path.write_text(SCRIPT.format(python=sys.executable, path=str(code)))
    path.chmod(0o755)
    return path


def revision_code(tmp: Path, rev: str) -> Path:
    """`rev`'s sources laid out as the installed package is (dreamwell/server, stores, dream)."""
    src = tmp / "src"
    src.mkdir()
    archive = subprocess.run(["git", "archive", rev], cwd=ROOT, capture_output=True, check=True)
    subprocess.run(["tar", "-x", "-C", str(src)], input=archive.stdout, check=True)
    package = tmp / "pkg" / "dreamwell"
    package.mkdir(parents=True)
    for part in ("server", "stores", "dream"):
        (package / part).symlink_to(src / part)
    return package.parent


def this_code(tmp: Path) -> Path:
    package = tmp / "this" / "dreamwell"
    package.mkdir(parents=True)
    for part in ("server", "stores", "dream"):
        (package / part).symlink_to(ROOT / part)
    return package.parent


def timed(cmd: list[str], stdin: bytes = b"", env: dict[str, str] | None = None) -> float:
    started = time.perf_counter()
    done = subprocess.run(cmd, input=stdin, capture_output=True, env=env, check=False)
    took = (time.perf_counter() - started) * 1000
    if done.returncode != 0:
        raise SystemExit(f"{cmd} failed: {done.stderr.decode()[-500:]}")
    return took


def floors(runs: int) -> None:
    py = sys.executable
    sys.stdout.write("the interpreter's floor (fresh process each run):\n")
    for name, cmd in (
        ("python -S -c pass", [py, "-S", "-c", "pass"]),
        ("python -c pass", [py, "-c", "pass"]),
        ("python -c 'import re' (the script's)", [py, "-c", "import re"]),
    ):
        sys.stdout.write(row(name, [timed(cmd) for _ in range(runs)]) + "\n")


def payload(event: str, transcript: Path, i: int) -> bytes:
    body = {"session_id": f"ab-{i}", "cwd": "/tmp", "transcript_path": str(transcript)}
    if event == "user-prompt":
        body["prompt"] = f"how do we deploy the api, take {i}"
    if event == "session-start":
        body["source"] = "startup"
    return json.dumps(body).encode()


def snapshot(data: Path) -> None:
    """The hooks' snapshot in place (the normal case; a hook without one starts a refresher,
    seconds of LanceDB's import competing for the CPU)."""
    cmd = [sys.executable, "-m", "dreamwell.server.hooks.refresh", str(data)]
    subprocess.run(cmd, check=True)


def failures(data: Path) -> int:
    log = data / "hooks.log"
    return sum("failed" in line for line in log.read_text().splitlines()) if log.exists() else 0


def processes(programs: dict[str, Path], data: Path, runs: int) -> None:
    env = {**os.environ, "DREAMWELL_EMBEDDER": "none"}
    transcript = data.parent / "transcript.jsonl"
    line = {"type": "user", "message": {"role": "user", "content": "ship it"}}
    transcript.write_text(json.dumps(line) + "\n")
    sys.stdout.write(f"`dreamwell hook EVENT` as a process, {runs} alternating runs each:\n")
    for event in HOOKS.values():
        took: dict[str, list[float]] = {name: [] for name in programs}
        for i in range(runs + 1):
            for name, path in programs.items():
                cmd = [str(path), "hook", event, "--data-dir", str(data)]
                value = timed(cmd, payload(event, transcript, i), env)
                if i:  # the first: page the code and the snapshot in
                    took[name].append(value)
        for name, values in took.items():
            sys.stdout.write(row(f"{event} ({name})", values) + "\n")
    sys.stdout.write(f"  hooks.log lines saying 'failed': {failures(data)}\n")


def homes(tmp: Path, programs: dict[str, Path], n: int, server: bool) -> dict[str, ClaudeHome]:
    """One Claude Code home per program, `install claude-code` done, its hooks rewritten to run
    that program (without `server`, the MCP server's entry taken out again); the same n
    memories in each data directory."""
    out: dict[str, ClaudeHome] = {}
    for name, path in programs.items():
        home = ClaudeHome(tmp / f"home-{name}")
        home.dreamwell("install", "claude-code")
        if not server:
            config = home.home / ".claude.json"
            entries = json.loads(config.read_text())
            entries.get("mcpServers", {}).pop("dreamwell", None)
            config.write_text(json.dumps(entries))
        settings = home.home / ".claude" / "settings.json"
        text = settings.read_text()
        installed = json.dumps(str(Path(sys.executable).parent / "dreamwell"))[1:-1]
        settings.write_text(text.replace(installed, str(path)))
        if not out:
            home.data_dir.mkdir(parents=True, exist_ok=True)
            build(home.data_dir, n)
        else:
            first = next(iter(out.values()))
            shutil.rmtree(home.data_dir, ignore_errors=True)
            shutil.copytree(first.data_dir, home.data_dir)
        snapshot(home.data_dir)  # its own: a copied one is behind and starts a refresher
        out[name] = home
    return out


def claude_pairs(
    tmp: Path, programs: dict[str, Path], pairs: int, n: int, server: bool = True
) -> None:
    users = homes(tmp, programs, n, server)
    waits: dict[str, dict[str, list[float]]] = {name: {} for name in users}
    with AnthropicAPI(lambda _request: Turn(text="OK")) as api:
        for home in users.values():  # warm the binary, the page cache, the hooks' snapshot
            home.claude(api, "Say OK")
        for pair in range(pairs):  # ABBA: neither goes first every time
            for name, home in list(users.items())[:: 1 if pair % 2 == 0 else -1]:
                run = home.claude(api, "Say OK")
                if run.returncode != 0 or run.json.get("result") != "OK":
                    raise SystemExit(f"claude -p failed ({name}): {run.stderr[-500:]}")
                for event, values in hook_waits(run.timeline).items():
                    waits[name].setdefault(event, []).extend(values)
    sys.stdout.write(
        f'what Claude Code waited for each hook, claude -p "Say OK", {pairs} alternating '
        f"pairs, {n} memories, {'with' if server else 'without'} dreamwell's MCP server "
        "(goal p50 <= 150 ms):\n"
    )
    for event, hook in HOOKS.items():
        for name in users:
            sys.stdout.write(row(f"{hook} ({name})", waits[name].get(event, [])) + "\n")
    for name, home in users.items():
        sys.stdout.write(f"  hooks.log lines saying 'failed' ({name}): {failures(home.data_dir)}\n")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--against", default="HEAD", help="the git revision to compare with")
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--pairs", type=int, default=5)
    parser.add_argument("--n", type=int, default=10_000, help="memories in the data directory")
    parser.add_argument(
        "--no-server", action="store_true", help="hooks only: no MCP server starting beside them"
    )
    args = parser.parse_args()
    sys.stdout.write(f"load before: {load()}  ({os.cpu_count()} cores)\n")
    with tempfile.TemporaryDirectory(prefix="hook-ab-bench-") as name:
        tmp = Path(name)
        programs = {
            args.against: program(tmp, "before", revision_code(tmp, args.against)),
            "this checkout": program(tmp, "after", this_code(tmp)),
        }
        floors(args.runs)
        if args.runs:
            data = tmp / "data" / "dreamwell"
            data.mkdir(parents=True)
            took = build(data, args.n)
            sys.stdout.write(f"built {args.n} memories in {took:.0f} s\n")
            snapshot(data)
            processes(programs, data, args.runs)
        if args.pairs:
            claude_pairs(tmp, programs, args.pairs, args.n, not args.no_server)
    sys.stdout.write(f"load after: {load()}\n")


if __name__ == "__main__":
    try:
        main()
    finally:
        close_all()  # the resident hook processes the runs started
