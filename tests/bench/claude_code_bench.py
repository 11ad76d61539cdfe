"""What a Claude Code user pays for dreamwell (docs/claude-code.md: its budgets and
"Starting fast"), with the real `claude` binary (tests/support/claude_code.py) against a
scripted Messages API on 127.0.0.1 (not collected by pytest).

Prints, with the load average before and after:
- the CPU time a server takes over a session of 0.8 s (a `claude -p` run) and of 3 s;
- the handshake: `dreamwell serve` as mcp.json starts it, from process start to its answer to
  Claude Code's `server/discover` probe (p50/p95; goal: 500 ms p50 on a quiet machine), on a
  first start and with the lists the last start kept (then nothing is waited for);
- `claude -p "Say OK"` with `dreamwell install claude-code` done against the same without,
  in alternating pairs (medians and their ratio; goal ≤ 1.3×), and when Claude Code had
  connected to dreamwell;
- what Claude Code waited for each hook (session-start, user-prompt, stop, session-end), read
  from its `--debug-file` timeline, with N memories in the data directory (goal: p50 ≤ 150 ms;
  a hook install writes `async` counts until Claude Code moved it to the background, and a
  background session end is not waited for at all: "(none)"); each run starts once the
  snapshot refresher the last one's hooks started has finished;
- with --breakdown R: R alternating rounds of the server alone and the hooks alone against
  the run without, to say which part the ratio comes from; and two designs' costs: an
  instant stdio server (no work at all), and dreamwell's MCP served over HTTP by a process
  already running (no process started per session), with the hooks as installed.

    python tests/bench/claude_code_bench.py [--pairs 5] [--n 10000] [--handshakes 20]
        [--breakdown 0]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import secrets
import signal
import socket
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

from dreamwell.server.transports.early_lists import prime  # noqa: E402
from tests.support.anthropic_api import AnthropicAPI, Turn  # noqa: E402
from tests.support.claude_code import (  # noqa: E402
    ClaudeHome,
    close_all,
    connected_in,
    hook_waits,
)
from tests.support.hooks import processes, wait_for_refresher  # noqa: E402
from tests.support.replicas import free_port  # noqa: E402
from tests.support.servers import from_mcp_json  # noqa: E402
from tests.support.wire import CLAUDE_CODE  # noqa: E402

HOOKS = {
    "SessionStart": "session-start",
    "UserPromptSubmit": "user-prompt",
    "Stop": "stop",
    "SessionEnd": "session-end",
}


def load() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def row(name: str, values: list[float], unit: str = "ms") -> str:
    if not values:
        return f"  {name:<44} (none)"
    return (
        f"  {name:<44} p50 {statistics.median(values):7.0f} {unit}   p95 "
        f"{pct(values, 0.95):7.0f} {unit}   (n={len(values)})"
    )


def probed(data: Path) -> tuple[subprocess.Popen[bytes], bytes]:
    """`dreamwell serve` started as mcp.json starts it, sent Claude Code's probe: the process
    and the first line of its answer."""
    params = from_mcp_json(data)
    probe = json.dumps(CLAUDE_CODE.discover("server-discover-probe-1")).encode() + b"\n"
    proc = subprocess.Popen(
        [params.command, *params.args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=params.env,
    )
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(probe)
    proc.stdin.flush()
    return proc, proc.stdout.readline()


def handshake_ms(data: Path) -> float:
    """From the process start to the first byte of the answer to Claude Code's probe."""
    started = time.perf_counter()
    proc, answer = probed(data)
    took = (time.perf_counter() - started) * 1000
    assert proc.stdin is not None
    proc.stdin.close()
    proc.wait(30)
    if b'"supportedVersions"' not in answer:
        raise SystemExit(f"no answer to the probe: {answer[:300]!r}")
    return took


def session_cpu_ms(data: Path, life: float) -> float:
    """The CPU time (user + system, ms) of `dreamwell serve` as mcp.json starts it, answering
    Claude Code's probe, then left alone for `life` seconds and stopped with SIGINT as Claude
    Code stops it: what a short session's server costs the cores Claude Code shares."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    proc, _ = probed(data)
    time.sleep(life)
    proc.send_signal(signal.SIGINT)
    proc.wait(30)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    used = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    return used * 1000


def claude_runs(tmp: Path, pairs: int, n: int) -> None:
    without, with_us = ClaudeHome(tmp / "without"), ClaudeHome(tmp / "with")
    with_us.dreamwell("install", "claude-code")
    if n:
        with_us.data_dir.mkdir(parents=True, exist_ok=True)
        took = build(with_us.data_dir, n)
        sys.stdout.write(f"built {n} memories in the data directory in {took:.0f} s\n")
    seconds: dict[str, list[float]] = {"without": [], "with": []}
    waits: dict[str, list[float]] = {}
    connects: list[float] = []
    with AnthropicAPI(lambda _request: Turn(text="OK")) as api:
        for home in (without, with_us):  # warm the binary and the page cache once
            home.claude(api, "Say OK")
        for _ in range(pairs):
            for name, home in (("without", without), ("with", with_us)):
                if name == "with":  # the snapshot refresher a hook started last run
                    wait_for_refresher(home.data_dir)
                run = home.claude(api, "Say OK")
                if run.returncode != 0 or run.json.get("result") != "OK":
                    raise SystemExit(f"claude -p failed ({name}): {run.stderr[-500:]}")
                seconds[name].append(run.seconds)
                if name == "with":
                    for event, values in hook_waits(run.timeline).items():
                        waits.setdefault(event, []).extend(values)
                    found = connected_in(run.timeline)
                    if found is not None:
                        connects.append(found)
    sys.stdout.write(f'claude -p "Say OK", {pairs} alternating pairs:\n')
    for name, values in seconds.items():
        shown = ", ".join(f"{v:.2f}" for v in values)
        sys.stdout.write(
            f"  {name + ' dreamwell':<20} median {statistics.median(values):5.2f} s  ({shown})\n"
        )
    ratio = statistics.median(seconds["with"]) / statistics.median(seconds["without"])
    sys.stdout.write(f"  ratio with/without: {ratio:.2f}x (goal <= 1.3x)\n")
    pairs_ratios = [w / o for w, o in zip(seconds["with"], seconds["without"], strict=True)]
    paired = statistics.median(pairs_ratios)
    sys.stdout.write(f"  median of the pairs' ratios: {paired:.2f}x\n")
    sys.stdout.write(
        row(f"connected to dreamwell ({len(connects)} of {pairs} runs)", connects) + "\n"
    )
    sys.stdout.write(f"what Claude Code waited for each hook ({n} memories; goal p50 <= 150 ms):\n")
    for event, name in HOOKS.items():
        sys.stdout.write(row(name, waits.get(event, [])) + "\n")


RELAY = Path(__file__).parent / "instant_mcp" / "relay.py"


def _only_server(home: ClaudeHome) -> None:
    settings = home.settings_json()
    settings.pop("hooks")
    (home.home / ".claude" / "settings.json").write_text(json.dumps(settings))


def _serve_with(home: ClaudeHome, args: list[str]) -> None:
    """dreamwell's MCP entry in .claude.json, its command `python -I -S relay.py ARGS`."""
    config = home.claude_json()
    entry = config["mcpServers"]["dreamwell"]
    entry["args"] = ["-I", "-S", str(RELAY), *args, entry["command"], *entry["args"]]
    entry["command"] = sys.executable
    (home.home / ".claude.json").write_text(json.dumps(config))


def _serve_http(home: ClaudeHome) -> subprocess.Popen[bytes]:
    """`dreamwell serve --transport http` on the home's data directory, started now and
    answering before the rounds, as dreamwell's MCP entry of type `http` (the hooks stay as
    installed): what Claude Code pays when no process starts for the MCP server at all."""
    port, token = free_port(), secrets.token_urlsafe(32)
    served = subprocess.Popen(
        [
            *(sys.executable, "-m", "dreamwell.server", "serve", "--transport", "http"),
            *("--port", str(port), "--data-dir", str(home.data_dir), "--token", token),
        ],
        env={**home.env(), "DREAMWELL_EMBEDDER": "none"},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}/mcp"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            time.sleep(0.5)
    config = home.claude_json()
    bearer = {"Authorization": f"Bearer {token}"}
    config["mcpServers"]["dreamwell"] = {"type": "http", "url": url, "headers": bearer}
    (home.home / ".claude.json").write_text(json.dumps(config))
    return served


def breakdown(tmp: Path, rounds: int) -> None:
    """Where the ratio comes from: besides the run without dreamwell, one with its server
    alone (install, then its hooks removed from settings.json), one with its hooks alone
    (its server removed from .claude.json), and one with an instant server: a stdlib script
    that answers each request with the reply dreamwell's server gave to the same method
    (instant_mcp/relay.py, recorded in the first run), doing no work: what any stdio server
    with dreamwell's lists costs. Alternating rounds, medians, ratios to the run without;
    empty data directories."""
    homes = {"without": ClaudeHome(tmp / "bare"), "installed": ClaudeHome(tmp / "installed")}
    homes["installed"].dreamwell("install", "claude-code")
    for name in ("server only", "hooks only", "instant server", "http server"):
        home = ClaudeHome(tmp / name.replace(" ", "-"))
        home.dreamwell("install", "claude-code")
        if name == "hooks only":
            config = home.claude_json()
            config.pop("mcpServers")
            (home.home / ".claude.json").write_text(json.dumps(config))
        elif name != "http server":
            _only_server(home)
        homes[name] = home
    served = _serve_http(homes["http server"])  # MCP from a process already running
    log = tmp / "instant-server.log"
    instant = homes["instant server"]
    _serve_with(instant, ["record", str(log)])
    seconds: dict[str, list[float]] = {name: [] for name in homes}
    with AnthropicAPI(lambda _request: Turn(text="OK")) as api:
        for home in homes.values():  # the instant server's run records dreamwell's replies
            home.claude(api, "Say OK")
        config = instant.claude_json()
        config["mcpServers"]["dreamwell"]["args"] = ["-I", "-S", str(RELAY), "replay", str(log)]
        (instant.home / ".claude.json").write_text(json.dumps(config))
        for _ in range(rounds):
            for name, home in homes.items():
                wait_for_refresher(home.data_dir)
                run = home.claude(api, "Say OK")
                if run.returncode != 0 or run.json.get("result") != "OK":
                    raise SystemExit(f"claude -p failed ({name}): {run.stderr[-500:]}")
                if name not in ("without", "hooks only") and connected_in(run.timeline) is None:
                    raise SystemExit(f"Claude Code did not connect ({name})")
                seconds[name].append(run.seconds)
    served.terminate()
    served.wait(10)
    base = statistics.median(seconds["without"])
    sys.stdout.write(f"where it comes from, {rounds} alternating rounds:\n")
    for name, values in seconds.items():
        median = statistics.median(values)
        sys.stdout.write(f"  {name:<20} median {median:5.2f} s  {median / base:.2f}x\n")


def wait_for_detached(tmp: Path, timeout: float = 120.0) -> None:
    """Until the processes the runs left behind with a home under `tmp` (the automatic
    dream at a session's end, a refresher) have exited: they write there until they do."""
    wanted = f"HOME={tmp}".encode()
    deadline = time.monotonic() + timeout
    while processes(lambda _command, environ: any(e.startswith(wanted) for e in environ)):
        if time.monotonic() > deadline:
            return
        time.sleep(0.2)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--pairs", type=int, default=5)
    parser.add_argument("--n", type=int, default=10_000, help="memories in the data directory")
    parser.add_argument("--handshakes", type=int, default=20)
    parser.add_argument(
        "--breakdown", type=int, default=0, help="rounds of the server alone and hooks alone"
    )
    args = parser.parse_args()
    sys.stdout.write(f"load before: {load()}  ({os.cpu_count()} cores)\n")
    with tempfile.TemporaryDirectory(prefix="claude-code-bench-") as tmp:
        data = Path(tmp) / "handshake"
        handshake_ms(data)  # creates the data directory and its format file
        taken = [handshake_ms(data) for _ in range(args.handshakes)]
        sys.stdout.write(row("handshake, first start (no lists kept)", taken) + "\n")
        params = from_mcp_json(data)
        if not prime(params.args, params.env, Path(tmp)):
            raise SystemExit("the server did not answer the lists")
        taken = [handshake_ms(data) for _ in range(args.handshakes)]
        sys.stdout.write(row("handshake, lists kept by the last start", taken) + "\n")
        for life in (0.8, 3.0):
            used = [session_cpu_ms(data, life) for _ in range(3)]
            sys.stdout.write(row(f"server CPU over a {life} s session (lists kept)", used) + "\n")
        claude_runs(Path(tmp), args.pairs, args.n)
        if args.breakdown:
            breakdown(Path(tmp), args.breakdown)
        close_all()  # the resident hook processes, before their homes are removed
        wait_for_detached(Path(tmp))  # a refresher, the automatic dream
    sys.stdout.write(f"load after: {load()}\n")


if __name__ == "__main__":
    try:
        main()
    finally:
        close_all()  # the resident hook processes the runs started
