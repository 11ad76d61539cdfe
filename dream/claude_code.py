"""The dream's LLM through the Claude Code the user already has (`llm_provider=claude-code`,
SPEC §10): each question is one `claude -p` run under the user's own login.

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
cancelled, is killed with its process group.
"""

from __future__ import annotations

import json
import os
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
USAGE_KEYS = (
    "input_tokens",
    "cache_creation_input_tokens",
    "cache_read_input_tokens",
    "output_tokens",
)


class ClaudeCodeLLM:
    """One `claude -p` per question; `last_tokens` is what the last one spent (its usage)."""

    provider = "claude-code"

    def __init__(self, binary: str = "claude", model: str | None = None, timeout: float = 600.0):
        self._binary, self._model = binary, model or DEFAULT_MODEL
        self._timeout = timeout
        self.last_tokens = 0

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
            why = str(result.get("result") or result.get("subtype") or f"exit code {code}")
            raise LLMUnavailable(f"{self.name} failed: {why[:300]}")
        if "structured_output" not in result:
            said = str(result.get("result", ""))[:200]
            raise BadAnswer(f"{self.name} answered without structured output: {said!r}")
        return json.dumps(result["structured_output"], ensure_ascii=False)

    def _run(
        self, command: list[str], prompt: str, cancel: threading.Event | None
    ) -> tuple[str, str, int]:
        """(stdout, stderr, exit code) of one run, killed past the time-out or on cancel."""
        with tempfile.TemporaryDirectory(prefix="dreamwell-claude-") as cwd:
            try:
                child = subprocess.Popen(
                    command,
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    cwd=cwd,  # no project: nothing of the user's folders is read
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
            deadline = time.monotonic() + self._timeout
            while talker.is_alive():
                if cancel is not None and cancel.is_set():
                    _stop(child, talker)
                    raise LLMCancelled(f"{self.name}: cancelled")
                if time.monotonic() > deadline:
                    _stop(child, talker)
                    raise LLMUnavailable(f"{self.name} gave no answer within {self._timeout:.0f} s")
                talker.join(0.05)
        stdout, stderr = done.get("io", ("", ""))
        return stdout or "", stderr or "", child.returncode


def _stop(child: subprocess.Popen[str], talker: threading.Thread) -> None:
    with suppress(OSError):
        os.killpg(child.pid, signal.SIGKILL)
    child.wait()
    talker.join(5)


def tokens(result: dict[str, Any]) -> int:
    """Input (cached or not) plus output tokens of a `--output-format json` result."""
    usage = result.get("usage")
    if not isinstance(usage, dict):
        return 0
    total = 0
    for key in USAGE_KEYS:
        value = usage.get(key)
        if isinstance(value, int):
            total += value
    return total
