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
import io
import os
import stat
import sys
from collections import deque
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import anyio

CHUNK = 1 << 16  # bytes read from the pipe at a time


@contextmanager
def claimed_stdin() -> Iterator[Any]:
    """stdin claimed as the SDK claims it, decoded with surrogateescape instead of replace
    (a byte that is not UTF-8 can then be answered instead of stored as U+FFFD); None (the
    SDK's own stdin) with an SDK that lacks the helpers this relies on."""
    from mcp.server import stdio as sdk

    with _claimed(0, sys.stdin, "rb", getattr(sdk, "_open_stdin_diversion", None)) as claim:
        if claim is None:
            yield None
        elif isinstance(claim, int):
            yield PipeReader(claim)
        else:
            yield anyio.wrap_file(_text(claim, errors="surrogateescape"))


@contextmanager
def claimed_stdout() -> Iterator[Any]:
    """stdout claimed as the SDK claims it; None (the SDK's own) as for stdin."""
    from mcp.server import stdio as sdk

    with _claimed(1, sys.stdout, "wb", getattr(sdk, "_open_stdout_diversion", None)) as claim:
        if claim is None:
            yield None
        elif isinstance(claim, int):
            yield PipeWriter(claim)
        else:
            yield anyio.wrap_file(_text(claim))


@contextmanager
def _claimed(fd: int, stream: Any, mode: str, divert: Any) -> Iterator[Any]:
    """The SDK's claim of `fd`: None without its helpers; the private descriptor, set
    non-blocking for as long as it is served, when it is a pipe or a socket; otherwise the
    binary buffer to serve."""
    from mcp.server import stdio as sdk

    claim = getattr(sdk, "_claim_fd", None)
    if claim is None or divert is None or getattr(sdk, "_UnownedTextWrapper", None) is None:
        yield None
        return
    buffer, restore = claim(fd, stream, mode, divert)
    try:
        own = _own_pipe(buffer)
        if own is None:
            yield buffer
            return
        os.set_blocking(own, False)
        try:
            yield own
        finally:
            os.set_blocking(own, True)  # the wire goes back to its standard descriptor as it came
    finally:
        if restore is not None:
            restore()


def _text(buffer: Any, errors: str = "strict") -> Any:
    from mcp.server import stdio as sdk

    return sdk._UnownedTextWrapper(buffer, encoding="utf-8", errors=errors)


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

    def __init__(self, fd: int) -> None:
        self._fd = fd
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
        try:
            chunk = os.read(self._fd, CHUNK)
        except BlockingIOError:  # nothing sent yet
            await anyio.wait_readable(self._fd)
            return
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
