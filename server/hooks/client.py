"""The command Claude Code runs for each hook on POSIX (install writes
`PYTHON -I -S .../dreamwell/server/hooks/client.py EVENT [FLAGS]`): it hands the hook to the
resident process of this configuration (resident.py) over a Unix socket and prints its answer,
so a hook costs a bare interpreter's start plus the work, not dreamwell's imports (the work is
~1-13 ms in a warm process; the imports were 150 ms on a quiet machine and seconds under load).

With no resident answering it starts one, detached, and runs the hook itself as
`dreamwell hook EVENT [FLAGS]` would: the socket is tried before stdin is read, so the
fallback gets the hook's input untouched. A resident that takes the input answers within
TIMEOUT or the hook prints nothing (Claude Code gives a hook 10 s, then goes on without it).

Every hook install writes for Claude Code is this command (no HTTP hook: nothing listens on a
port another user could take first), and what it may do is fixed by the flags install wrote
here: the resident takes none from a connection. The protocol is the event, this process's
directory and the hook's JSON, NUL-separated, over the socket; the answer is what the hook
prints.

Only builtin modules (`os`, `sys`, `_socket`): with -S there is no site-packages, and
whatever this file imports every hook pays. The resident's socket, lock and pid live in RUN_DIR (the
user's `$XDG_RUNTIME_DIR/dreamwell`, else `/tmp/dreamwell-UID`), a directory of the user's own
with mode 0700 (anything else and the hook runs without a resident); the configuration's key
names them (`key`)."""

from __future__ import annotations

import _socket
import os
import sys

TIMEOUT = 9.0  # seconds a resident has to answer (Claude Code waits 10 for a hook)
MAX_INPUT = 1024 * 1024  # bytes of hook JSON a hook reads from stdin (here and events.py)
KEYED_ENV = ("HOME", "XDG_DATA_HOME")  # besides DREAMWELL_*: where the data directory is


def run_dir() -> str:
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    return os.path.join(runtime, "dreamwell") if runtime else f"/tmp/dreamwell-{os.getuid()}"


def key(flags: list[str]) -> str:
    """The resident that serves hooks with these flags: one per data directory, tenant and
    settings (the flags without the event, the environment that chooses them), interpreter
    and version of this file (an upgrade starts a new resident; the old one idles out)."""
    env = sorted(
        f"{k}={v}" for k, v in os.environ.items() if k.startswith("DREAMWELL_") or k in KEYED_ENV
    )
    mine = os.stat(__file__)
    parts = [sys.executable, str(mine.st_mtime_ns), str(mine.st_size), *flags, "", *env]
    digest = 0xCBF29CE484222325  # 64-bit FNV-1a: hashlib would cost every hook its import
    for byte in "\0".join(parts).encode("utf-8", "surrogateescape"):
        digest = ((digest ^ byte) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return f"{digest:016x}"


def private(path: str, make: bool = False) -> bool:
    """Whether `path` is a directory of this user's that no one else may enter (made so when
    `make` and missing)."""
    if make:
        try:
            os.makedirs(path, mode=0o700)
        except FileExistsError:
            pass
        except OSError:
            return False
    try:
        found = os.lstat(path)
    except OSError:
        return False
    return (
        (found.st_mode & 0o170000) == 0o040000
        and found.st_uid == os.getuid()
        and not found.st_mode & 0o077
    )


def connect(path: str) -> _socket.socket | None:
    sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    sock.settimeout(TIMEOUT)
    try:
        sock.connect(path)
    except OSError:  # none there, a stale socket, a path too long: no resident
        sock.close()
        return None
    return sock


def ask(sock: _socket.socket, event: str, raw: bytes) -> bytes:
    """The resident's answer to one hook ("" when it fails or takes too long): it is sent the
    event, this process's directory (where Claude Code ran the hook: the project when the
    hook's JSON names none) and the JSON, NUL-separated."""
    try:
        here = os.getcwd()
    except OSError:  # removed meanwhile
        here = ""
    try:
        sock.sendall(b"\0".join([event.encode(), os.fsencode(here), raw]))
        sock.shutdown(_socket.SHUT_WR)
        chunks = []
        while chunk := sock.recv(65536):
            chunks.append(chunk)
    except OSError:
        return b""
    finally:
        sock.close()
    return b"".join(chunks)


def may_start(where: str, name: str) -> bool:
    """Whether a resident of key `name` may be started in `where`: none refused its flags,
    and the directory is this user's own (made so when missing)."""
    return not os.path.exists(os.path.join(where, name + ".refused")) and private(where, True)


def start_resident(where: str, name: str, args: list[str]) -> bool:
    """A detached `python -m dreamwell.server.hooks.resident NAME ARGS` (it gives up at once
    when another holds the configuration's lock), its stdio on /dev/null so that Claude Code,
    which reads the hook's output to its end, never waits for it; whether one was started."""
    if not may_start(where, name):
        return False
    if os.fork():
        return True
    try:  # the child
        os.setsid()
        null = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(null, fd)
        module = "dreamwell.server.hooks.resident"
        os.execv(sys.executable, [sys.executable, "-m", module, name, *args])
    finally:
        os._exit(0)


def main(args: list[str]) -> int:
    os.umask(0o077)  # what this process and its children create is private (stores/files.py)
    where = run_dir()
    name = key(args[1:])
    sock = connect(os.path.join(where, name + ".sock")) if args and private(where) else None
    if sock is None:  # none answers (not started yet, idled out, killed): start one, and
        if args:  # run this hook as `dreamwell hook` itself, so that none is lost
            start_resident(where, name, args)
        os.execv(sys.executable, [sys.executable, "-m", "dreamwell.server", "hook", *args])
    out = ask(sock, args[0], sys.stdin.buffer.read(MAX_INPUT))
    while out:
        out = out[os.write(1, out) :]
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
