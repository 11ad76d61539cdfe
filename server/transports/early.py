"""The stdio handshake answered while the server is still loading
(docs/claude-code.md#starting-fast).

`dreamwell serve` needs the MCP SDK, pydantic and its settings before it can serve: 1-4 s on
a loaded machine, and Claude Code gives up on its `server/discover` probe after ~2.8 s, then
falls back to `initialize`. So, before any of that is imported, `EarlyStdio` starts a thread
that reads the client's frames from stdin and answers the handshake ones (`initialize`,
`server/discover`) with the replies the SDK would give (server/mcp/handshake.py). When the
server is ready, `hand_over` stops the thread and gives back every byte it read, for the SDK
to read again as if nothing had happened (server/transports/stdio.py drops the SDK's replies
to the frames answered here). A frame answered here that the SDK must not see is left out:
a `server/discover` that the client abandoned for an `initialize` (then the connection is
2025-era, as the client chose).

When the server cannot start (bad settings, an unusable data directory), `refuse` answers
every request with one error naming the cause: Claude Code shows it as the server's failure.

Standard library only, and POSIX pipes or sockets only (elsewhere the SDK reads stdin itself).
"""

from __future__ import annotations

import json
import os
import select
import stat
import sys
import threading
import time

from dreamwell.server.mcp import handshake
from dreamwell.server.transports import early_lists

TYPE_CHECKING = False  # `typing` is not imported: the first reply waits for every import
if TYPE_CHECKING:
    from typing import Any

CHUNK = 1 << 16
REFUSING_FOR = 30.0  # seconds a server that cannot start keeps answering before it leaves
IDLE = 1.5  # seconds a server whose kept lists vouch waits before loading, unless needed
# (Claude Code starts a server for every session, `claude -p` too, and a run that never calls
# it ends ~1 s later: loading beside it, 1-3 s of CPU on two cores, slowed its start ~15%)
HOLD = 0.3  # seconds at most that a handshake reply waits for the settings to be read
# (~0.2 s on a quiet machine; loaded, the reply goes first and a bad setting is the answer to
# the client's next request: Claude Code's follow-up discover, then it reports the failure)
# what a handshake answered here must not wait for (docs/claude-code.md#starting-fast); which of
# them were loaded when the first reply went out is logged (`Handover.loaded_then`), and a test
# reads that line
HEAVY = ("mcp", "lancedb", "pyarrow", "onnxruntime", "numpy", "tantivy")
# and, when the kept lists vouch (nothing to wait for), not the settings' nor the stores' code
# either: the reply goes before `main` imports them (~50-150 ms), and the log names them too
WATCHED = (*HEAVY, "pydantic", "dreamwell.stores")


class Handover:
    """What the early reader read: the bytes for the SDK to read (frames it must not see are
    left out) and the ids of the requests answered already (with the replies sent). A plain
    class: `dataclasses` costs a new process ~15 ms of imports before its first reply."""

    def __init__(
        self,
        data: bytes = b"",
        answered: dict[Any, list[dict[str, Any]]] | None = None,
        loaded_then: list[str] | None = None,
        lists: early_lists.ListCache | None = None,
        listed: dict[Any, str] | None = None,
        legacy: bool = False,
    ) -> None:
        self.data = data
        self.legacy = legacy  # the client opened with a 2025 `initialize`
        self.answered = {} if answered is None else answered
        self.loaded_then = loaded_then  # of WATCHED, loaded at the first reply (None: none sent)
        self.lists = lists  # for the SDK's answers to list requests
        self.listed = {} if listed is None else listed  # list requests answered: id -> method

    def take(self, key: Any) -> dict[str, Any] | None:
        """The early reply under `key` (see `sent_key`), once (None: the SDK's goes out)."""
        found = self.answered.get(key)
        if not found:
            return None
        if len(found) == 1:
            del self.answered[key]
        return found.pop(0)


def _pipe(fd: int) -> bool:
    try:
        mode = os.fstat(fd).st_mode
    except OSError:
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)


def wanted(transport_flag: str | None) -> bool:
    """Serve early when the server will speak stdio over pipes or sockets on POSIX (the
    transport as `Settings` will read it: the flag, else DREAMWELL_TRANSPORT)."""
    transport = transport_flag or os.environ.get("DREAMWELL_TRANSPORT") or "stdio"
    return os.name == "posix" and transport.strip().lower() == "stdio" and _pipe(0) and _pipe(1)


def early_reply(frame: Any) -> tuple[Any, dict[str, Any] | None]:
    """What is answered here to `frame`, and its key in `Handover.answered`: the request id
    for a handshake reply, ("ack", id) for the acknowledgement of a `subscriptions/listen`."""
    found = handshake.reply(frame)
    if found is not None:
        return frame["id"], found
    found = handshake.acknowledgement(frame)
    return ("ack", frame["id"]) if found is not None else None, found


def sent_key(message: dict[str, Any]) -> Any:
    """The key of an outgoing message in `Handover.answered` (see `early_reply`)."""
    if message.get("method") == handshake.ACKNOWLEDGED:
        return ("ack", message.get("params", {}).get("_meta", {}).get(handshake.SUBSCRIPTION_ID))
    return message.get("id") if "method" not in message else None


class EarlyStdio:
    """Reads stdin (fd 0) on a thread and answers handshake frames on stdout (fd 1), and,
    to a client that listens for list changes, the list requests from `lists` (the last
    server's answers, server/transports/early_lists.py).

    A handshake reply waits until the server has read its settings and checked its data
    directory (`ready`), so that a server that cannot start says why in its answer to the
    handshake (`refuse`), but never longer than `hold` seconds after `start`: then it is
    answered anyway, and a failure reaches the client as the answer to its next request.
    When the kept lists vouch for the settings (a server with the same ones answered them),
    the handshake and the lists are answered at once."""

    def __init__(self, hold: float = HOLD, lists: early_lists.ListCache | None = None) -> None:
        self._lines: list[bytes] = []  # whole frames read, newline included
        self._tail = b""  # the frame being read
        self._handled = 0  # frames of _lines answered or let through
        self._sent: dict[Any, list[dict[str, Any]]] = {}
        self._legacy = False  # an `initialize` was answered here
        self._loaded_then: list[str] | None = None
        self._waiting: list[Any] = []  # requests read here and left for the SDK
        self._unread = False  # a frame not JSON: the SDK's transport answers it
        self._handed = False
        self._decided = False  # `ready` or `refuse` was called
        self._cause: str | None = None  # set by `refuse`
        self._ended = threading.Event()  # stdin closed
        self._needed = threading.Event()  # a frame only the server answers came, or stdin closed
        self._lock = threading.Lock()
        self._hold = hold
        self._deadline = 0.0
        self._lists = lists
        self._vouched = lists is not None and lists.vouches  # nothing to wait for
        self._listed: dict[Any, str] = {}
        self._stop_r, self._stop_w = os.pipe()
        self._thread = threading.Thread(target=self._run, name="dreamwell-early-stdio", daemon=True)

    def start(self) -> EarlyStdio:
        self._deadline = time.monotonic() + self._hold
        self._thread.start()
        return self

    def _run(self) -> None:
        while True:
            watched = [self._stop_r] if self._ended.is_set() else [0, self._stop_r]
            ready, _, _ = select.select(watched, [], [], self._wait())
            if self._stop_r in ready:
                return
            chunk = os.read(0, CHUNK) if 0 in ready else None
            with self._lock:
                if chunk is not None:
                    self._take(chunk)
                self._answer_pending()
            if chunk == b"":
                self._ended.set()
                self._needed.set()

    def _wait(self) -> float | None:
        """Seconds until a held frame must be answered; None when none is held."""
        with self._lock:
            if self._decided or self._handled == len(self._lines):
                return None
            return max(0.0, self._deadline - time.monotonic())

    def _take(self, chunk: bytes) -> None:
        *lines, self._tail = (self._tail + chunk).split(b"\n")
        self._lines.extend(line + b"\n" for line in lines)
        if not chunk and self._tail:  # the last frame, without its newline
            self._lines.append(self._tail)
            self._tail = b""

    def _answer_pending(self) -> None:
        """Answer the frames read since the last call, in order (under the lock); a
        handshake frame is held until `ready` or the deadline."""
        while self._handled < len(self._lines):
            try:
                frame = json.loads(self._lines[self._handled])
            except (ValueError, RecursionError):  # left for the SDK's transport to answer
                frame = None
                self._unread = True
            if self._cause is not None:
                found = handshake.refusal(frame, self._cause)
            elif self._legacy:  # the SDK answers what follows the 2025 handshake, but tools/list
                found = self._listed_early(frame)
            else:
                key, found = early_reply(frame)
                if found is None:
                    found = self._listed_early(frame)
                elif not self._settled() and time.monotonic() < self._deadline:
                    return
                else:
                    self._legacy = frame["method"] == "initialize"
                    self._sent.setdefault(key, []).append(found)
            if found is not None:
                self._write(found)
            elif handshake.method(frame) is not None:
                self._waiting.append(frame)  # for the SDK to answer (or `refuse`)
                self._needed.set()
            self._handled += 1

    def _settled(self) -> bool:
        """Whether a handshake reply may go: the server will start, or a server with these
        settings started before (`ListCache.vouches`)."""
        return self._decided or self._vouched

    def _listable(self, frame: Any) -> bool:
        """Whether `frame` is a list request answered here from the last server's answers
        (kept for these settings, see early_lists.py), to a client that is told when the
        SDK's answer differs: one whose `subscriptions/listen` was acknowledged here, or one
        that opened with a 2025 `initialize`, whose answer declares `listChanged` for the
        lists that can change (it gets a 2025 `notifications/*/list_changed`)."""
        wanted = early_lists.of_request(frame)
        if not self._vouched or wanted is None:
            return False
        return self._legacy or any(isinstance(key, tuple) and key[0] == "ack" for key in self._sent)

    def _listed_early(self, frame: Any) -> dict[str, Any] | None:
        """The kept answer to list request `frame` when it is `_listable` (None: the SDK's)."""
        found = self._lists.reply(frame) if self._lists and self._listable(frame) else None
        if found is not None:
            self._listed[frame["id"]] = frame["method"]
            self._sent.setdefault(frame["id"], []).append(found)
        return found

    def _write(self, reply: dict[str, Any]) -> None:
        if self._loaded_then is None:
            self._loaded_then = [name for name in WATCHED if name in sys.modules]
        data = memoryview((json.dumps(reply, separators=(",", ":")) + "\n").encode())
        while data:
            try:
                data = data[os.write(1, data) :]
            except BlockingIOError:
                select.select([], [1], [])
            except OSError:  # the client left
                return

    def idle(self, grace: float = IDLE) -> None:
        """When the kept lists vouch, the client has all it asks at its start from here: the
        server's loading (the settings, the SDK, the stores) waits until a frame needs the
        server, stdin closes or `grace` seconds pass, not beside the client's own start. Else
        it goes on at once: the handshake waits for the settings."""
        if self._vouched:
            self._needed.wait(grace)

    def finished(self) -> bool:
        """Whether the client closed stdin with every frame it sent answered here: nothing is
        left for the server to do (a session that listed the tools and never called one), so
        it need not load (1-3 s of CPU beside the agent, on two cores)."""
        with self._lock:
            return (
                self._ended.is_set()
                and self._handled == len(self._lines)
                and not (self._waiting or self._tail or self._unread)
            )

    def ready(self) -> None:
        """The server will start: answer the handshake frames held so far."""
        with self._lock:
            self._decided = True
            self._answer_pending()

    def hand_over(self) -> Handover:
        """Stop reading; what was read, for the SDK."""
        self.ready()
        os.write(self._stop_w, b"x")
        self._thread.join()
        self._handed = True
        os.close(self._stop_r)
        os.close(self._stop_w)
        with self._lock:
            kept = [line for line in self._lines if not self._superseded(line)]
            answered = {key: sent for key, sent in self._sent.items() if sent}
            return Handover(
                b"".join(kept) + self._tail,
                answered,
                self._loaded_then,
                self._lists,
                self._listed,
                self._legacy,
            )

    def _superseded(self, line: bytes) -> bool:
        """A discover (or listen) answered here, when an `initialize` was answered here after
        it: the client chose the 2025 handshake, and the SDK would refuse that `initialize` on
        a connection opened in the 2026 era."""
        if not self._legacy:
            return False
        try:
            frame = json.loads(line)
        except (ValueError, RecursionError):
            return False
        key, _ = early_reply(frame)
        if handshake.method(frame) == "initialize" or not self._sent.get(key):
            return False
        self._sent[key].pop(0)
        return True

    def refuse(self, cause: str, wait: float = REFUSING_FOR) -> None:
        """Answer every request not answered yet, and every later one, with an error naming
        `cause`, until the client closes stdin (`wait` seconds at most)."""
        with self._lock:
            if self._handed:  # the SDK serves the client now: it has its own errors
                return
            self._decided = True
            self._cause = cause
            for frame in self._waiting:
                found = handshake.refusal(frame, cause)
                if found is not None:
                    self._write(found)
            self._waiting.clear()
            self._answer_pending()
        self._ended.wait(wait)
