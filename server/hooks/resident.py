"""The resident hook process: one per configuration (client.py's key), started detached by
the first hook that found none, answering hooks over a Unix socket with the modules already
imported, until it has been idle for IDLE seconds or another resident took its socket.

    python -m dreamwell.server.hooks.resident KEY EVENT [FLAGS]

One hook at a time, each exactly as `dreamwell hook` runs it (events.hook_output, so hooks.log
and every record are the same; its line ends "(resident)"), with the flags it was started
with and the settings they give (read once: flags and environment are fixed for its key).
A connection that sends nothing for CONN_WAIT seconds is dropped. A second resident of the
same key gives up at once (the key's lock), as does one whose flags only argparse could judge:
it leaves `KEY.refused` so that hooks stop starting it, and they keep running as processes."""

from __future__ import annotations

import contextlib
import fcntl
import os
import socket
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from dreamwell.server.hooks.client import MAX_INPUT, private, run_dir

IDLE = 3600.0  # seconds without a hook before the resident exits
CONN_WAIT = 2.0  # seconds a connection may take to send its hook
TICK = 30.0  # seconds between checks that the socket is still there
HEAD = 8192  # bytes at most before the hook JSON: the event and the hook's directory


def answerer(args: list[str]) -> Callable[[str, bytes], bytes] | None:
    """How this resident answers a hook (event, hook JSON) -> output, with the flags it was
    started with; None when they are not the plain flags install writes."""
    from dreamwell.server.hooks import settings as hook_settings
    from dreamwell.server.hooks.entry import plain_arguments
    from dreamwell.server.hooks.events import EVENTS, hook_output

    parsed = plain_arguments(args)
    if parsed is None:
        return None
    given = {k: v for k, v in parsed.items() if k not in ("event", "tenant", "data_dir")}
    try:
        settings = hook_settings.read(parsed["data_dir"], given)
    except hook_settings.NotPlain:
        return None
    _warm()

    def answer(event: str, raw: bytes) -> bytes:
        if event not in EVENTS:
            return b""
        return hook_output(settings, event, parsed["tenant"], raw, " (resident)").encode()

    return answer


def _warm() -> None:
    """Import now what the events import when first called (the point of being resident):
    the first session-start took 79 ms in a fresh resident without this, 7 ms after."""
    import importlib

    for module in (
        "dreamwell.server.auto_dream",
        "dreamwell.server.hooks.skills",
        "dreamwell.server.hooks.transcript",
        "dreamwell.server.mcp.recall_text",
        "dreamwell.stores.hooks.quick_recall",
        "dreamwell.stores.index.hybrid_rank",
        "dreamwell.stores.index.relevance",
        "dreamwell.stores.index.text_index",
        "dreamwell.stores.working.memory",
    ):
        importlib.import_module(module)


@contextlib.contextmanager
def holding(path: Path) -> Iterator[bool]:
    """Whether this process holds the key's lock (taken without waiting) while inside."""
    fd = os.open(path, os.O_CREAT | os.O_RDWR, 0o600)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            yield False
            return
        yield True
    finally:
        os.close(fd)


def listen(path: Path) -> socket.socket:
    path.unlink(missing_ok=True)  # a dead resident's (we hold the lock)
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(path))
    os.chmod(path, 0o600)
    server.listen(64)
    return server


def receive(conn: socket.socket) -> tuple[str, bytes] | None:
    """(event, hook JSON) of one connection, in the directory the hook ran in (this process
    changes to it: one hook at a time); None when it sends nothing in time or too much."""
    conn.settimeout(CONN_WAIT)
    chunks, size = [], 0
    try:
        while chunk := conn.recv(65536):
            chunks.append(chunk)
            size += len(chunk)
            if size > MAX_INPUT + HEAD:
                return None
    except OSError:
        return None
    event, _, rest = b"".join(chunks).partition(b"\0")
    here, _, raw = rest.partition(b"\0")
    try:
        os.chdir(os.fsdecode(here) or "/")
    except OSError:  # gone, or not a directory: no project from it
        os.chdir("/")
    return event.decode("ascii", "replace"), raw


def serve(
    server: socket.socket,
    path: Path,
    answer: Callable[[str, bytes], bytes],
    idle: float = IDLE,
) -> None:
    """Answer hooks one at a time until idle for `idle` seconds or the socket at `path` is
    gone (a cleaner of /tmp); when idle, the socket is removed first (a hook from then on
    runs as a process) and the hooks that connected meanwhile are still answered."""
    last = time.monotonic()
    server.settimeout(min(TICK, idle))
    while time.monotonic() - last < idle:
        try:
            conn, _ = server.accept()
        except TimeoutError:
            if not path.exists():
                return
            continue
        _answer_one(conn, answer)
        last = time.monotonic()
    path.unlink(missing_ok=True)
    server.settimeout(0.0)
    while True:
        try:
            conn, _ = server.accept()
        except OSError:  # none waiting
            return
        _answer_one(conn, answer)


def _answer_one(conn: socket.socket, answer: Callable[[str, bytes], bytes]) -> None:
    with conn:
        got = receive(conn)
        if got is not None:
            with contextlib.suppress(OSError):
                conn.sendall(answer(*got))


def main(argv: list[str]) -> int:
    name, args = argv[0], argv[1:]
    where = Path(run_dir())
    if not private(str(where)):
        return 0
    with holding(where / (name + ".lock")) as held:
        if not held:
            return 0  # another resident serves this key
        answer = answerer(args)
        if answer is None:
            (where / (name + ".refused")).touch()
            return 0
        path = where / (name + ".sock")
        pid = where / (name + ".pid")
        server = listen(path)
        pid.write_text(f"{os.getpid()}\n", encoding="utf-8")
        try:
            serve(server, path, answer)
        finally:  # the lock is still held: what is at these paths is this resident's
            server.close()
            path.unlink(missing_ok=True)
            pid.unlink(missing_ok=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
