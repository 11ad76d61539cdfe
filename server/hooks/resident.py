"""The resident hook process: one per configuration (client.py's key), started detached by
the first hook that found none, answering hooks over a Unix socket with the modules already
imported, until it has been idle for IDLE seconds or another resident took its socket.

    python -m dreamwell.server.hooks.resident KEY EVENT [FLAGS]

One hook at a time, each exactly as `dreamwell hook` runs it (events.hook_output, so hooks.log
and every record are the same; its line ends "(resident)"), with the flags it was started
with and the settings they give (read once: flags and environment are fixed for its key).
A connection that sends nothing for CONN_WAIT seconds is dropped. A second resident of the
same key gives up at once (the key's lock), as does one whose flags only argparse could judge:
it leaves `KEY.refused` so that hooks stop starting it, and they keep running as processes.

It also listens at the data directory's HTTP door when one was made (door.py: 127.0.0.1, the
door's port, its bearer token) and answers Claude Code's `http` hooks there the same way, the
session's text as the `additionalContext` of Claude Code's JSON; a port another holds leaves
it on its socket alone."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import select
import socket
import sys
import time
from collections.abc import Callable, Iterator
from http import HTTPStatus
from pathlib import Path

from dreamwell.server.hooks import door as hook_door
from dreamwell.server.hooks.client import MAX_INPUT, private, run_dir

IDLE = 3600.0  # seconds without a hook before the resident exits
CONN_WAIT = 2.0  # seconds a connection may take to send its hook
TICK = 30.0  # seconds between checks that the socket is still there
LEAVE_WAIT = 3.0  # seconds a new resident waits for an older one to leave the HTTP door
HEAD = 8192  # bytes at most before the hook JSON: the event and the hook's directory
# (and of an HTTP request's line and headers)
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
    from dreamwell.server.hooks import hybrid

    if settings.embedder != "none":  # hybrid ranking, seconds from now
        hybrid.start(settings.data_dir, parsed["tenant"] or "", given)

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
    _enter(os.fsdecode(here))
    return event.decode("ascii", "replace"), raw


def _enter(here: str) -> None:
    try:
        os.chdir(here or "/")
    except OSError:  # gone, or not a directory: no project from it
        os.chdir("/")


class HttpHooks:
    """The HTTP door's side of this resident: Claude Code's `http` hooks, each answered as
    the socket's are (`answers` gives the answer for a hook's extra flags; None: refused)."""

    def __init__(
        self, door: hook_door.Door, answers: Callable[[tuple[str, ...]], Answer | None]
    ) -> None:
        self.door = door
        self.answers = answers
        self.left = False  # asked to leave the door to a newer resident

    def handle(self, conn: socket.socket) -> None:
        with conn:
            status, body, work = self.respond(conn)
            head = (
                f"HTTP/1.1 {status} {HTTPStatus(status).phrase}\r\n"
                f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n"
                "Connection: close\r\n\r\n"
            )
            with contextlib.suppress(OSError):
                conn.sendall(head.encode() + body)
        if work is not None:  # a silent hook's, once Claude Code has its answer
            work()

    def respond(self, conn: socket.socket) -> tuple[int, bytes, Callable[[], object] | None]:
        """The status and body for one request, and the work left for after them."""
        got = _http_request(conn)
        if isinstance(got, int):
            return got, b"", None
        target, headers, raw = got
        if not self.door.authorized(headers.get("authorization", "")):
            return 401, b"", None
        found = hook_door.parse_target(target)
        if found is None:
            return 404, b"", None
        event, extra = found
        if event in (hook_door.PING, hook_door.LEAVE):
            self.left = event == hook_door.LEAVE
            return 200, b"", None
        answer = self.answers(extra)
        if answer is None or event not in hook_door.CLAUDE_EVENT:
            return 404, b"", None
        try:
            here = json.loads(raw).get("cwd")
        except (ValueError, AttributeError):
            here = None
        _enter(here if isinstance(here, str) else "")
        if event in SILENT:
            return 200, b"", lambda: answer(event, raw)
        text = answer(event, raw).decode().rstrip("\n")
        if not text:
            return 200, b"", None
        name = hook_door.CLAUDE_EVENT[event]
        out = {"hookSpecificOutput": {"hookEventName": name, "additionalContext": text}}
        return 200, json.dumps(out).encode(), None


def _http_request(conn: socket.socket) -> tuple[str, dict[str, str], bytes] | int:
    """(target, headers by lower-cased name, body) of one POST, or the status refusing it:
    the line and headers within HEAD bytes, a Content-Length body within MAX_INPUT, each
    read within CONN_WAIT."""
    conn.settimeout(CONN_WAIT)
    data = b""
    try:
        while b"\r\n\r\n" not in data:
            chunk = conn.recv(HEAD)
            if not chunk:
                return 400
            data += chunk
            if b"\r\n\r\n" not in data and len(data) > HEAD:
                return 431
        head, _, body = data.partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        method, target, *_ = [*lines[0].split(" "), "", ""]
        headers = {}
        for line in lines[1:]:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        if method != "POST":
            return 405
        length = int(headers.get("content-length", "x"))
        if length < 0:
            return 400
        if length > MAX_INPUT:
            return 413
        while len(body) < length:
            chunk = conn.recv(min(65536, length - len(body)))
            if not chunk:
                return 400
            body += chunk
    except ValueError:
        return 411
    except OSError:
        return 408
    return target, headers, body[:length]


def open_door(
    data_dir: Path, answers: Callable[[tuple[str, ...]], Answer | None]
) -> tuple[socket.socket, HttpHooks] | None:
    """The listening socket at the data directory's HTTP door (None: no door was made, or
    another process holds its port). A resident there (of another key: an older version,
    other settings) is asked to leave it first: the newest resident answers the door."""
    from dreamwell.stores import DataDir

    found = hook_door.read(DataDir(data_dir).hook_door)
    if found is None:
        return None
    asked = False
    deadline = time.monotonic() + LEAVE_WAIT
    while True:
        server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            server.bind((hook_door.HOST, found.port))
            server.listen(64)
            return server, HttpHooks(found, answers)
        except OSError:
            server.close()
        if time.monotonic() > deadline or not (
            asked or hook_door.ping(found, 1.0, hook_door.LEAVE)
        ):
            return None
        asked = True
        time.sleep(0.05)


def serve(
    server: socket.socket,
    path: Path,
    answer: Answer,
    idle: float = IDLE,
    door: tuple[socket.socket, HttpHooks] | None = None,
) -> None:
    """Answer hooks one at a time until idle for `idle` seconds or the socket at `path` is
    gone (a cleaner of /tmp); when idle, the socket is removed and the door closed first (a
    hook from then on runs as a process) and the hooks that connected meanwhile are still
    answered."""
    last = time.monotonic()
    listeners = [server] + ([door[0]] if door else [])
    while time.monotonic() - last < idle:
        ready, _, _ = select.select(listeners, [], [], min(TICK, idle))
        if not ready:
            if not path.exists():
                break
            continue
        for listener in ready:
            _accept(listener, server, answer, door)
        if door is not None and door[1].left:  # a newer resident opens it again
            door[0].close()
            listeners = [server]
        last = time.monotonic()
    path.unlink(missing_ok=True)
    if door is not None:
        door[0].close()  # connections it accepted meanwhile are refused: Claude Code goes on
    server.settimeout(0.0)
    while True:
        try:
            conn, _ = server.accept()
        except OSError:  # none waiting
            return
        _answer_one(conn, answer)


def _accept(
    listener: socket.socket,
    server: socket.socket,
    answer: Answer,
    door: tuple[socket.socket, HttpHooks] | None,
) -> None:
    try:
        conn, _ = listener.accept()
    except OSError:
        return
    conn.setblocking(True)
    if listener is server:
        _answer_one(conn, answer)
    elif door is not None:
        door[1].handle(conn)


def _answer_one(conn: socket.socket, answer: Answer) -> None:
    with conn:
        got = receive(conn)
        if got is None:
            return
        if got[0] not in SILENT:
            with contextlib.suppress(OSError):
                conn.sendall(answer(*got))
            return
    answer(*got)  # the client has its (empty) answer: the connection is closed


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
        door = open_door(_data_dir(args), _extra_answers(args, answer))
        pid.write_text(f"{os.getpid()}\n", encoding="utf-8")
        try:
            serve(server, path, answer, door=door)
        finally:  # the lock is still held: what is at these paths is this resident's
            server.close()
            if door is not None:
                door[0].close()
            path.unlink(missing_ok=True)
            pid.unlink(missing_ok=True)
    return 0


def _data_dir(args: list[str]) -> Path:
    from dreamwell.server.hooks import settings as hook_settings
    from dreamwell.server.hooks.entry import plain_arguments

    parsed = plain_arguments(args) or {}
    return hook_settings.data_dir(parsed.get("data_dir"))


def _extra_answers(args: list[str], plain: Answer) -> Callable[[tuple[str, ...]], Answer | None]:
    """The answer for an `http` hook's extra flags: this resident's own without any, else
    one made with them added (kept: the session end's dream flags come every session)."""
    made: dict[tuple[str, ...], Answer | None] = {(): plain}

    def answers(extra: tuple[str, ...]) -> Answer | None:
        if extra not in made:
            made[extra] = answerer([*args, *extra]) if len(made) < 8 else None
        return made[extra]

    return answers


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
