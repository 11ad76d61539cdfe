"""On a read-only data directory (a read-only bind mount: as root, chmod does not bite) every
write and the `dream` prompt refuse in one line that names the read-only mount, `dream --once`
prints one line, and `doctor` tells the mount from a permissions problem. CI runs as root, so
these run there; elsewhere they are skipped with the reason."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError

from tests.support.calls import fails, ok
from tests.support.readonly import read_only_server, seed, tree

pytestmark = pytest.mark.anyio
ENV = {**os.environ, "DREAMWELL_EMBEDDER": "none"}
MOUNT = 'mount --bind "$1" "$1" && mount -o remount,bind,ro "$1" "$1" && shift && exec "$@"'


def in_read_only_mount(data: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    """`dreamwell ARGV --data-dir DATA` with DATA bind-mounted read-only in a private mount
    namespace (gone with the process)."""
    unshare = shutil.which("unshare")
    if os.geteuid() != 0 or unshare is None:
        pytest.skip("a read-only bind mount needs root and unshare (CI runs as root)")
    if subprocess.run([unshare, "-m", "true"], capture_output=True, check=False).returncode:
        pytest.skip("mount namespaces are not permitted here: cannot make a read-only mount")
    command = [unshare, "-m", "sh", "-c", MOUNT, "sh", str(data), "dreamwell", *argv]
    return subprocess.run(
        [*command, "--data-dir", str(data)],
        capture_output=True,
        text=True,
        env=ENV,
        timeout=120,
        check=False,
    )


async def test_every_write_and_the_dream_prompt_say_the_directory_is_read_only(
    tmp_path: Path,
) -> None:
    data = tmp_path / "data"
    await seed(data)
    before = tree(data)
    with read_only_server(data) as params:
        if os.geteuid() != 0:
            pytest.skip("as a user, chmod makes a permissions problem, not a read-only mount")
        async with Client(params) as c:
            assert "Readable on a read-only disk" in await ok(c, "search_memory", query="disk")
            found = (await ok(c, "search_memory", query="disk")).split("[", 1)[1][:12]
            refusals = [
                await fails(c, "save_memory", content="cannot be written"),
                await fails(c, "delete_memory", id=found),
                await fails(c, "save_to_working_memory", key="k2", data="v"),
            ]
            for apply in ("yes", "no"):  # even a preview takes the dream lock and reports
                with pytest.raises(MCPError) as refused:
                    await c.get_prompt("dream", {"apply": apply})
                refusals.append(str(refused.value))
            recalled = await c.get_prompt("recall", {"message": "disk"})
            assert "Readable on a read-only disk" in recalled.messages[0].content.text  # type: ignore[union-attr]
    for text in refusals:
        assert "read-only" in text and "\n" not in text, text
        assert "Error rendering" not in text and "Traceback" not in text, text
    assert "read-only mount" in refusals[-1] and "Reads still work" in refusals[0]
    assert tree(data) == before


async def test_dream_once_prints_one_line_and_doctor_names_the_read_only_mount(
    tmp_path: Path,
) -> None:
    data = tmp_path / "data"
    await seed(data)
    before = tree(data)
    dreamed = in_read_only_mount(data, "dream", "--once")
    assert dreamed.returncode == 1 and dreamed.stdout == ""
    assert dreamed.stderr.count("\n") == 1 and "Traceback" not in dreamed.stderr
    assert "read-only mount" in dreamed.stderr, dreamed.stderr
    doctor = in_read_only_mount(data, "doctor")
    assert doctor.returncode == 1
    assert f"{data} is on a read-only mount ({data})" in doctor.stdout, doctor.stdout
    assert f"mount -o remount,rw {data}" in doctor.stdout and "chown" not in doctor.stdout
    assert tree(data) == before


def test_doctor_tells_a_permissions_problem_from_a_read_only_mount() -> None:
    """A directory this user may not write (doctor run as `nobody` via setpriv) is a
    permissions problem: chown is the fix there, not a remount."""
    setpriv = shutil.which("setpriv")
    if os.geteuid() != 0 or setpriv is None:
        pytest.skip("switching to another user needs root and setpriv (CI runs as root)")
    root = Path(tempfile.mkdtemp(prefix="dreamwell-perm-"))  # pytest's tmp is root-only
    try:
        root.chmod(0o755)  # nobody may reach it, not write it
        data = root / "data"
        data.mkdir(mode=0o755)
        as_nobody = [setpriv, "--reuid", "65534", "--regid", "65534", "--clear-groups"]
        program = shutil.which("dreamwell") or "dreamwell"
        doctor = subprocess.run(
            [*as_nobody, program, "doctor", "--data-dir", str(data)],
            capture_output=True,
            text=True,
            env=ENV,
            timeout=120,
            check=False,
        )
    finally:
        shutil.rmtree(root)
    assert doctor.returncode == 1, doctor.stderr
    assert f"{data} is not writable by this user (Permission denied)" in doctor.stdout
    assert f"chown -R $USER {data}" in doctor.stdout and "read-only" not in doctor.stdout
