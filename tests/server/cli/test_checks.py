"""`dreamwell doctor` confirms a client's install (issue 56 item 6: "check that it works"):
dreamwell's entry in each client config that exists, and Claude Code's five hooks."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest

from dreamwell.server.cli.install import Where, apply, plan
from tests.support.cli import exit_code


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / ".config"))
    monkeypatch.setenv("DREAMWELL_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("DREAMWELL_EMBEDDER", "none")
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path / "run"))
    return tmp_path


def doctor(capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code = exit_code("doctor")
    return code, capsys.readouterr().out


def test_doctor_confirms_claude_codes_entry_and_hooks_and_names_what_is_missing(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out = doctor(capsys)
    assert code == 0 and "warn no client is connected yet" in out
    apply(plan("claude-code", Where("linux", home), "dreamwell", None, None, False), False, print)
    capsys.readouterr()
    code, out = doctor(capsys)
    assert code == 0, out
    assert f"ok   claude-code: dreamwell is in {home}/.claude.json" in out
    assert f"ok   claude-code: the 5 hooks are in {home}/.claude/settings.json" in out
    run = home / "run" / "dreamwell"
    assert f"warn claude-code: no hooks' resident process is running in {run}" in out
    run.mkdir(parents=True, mode=0o700)
    with socket.socket(socket.AF_UNIX) as resident:  # where a resident listens
        resident.bind(str(run / "0123456789abcdef.sock"))
        resident.listen(1)
        code, out = doctor(capsys)
    assert f"ok   claude-code: the hooks' resident process answers ({run})" in out
    settings = home / ".claude" / "settings.json"
    hooks = json.loads(settings.read_text())
    del hooks["hooks"]["UserPromptSubmit"]
    settings.write_text(json.dumps(hooks))
    (home / ".cursor").mkdir()
    (home / ".cursor" / "mcp.json").write_text('{"mcpServers": {}}')
    code, out = doctor(capsys)
    assert code == 1
    assert f"FAIL claude-code: hooks missing in {settings}: UserPromptSubmit" in out
    assert f"FAIL cursor: no dreamwell entry in {home}/.cursor/mcp.json" in out
    assert "fix: dreamwell install cursor" in out


def test_doctor_confirms_each_other_agents_install_and_names_a_file_left_behind(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (home / ".gemini").mkdir()
    (home / ".gemini" / "settings.json").write_text('{"theme": "dark"}')
    code, out = doctor(capsys)
    assert "gemini:" not in out  # an agent dreamwell was never installed in is not named
    for agent in ("codex", "gemini", "copilot"):
        assert exit_code("install", agent) == 0
    capsys.readouterr()
    code, out = doctor(capsys)
    for agent in ("codex", "gemini", "copilot"):
        assert f"ok   {agent}: dreamwell's server and hooks are installed" in out, out
    settings = home / ".gemini" / "settings.json"
    config = json.loads(settings.read_text())
    del config["hooks"]["BeforeAgent"]  # the prompt hook, lost to a hand edit
    settings.write_text(json.dumps(config))
    code, out = doctor(capsys)
    assert code == 1
    assert f"FAIL gemini: dreamwell is not installed as this version would: {settings}" in out
    assert "fix: dreamwell install gemini" in out
