"""The real Claude Code (tests/support/claude_code.py) starting dreamwell as `dreamwell install
claude-code` configures it: it connects on its first `server/discover`, and a dreamwell that
cannot start is reported with its cause. Few tests: each `claude` run costs seconds."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

from tests.support.anthropic_api import AnthropicAPI, Turn
from tests.support.claude_code import ClaudeHome, connected_in, mcp_lines

# what Claude Code's timeline says when it gave up on the probe or went back to `initialize`
FALLBACK = re.compile(r"legacy|initialize|fall(s|ing)? ?back|abandon|-32022", re.IGNORECASE)


def test_claude_code_connects_on_its_first_discover(tmp_path: Path) -> None:
    """dreamwell answered the probe only after importing the MCP SDK (3.5 s); Claude Code gave
    up at ~2.8 s, fell back to `initialize`, was refused with -32022, and discovered again
    (11 of 17 connects), or did not connect at all before a short `-p` session ended."""
    home = ClaudeHome(tmp_path)
    home.dreamwell("install", "claude-code")
    with AnthropicAPI(lambda _request: Turn(text="OK")) as api:
        run = home.claude(api, "Say OK")
    assert run.returncode == 0 and run.json.get("result") == "OK", run.stderr
    lines = mcp_lines(run.timeline)
    assert connected_in(run.timeline) is not None, "\n".join(lines)
    assert not [line for line in lines if FALLBACK.search(line)], "\n".join(lines)


def test_claude_mcp_list_names_why_dreamwell_cannot_start(tmp_path: Path) -> None:
    """A data directory that is a file: the server said "File exists" on its stderr and
    Claude Code showed only a closed connection."""
    home = ClaudeHome(tmp_path)
    home.dreamwell("install", "claude-code")
    shutil.rmtree(home.data_dir, ignore_errors=True)  # install made it (its skill folders' state)
    home.data_dir.parent.mkdir(parents=True, exist_ok=True)
    home.data_dir.write_text("not a directory")
    listed = home.run("mcp", "list")
    line = next(x for x in listed.stdout.splitlines() if x.startswith("dreamwell:"))
    assert "Failed to connect" in line, listed.stdout
    assert f"the data directory {home.data_dir} is a file, not a directory" in line, line
