"""`dreamwell install codex|gemini|copilot` into temp homes, without the binaries: each agent's
files get what it needs, merged with the user's own (every other byte of a TOML file kept),
a second install changes no byte, `--uninstall` gives the user's files back, `--dry-run`
writes nothing, `--project` writes the project's files, and a file install cannot edit is
refused with one line and nothing written."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dreamwell.server.cli.agents.codex import trusted_hash
from dreamwell.server.cli.config_files import InstallError, Where, apply
from dreamwell.server.cli.install import plan

CMD = "/opt/dw/bin/dreamwell"
USER_TOML = """# my codex settings
model = "o9"

[mcp_servers.other]
command = "other-server"  # keep this comment

[profiles.fast]
model = "o9-mini"
"""
FILES = {
    "codex": [".codex/config.toml", ".codex/hooks.json"],
    "gemini": [".gemini/settings.json"],
    "copilot": [".copilot/mcp-config.json", ".copilot/hooks/dreamwell.json"],
}


def toml(text: str) -> dict[str, object]:
    """The TOML read back (Python 3.11's tomllib; the install itself runs without it)."""
    loaded: dict[str, object] = pytest.importorskip("tomllib").loads(text)
    return loaded


def install(agent: str, home: Path, project: Path | None = None, **kw: bool) -> str:
    said: list[str] = []
    changes = plan(agent, Where("linux", home), CMD, None, project, kw.get("remove", False))
    apply(changes, kw.get("dry_run", False), said.append)
    return "".join(said)


def snapshot(home: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(home)): p.read_bytes()
        for p in sorted(home.rglob("*"))
        if p.is_file() and not p.name.endswith(".bak")
    }


@pytest.mark.parametrize("agent", list(FILES))
def test_install_is_idempotent_and_uninstall_gives_the_user_s_files_back(
    agent: str, tmp_path: Path
) -> None:
    (tmp_path / ".codex").mkdir()
    (tmp_path / ".codex" / "config.toml").write_text(USER_TOML)
    (tmp_path / ".gemini").mkdir()
    (tmp_path / ".gemini" / "settings.json").write_text('{"theme": "dark"}\n')
    before = snapshot(tmp_path)
    assert install(agent, tmp_path, dry_run=True) and snapshot(tmp_path) == before
    install(agent, tmp_path)
    for name in FILES[agent]:
        assert (tmp_path / name).is_file(), name
    once = snapshot(tmp_path)
    assert "nothing to change" in install(agent, tmp_path) and snapshot(tmp_path) == once
    install(agent, tmp_path, remove=True)
    assert snapshot(tmp_path) == before


def test_codex_gets_approval_startup_and_a_trust_hash_for_each_hook(tmp_path: Path) -> None:
    (tmp_path / ".codex").mkdir()
    (tmp_path / ".codex" / "config.toml").write_text(USER_TOML)
    install("codex", tmp_path)
    text = (tmp_path / ".codex" / "config.toml").read_text()
    assert text.startswith(USER_TOML)  # every byte of the user's kept, comments too
    config = toml(text)
    server = config["mcp_servers"]["dreamwell"]
    assert server["command"] == CMD and server["args"] == ["serve"]
    assert server["default_tools_approval_mode"] == "approve" and server["required"] is True
    hooks_path = tmp_path / ".codex" / "hooks.json"
    hooks = json.loads(hooks_path.read_text())["hooks"]
    labels = {"SessionStart": "session_start", "UserPromptSubmit": "user_prompt_submit"}
    labels |= {"Stop": "stop", "PreCompact": "pre_compact", "SessionEnd": "session_end"}
    for name, label in labels.items():
        [hook] = hooks[name][0]["hooks"]
        assert " codex:" in hook["command"]
        assert hook["timeout"] == (3 if name == "SessionEnd" else 10)
        state = config["hooks"]["state"][f"{hooks_path}:{label}:0:0"]
        assert state["trusted_hash"] == trusted_hash(label, hook)


def test_a_codex_hook_after_the_user_s_own_is_trusted_at_its_own_index(tmp_path: Path) -> None:
    (tmp_path / ".codex").mkdir()
    theirs = {"type": "command", "command": "echo mine", "timeout": 5}
    (tmp_path / ".codex" / "hooks.json").write_text(
        json.dumps({"hooks": {"Stop": [{"hooks": [theirs]}]}})
    )
    install("codex", tmp_path)
    hooks = json.loads((tmp_path / ".codex" / "hooks.json").read_text())["hooks"]
    assert hooks["Stop"][0]["hooks"] == [theirs]
    state = toml((tmp_path / ".codex" / "config.toml").read_text())["hooks"]["state"]
    assert any(k.endswith(":stop:1:0") for k in state) and not any(
        k.endswith(":stop:0:0") for k in state
    )
    install("codex", tmp_path, remove=True)
    assert json.loads((tmp_path / ".codex" / "hooks.json").read_text()) == {
        "hooks": {"Stop": [{"hooks": [theirs]}]}
    }
    assert not (tmp_path / ".codex" / "config.toml").exists()


def test_codex_tables_written_another_way_are_refused_and_nothing_is_written(
    tmp_path: Path,
) -> None:
    (tmp_path / ".codex").mkdir()
    odd = '[mcp_servers]\ndreamwell = { command = "old" }\n'
    (tmp_path / ".codex" / "config.toml").write_text(odd)
    with pytest.raises(InstallError, match=r"config.toml: .*nothing was changed"):
        install("codex", tmp_path)
    assert (tmp_path / ".codex" / "config.toml").read_text() == odd
    assert not (tmp_path / ".codex" / "hooks.json").exists()


def test_gemini_trusts_the_server_and_times_hooks_in_milliseconds(tmp_path: Path) -> None:
    install("gemini", tmp_path)
    settings = json.loads((tmp_path / ".gemini" / "settings.json").read_text())
    assert settings["mcpServers"]["dreamwell"]["trust"] is True
    names = {"SessionStart", "BeforeAgent", "AfterAgent", "PreCompress", "SessionEnd"}
    assert set(settings["hooks"]) == names
    for name in names:
        [hook] = settings["hooks"][name][0]["hooks"]
        assert hook["timeout"] == 10_000 and " gemini:" in hook["command"]


def test_copilot_gets_its_own_hook_file_and_mcp_entry(tmp_path: Path) -> None:
    install("copilot", tmp_path)
    servers = json.loads((tmp_path / ".copilot" / "mcp-config.json").read_text())["mcpServers"]
    assert servers["dreamwell"]["type"] == "local" and servers["dreamwell"]["tools"] == ["*"]
    hooks = json.loads((tmp_path / ".copilot" / "hooks" / "dreamwell.json").read_text())
    assert hooks["version"] == 1
    start = hooks["hooks"]["SessionStart"][0]
    assert " copilot:session-start" in start["bash"] and start["timeoutSec"] == 10


@pytest.mark.parametrize(
    ("agent", "files"),
    [
        ("codex", [".codex/config.toml", ".codex/hooks.json"]),
        ("gemini", [".gemini/settings.json"]),
        ("copilot", [".github/mcp.json", ".github/hooks/dreamwell.json"]),
    ],
)
def test_project_installs_write_the_project_s_files(
    agent: str, files: list[str], tmp_path: Path
) -> None:
    home, project = tmp_path / "home", tmp_path / "repo"
    home.mkdir()
    project.mkdir()
    install(agent, home, project)
    written = sorted(str(p.relative_to(project)) for p in project.rglob("*") if p.is_file())
    assert written == sorted(files)
    if agent == "codex":  # the trust of the project's hooks is the user's to give
        state = toml((home / ".codex" / "config.toml").read_text())["hooks"]["state"]
        assert all(k.startswith(str(project / ".codex" / "hooks.json")) for k in state)


def test_a_data_directory_of_its_own_reaches_each_agent_s_server_and_hooks(
    tmp_path: Path,
) -> None:
    data = tmp_path / "my data"  # a space: quoted in the hook commands
    for agent in FILES:
        apply(plan(agent, Where("linux", tmp_path), CMD, data, None, False), False, lambda _: None)
    servers = toml((tmp_path / ".codex" / "config.toml").read_text())["mcp_servers"]
    assert servers["dreamwell"]["env"] == {"DREAMWELL_DATA_DIR": str(data)}  # type: ignore[index]
    gemini = json.loads((tmp_path / ".gemini" / "settings.json").read_text())
    assert gemini["mcpServers"]["dreamwell"]["env"] == {"DREAMWELL_DATA_DIR": str(data)}
    hooks = (tmp_path / ".copilot" / "hooks" / "dreamwell.json").read_text()
    assert f"--data-dir '{data}'" in json.loads(hooks)["hooks"]["Stop"][0]["bash"]


def test_with_codex_home_set_a_project_s_hooks_are_trusted_in_codex_home(tmp_path: Path) -> None:
    """Codex reads the user's config from $CODEX_HOME when set: the trust of a project's hooks
    goes there, not to ~/.codex (which Codex then never reads)."""
    home, codex_home, project = tmp_path / "home", tmp_path / "codex-home", tmp_path / "repo"
    project.mkdir()
    where = Where("linux", home, codex_home=codex_home)
    apply(plan("codex", where, CMD, None, project, False), False, lambda _: None)
    hooks_path = project / ".codex" / "hooks.json"
    assert "dreamwell" in toml((project / ".codex" / "config.toml").read_text())["mcp_servers"]  # type: ignore[operator]
    state = toml((codex_home / "config.toml").read_text())["hooks"]["state"]  # type: ignore[index]
    assert f"{hooks_path}:session_start:0:0" in state
    assert not (home / ".codex").exists()
