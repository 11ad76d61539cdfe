"""The data directory is the user's alone (issue 53, HIGH 4): another local user read
`hooks/entries.sqlite`, `lancedb/`, `wal/`, working memory and dream reports (0644 files in 0755
folders). What the real server, a hook, its refresher and a dream write is 0700/0600, and a
directory written before is tightened on start, said once."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import anyio
import pytest
from mcp import Client

from dreamwell.stores.files import make_private, write_atomic
from dreamwell.stores.layout import DataDir
from tests.support.calls import ok
from tests.support.hooks import hook, prompt, wait_for_refresher
from tests.support.other_user import other_user_or_skip, readable_by_other_user, traversable_dir
from tests.support.servers import stdio_params

TIGHTENED = "readable by this user only"


def everything(root: Path) -> list[Path]:
    return [root, *sorted(p for p in root.rglob("*") if not p.is_symlink())]


def open_to_others(root: Path) -> list[str]:
    return [
        f"{p} {stat.filemode(p.stat().st_mode)}"
        for p in everything(root)
        if p.stat().st_mode & 0o077
    ]


def dreamwell(data: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "dreamwell.server", *args, "--data-dir", str(data)],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "DREAMWELL_EMBEDDER": "none"},
        check=False,
    )


async def write_everything(data: Path) -> None:
    """A dream writes its report (first: after tool calls it waits for quiet); the real server
    saves a memory and working memory; a hook records a prompt, its refresher writes the hooks'
    snapshot."""
    assert dreamwell(data, "dream", "--once").returncode == 0
    async with Client(stdio_params(data)) as server:
        await ok(server, "save_memory", content="The deploy key is in the vault", category="ops")
        await ok(server, "save_to_working_memory", key="draft", data="half a reply")
        done = await anyio.to_thread.run_sync(hook, "user-prompt", prompt("s1", "deploy key"), data)
        assert done.returncode == 0, done
        await anyio.to_thread.run_sync(wait_for_refresher, data)


@pytest.mark.anyio
async def test_another_user_reads_nothing_we_wrote_and_an_old_directory_is_tightened_once() -> None:
    other_user_or_skip()
    with traversable_dir() as home:
        data = home / "data"
        await write_everything(data)
        dirs = DataDir(data)
        for wanted in (dirs.hook_entries, dirs.lancedb, dirs.wal, dirs.working, dirs.reports):
            assert wanted.exists(), wanted
        assert any(dirs.working.iterdir()) and any(dirs.reports.glob("*.json"))
        assert open_to_others(data) == []
        assert readable_by_other_user(everything(data)) == []

        # a directory an older dreamwell wrote: 0644 files in 0755 folders
        subprocess.run(["chmod", "-R", "go+rX", str(data)], check=True)
        dirs.private_marker.unlink()
        assert str(dirs.hook_entries) in readable_by_other_user([dirs.hook_entries])
        widened = len(everything(data))
        first = dreamwell(data, "stats")
        said = [line for line in first.stderr.splitlines() if TIGHTENED in line]
        assert len(said) == 1, first.stderr
        # every path, but the directory itself when a command shut it first, silently
        assert int(said[0].split("made ")[1].split()[0]) in (widened - 1, widened), said
        assert open_to_others(data) == []
        assert readable_by_other_user(everything(data)) == []
        again = dreamwell(data, "stats")
        assert again.returncode == 0 and TIGHTENED not in again.stderr, again.stderr


def test_atomic_writes_are_private_whatever_the_umask(tmp_path: Path) -> None:
    before = os.umask(0o022)
    try:
        write_atomic(tmp_path / "f.json", "{}")
        dirs = DataDir(tmp_path / "d")
        dirs.ensure()
    finally:
        os.umask(before)
    assert stat.S_IMODE((tmp_path / "f.json").stat().st_mode) == 0o600
    assert stat.S_IMODE(dirs.root.stat().st_mode) == 0o700


def test_tightening_keeps_the_owners_bits_and_leaves_links_alone(tmp_path: Path) -> None:
    root = tmp_path / "d"
    (root / "sub").mkdir(parents=True)
    (root / "sub" / "run.sh").write_text("")
    (root / "sub" / "run.sh").chmod(0o755)
    (root / "sub").chmod(0o755)
    outside = tmp_path / "outside"
    outside.write_text("")
    outside.chmod(0o644)
    (root / "link").symlink_to(outside)
    root.chmod(0o755)
    assert make_private(root) == 3  # root, sub, run.sh
    assert stat.S_IMODE((root / "sub" / "run.sh").stat().st_mode) == 0o700
    assert stat.S_IMODE(outside.stat().st_mode) == 0o644
    assert make_private(root) == 0


def test_without_the_walk_only_the_directory_is_shut_and_the_walk_comes_later(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    dirs = DataDir(tmp_path / "d")
    dirs.ensure()
    inside = dirs.root / "notes.json"
    inside.write_text("{}")
    for path in (dirs.root, inside):
        path.chmod(0o755)
    dirs.private_marker.unlink()
    dirs.ensure(walk=False)  # what a command does before a server's handshake
    assert stat.S_IMODE(dirs.root.stat().st_mode) == 0o700
    assert stat.S_IMODE(inside.stat().st_mode) == 0o755 and not caplog.records
    dirs.ensure()  # the store's opening
    assert stat.S_IMODE(inside.stat().st_mode) == 0o700
    assert [r.getMessage().split(" in ")[0] for r in caplog.records] == [
        "made 1 paths"
    ]  # notes.json
    dirs.ensure()
    assert len(caplog.records) == 1


def test_a_home_folder_given_as_the_data_directory_is_never_changed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    (home / "public_html").mkdir(parents=True)
    for path in (home, home / "public_html"):
        path.chmod(0o755)
    monkeypatch.setenv("HOME", str(home))
    for _ in range(2):  # --data-dir ~ by mistake, twice (then it holds format.json)
        DataDir(home).ensure()
    assert {stat.S_IMODE(p.stat().st_mode) for p in (home, home / "public_html")} == {0o755}
