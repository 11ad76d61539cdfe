"""The command line: fast help, flags from the settings model, one-line errors, and the README
settings table generated from the same model."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from dreamwell.server.cli.main import main, parser
from dreamwell.server.cli.parsing import HELP
from dreamwell.server.config import Settings
from dreamwell.server.flags import COMMANDS, SETTINGS, flag_for
from dreamwell.server.settings_table import settings_table
from tests.support import ROOT
from tests.support.cli import NO_EMBEDDER, dreamwell
from tests.support.wire import as_another_user

HEAVY = ("mcp", "lancedb", "onnxruntime", "tantivy", "pyarrow", "uvicorn", "starlette", "pydantic")


def test_help_of_every_command_imports_no_heavy_library() -> None:
    probe = (
        "import sys, contextlib, io\n"
        "from dreamwell.server.cli.parsing import HELP, parser\n"
        "for args in [['--help'], ['--version']] + [[c, '--help'] for c in HELP]:\n"
        "    with contextlib.suppress(SystemExit), contextlib.redirect_stdout(io.StringIO()):\n"
        "        parser().parse_args(args)\n"
        f"print(sorted({{m.split('.')[0] for m in sys.modules}} & set({HEAVY!r})))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60
    )
    assert done.stdout.strip() == "[]"


def test_version_names_the_installed_distribution() -> None:
    done = dreamwell("--version")
    assert done.returncode == 0
    assert done.stdout.startswith("dreamwell 0.") and done.stdout.count("\n") == 1


@pytest.mark.parametrize("name", list(Settings.model_fields))
def test_every_flag_comes_from_a_setting_and_reaches_it(name: str, tmp_path: Path) -> None:
    values = {
        "data_dir": str(tmp_path),
        "storage_options": '{"endpoint": "http://127.0.0.1:9"}',
        "cache_dir": str(tmp_path / "cache"),
        "transport": "http",
        "host": "127.0.0.1",
        "port": "9",
        "namespace": "patrol/x",
        "token": "12345678",
        "tokens_file": str(tmp_path / "t.json"),
        "log_level": "ERROR",
        "embedder": "none",
        "ollama_host": "http://127.0.0.1:1",
        "ollama_model": "m",
        "dream_every": "2h",
        "llm_provider": "openai",
        "llm_base_url": "http://127.0.0.1:1/v1",
        "llm_model": "m",
        "llm_api_key": "sk-not-a-real-key",
        "claude_path": "/opt/claude/bin/claude",
        "dream_budget_tokens": "5000",
        "dream_auto_after": "12h",
        "dream_auto_sessions": "3",
        "project": "github.com/acme/shop",
    }
    for command in flag_for(name):
        extra = {
            "dream": ["--once"],
            "log": ["feedback", "x"],
            "skills": ["list"],
            "hook": ["stop"],
            "install": ["cursor"],
            "config": ["list"],
        }
        args = [command, *extra.get(command, [])]
        args += ["import-file"] if command == "import" else []
        flag = "--" + name.replace("_", "-")
        if SETTINGS[name].switch:
            parsed = parser().parse_args([*args, flag])
            assert getattr(parsed, name) is True
        else:
            parsed = parser().parse_args([*args, flag, values[name]])
            assert getattr(parsed, name) == values[name]


def test_commands_without_a_setting_do_not_accept_its_flag(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert "export" not in flag_for("transport")
    with pytest.raises(SystemExit) as exit_:
        parser().parse_args(["export", "--transport", "http"])
    assert exit_.value.code == 2
    assert "unknown argument --transport" in capsys.readouterr().err


def test_readme_settings_table_is_generated_from_the_model() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert settings_table() in readme, (
        "paste: python -c "
        "'from dreamwell.server.settings_table import settings_table as t; print(t())'"
    )
    assert tuple(HELP) == COMMANDS


def test_the_flag_table_names_exactly_the_settings_and_their_switches() -> None:
    assert list(SETTINGS) == list(Settings.model_fields)
    for name, info in Settings.model_fields.items():
        assert SETTINGS[name].switch == (info.annotation is bool), name
        assert info.description == SETTINGS[name].meaning


def test_a_bad_setting_is_one_line_naming_key_and_value(tmp_path: Path) -> None:
    done = dreamwell("stats", "--data-dir", str(tmp_path), "--embedder", "word2vec")
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1
    assert done.stderr.startswith("dreamwell: bad setting embedder='word2vec'")


def test_a_namespace_working_memory_cannot_read_back_is_refused(tmp_path: Path) -> None:
    """`--namespace ops/x` used to be taken: entries were written to `ops.json`, which working
    memory never reads, so they vanished at the next start."""
    done = dreamwell("serve", "--data-dir", str(tmp_path / "d"), "--namespace", "ops/x")
    assert done.returncode == 2 and done.stderr.count("\n") == 1
    assert "bad setting namespace='ops/x'" in done.stderr
    assert "must be two segments starting with one of session, patrol, subagent" in done.stderr
    assert not (tmp_path / "d").exists()


def test_a_bad_tenant_name_is_one_line_and_writes_nothing(tmp_path: Path) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["export", "--data-dir", str(tmp_path / "d"), "--tenant", "../x"])
    assert exit_.value.code == 2
    assert not (tmp_path / "d").exists()


def test_log_appends_a_feedback_record(tmp_path: Path) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["log", "feedback", "wrong tz", "--data-dir", str(tmp_path), "--memory-id", "abc"])
    assert exit_.value.code == 0
    line = json.loads((tmp_path / "feedback.jsonl").read_text().splitlines()[0])
    assert line["detail"] == "wrong tz" and line["memory_id"] == "abc"


def test_a_store_error_is_one_line_not_a_traceback(tmp_path: Path) -> None:
    """Another process holds the write lock for longer than the store waits."""
    from dreamwell.stores import LongTermStore

    LongTermStore(tmp_path, embedder=None).save("a")
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys; from filelock import FileLock; "
            f"l = FileLock({str(tmp_path / 'write.lock')!r}); l.acquire(); "
            "print('held', flush=True); sys.stdin.read()",
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        done = dreamwell("export", "--data-dir", str(tmp_path))  # reading needs no lock
        assert done.returncode == 0 and '"content": "a"' in done.stdout, done.stderr
        newer = tmp_path / "newer"
        newer.mkdir()
        (newer / "format.json").write_text('{"format": 99}')
        memories = tmp_path / "one.jsonl"
        memories.write_text(json.dumps({"content": "hello"}) + "\n")
        done = dreamwell("import", str(memories), "--data-dir", str(newer))
        assert done.returncode == 1, done.stderr
        assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
        assert "newer than this dreamwell reads" in done.stderr
    finally:
        assert holder.stdin is not None and holder.stdout is not None
        holder.stdin.close()
        holder.wait(timeout=30)
        holder.stdout.close()


@pytest.mark.parametrize("command", ["stats", "serve"])
def test_an_unreadable_data_directory_is_one_line_naming_it(tmp_path: Path, command: str) -> None:
    """`dreamwell stats` printed a PermissionError traceback; `serve` (with nothing on
    stdin) too. Run as another user when the tests run as root."""
    data = tmp_path / "data"
    assert dreamwell("stats", "--data-dir", str(data)).returncode == 0  # nothing stored yet
    data.mkdir()
    data.chmod(0)
    tmp_path.chmod(0o755)
    try:
        done = dreamwell(
            command, "--data-dir", str(data), env=NO_EMBEDDER, prefix=as_another_user()
        )
    finally:
        data.chmod(0o755)
    assert done.returncode == 1
    assert len(done.stderr.splitlines()) == 1 and "Traceback" not in done.stderr
    assert str(data) in done.stderr and "Permission denied" in done.stderr


def test_an_unknown_flag_names_the_nearest_and_help_shows_defaults(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Issue 44: `serve --datadir` printed the top-level usage with no suggestion, and
    --help showed no defaults."""
    with pytest.raises(SystemExit) as exit_:
        main(["serve", "--datadir", "/tmp/x"])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert err == "dreamwell serve: unknown argument --datadir; did you mean --data-dir?\n"
    with pytest.raises(SystemExit):
        main(["log", "--help"])
    shown = " ".join(capsys.readouterr().out.split())
    assert "(default: user)" in shown
    with pytest.raises(SystemExit):
        main(["serve", "--help"])
    shown = " ".join(capsys.readouterr().out.split())
    assert "(default: $XDG_DATA_HOME/dreamwell or ~/.local/share/dreamwell)" in shown


def _help_entries(command: str, capsys: pytest.CaptureFixture[str]) -> dict[str, str]:
    """`dreamwell COMMAND --help` as {flag: its help text on one line}."""
    with pytest.raises(SystemExit):
        main([command, "--help"])
    entries: dict[str, str] = {}
    flag = ""
    for line in capsys.readouterr().out.split("options:", 1)[1].splitlines():
        if line.startswith("  -"):
            flag = line.split()[0].rstrip(",")
            entries[flag] = " ".join(line.split()[1:])
        elif flag:
            entries[flag] += " " + line.strip()
    return entries


def _as_help_shows(value: object) -> str:
    if isinstance(value, bool):
        return "on" if value else "off"
    return "not set" if value is None else str(value)


@pytest.mark.parametrize("command", COMMANDS)
def test_help_names_every_setting_flag_default_and_it_is_the_one_settings_start_from(
    command: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 44: only some flags showed a default (--port, --log-level, --dream-auto-after and
    most others showed none)."""
    from dreamwell.server.flags import UI_PORT

    monkeypatch.setenv("COLUMNS", "100")
    entries = _help_entries(command, capsys)
    for name in (n for n in SETTINGS if command in SETTINGS[n].commands):
        text = entries["--" + name.replace("_", "-")]
        assert text.count("(default: ") == 1, (command, name, text)
        shown = text.split("(default: ")[1].removesuffix(")")
        field = Settings.model_fields[name]
        if field.default_factory is not None:  # computed from the environment: named in words
            assert shown == (SETTINGS[name].shown or "").replace("`", ""), (command, name)
        elif (command, name) == ("ui", "port"):  # ui's own, so it never meets serve's
            assert shown == str(UI_PORT) != str(field.default)
        else:
            want = SETTINGS[name].shown or _as_help_shows(field.default)
            assert shown == want.replace("`", ""), (command, name, shown)
    assert Settings().port == 8765 and Settings().enrich is True  # the table reached the model


def test_the_settings_defaults_are_defined_once_in_the_flag_table() -> None:
    """Settings reads each default from `flags.SETTINGS`: the two cannot disagree."""
    for name, field in Settings.model_fields.items():
        if field.default_factory is None:
            assert field.default == SETTINGS[name].default, name
        else:
            assert SETTINGS[name].default is None and SETTINGS[name].shown, name
