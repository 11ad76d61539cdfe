"""The stdio wire: stdin and stdout claimed as the MCP SDK claims them, and, when they are
pipes or sockets (POSIX), read and written from the event loop.

The SDK reads each line in a worker thread and writes, then flushes, each reply in one more
thread each: three hand-offs to a thread and back per request, and a thread's wake-up after
a longer sleep costs more. Here the loop waits on the descriptors itself. A file, a terminal,
or a stream the SDK could not claim is served as the SDK serves it (a terminal's descriptor
is shared with the shell, which must not find it non-blocking afterwards).
"""

from __future__ import annotations

import codecs
import functools
import io
import os
import stat
import sys
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Any

import anyio

CHUNK = 1 << 16  # bytes read from the pipe at a time


def claimed_stdin(first: bytes = b"") -> AbstractContextManager[Any]:
    """stdin claimed as the SDK claims it, decoded with surrogateescape instead of replace
    (a byte that is not UTF-8 can then be answered instead of stored as U+FFFD); None (the
    SDK's own stdin) with an SDK that lacks the helpers this relies on. `first`: bytes read
    from stdin already (server/transports/early.py), read again before the pipe's."""
    reader = functools.partial(PipeReader, first=first)
    return _claimed(0, sys.stdin, "rb", "_open_stdin_diversion", reader, "surrogateescape")


def claimed_stdout() -> AbstractContextManager[Any]:
    """stdout claimed as the SDK claims it; None (the SDK's own) as for stdin."""
    return _claimed(1, sys.stdout, "wb", "_open_stdout_diversion", PipeWriter, "strict")


@contextmanager
def _claimed(
    fd: int, stream: Any, mode: str, diversion: str, pipe: Callable[[int], Any], errors: str
) -> Iterator[Any]:
    """The SDK's claim of `fd`, served by `pipe` on the private descriptor, set non-blocking
    for as long as it is served, when that is a pipe or a socket; otherwise as the SDK's text
    wrapper with `errors`. None without the SDK's helpers."""
    from mcp.server import stdio as sdk

    claim = getattr(sdk, "_claim_fd", None)
    divert = getattr(sdk, diversion, None)
    wrapper = getattr(sdk, "_UnownedTextWrapper", None)
    if claim is None or divert is None or wrapper is None:
        yield None
        return
    buffer, restore = claim(fd, stream, mode, divert)
    try:
        own = _own_pipe(buffer)
        if own is None:
            yield anyio.wrap_file(wrapper(buffer, encoding="utf-8", errors=errors))
            return
        os.set_blocking(own, False)
        try:
            yield pipe(own)
        finally:
            os.set_blocking(own, True)  # the wire goes back to its standard descriptor as it came
    finally:
        if restore is not None:
            restore()


def _own_pipe(buffer: Any) -> int | None:
    """The private descriptor of a claimed wire that is a pipe or a socket, on POSIX; None
    for a file, a terminal, or the sys stream served in place (its buffer may hold bytes)."""
    try:
        fd = buffer.fileno()
        mode = os.fstat(fd).st_mode
    except (AttributeError, OSError, ValueError):
        return None
    if os.name != "posix" or fd <= 2 or not (stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)):
        return None
    return int(fd)


class PipeReader:
    """Lines from the client, read from the event loop as they arrive: decoded as the SDK's
    text wrapper decodes them (UTF-8 with surrogateescape, universal newlines), each with its
    newline, and the last one without at the end of input."""

    def __init__(self, fd: int, first: bytes = b"") -> None:
        self._fd = fd
        self._first = first
        utf8 = codecs.getincrementaldecoder("utf-8")(errors="surrogateescape")
        self._decoder = io.IncrementalNewlineDecoder(utf8, translate=True)
        self._lines: deque[str] = deque()
        # the line being read, in pieces: a long frame is not copied again with every read
        self._partial: list[str] = []
        self._ended = False

    def __aiter__(self) -> PipeReader:
        return self

    async def __anext__(self) -> str:
        while not self._lines:
            if self._ended:
                raise StopAsyncIteration
            await self._read()
        return self._lines.popleft()

    async def _read(self) -> None:
        if self._first:
            chunk, self._first = self._first, b""
            self._split(chunk)
            return
        try:
            chunk = os.read(self._fd, CHUNK)
        except BlockingIOError:  # nothing sent yet
            await anyio.wait_readable(self._fd)
            return
        self._split(chunk)

    def _split(self, chunk: bytes) -> None:
        *lines, rest = self._decoder.decode(chunk, final=not chunk).split("\n")
        if lines:
            lines[0] = "".join([*self._partial, lines[0]])
            self._partial.clear()
            self._lines.extend(line + "\n" for line in lines)
        if rest:
            self._partial.append(rest)
        if not chunk:
            self._ended = True
            if self._partial:
                self._lines.append("".join(self._partial))


class PipeWriter:
    """The wire to the client, written from the event loop: as much of a reply as the pipe
    takes at once, and the rest when it has room again, awaited without blocking the loop."""

    def __init__(self, fd: int) -> None:
        self._fd = fd

    async def write(self, text: str) -> None:
        data = memoryview(text.encode("utf-8"))
        while data:
            try:
                data = data[os.write(self._fd, data) :]
            except BlockingIOError:  # the client has not read what came before yet
                await anyio.wait_writable(self._fd)

    async def flush(self) -> None:
        """Nothing is buffered here."""
