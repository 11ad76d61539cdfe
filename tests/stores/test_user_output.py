"""A path the user names (`dreamwell export -o PATH`) is written as they meant it: through a
symlink to its target, into a device or FIFO directly, never renamed over (issue 56 item 2:
`export -o /dev/null` run as root replaced the machine's /dev/null with a regular file)."""

from __future__ import annotations

import os
import stat
import threading
from pathlib import Path

import pytest

from dreamwell.stores import NotWritable, user_output
from tests.support.cli import exit_code


def null_device(tmp_path: Path) -> Path:
    """A character device like /dev/null (1, 3), made in the test's own directory."""
    if os.geteuid() != 0:
        pytest.skip("making a device node needs root (CI runs as root)")
    node = tmp_path / "null"
    os.mknod(node, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
    node.chmod(0o666)  # as /dev/null is (mknod's mode passes through the umask)
    return node


def test_export_to_a_device_writes_through_it_and_leaves_it_a_device(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DREAMWELL_EMBEDDER", "none")
    node = null_device(tmp_path)
    source = tmp_path / "one.jsonl"
    source.write_text('{"content": "hello"}\n')
    data = str(tmp_path / "d")
    assert exit_code("import", str(source), "--data-dir", data) == 0
    assert exit_code("export", "--data-dir", data, "-o", str(node)) == 0
    assert "exported 1 memories" in capsys.readouterr().err
    assert stat.S_ISCHR(os.lstat(node).st_mode)  # still the device, not a regular file
    assert os.lstat(node).st_rdev == os.makedev(1, 3)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["d", "null", "one.jsonl"]


def test_a_fifo_is_written_through_not_replaced(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()))
    reader.start()
    with user_output(fifo) as out:
        out.write("line 1\n")
    reader.join(timeout=30)
    assert got == [b"line 1\n"]
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)


def test_a_symlink_is_kept_and_its_target_replaced_whole(tmp_path: Path) -> None:
    target = tmp_path / "dotfiles" / "memories.jsonl"
    target.parent.mkdir()
    target.write_text("old\n")
    target.chmod(0o600)
    link = tmp_path / "memories.jsonl"
    link.symlink_to(target)
    with user_output(link) as out:
        out.write("new\n")
    assert link.is_symlink() and os.readlink(link) == str(target)
    assert target.read_text() == "new\n"
    assert stat.S_IMODE(target.stat().st_mode) == 0o600
    assert sorted(p.name for p in target.parent.iterdir()) == ["memories.jsonl"]


def test_a_failed_write_leaves_the_old_file_and_no_partial(tmp_path: Path) -> None:
    path = tmp_path / "out.jsonl"
    path.write_text("old\n")
    with pytest.raises(RuntimeError), user_output(path) as out:
        out.write("half")
        raise RuntimeError("disk full")
    assert path.read_text() == "old\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.jsonl"]


def test_a_directory_is_refused(tmp_path: Path) -> None:
    with pytest.raises(NotWritable, match="it is a directory"), user_output(tmp_path):
        pass
    assert list(tmp_path.iterdir()) == []


def test_a_skill_export_writes_into_a_device_but_never_changes_its_mode(tmp_path: Path) -> None:
    """`skills export --to DIR` where DIR/<name>/SKILL.md is a device: written through, and
    its mode left alone (it was chmod-ed 0644 like a file)."""
    from dreamwell.stores.skills.folders import write_folder

    node = null_device(tmp_path)
    (tmp_path / "deploy").mkdir()
    os.rename(node, tmp_path / "deploy" / "SKILL.md")
    write_folder(tmp_path, "deploy", {"SKILL.md": b"---\nname: deploy\n---\n"})
    found = os.lstat(tmp_path / "deploy" / "SKILL.md")
    assert stat.S_ISCHR(found.st_mode) and stat.S_IMODE(found.st_mode) == 0o666
