"""The resident hook process: one per configuration (client.py's key), started detached by
the first hook that found none, answering hooks over a Unix socket in the user's own 0700
runtime directory with the modules already imported, until it has been idle for IDLE seconds
or another resident took its socket.

    python -m dreamwell.server.hooks.resident KEY EVENT [FLAGS]

What a hook may do is fixed by the flags it was started with (those install wrote in the hook
command, the key's): a connection carries only an event, a directory and the hook's JSON,
never a flag. Connections are read side by side, each within CONN_WAIT seconds of its accept
(a slow or silent sender is dropped and delays no other hook), at most MAX_PENDING at once;
the hooks themselves run one at a time, each exactly as `dreamwell hook` runs it
(events.hook_output, so hooks.log and every record are the same; its line ends "(resident)").
A hook that prints nothing is answered before its work and kept in `KEY.journal/` until that
work is done: a resident killed meanwhile leaves it to the next one, which does it first.
A second resident of the same key gives up at once (the key's lock), as does one whose flags
only argparse could judge: it leaves `KEY.refused` so that hooks stop starting it, and they
keep running as processes. At its start it deletes the data directory's `hook-door.json`, the
token of the HTTP door earlier versions opened (docs/claude-code.md). Unless the embedder is
`none`, it also opens the long-term store with its embedder on a thread (hybrid.py): the
prompt hook and the session start rank as `search_memory` does once that is done."""

from __future__ import annotations

import contextlib
import fcntl
import os
import select
import socket
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from dreamwell.server.hooks.client import MAX_INPUT, private, run_dir
from dreamwell.server.hooks.old_hooks import forget_door

IDLE = 3600.0  # seconds without a hook before the resident exits
CONN_WAIT = 2.0  # seconds from a connection's accept to the end of its hook's input
MAX_PENDING = 64  # connections read at once (more wait in the listen backlog)
TICK = 30.0  # seconds between checks that the socket is still there
HEAD = 8192  # bytes at most before the hook JSON: the event and the hook's directory
# the events whose hooks print nothing: answered (empty) before their work, so Claude Code,
# which waits for each (two of them at a `claude -p` run's end), goes on at once; the work
# is done before the next hook is taken, and one lost with this process is recorded by the
# session's next transcript hook (it reads from the offset the last one reached)
SILENT = frozenset({"stop", "pre-compact", "session-end"})

Answer = Callable[[str, bytes], bytes]


def answerer(args: list[str]) -> Answer | None:
    """How this resident answers a hook (event, hook JSON) -> output, with the flags it was
    started with; None when they are not the plain flags install writes."""
    from dreamwell.server.hooks import settings as hook_settings
    from dreamwell.server.hooks.agents.table import HOOK_EVENTS
    from dreamwell.server.hooks.events import hook_output
    from dreamwell.server.hooks.settings import plain_arguments

    parsed = plain_arguments(args)
    if parsed is None:
        return None
    given = {k: v for k, v in parsed.items() if k not in ("event", "tenant", "data_dir")}
    try:
        settings = hook_settings.read(parsed["data_dir"], given)
    except hook_settings.NotPlain:
        return None
    _warm()
    from dreamwell.server.hooks import hybrid

    if settings.embedder != "none":  # hybrid ranking, seconds from now
        hybrid.start(settings.data_dir, parsed["tenant"] or "", given)

    def answer(event: str, raw: bytes) -> bytes:
        if event not in HOOK_EVENTS:
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
        "dreamwell.server.recall_text",
        "dreamwell.stores.hooks.inject",
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
    server.setblocking(False)
    return server


class Reading:
    """One connection whose hook is being read: the bytes so far, and the time by which the
    sender must have sent all of them (CONN_WAIT after its accept)."""

    def __init__(self, conn: socket.socket, now: float) -> None:
        conn.setblocking(False)
        self.conn = conn
        self.chunks: list[bytes] = []
        self.size = 0
        self.deadline = now + CONN_WAIT

    def drain(self) -> bool | None:
        """Read what has arrived: True once the sender has finished (it shut its side),
        False while more may come, None when it must be dropped (too much, an error)."""
        while True:
            try:
                chunk = self.conn.recv(65536)
            except BlockingIOError:
                return False
            except OSError:
                return None
            if not chunk:
                return True
            self.chunks.append(chunk)
            self.size += len(chunk)
            if self.size > MAX_INPUT + HEAD:
                return None


def serve(
    server: socket.socket,
    path: Path,
    answer: Answer,
    idle: float = IDLE,
    journal: Path | None = None,
) -> None:
    """Answer hooks until idle for `idle` seconds or the socket at `path` is gone (a cleaner
    of /tmp). Connections are read side by side within their deadlines; each one whose
    input is whole is answered at once, one at a time. When idle the socket is removed
    first (a hook from then on runs as a process), and the hooks that connected meanwhile
    are still answered. `journal`: where a silent hook is kept from its answer to the end of
    its work (`replay`)."""
    reading: dict[socket.socket, Reading] = {}
    last = time.monotonic()
    listening = True
    while listening or reading:
        now = time.monotonic()
        waits = [TICK, idle - (now - last), *(r.deadline - now for r in reading.values())]
        taking = listening and len(reading) < MAX_PENDING
        watched = ([server] if taking else []) + list(reading)  # never empty here
        ready = select.select(watched, [], [], max(0.0, min(waits)))[0]
        if server in ready:
            _accept(server, reading)
        for conn in ready:
            if conn in reading and _step(reading, conn, answer, journal):
                last = time.monotonic()
        _expire(reading, answer, journal)
        if listening and (time.monotonic() - last >= idle or (not ready and not path.exists())):
            path.unlink(missing_ok=True)
            listening = False
            _accept(server, reading)  # those already waiting in the backlog


def _accept(server: socket.socket, reading: dict[socket.socket, Reading]) -> None:
    while len(reading) < MAX_PENDING:
        try:
            conn, _ = server.accept()
        except OSError:  # none waiting
            return
        reading[conn] = Reading(conn, time.monotonic())


def _step(
    reading: dict[socket.socket, Reading],
    conn: socket.socket,
    answer: Answer,
    journal: Path | None,
) -> bool:
    """Read one ready connection; answer its hook once whole (whether one was answered)."""
    state = reading[conn].drain()
    if state is False:
        return False
    got = reading.pop(conn)
    if state is None:
        conn.close()
        return False
    _answer_one(conn, b"".join(got.chunks), answer, journal)
    return True


def _expire(reading: dict[socket.socket, Reading], answer: Answer, journal: Path | None) -> None:
    """Drop the connections past their deadline, but answer those whose input arrived
    whole while another hook ran."""
    now = time.monotonic()
    for conn in [c for c, r in reading.items() if r.deadline <= now]:
        if reading[conn].drain() is True:
            _answer_one(conn, b"".join(reading.pop(conn).chunks), answer, journal)
        else:
            reading.pop(conn)
            conn.close()


def _answer_one(conn: socket.socket, got: bytes, answer: Answer, journal: Path | None) -> None:
    """One hook: its event, the directory it ran in (this process changes to it: one hook at
    a time) and its JSON, NUL-separated; a silent one's (empty) answer comes before its work,
    and it stays in the journal until that work is done."""
    event = got.partition(b"\0")[0].decode("ascii", "replace")
    with conn:
        conn.settimeout(CONN_WAIT)
        if event.rpartition(":")[2] not in SILENT:  # `gemini:stop` is silent too
            with contextlib.suppress(OSError):
                conn.sendall(_run(got, answer))
            return
        kept = _keep(journal, got)
    _run(got, answer)  # the client has its (empty) answer: the connection is closed
    if kept is not None:
        kept.unlink(missing_ok=True)


def _run(got: bytes, answer: Answer) -> bytes:
    event, _, rest = got.partition(b"\0")
    here, _, raw = rest.partition(b"\0")
    _enter(os.fsdecode(here))
    return answer(event.decode("ascii", "replace"), raw)


def _keep(journal: Path | None, got: bytes) -> Path | None:
    """`got` written to the journal (None: no journal, or it cannot be written)."""
    if journal is None:
        return None
    path = journal / f"{time.time_ns()}.hook"
    try:
        journal.mkdir(mode=0o700, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as out:
            out.write(got)
    except OSError:
        return None
    return path


def replay(journal: Path, answer: Answer) -> None:
    """The silent hooks an earlier resident of this key answered but died before doing (a
    `kill -9`, a crash): done now, oldest first, each once."""
    for path in sorted(journal.glob("*.hook")) if journal.is_dir() else []:
        try:
            got = path.read_bytes()
            path.unlink()
        except OSError:
            continue
        _run(got, answer)


def _enter(here: str) -> None:
    try:
        os.chdir(here or "/")
    except OSError:  # gone, or not a directory: no project from it
        os.chdir("/")


def main(argv: list[str]) -> int:
    os.umask(0o077)  # what this process and its children create is private (stores/files.py)
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
        forget_door(_data_dir(args))  # an earlier version's token
        path = where / (name + ".sock")
        pid = where / (name + ".pid")
        journal = where / (name + ".journal")
        replay(journal, answer)
        server = listen(path)
        pid.write_text(f"{os.getpid()}\n", encoding="utf-8")
        try:
            serve(server, path, answer, journal=journal)
        finally:  # the lock is still held: what is at these paths is this resident's
            server.close()
            path.unlink(missing_ok=True)
            pid.unlink(missing_ok=True)
    return 0


def _data_dir(args: list[str]) -> Path:
    from dreamwell.server.hooks import settings as hook_settings
    from dreamwell.server.hooks.settings import plain_arguments

    parsed = plain_arguments(args) or {}
    return hook_settings.data_dir(parsed.get("data_dir"))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
