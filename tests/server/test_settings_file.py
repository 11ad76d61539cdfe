"""The settings in one place (issue 56 item 4): `$XDG_CONFIG_HOME/dreamwell/config.toml`, read
by every command and by the hooks, flags > environment > file > defaults, `dreamwell config`;
and one bad setting never switches memory off (issue 53 goal 6): a value from the
environment or the file that cannot be used takes its default and is said where the user
looks (stderr of every command, serve's included; doctor; the session start's context),
while a bad flag the user just typed is still exit 2."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from dreamwell.server.config import load_settings
from dreamwell.server.hooks import settings as hook_settings
from tests.support.cli import dreamwell, exit_code

BAD_AFTER = "setting dream_auto_after='0s' from the environment (DREAMWELL_DREAM_AUTO_AFTER)"


@pytest.fixture
def config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty settings file's path, in this test's own XDG_CONFIG_HOME."""
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "cfg"))
    monkeypatch.setenv("DREAMWELL_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("DREAMWELL_EMBEDDER", "none")
    path = tmp_path / "cfg" / "dreamwell" / "config.toml"
    path.parent.mkdir(parents=True)
    return path


def test_flags_beat_the_environment_which_beats_the_file_which_beats_defaults(
    config: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config.write_text(
        "# mine\nhook_max_chars = 4000\nwm_ttl_minutes = 30\ndream_auto = false\n"
        'llm_provider = "claude-code"\n'
    )
    monkeypatch.setenv("DREAMWELL_WM_TTL_MINUTES", "9")
    settings = load_settings({"llm_provider": "openai"})
    assert settings.hook_max_chars == 4000  # file
    assert settings.wm_ttl_minutes == 9  # environment over file
    assert settings.llm_provider == "openai"  # flag over file
    assert settings.dream_auto is False and settings.rerank_depth == 20  # file, default
    assert settings.fell_back == ()
    fast = hook_settings.read(None)  # the hooks' reader without pydantic reads it too
    assert (fast.hook_max_chars, fast.dream_auto) == (4000, False)


def test_a_bad_setting_takes_its_default_and_a_bad_flag_is_still_refused(
    config: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`DREAMWELL_DREAM_AUTO_AFTER=0s` in Claude Code's environment stopped the server and
    every hook (qa-turn5); today `stats` exits 2 with it."""
    monkeypatch.setenv("DREAMWELL_DREAM_AUTO_AFTER", "0s")
    config.write_text("hook_max_chars = 5\nbogus = 1\n")
    assert exit_code("stats") == 0
    err = capsys.readouterr().err
    assert f"dreamwell: {BAD_AFTER} is not usable" in err and "using the default 24h" in err
    assert "setting hook_max_chars=5 from the settings file" in err
    assert f"the settings file {config}: no setting 'bogus'; ignored" in err
    settings = load_settings({})
    assert (settings.dream_auto_after, settings.hook_max_chars) == ("24h", 6000)
    assert exit_code("stats", "--embedder", "e6") == 2  # typed by the user
    assert "bad setting embedder='e6'" in capsys.readouterr().err
    assert exit_code("doctor") == 0
    out = capsys.readouterr().out
    assert f"warn {BAD_AFTER} is not usable" in out
    assert "dream_auto_after=24h (default: the environment's value is not usable)" in out


def test_the_session_start_and_serve_say_a_bad_setting_and_keep_working(tmp_path: Path) -> None:
    env = {
        "DREAMWELL_DREAM_AUTO_AFTER": "0s",
        "DREAMWELL_EMBEDDER": "none",
        "XDG_CONFIG_HOME": str(tmp_path / "cfg"),
    }
    data = str(tmp_path / "data")
    start = {"session_id": "s1", "hook_event_name": "SessionStart", "cwd": str(tmp_path)}
    hook = dreamwell("hook", "session-start", "--data-dir", data, stdin=json.dumps(start), env=env)
    assert hook.returncode == 0
    assert hook.stdout.startswith(f"[dreamwell] {BAD_AFTER} is not usable"), hook.stdout
    prompt = {**start, "hook_event_name": "UserPromptSubmit", "prompt": "we deploy with make"}
    dreamwell("hook", "user-prompt", "--data-dir", data, stdin=json.dumps(prompt), env=env)
    assert "we deploy with make" in (tmp_path / "data" / "conversation.jsonl").read_text()
    served = dreamwell("serve", "--data-dir", data, stdin=subprocess.DEVNULL, env=env)
    assert served.returncode == 0 and f"dreamwell: {BAD_AFTER} is not usable" in served.stderr


def test_config_set_get_unset_keep_the_files_other_lines(
    config: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config.write_text("# my settings\nrerank = true\n")
    config.chmod(0o640)
    assert exit_code("config", "set", "dream-auto-after", "12h") == 0
    assert exit_code("config", "set", "record_conversation", "off") == 0
    assert exit_code("config", "set", "dream_auto_after", "0s") == 2  # checked: not written
    assert "bad setting dream_auto_after='0s'" in capsys.readouterr().err
    assert config.read_text() == (
        '# my settings\nrerank = true\ndream_auto_after = "12h"\nrecord_conversation = false\n'
    )
    assert exit_code("config", "get", "dream_auto_after") == 0
    assert capsys.readouterr().out == f"12h\t(settings file ({config}))\n"
    assert exit_code("config", "unset", "rerank") == 0
    assert "rerank" not in config.read_text()
    assert exit_code("config", "get", "rerank_dept") == 2
    assert "no setting 'rerank_dept'; did you mean rerank_depth?" in capsys.readouterr().err
    assert exit_code("config", "list") == 0
    listed = capsys.readouterr().out
    assert "record_conversation = off\t(settings file" in listed
    assert "embedder = none\t(environment (DREAMWELL_EMBEDDER))" in listed
    assert os.stat(config).st_mode & 0o777 == 0o640  # the user's own file keeps its mode


def test_the_data_directory_comes_from_the_file_and_a_fifo_there_is_ignored(
    config: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from dreamwell.server import where

    monkeypatch.delenv("DREAMWELL_DATA_DIR")
    config.write_text(f'data_dir = "{tmp_path / "mine"}"\n')
    assert where.data_dir(None) == str(tmp_path / "mine")
    assert load_settings({}).data_dir == tmp_path / "mine"
    config.unlink()
    os.mkfifo(config)  # read, it would hang every command and hook
    assert load_settings({}).fell_back == (f"the settings file {config} is not a file; ignored",)
    assert where.data_dir(None) != str(tmp_path / "mine")
