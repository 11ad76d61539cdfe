"""The real Claude Code binary, driven in print mode against a scripted Anthropic Messages API
on 127.0.0.1 (tests/support/anthropic_api.py). Never an imitation of Claude Code's side.

The binary is the pinned npm package `.ci/run` installs into `.tools/claude-code/`
(`CLAUDE_CODE_VERSION`); `DREAMWELL_TEST_CLAUDE` may name another copy. Without it the tests
that need it skip, and with CI set they fail.

    home = ClaudeHome(tmp_path)              # a temp HOME: ~/.claude.json, ~/.claude/, data dir
    home.dreamwell("install", "claude-code") # the installed `dreamwell`, with that HOME
    with AnthropicAPI(brain) as api:
        result = home.claude(api, "Remember that we deploy with make ship")
    result.json["result"], result.timeline (the --debug-file lines)
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.support import ROOT, pinned
from tests.support.anthropic_api import AnthropicAPI
from tests.support.hooks import settle, stop_residents

CLAUDE_CODE_VERSION = (ROOT / ".ci" / "claude-code-version").read_text().strip()
DREAMWELL = Path(sys.executable).parent / "dreamwell"


def claude_binary() -> Path:
    """The pinned `claude`; skips the test without it (fails with CI set)."""
    given = os.environ.get("DREAMWELL_TEST_CLAUDE")
    found = (
        Path(given)
        if given
        else ROOT / ".tools" / "claude-code" / "node_modules" / ".bin" / "claude"
    )
    package = f"@anthropic-ai/claude-code@{CLAUDE_CODE_VERSION}"
    return pinned(found, f"Claude Code {CLAUDE_CODE_VERSION}", "claude-code", package)


@dataclass(frozen=True)
class Run:
    """One `claude -p` run: its exit code, its JSON result, and its debug timeline."""

    returncode: int
    json: dict[str, Any]
    stderr: str
    timeline: list[str]
    seconds: float


# what Claude Code's --debug-file says when a command hook ends: "Hooks: UserPromptSubmit [cmd]
# finished with status 0 (692ms)" (SessionStart:startup, UserPromptSubmit, …), or, for one
# that runs in the background (`async`), "Hooks: Stop [cmd] moved to the background (3ms)"
_HOOK_DONE = re.compile(
    r"Hooks: (\w+)(?::\w+)? \[(.*?)\] "
    r"(?:finished with status \d+|moved to the background) \((\d+)ms\)"
)
_CONNECTED = re.compile(r'MCP server "([^"]+)": Successfully connected .* in (\d+)ms')


def hook_waits(timeline: list[str]) -> dict[str, list[int]]:
    """What Claude Code waited for each hook of a run, by event (milliseconds), as its
    timeline reports it (a background hook's: until it was moved to the background)."""
    waits: dict[str, list[int]] = {}
    for line in timeline:
        found = _HOOK_DONE.search(line)
        if found is not None:
            waits.setdefault(found.group(1), []).append(int(found.group(3)))
    return waits


def connected_in(timeline: list[str], server: str = "dreamwell") -> int | None:
    """How long Claude Code took to connect to the MCP server (ms), None if it never did."""
    for line in timeline:
        found = _CONNECTED.search(line)
        if found is not None and found.group(1) == server:
            return int(found.group(2))
    return None


def mcp_lines(timeline: list[str], server: str = "dreamwell") -> list[str]:
    """The timeline's lines about one MCP server."""
    return [line for line in timeline if f'MCP server "{server}"' in line]


OPEN: list[ClaudeHome] = []  # closed after each test (tests/conftest.py)


NO_API = "http://127.0.0.1:9"  # the discard port: nothing listens, a connection is refused


def close_all() -> None:
    while OPEN:
        OPEN.pop().close()


class ClaudeHome:
    """A temp HOME for one Claude Code user: its config, its data directory, its projects."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.home = root / "home"
        self.home.mkdir(parents=True, exist_ok=True)
        self.project = root / "project"
        self.project.mkdir(exist_ok=True)
        self.data_dir = self.home / ".local" / "share" / "dreamwell"
        self.binary = claude_binary()
        self.extra_env: dict[str, str] = {}  # beats env()'s own values
        # the hooks' resident processes (server/hooks/resident.py) keep their sockets here:
        # a short path (a socket's has at most ~107 bytes); stopped after the test (close())
        self.run_dir = Path(tempfile.mkdtemp(prefix="dw", dir="/tmp"))
        OPEN.append(self)

    def close(self) -> None:
        """Stop the resident hook processes this user's hooks started."""
        stop_residents(self.run_dir)

    def env(self, api: AnthropicAPI | None = None) -> dict[str, str]:
        keep = ("PATH", "LANG", "LC_ALL", "TMPDIR", "CI", "SYSTEMROOT")
        env = {k: v for k, v in os.environ.items() if k in keep}
        env.update(
            HOME=str(self.home),
            XDG_CONFIG_HOME=str(self.home / ".config"),
            XDG_DATA_HOME=str(self.home / ".local" / "share"),
            XDG_CACHE_HOME=str(self.home / ".cache"),
            ANTHROPIC_API_KEY="sk-ant-test-not-a-real-key",
            DISABLE_TELEMETRY="1",
            CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1",
            DISABLE_AUTOUPDATER="1",
            DISABLE_ERROR_REPORTING="1",
            TERM="dumb",
            DREAMWELL_EMBEDDER="none",
            XDG_RUNTIME_DIR=str(self.run_dir),
        )
        env["PATH"] = f"{DREAMWELL.parent}{os.pathsep}{env.get('PATH', '')}"
        # with no scripted API, one that refuses at once: left to api.anthropic.com, which
        # this machine cannot reach, `claude mcp list` waited ~18 s for it before answering
        env["ANTHROPIC_BASE_URL"] = api.url if api is not None else NO_API
        return {**env, **self.extra_env}

    def dreamwell(
        self, *args: str, check: bool = True, api: AnthropicAPI | None = None
    ) -> subprocess.CompletedProcess[str]:
        """The installed `dreamwell` command, as this user (their HOME, their data dir);
        with `api`, a `claude` it runs (the dream's `llm_provider=claude-code`) talks to it."""
        done = subprocess.run(
            [str(DREAMWELL), *args],
            env=self.env(api),
            cwd=self.project,
            capture_output=True,
            text=True,
            timeout=120,
        )
        if check and done.returncode != 0:
            raise AssertionError(f"dreamwell {' '.join(args)}: {done.returncode}\n{done.stderr}")
        return done

    def claude(
        self,
        api: AnthropicAPI,
        prompt: str,
        *args: str,
        timeout: float = 120,
        cwd: Path | None = None,
    ) -> Run:
        """`claude -p PROMPT --output-format json ARGS…` in the project folder."""
        debug = self.root / f"debug-{len(list(self.root.glob('debug-*')))}.log"
        import time

        began = time.monotonic()
        done = subprocess.run(
            [
                str(self.binary),
                "-p",
                prompt,
                "--output-format",
                "json",
                "--debug-file",
                str(debug),
                *args,
            ],
            env=self.env(api),
            cwd=cwd or self.project,
            capture_output=True,
            text=True,
            timeout=timeout,
            stdin=subprocess.DEVNULL,
        )
        seconds = time.monotonic() - began
        settle(self.run_dir)  # the work of the silent hooks Claude Code had its answers to
        try:
            result = json.loads(done.stdout)
        except json.JSONDecodeError:
            result = {"unparsed": done.stdout}
        timeline = debug.read_text(errors="replace").splitlines() if debug.exists() else []
        return Run(done.returncode, result, done.stderr, timeline, seconds)

    def run(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        """Another `claude` command (`mcp list`, …) as this user, in the project folder."""
        done = subprocess.run(
            [str(self.binary), *args],
            env=self.env(),
            cwd=self.project,
            capture_output=True,
            text=True,
            timeout=timeout,
            stdin=subprocess.DEVNULL,
        )
        settle(self.run_dir)
        return done

    def claude_json(self) -> dict[str, Any]:
        path = self.home / ".claude.json"
        return json.loads(path.read_text()) if path.exists() else {}

    def settings_json(self) -> dict[str, Any]:
        path = self.home / ".claude" / "settings.json"
        return json.loads(path.read_text()) if path.exists() else {}
