"""What the tests share: helpers, fakes and servers, imported as `tests.support.X` (pytest
fixtures stay in conftest.py files).

calls: tool calls through an MCP client (call, ok, fails) and a raw `initialize` request.
cli: `dreamwell(...)`, the command line as a user runs it, in a subprocess.
fake_ollama, fake_openai: scripted LLM servers on 127.0.0.1.
s3server: a real S3-compatible server (SeaweedFS's `weed mini`) on 127.0.0.1.
servers: the real ASGI server on a free port, and MCP clients over HTTP and stdio.
replicas: `dreamwell serve` replicas on one object-store location.
racing: writers racing from every replica, and waiting until a write is seen.
mixed_load: a mixed load of tool calls and the exact account of what must be stored.
hooks: `dreamwell hook` run as Claude Code runs it, and a transcript written like its own.
agents, agent_apis: the real Codex, Gemini CLI and Copilot CLI, and the scripted model APIs
(Responses, Gemini) they are run against.
skill_samples: real-world-shaped skill folders.
ui_browser: the memory browser in a real Chromium (Playwright) and axe-core.

ROOT is the repository's root (where mcp.json and README.md are); `pinned` finds a pinned
agent binary that .ci/run installs, or skips the test (fails it with CI set).
"""

from __future__ import annotations

import os
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def pinned(found: Path, name: str, folder: str, package: str) -> Path:
    """`found`, the pinned binary `name` (.ci/run: `npm install --prefix .tools/FOLDER
    PACKAGE`); the test is skipped without it, and fails with CI set (CI installs it)."""
    if found.exists():
        return found
    message = (
        f"{name} not found at {found}: npm install --prefix .tools/{folder} {package} "
        "(as .ci/run does)"
    )
    import pytest  # only where a test runs

    if os.environ.get("CI"):
        pytest.fail(message)
    pytest.skip(message)
