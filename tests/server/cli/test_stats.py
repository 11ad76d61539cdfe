"""`dreamwell stats`, `dreamwell doctor` and the data directory's format version."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from dreamwell.server.cli.stats import FORMAT_VERSION
from dreamwell.stores import PROJECT, PROJECT_NAME, RECALL, JsonlLog, LongTermStore
from tests.support.cli import exit_code


def filled(data: Path) -> LongTermStore:
    store = LongTermStore(data, embedder=None)
    store.save("User is in Chicago", category="user/timezone")
    store.save("User is in Chicago", category="user/timezone")
    store.save("Prefers tea", category="user/drinks")
    gone = store.save("Old fact").entry
    store.apply([replace(gone, archived_at=gone.created_at)])
    return store


def test_stats_counts_memories_per_tenant_and_category_and_shows_the_last_dream(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    filled(tmp_path)
    LongTermStore(tmp_path / "tenants" / "team", embedder=None).save("Team fact", category="t")
    assert (
        exit_code("log", "feedback", "helpful", "--data-dir", str(tmp_path), "--kind", "helpful")
        == 0
    )
    assert exit_code("dream", "--once", "--data-dir", str(tmp_path)) == 0
    capsys.readouterr()
    assert exit_code("stats", "--data-dir", str(tmp_path), "--embedder", "none") == 0
    out = capsys.readouterr().out
    default, team = out.split("tenant team")
    assert "memories: 2 live, 1 archived" in default
    assert "user/timezone: 1" in default and "user/drinks: 1" in default
    assert "text index: in step" in default
    assert "vectors missing: 2" in default
    assert "last dream: " in default and "last dream: never" not in default
    assert "embedder: none (BM25 only)" in out
    assert "memories: 1 live, 0 archived" in team  # dream --once dreams every tenant too
    assert "last dream: " in team and "last dream: never" not in team


def test_stats_counts_the_records_a_log_bound_dropped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    filled(tmp_path)
    log = JsonlLog(tmp_path, RECALL, max_bytes=2_000)
    for i in range(40):
        log.append({"session": "s", "query": f"query number {i}", "ids": []})
    kept = len(log.read())
    assert kept < 40
    assert exit_code("stats", "--data-dir", str(tmp_path), "--embedder", "none") == 0
    out = capsys.readouterr().out
    assert "recall.jsonl" in out
    assert f"({40 - kept} oldest records dropped by its size bound)" in out


def test_a_fresh_install_has_nothing_stored_yet_and_is_told_the_next_step(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 44: stats said "no data directory" (exit 1) and doctor FAIL with "mkdir -p"
    before the first save, which reads as broken to someone who just installed."""
    fresh = str(tmp_path / "nope")
    assert exit_code("stats", "--data-dir", fresh) == 0
    out = capsys.readouterr().out
    assert out.count("\n") == 1 and out.startswith("Nothing stored yet")
    assert "dreamwell install <client> (claude-code" in out
    assert exit_code("doctor", "--data-dir", fresh) == 0
    out = capsys.readouterr().out
    assert "FAIL" not in out and "mkdir" not in out
    assert "nothing stored yet" in out and "dreamwell install <client>" in out
    assert not (tmp_path / "nope").exists()  # asking makes nothing


def test_stats_of_a_file_given_as_the_data_directory_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "file").write_text("x")
    assert exit_code("stats", "--data-dir", str(tmp_path / "file")) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "not a directory" in err


def test_doctor_passes_a_healthy_directory(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    filled(tmp_path)
    assert exit_code("doctor", "--data-dir", str(tmp_path)) == 0
    out = capsys.readouterr().out
    assert "FAIL" not in out and out.endswith("all good\n")
    assert "embedded model files match their checksums" in out


def test_doctor_names_an_unreachable_llm_and_the_command_that_fixes_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    filled(tmp_path)
    host = "http://127.0.0.1:9"  # discard port: nothing listens
    assert exit_code("doctor", "--data-dir", str(tmp_path), "--ollama-host", host) == 1
    out = capsys.readouterr().out
    assert "FAIL ollama:llama3.2@http://127.0.0.1:9 is unreachable" in out
    assert "fix: ollama serve  # then: ollama pull llama3.2" in out
    assert out.endswith("1 problem(s)\n")


def test_doctor_warns_without_an_llm_naming_the_passes_that_never_run_and_the_setup(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    filled(tmp_path)
    assert exit_code("doctor", "--data-dir", str(tmp_path)) == 0  # a warning, no failure
    out = capsys.readouterr().out
    line = next(x for x in out.splitlines() if "no LLM configured" in x)
    assert line.startswith("warn ")
    for never in ("skill-gap", "consolidation", "anti-patterns", "preferences", "judge"):
        assert never in line
    fix = out.split(line, 1)[1].splitlines()[1]
    assert "--llm-provider claude-code" in fix
    assert "llm_provider=openai + llm_model + llm_base_url" in fix


def test_doctor_checks_the_claude_code_it_would_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    filled(tmp_path)
    missing = str(tmp_path / "no-claude")
    args = ["--llm-provider", "claude-code", "--claude-path", missing]
    assert exit_code("doctor", "--data-dir", str(tmp_path), *args) == 1
    out = capsys.readouterr().out
    assert f"FAIL claude-code:haiku: no Claude Code at {missing!r}" in out
    assert "fix: npm install -g @anthropic-ai/claude-code" in out


def test_a_data_directory_from_a_newer_dreamwell_is_refused_with_what_to_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "format.json").write_text(json.dumps({"format": FORMAT_VERSION + 1}))
    source = tmp_path / "x.json"
    source.write_text('[{"content": "a"}]')
    assert exit_code("import", str(source), "--data-dir", str(tmp_path)) == 1
    err = capsys.readouterr().err
    assert "newer than this dreamwell reads" in err and "pipx upgrade dreamwell" in err
    assert not (tmp_path / "lancedb").exists()
    assert exit_code("doctor", "--data-dir", str(tmp_path)) == 1
    assert "fix: pipx upgrade dreamwell" in capsys.readouterr().out


def test_the_format_file_is_written_once_and_never_rewritten(tmp_path: Path) -> None:
    source = tmp_path / "x.json"
    source.write_text('[{"content": "a"}]')
    data = tmp_path / "d"
    assert exit_code("import", str(source), "--data-dir", str(data)) == 0
    assert json.loads((data / "format.json").read_text()) == {"format": FORMAT_VERSION}
    (data / "format.json").write_text('{"format": 1, "note": "kept"}')
    assert exit_code("import", str(source), "--data-dir", str(data)) == 0
    assert "kept" in (data / "format.json").read_text()


def test_stats_counts_memories_per_project(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = LongTermStore(tmp_path, embedder=None)
    shop = {PROJECT: "github.com/acme/shop", PROJECT_NAME: "shop"}
    store.save("Deploy with make ship", metadata=shop)
    store.save("Tests run with pytest", metadata=shop)
    store.save("Deploy with kubectl", metadata={PROJECT: "github.com/acme/billing"})
    store.save("Prefers tea", category="user-preferences/drinks")
    assert exit_code("stats", "--data-dir", str(tmp_path), "--embedder", "none") == 0
    out = capsys.readouterr().out
    assert "projects (2):" in out
    assert "shop (github.com/acme/shop): 2" in out
    assert "billing (github.com/acme/billing): 1" in out and "(global): 1" in out


def test_doctor_names_settings_that_still_hold_the_old_http_hooks_and_the_install_that_fixes_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """An earlier version's `http` hooks (a URL under /dreamwell/hook/ and a bearer token)
    in the user's settings.json or in the project's, where doctor is run: each is a problem
    with the command that replaces them."""
    from tests.support.hooks import install_claude_code

    filled(tmp_path / "data")
    home, project = tmp_path / "home", tmp_path / "project"
    old = {"type": "http", "url": "http://127.0.0.1:23456/dreamwell/hook/stop"}
    for where in (home, project / "src"):
        (where / ".claude").mkdir(parents=True)
        hooks = {"Stop": [{"hooks": [{**old, "headers": {"Authorization": "Bearer t"}}]}]}
        (where / ".claude" / "settings.json").write_text(json.dumps({"hooks": hooks}))
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.chdir(project / "src")
    assert exit_code("doctor", "--data-dir", str(tmp_path / "data")) == 1
    out = capsys.readouterr().out
    for where, fix in ((home, ""), (project / "src", f" --project {project / 'src'}")):
        line = f"FAIL {where / '.claude' / 'settings.json'} still holds dreamwell's old http hooks"
        assert line in out
        assert f"fix: run `dreamwell install claude-code{fix}`" in out
    install_claude_code(home, tmp_path / "data")
    capsys.readouterr()
    assert exit_code("doctor", "--data-dir", str(tmp_path / "data")) == 1
    out = capsys.readouterr().out
    assert f"FAIL {home / '.claude' / 'settings.json'} still holds" not in out  # replaced
    assert out.endswith("1 problem(s)\n")
