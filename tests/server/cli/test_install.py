"""`dreamwell install CLIENT`: each client's documented config file for Linux, macOS and
Windows layouts (temporary homes), merged without losing a key, with a backup, idempotent,
a bad file left untouched, `--dry-run` and `--uninstall`."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from dreamwell.server.cli.install import HOOK_EVENTS, InstallError, Where, apply, plan
from dreamwell.server.hooks import client as hook_client
from dreamwell.server.hooks.events import EVENTS
from tests.support.cli import dreamwell

CMD = "/opt/dw/bin/dreamwell"
HOOK_NAMES = tuple(HOOK_EVENTS.values())  # Claude Code's names of the hooks' events
# a hook on POSIX: this interpreter runs the lean client (server/hooks/client.py)
HOOK = f"{shlex.quote(sys.executable)} -I -S {shlex.quote(str(Path(hook_client.__file__)))}"
EXPECTED = {  # (client, platform) -> the files written, relative to the home
    ("claude-code", "linux"): [".claude.json", ".claude/settings.json"],
    ("claude-code", "darwin"): [".claude.json", ".claude/settings.json"],
    ("claude-code", "win32"): [".claude.json", ".claude/settings.json"],
    ("claude-desktop", "linux"): [".config/Claude/claude_desktop_config.json"],
    ("claude-desktop", "darwin"): ["Library/Application Support/Claude/claude_desktop_config.json"],
    ("claude-desktop", "win32"): ["AppData/Roaming/Claude/claude_desktop_config.json"],
    ("cursor", "linux"): [".cursor/mcp.json"],
    ("cursor", "darwin"): [".cursor/mcp.json"],
    ("cursor", "win32"): [".cursor/mcp.json"],
    ("vscode", "linux"): [".config/Code/User/mcp.json"],
    ("vscode", "darwin"): ["Library/Application Support/Code/User/mcp.json"],
    ("vscode", "win32"): ["AppData/Roaming/Code/User/mcp.json"],
}


def where(platform: str, home: Path) -> Where:
    return Where(platform, home, home / "AppData" / "Roaming" if platform == "win32" else None)


def run(
    client: str, home: Path, platform: str = "linux", *, project: Path | None = None, **kw: Any
) -> str:
    said: list[str] = []
    remove = kw.pop("remove", False)
    changes = plan(client, where(platform, home), CMD, kw.pop("data_dir", None), project, remove)
    apply(changes, kw.pop("dry_run", False), said.append, remove)
    return "".join(said)


def read(path: Path) -> dict[str, Any]:
    return dict(json.loads(path.read_text()))


@pytest.mark.parametrize(("client", "platform"), list(EXPECTED))
def test_each_client_gets_its_documented_file_and_key_on_each_platform(
    client: str, platform: str, tmp_path: Path
) -> None:
    run(client, tmp_path, platform)
    written = sorted(
        str(p.relative_to(tmp_path)).replace(os.sep, "/")
        for p in tmp_path.rglob("*")
        if p.is_file()
    )
    assert written == sorted(EXPECTED[(client, platform)])
    config = read(tmp_path / EXPECTED[(client, platform)][0])
    key = "servers" if client == "vscode" else "mcpServers"
    entry = config[key]["dreamwell"]
    assert entry["command"] == CMD and entry["args"] == ["serve"]
    assert ("type" in entry) == (client in ("claude-code", "vscode"))


def test_claude_code_gets_the_five_hooks_with_a_timeout(tmp_path: Path) -> None:
    run("claude-code", tmp_path, data_dir=Path("/data/my dw"))
    hooks = read(tmp_path / ".claude" / "settings.json")["hooks"]
    assert set(hooks) == {"SessionStart", "UserPromptSubmit", "Stop", "PreCompact", "SessionEnd"}
    [[prompt]] = [g["hooks"] for g in hooks["UserPromptSubmit"]]
    assert prompt == {
        "type": "command",
        "command": f"{HOOK} user-prompt --data-dir '/data/my dw'",
        "timeout": 10,
    }
    server = read(tmp_path / ".claude.json")["mcpServers"]["dreamwell"]
    assert server["env"] == {"DREAMWELL_DATA_DIR": "/data/my dw"}


def test_merging_keeps_every_other_key_and_a_backup(tmp_path: Path) -> None:
    config = tmp_path / ".claude.json"
    before = {
        "numStartups": 41,
        "mcpServers": {
            "github": {"command": "gh-mcp"},
            "dreamwell": {"command": "old/dreamwell", "env": {"DREAMWELL_EMBEDDER": "none"}},
        },
        "projects": {"/x": {"allowedTools": []}},
    }
    config.write_text(json.dumps(before))
    settings = tmp_path / ".claude" / "settings.json"
    settings.parent.mkdir()
    mine = {"type": "command", "command": "notify-send hi"}
    settings.write_text(json.dumps({"model": "opus", "hooks": {"Stop": [{"hooks": [mine]}]}}))
    run("claude-code", tmp_path)
    after = read(config)
    assert after["numStartups"] == 41 and after["projects"] == before["projects"]
    assert after["mcpServers"]["github"] == {"command": "gh-mcp"}
    assert after["mcpServers"]["dreamwell"]["command"] == CMD
    assert after["mcpServers"]["dreamwell"]["env"] == {"DREAMWELL_EMBEDDER": "none"}  # kept
    assert read(config.with_name(".claude.json.dreamwell.bak")) == before
    hooks = read(settings)
    assert hooks["model"] == "opus"
    assert [h["command"] for g in hooks["hooks"]["Stop"] for h in g["hooks"]] == [
        "notify-send hi",
        f"{HOOK} stop",
    ]


def test_a_second_install_changes_nothing(tmp_path: Path) -> None:
    run("claude-code", tmp_path)
    files = {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
    assert run("claude-code", tmp_path) == "already as asked; nothing to change\n"
    assert {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()} == files


@pytest.mark.parametrize("bad", ["{not json", "[1, 2]", '{"mcpServers": [1]}'])
def test_a_file_that_is_not_a_json_object_is_left_untouched(bad: str, tmp_path: Path) -> None:
    config = tmp_path / ".claude.json"
    config.write_text('{"ok": true}')
    settings = tmp_path / ".claude" / "settings.json"
    settings.parent.mkdir()
    settings.write_text(bad.replace("mcpServers", "hooks"))
    with pytest.raises(InstallError, match="nothing was changed") as err:
        run("claude-code", tmp_path)
    assert "\n" not in str(err.value) and str(settings) in str(err.value)
    assert config.read_text() == '{"ok": true}'  # the good file was not written either
    assert settings.read_text() == bad.replace("mcpServers", "hooks")
    assert not list(tmp_path.rglob("*.bak"))


def test_dry_run_prints_the_diff_and_writes_nothing(tmp_path: Path) -> None:
    (tmp_path / ".cursor").mkdir()
    (tmp_path / ".cursor" / "mcp.json").write_text('{"mcpServers": {}}')
    out = run("cursor", tmp_path, dry_run=True)
    assert out.startswith(f"--- {tmp_path}/.cursor/mcp.json\n+++ ")
    assert f'+    "dreamwell": {{\n+      "command": "{CMD}",' in out
    assert (tmp_path / ".cursor" / "mcp.json").read_text() == '{"mcpServers": {}}'


def test_uninstall_removes_only_what_install_wrote(tmp_path: Path) -> None:
    settings = tmp_path / ".claude" / "settings.json"
    settings.parent.mkdir()
    mine = {"type": "command", "command": "notify-send hi"}
    settings.write_text(json.dumps({"hooks": {"Stop": [{"hooks": [mine]}]}}))
    (tmp_path / ".claude.json").write_text(json.dumps({"mcpServers": {"gh": {"command": "g"}}}))
    run("claude-code", tmp_path)
    run("claude-code", tmp_path, remove=True)
    assert read(settings) == {"hooks": {"Stop": [{"hooks": [mine]}]}}
    assert read(tmp_path / ".claude.json") == {"mcpServers": {"gh": {"command": "g"}}}
    assert run("claude-code", tmp_path, remove=True) == "already as asked; nothing to change\n"


def test_project_configs_go_into_the_project(tmp_path: Path) -> None:
    home, project = tmp_path / "home", tmp_path / "proj"
    project.mkdir()
    run("claude-code", home, project=project)
    run("cursor", home, project=project)
    run("vscode", home, project=project)
    assert not home.exists()
    assert "dreamwell" in read(project / ".mcp.json")["mcpServers"]
    assert "UserPromptSubmit" in read(project / ".claude" / "settings.json")["hooks"]
    assert "dreamwell" in read(project / ".cursor" / "mcp.json")["mcpServers"]
    assert read(project / ".vscode" / "mcp.json")["servers"]["dreamwell"]["type"] == "stdio"
    with pytest.raises(InstallError, match="no per-project config"):
        run("claude-desktop", home, project=project)


def test_windows_hook_commands_quote_paths_with_spaces(tmp_path: Path) -> None:
    changes = plan(
        "claude-code",
        where("win32", tmp_path),
        r"C:\Program Files\dw\dreamwell.exe",
        None,
        None,
        False,
    )
    apply(changes, False, lambda _: None)
    hooks = read(tmp_path / ".claude" / "settings.json")["hooks"]
    command = hooks["SessionEnd"][0]["hooks"][0]["command"]
    assert command == r'"C:\Program Files\dw\dreamwell.exe" hook session-end'


def install(*args: str, home: Path) -> subprocess.CompletedProcess[str]:
    """`dreamwell install ARGS` with `home` as the user's home and no data dir set."""
    env = {"HOME": str(home), "XDG_CONFIG_HOME": str(home / ".config")}
    env["XDG_DATA_HOME"] = str(home / ".local" / "share")
    return dreamwell("install", *args, env=env, unset=["DREAMWELL_DATA_DIR"], timeout=60)


def test_the_command_writes_says_and_fails_in_one_line(tmp_path: Path) -> None:
    done = install("cursor", home=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout == (
        f"updated {tmp_path}/.cursor/mcp.json\n"
        "Restart Cursor (quit it and open it again): it starts using dreamwell then.\n"
    )
    entry = read(tmp_path / ".cursor" / "mcp.json")["mcpServers"]["dreamwell"]
    assert "env" not in entry  # the default data directory needs no setting
    (tmp_path / ".cursor" / "mcp.json").write_text("{oops")
    bad = install("cursor", home=tmp_path)
    assert bad.returncode == 1 and bad.stderr.count("\n") == 1 and "not valid JSON" in bad.stderr
    nowhere = install("vscode", "--project", str(tmp_path / "missing"), home=tmp_path)
    assert nowhere.returncode == 2 and "is not a directory" in nowhere.stderr


def test_claude_code_gets_the_permission_rule_for_dreamwells_tools_once(tmp_path: Path) -> None:
    settings = tmp_path / ".claude" / "settings.json"
    settings.parent.mkdir()
    settings.write_text(json.dumps({"permissions": {"allow": ["Bash(make:*)"], "deny": ["X"]}}))
    run("claude-code", tmp_path)
    assert read(settings)["permissions"] == {
        "allow": ["Bash(make:*)", "mcp__dreamwell"],
        "deny": ["X"],
    }
    assert run("claude-code", tmp_path) == "already as asked; nothing to change\n"
    run("claude-code", tmp_path, remove=True)
    assert read(settings) == {"permissions": {"allow": ["Bash(make:*)"], "deny": ["X"]}}


def test_no_allow_installs_without_the_permission_rule(tmp_path: Path) -> None:
    changes = plan("claude-code", where("linux", tmp_path), CMD, None, None, False, allow=False)
    apply(changes, False, lambda _: None)
    settings = read(tmp_path / ".claude" / "settings.json")
    assert "permissions" not in settings and "SessionStart" in settings["hooks"]


def test_uninstall_leaves_no_empty_key_it_emptied(tmp_path: Path) -> None:
    (tmp_path / ".claude.json").write_text(json.dumps({"numStartups": 3}))
    run("claude-code", tmp_path)
    run("claude-code", tmp_path, remove=True)
    assert read(tmp_path / ".claude.json") == {"numStartups": 3}
    assert not (tmp_path / ".claude" / "settings.json").exists()  # install made it: gone


def test_uninstall_leaves_no_empty_file_and_no_token_in_a_backup(tmp_path: Path) -> None:
    """Issue 56: `--uninstall` left `{}` files install had created, and `.dreamwell.bak`
    copies holding the hooks' bearer token."""
    (tmp_path / ".claude.json").write_text(json.dumps({"numStartups": 3}))
    run("claude-code", tmp_path)
    said = run("claude-code", tmp_path, remove=True)
    assert f"removed {tmp_path}/.claude/settings.json" in said
    assert not (tmp_path / ".claude" / "settings.json").exists()
    assert read(tmp_path / ".claude.json") == {"numStartups": 3}
    assert list(tmp_path.rglob("*.dreamwell.bak")) == []  # what install kept goes with it


def test_a_symlinked_config_keeps_its_link_and_a_device_is_refused(tmp_path: Path) -> None:
    dotfiles = tmp_path / "dotfiles"
    dotfiles.mkdir()
    (dotfiles / "mcp.json").write_text('{"mcpServers": {}}')
    (tmp_path / ".cursor").mkdir()
    link = tmp_path / ".cursor" / "mcp.json"
    link.symlink_to(dotfiles / "mcp.json")
    run("cursor", tmp_path)
    assert link.is_symlink()
    assert "dreamwell" in read(dotfiles / "mcp.json")["mcpServers"]
    link.unlink()
    os.mkfifo(link)
    with pytest.raises(InstallError, match="is not a regular file; nothing was changed"):
        run("cursor", tmp_path)


def test_a_permissions_allow_that_is_not_a_list_is_left_untouched(tmp_path: Path) -> None:
    settings = tmp_path / ".claude" / "settings.json"
    settings.parent.mkdir()
    settings.write_text('{"permissions": {"allow": "mcp__x"}}')
    with pytest.raises(InstallError, match=r"'permissions\.allow' is not a JSON array"):
        run("claude-code", tmp_path)
    assert settings.read_text() == '{"permissions": {"allow": "mcp__x"}}'


def test_claude_code_keeps_the_skills_as_folders_until_uninstalled(tmp_path: Path) -> None:
    data = tmp_path / ".local" / "share" / "dreamwell"
    source = tmp_path / "src" / "go-release"
    source.mkdir(parents=True)
    text = "---\nname: go-release\ndescription: Cut a Go release\n---\n\nRun make release.\n"
    (source / "SKILL.md").write_text(text)
    assert dreamwell("skills", "import", str(source), "--data-dir", str(data)).returncode == 0
    done = install("claude-code", home=tmp_path)
    assert done.returncode == 0, done.stderr
    folder = tmp_path / ".claude" / "skills" / "go-release"
    assert "Run make release." in (folder / "SKILL.md").read_text()
    assert f"kept the active skills as folders in {folder.parent} (1 written)" in done.stdout
    again = install("claude-code", home=tmp_path)
    assert "(0 written)" in again.stdout and "nothing to change" in again.stdout
    gone = install("claude-code", "--uninstall", home=tmp_path)
    assert gone.returncode == 0 and not folder.exists()
    assert f"removed 1 skill folders dreamwell wrote in {folder.parent}" in gone.stdout


def test_hooks_written_before_the_lean_client_are_replaced_and_uninstalled(
    tmp_path: Path,
) -> None:
    """`dreamwell hook EVENT` (what install wrote before, and still writes on Windows) is
    ours: a new install replaces it with the client, --uninstall removes either."""
    settings = tmp_path / ".claude" / "settings.json"
    settings.parent.mkdir()
    old = {"type": "command", "command": f"{CMD} hook stop", "timeout": 10}
    mine = {"type": "command", "command": "notify-send hi"}
    settings.write_text(json.dumps({"hooks": {"Stop": [{"hooks": [old]}, {"hooks": [mine]}]}}))
    run("claude-code", tmp_path)
    stop = [h["command"] for g in read(settings)["hooks"]["Stop"] for h in g["hooks"]]
    assert stop == ["notify-send hi", f"{HOOK} stop"]
    settings.write_text(json.dumps({"hooks": {"Stop": [{"hooks": [old]}, {"hooks": [mine]}]}}))
    run("claude-code", tmp_path, remove=True)
    assert read(settings)["hooks"] == {"Stop": [{"hooks": [mine]}]}


def test_every_claude_code_hook_is_a_command_and_the_silent_ones_run_in_the_background(
    tmp_path: Path,
) -> None:
    """No `http` hook, no URL, no token: each event runs the lean client, which reaches the
    resident over the user's own Unix socket; Claude Code does not wait for the hooks that
    print nothing (`async`) but the stop: a `claude -p` run ending during an async stop
    cancelled it and then waited ~1.4 s (4 of 10 runs). Install twice changes nothing;
    uninstall takes exactly ours."""
    settings = tmp_path / ".claude" / "settings.json"
    settings.parent.mkdir()
    theirs = {"type": "http", "url": "http://127.0.0.1:9000/audit"}
    settings.write_text(json.dumps({"hooks": {"Stop": [{"hooks": [theirs]}]}}))
    for i, remove in enumerate((False, False, True)):
        said = run("claude-code", tmp_path, remove=remove)
        if remove:
            continue
        assert (said == "already as asked; nothing to change\n") == (i == 1), said
        hooks = read(settings)["hooks"]
        ours = {n: [h for g in v for h in g["hooks"] if h != theirs] for n, v in hooks.items()}
        background = {"PreCompact", "SessionEnd"}
        assert ours == {
            name: [
                {"type": "command", "command": f"{HOOK} {event}", "timeout": 10}
                | ({"async": True} if name in background else {})
            ]
            for event, name in zip(EVENTS, HOOK_NAMES, strict=True)
        }
        assert "Bearer" not in settings.read_text()
    assert read(settings)["hooks"] == {"Stop": [{"hooks": [theirs]}]}


def old_install(home: Path, token: str) -> dict[str, Any]:
    """settings.json as an earlier version's install left it: its hooks posts to the HTTP
    door with the token, beside a hook of the user's."""
    mine = {"type": "command", "command": "notify-send hi"}
    hooks: dict[str, Any] = {
        name: [{"hooks": [{"type": "command", "command": f"{HOOK} session-start"}]}]
        if event == "session-start"
        else [
            {
                "hooks": [
                    {
                        "type": "http",
                        "url": f"http://127.0.0.1:23456/dreamwell/hook/{event}",
                        "headers": {"Authorization": f"Bearer {token}"},
                        "timeout": 10,
                    }
                ]
            }
        ]
        for event, name in zip(EVENTS, HOOK_NAMES, strict=True)
    }
    hooks["Stop"].insert(0, {"hooks": [mine]})
    return {"hooks": hooks, "model": "opus"}


@pytest.mark.parametrize("remove", [False, True])
def test_an_earlier_version_s_http_hooks_are_replaced_or_removed_and_no_backup_keeps_the_token(
    tmp_path: Path, remove: bool
) -> None:
    token = "T" * 32
    settings = tmp_path / ".claude" / "settings.json"
    settings.parent.mkdir()
    settings.write_text(json.dumps(old_install(tmp_path, token)))
    backup = settings.with_name("settings.json.dreamwell.bak")
    backup.write_text(json.dumps(old_install(tmp_path, token)))  # an earlier install's
    run("claude-code", tmp_path, remove=remove)
    assert backup.exists() != remove  # an uninstall removes the backups install kept
    for path in (settings, backup) if not remove else (settings,):
        text = path.read_text()
        assert token not in text and "/dreamwell/hook/" not in text, path
        assert read(path)["model"] == "opus"
        stop = [h["command"] for g in read(path)["hooks"]["Stop"] for h in g["hooks"]]
        assert stop[0] == "notify-send hi"
    kinds = {h["type"] for v in read(settings)["hooks"].values() for g in v for h in g["hooks"]}
    assert kinds == {"command"}
    if remove:
        mine = {"type": "command", "command": "notify-send hi"}
        assert read(settings)["hooks"] == {"Stop": [{"hooks": [mine]}]}


def test_install_writes_no_door_and_takes_command_hooks_as_a_no_op_that_says_so(
    tmp_path: Path,
) -> None:
    env = {"HOME": str(tmp_path), "XDG_DATA_HOME": str(tmp_path / "data")}
    env["XDG_CONFIG_HOME"] = str(tmp_path / ".config")
    door = tmp_path / "data" / "dreamwell" / "hook-door.json"
    door.parent.mkdir(parents=True)
    door.write_text('{"port": 23456, "token": "an-earlier-version-s-token"}')
    settings = tmp_path / ".claude" / "settings.json"
    plain = dreamwell("install", "claude-code", "--dry-run", env=env, unset=["DREAMWELL_DATA_DIR"])
    assert plain.returncode == 0 and "http" not in plain.stdout, plain.stderr
    done = dreamwell(
        "install", "claude-code", "--command-hooks", env=env, unset=["DREAMWELL_DATA_DIR"]
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr == (
        "dreamwell: --command-hooks is no longer needed: every hook is a command now\n"
    )
    hooks = read(settings)["hooks"]
    assert {h["type"] for v in hooks.values() for g in v for h in g["hooks"]} == {"command"}
    assert not door.exists()  # the earlier version's token went with its hooks
