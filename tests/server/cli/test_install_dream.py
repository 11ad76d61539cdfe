"""`dreamwell install claude-code --dream`: the dream's LLM becomes the user's own Claude Code
(`llm_provider=claude-code`), written into the settings file every command reads (not as flags
of the commands install writes), and said out loud, since it spends the user's Claude usage;
installing again without --dream takes it back."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

from tests.support.cli import dreamwell


def install(*args: str, home: Path) -> subprocess.CompletedProcess[str]:
    env = {"HOME": str(home), "XDG_CONFIG_HOME": str(home / ".config")}
    env["XDG_DATA_HOME"] = str(home / ".local" / "share")
    return dreamwell("install", *args, env=env, unset=["DREAMWELL_DATA_DIR"], timeout=60)


def read(path: Path) -> dict[str, Any]:
    return dict(json.loads(path.read_text()))


def session_end(home: Path) -> str:
    """The session end's hook: its command (the flags it may run the dream with)."""
    hooks = read(home / ".claude" / "settings.json")["hooks"]
    return str(hooks["SessionEnd"][0]["hooks"][0]["command"])


def test_install_dream_turns_on_claude_code_as_the_llm_and_says_so(tmp_path: Path) -> None:
    done = install("claude-code", "--dream", home=tmp_path)
    assert done.returncode == 0, done.stderr
    said = done.stdout
    assert "llm_provider=claude-code" in said and "spends your Claude usage" in said
    assert "200,000 tokens a cycle" in said and "without --dream" in said
    server = read(tmp_path / ".claude.json")["mcpServers"]["dreamwell"]
    assert server["args"] == ["serve"]
    assert session_end(tmp_path).endswith(" session-end")  # no flags in any hook
    config = tmp_path / ".config" / "dreamwell" / "config.toml"
    assert config.read_text() == 'llm_provider = "claude-code"\n'
    assert (config.stat().st_mode & 0o777) == 0o600
    env = {"HOME": str(tmp_path), "XDG_CONFIG_HOME": str(tmp_path / ".config")}
    by_hand = dreamwell("config", "get", "llm_provider", env=env)  # as `dream --once` reads it
    assert by_hand.stdout == f"claude-code\t(settings file ({config}))\n", by_hand.stderr
    again = install("claude-code", home=tmp_path)
    assert "llm_provider removed" in again.stdout
    assert read(tmp_path / ".claude.json")["mcpServers"]["dreamwell"]["args"] == ["serve"]
    assert config.read_text() == "\n"


def test_dream_is_for_claude_code_only(tmp_path: Path) -> None:
    done = install("cursor", "--dream", home=tmp_path)
    assert done.returncode == 1 and done.stderr.count("\n") == 1
    assert "claude-code only" in done.stderr
    assert not (tmp_path / ".cursor").exists()
