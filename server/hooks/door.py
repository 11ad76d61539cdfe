"""The hooks' HTTP door (SPEC §10 "Start fast"): Claude Code's `http` hooks POST each event's
JSON to the resident hook process (resident.py) at `http://127.0.0.1:PORT/dreamwell/hook/EVENT`
with a bearer token, so that a hook costs Claude Code no process at all (a command hook costs
it a shell and an interpreter: ~40 ms a hook under Claude Code, measured in
docs/benchmarks.md).

The door is the data directory's: its port and token live in `DataDir.hook_door` (0600),
written once by `install claude-code` (`ensure`) and read by the resident, which listens
there, and by `dreamwell serve`, which keeps the resident up while a session lasts
(`keep_alive`): an `http` hook that finds no one there is lost to Claude Code (it goes on
without it), so the session-start hook stays a command (it starts a resident when none
answers) and every stdio server pings the door and starts a resident when none answers.

Standard library only: the resident and the server import it, and so does install."""

from __future__ import annotations

import contextlib
import hmac
import json
import os
import random
import secrets
import socket
import sys
import threading
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote, unquote

HOST = "127.0.0.1"
PREFIX = "/dreamwell/hook/"  # the URL path before the event
PING = "ping"  # the path's event that only says the resident is there (and keeps it up)
LEAVE = "leave"  # the path's event that asks the resident to close the door (a newer one opens it)
PORTS = (20000, 32767)  # below Linux's ephemeral range: no outgoing connection takes it later
# Claude Code's event name for each `dreamwell hook EVENT`
CLAUDE_EVENT = {
    "session-start": "SessionStart",
    "user-prompt": "UserPromptSubmit",
    "stop": "Stop",
    "pre-compact": "PreCompact",
    "session-end": "SessionEnd",
}
KEEP_ALIVE_EVERY = 300.0  # seconds between a server's pings (the resident idles out after 3600)
FIRST_CHECK = 20.0  # seconds after a server's start before its first ping


@dataclass(frozen=True)
class Door:
    port: int
    token: str

    def url(self, event: str, extra: tuple[str, ...] = ()) -> str:
        """The URL a hook of `event` posts to; `extra` are flags for that event alone (the
        session end's dream flags), carried in the query."""
        query = "&".join("arg=" + quote(a, safe="") for a in extra)
        return f"http://{HOST}:{self.port}{PREFIX}{event}" + (f"?{query}" if query else "")

    def authorized(self, header: str) -> bool:
        scheme, _, given = header.strip().partition(" ")
        return scheme.lower() == "bearer" and hmac.compare_digest(
            given.strip().encode(), self.token.encode()
        )


def parse_target(target: str) -> tuple[str, tuple[str, ...]] | None:
    """(event, extra flags) of a request's target under PREFIX; None for any other path."""
    path, _, query = target.partition("?")
    if not path.startswith(PREFIX):
        return None
    extra = tuple(unquote(p[4:]) for p in query.split("&") if p.startswith("arg="))
    return path[len(PREFIX) :], extra


def read(path: Path) -> Door | None:
    """The door written at `path` (None: none, or not one of this user's own making)."""
    try:
        found = os.stat(path)
        if found.st_uid != os.getuid() or found.st_mode & 0o077:
            return None
        data = json.loads(path.read_text(encoding="utf-8"))
        port, token = int(data["port"]), str(data["token"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if not PORTS[0] <= port <= 65535 or len(token) < 16:
        return None
    return Door(port, token)


def _free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        try:
            probe.bind((HOST, port))
        except OSError:
            return False
    return True


def ensure(path: Path) -> Door:
    """The door at `path`, made (a free port, a new token) when there is none: kept across
    installs, so that hooks already written keep reaching it."""
    found = read(path)
    if found is not None:
        return found
    ports = list(range(PORTS[0], PORTS[1] + 1))
    port = next((p for p in random.sample(ports, 64) if _free(p)), PORTS[0])
    door = Door(port, secrets.token_urlsafe(24))
    path.parent.mkdir(parents=True, exist_ok=True)
    temp = path.with_name(path.name + ".tmp")
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as out:
        json.dump({"port": door.port, "token": door.token}, out)
    os.replace(temp, path)
    return door


def ping(door: Door, timeout: float = 2.0, event: str = PING) -> bool:
    """Whether a resident answers at the door (and, answering, it stays up: a ping counts
    as a hook for its idle time); `event` LEAVE: and closes the door."""
    request = (
        f"POST {PREFIX}{event} HTTP/1.1\r\nHost: {HOST}:{door.port}\r\n"
        f"Authorization: Bearer {door.token}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
    )
    try:
        with socket.create_connection((HOST, door.port), timeout=timeout) as sock:
            sock.sendall(request.encode())
            return sock.recv(16).startswith(b"HTTP/1.1 2")
    except OSError:
        return False


def start_resident(flags: list[str]) -> None:
    """A detached resident for hooks with `flags`, as client.py starts one (it gives up at
    once when another holds its configuration's lock), spawned without fork()ing this
    process and its threads (server/detached.py)."""
    from dreamwell.server.detached import start_detached
    from dreamwell.server.hooks import client

    where = client.run_dir()
    name = client.key(flags)
    if not client.may_start(where, name):
        return
    module = "dreamwell.server.hooks.resident"
    start_detached([sys.executable, "-m", module, name, "session-start", *flags])


def keep_alive(door_path: Path, flags: list[str], stop: threading.Event) -> None:
    """For `dreamwell serve` on stdio, in a daemon thread until `stop`: every
    KEEP_ALIVE_EVERY seconds (the first FIRST_CHECK after the start) ping the door, and
    start a resident with `flags` (the hooks' --data-dir) when none answers, so that the
    session's `http` hooks find one however long it lasts."""
    while not stop.wait(FIRST_CHECK):  # the session-start hook's own resident may be loading
        door = read(door_path)
        if door is not None and not ping(door):
            with contextlib.suppress(OSError):
                start_resident(flags)
        if stop.wait(KEEP_ALIVE_EVERY - FIRST_CHECK):
            return
