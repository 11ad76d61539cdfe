"""The dream's LLM through the Claude Code the user already has (`llm_provider=claude-code`,
docs/dreaming.md): each question is one `claude -p` run under the user's own login.

What each run is started with, and why:
- `--safe-mode`: no hooks, MCP servers, skills, plugins or CLAUDE.md, so the dream never
  records or recurses into itself (dreamwell's own hooks included), while the login (a
  subscription too) and model selection work as usual (`--bare` would read only
  ANTHROPIC_API_KEY);
- `--tools ""`: no built-in tool; `--no-session-persistence`: nothing saved to resume;
- `--json-schema`: Claude Code offers the schema as its `StructuredOutput` tool and checks the
  answer against it; `--output-format json` carries `structured_output` and `usage`;
- `--model` (a cheap one by default), `--system-prompt` (the pass's), the prompt on stdin.

A run that ends without `structured_output` (the model answered in text twice: Claude Code
still exits 0) is a bad answer, so the pass changes nothing. A run past `timeout`, or
cancelled, or interrupted, is killed with its process group.

A question is one request: Claude Code's own retries (about ten for a 429 or 529, with
backoff up to minutes; five for an answer outside the schema) are turned off in the
environment each run gets (`CLAUDE_CODE_MAX_RETRIES=0`, `MAX_STRUCTURED_OUTPUT_RETRIES=1`),
its request time-out is the run's (`API_TIMEOUT_MS`), and its answer is capped
(`CLAUDE_CODE_MAX_OUTPUT_TOKENS`), so the cycle's breaker and budget (dream/budget.py)
decide. Each run works in an empty temp folder named with the dream's pid; one left by a
killed dream is removed by the next (`check`).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from contextlib import suppress
from typing import Any

from dreamwell.dream.llm import BadAnswer, LLMCancelled, LLMUnavailable

DEFAULT_MODEL = "haiku"
MAX_TIMEOUT = 120.0  # seconds for one answer: a run that takes longer is stuck
OVERHEAD_TOKENS = 1500  # Claude Code's own text and tools around the question (~640 measured)
TEMP_PREFIX = "dreamwell-claude-"
USAGE_KEYS = (
    "input_tokens",
    "cache_creation_input_tokens",
    "cache_read_input_tokens",
    "output_tokens",
)
MODEL_USAGE_KEYS = (
    "inputTokens",
    "cacheCreationInputTokens",
    "cacheReadInputTokens",
    "outputTokens",
)


class ClaudeCodeLLM:
    """One `claude -p` per question; `last_tokens` is what the last one spent (its usage)."""

    provider = "claude-code"

    def __init__(
        self,
        binary: str = "claude",
        model: str | None = None,
        timeout: float = MAX_TIMEOUT,
        max_tokens: int = 2048,
    ):
        self._binary, self._model = binary, model or DEFAULT_MODEL
        self._timeout = min(timeout, MAX_TIMEOUT)
        self.last_tokens = 0
        self.max_output_tokens = max_tokens  # the cycle's budget counts these (budget.py)
        self.overhead_tokens = OVERHEAD_TOKENS

    @property
    def name(self) -> str:
        return f"{self.provider}:{self._model}"

    def _path(self) -> str:
        found = shutil.which(self._binary)
        if found is None:
            raise LLMUnavailable(
                f"{self.name}: no Claude Code at {self._binary!r}; install it "
                "(npm install -g @anthropic-ai/claude-code) or set claude_path"
            )
        return found

    def check(self) -> None:
        self._path()
        sweep_leftovers()

    def environment(self) -> dict[str, str]:
        """The run's environment: the dream's own, with Claude Code's retries off."""
        return os.environ | {
            "CLAUDE_CODE_MAX_RETRIES": "0",
            "MAX_STRUCTURED_OUTPUT_RETRIES": "1",
            "API_TIMEOUT_MS": str(int(self._timeout * 1000)),
            "CLAUDE_CODE_MAX_OUTPUT_TOKENS": str(self.max_output_tokens),
        }

    def command(self, system: str, schema: dict[str, Any]) -> list[str]:
        return [
            self._path(),
            "-p",
            "--safe-mode",
            "--tools",
            "",
            "--no-session-persistence",
            "--output-format",
            "json",
            "--json-schema",
            json.dumps(schema, ensure_ascii=False),
            "--model",
            self._model,
            "--system-prompt",
            system,
        ]

    def ask(
        self,
        system: str,
        prompt: str,
        schema: dict[str, Any],
        cancel: threading.Event | None = None,
    ) -> str:
        """The structured answer as JSON text; raises LLMError (LLMCancelled when cancelled)."""
        self.last_tokens = 0
        out, err, code = self._run(self.command(system, schema), prompt, cancel)
        try:
            result = json.loads(out)
        except ValueError:
            result = None
        if not isinstance(result, dict):
            why = (err.strip() or out.strip() or f"exit code {code}")[:300]
            raise LLMUnavailable(f"{self.name} failed: {why}")
        self.last_tokens = tokens(result)
        if result.get("is_error") or code != 0:
            errors = result.get("errors")
            said = errors[0] if isinstance(errors, list) and errors else result.get("result")
            why = str(said or result.get("subtype") or f"exit code {code}")
            raise LLMUnavailable(f"{self.name} failed: {why[:300]}")
        if "structured_output" not in result:
            said = str(result.get("result", ""))[:200]
            raise BadAnswer(f"{self.name} answered without structured output: {said!r}")
        return json.dumps(result["structured_output"], ensure_ascii=False)

    def _run(
        self, command: list[str], prompt: str, cancel: threading.Event | None
    ) -> tuple[str, str, int]:
        """(stdout, stderr, exit code) of one run, killed past the time-out or on cancel."""
        with tempfile.TemporaryDirectory(prefix=f"{TEMP_PREFIX}{os.getpid()}-") as cwd:
            try:
                child = subprocess.Popen(
                    command,
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    cwd=cwd,  # no project: nothing of the user's folders is read
                    env=self.environment(),
                    text=True,
                    encoding="utf-8",
                    errors="replace",
                    start_new_session=True,
                )
            except OSError as exc:
                raise LLMUnavailable(f"{self.name}: cannot start {command[0]}: {exc}") from exc
            done: dict[str, Any] = {}

            def talk() -> None:
                done["io"] = child.communicate(prompt)

            talker = threading.Thread(target=talk, daemon=True)
            talker.start()
            try:
                self._wait(talker, cancel)
            except BaseException:  # a time-out, a cancel, or the dream itself interrupted
                _stop(child, talker)
                raise
        stdout, stderr = done.get("io", ("", ""))
        return stdout or "", stderr or "", child.returncode

    def _wait(self, talker: threading.Thread, cancel: threading.Event | None) -> None:
        """Until the run ends; LLMCancelled on cancel, LLMUnavailable past the time-out."""
        deadline = time.monotonic() + self._timeout
        while talker.is_alive():
            if cancel is not None and cancel.is_set():
                raise LLMCancelled(f"{self.name}: cancelled")
            if time.monotonic() > deadline:
                raise LLMUnavailable(f"{self.name} gave no answer within {self._timeout:.0f} s")
            talker.join(0.05)


def _stop(child: subprocess.Popen[str], talker: threading.Thread) -> None:
    with suppress(OSError):
        os.killpg(child.pid, signal.SIGKILL)
    child.wait()
    talker.join(5)


def tokens(result: dict[str, Any]) -> int:
    """Input (cached or not) plus output tokens of a `--output-format json` result: its
    `usage`, else (a failed run reports none there) the sum of its `modelUsage`."""
    usage = result.get("usage")
    total = _sum(usage, USAGE_KEYS) if isinstance(usage, dict) else 0
    if total:
        return total
    models = result.get("modelUsage")
    if not isinstance(models, dict):
        return 0
    return sum(_sum(m, MODEL_USAGE_KEYS) for m in models.values() if isinstance(m, dict))


def _sum(usage: dict[str, Any], keys: tuple[str, ...]) -> int:
    return sum(v for v in (usage.get(k) for k in keys) if isinstance(v, int))


def sweep_leftovers() -> None:
    """Remove the temp folders of runs whose dream is gone (killed before it could)."""
    try:
        found = os.scandir(tempfile.gettempdir())
    except OSError:
        return
    with found:
        for entry in found:
            match = _LEFTOVER.match(entry.name)
            if match is None or _alive(int(match.group(1))):
                continue
            with suppress(OSError):
                if entry.is_dir(follow_symlinks=False) and entry.stat().st_uid == os.getuid():
                    shutil.rmtree(entry.path, ignore_errors=True)


_LEFTOVER = re.compile(rf"^{TEMP_PREFIX}(\d+)-")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True
    return True
