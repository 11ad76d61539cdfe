"""The stdio wire read from the event loop (server/transports/wire.py) gives the SDK the lines its
own reader gave, however the client's bytes are split between reads."""

from __future__ import annotations

import fcntl
import io
import os
import socket
import threading
import time
from pathlib import Path

import pytest

from dreamwell.server.transports.wire import PipeReader, _own_pipe

pytestmark = pytest.mark.anyio

SENT = (
    b'{"jsonrpc":"2.0","id":1,"method":"ping"}\n'
    + "caf\u00e9 \u20ac \U0001f600 split across reads\n".encode()
    + b"raw \xff\xfe bytes\n"  # not UTF-8: kept as surrogate escapes, answered as such
    + b"windows\r\nold mac\rlast\n"
    + b"x" * 200_000
    + b"\n\n"  # a frame longer than one read, then a blank line
    + b"no newline at the end"
)


def _dribble(fd: int, data: bytes) -> None:
    """Write `data` in pieces of 1 to 7 bytes, then large ones, with pauses: the reader
    waits between them, and multi-byte characters and CRLF pairs straddle reads."""
    at, step = 0, 0
    while at < len(data):
        size = 1 + step % 7 if at < 400 else 50_000
        os.write(fd, data[at : at + size])
        at, step = at + size, step + 1
        time.sleep(0.001 if step % 5 == 0 else 0)
    os.close(fd)


async def test_lines_read_from_the_loop_are_the_lines_the_sdk_reader_gave() -> None:
    expected = list(io.TextIOWrapper(io.BytesIO(SENT), encoding="utf-8", errors="surrogateescape"))
    read, write = os.pipe()
    os.set_blocking(read, False)
    writer = threading.Thread(target=_dribble, args=(write, SENT))
    writer.start()
    try:
        lines = [line async for line in PipeReader(read)]
    finally:
        writer.join()
        os.close(read)
    assert lines == expected
    assert lines[1] == "caf\u00e9 \u20ac \U0001f600 split across reads\n"
    assert lines[3:6] == ["windows\n", "old mac\n", "last\n"]
    assert lines[-1] == "no newline at the end"


def test_only_a_private_pipe_or_socket_is_served_from_the_loop(tmp_path: Path) -> None:
    """A file or a terminal keeps the SDK's threads (a terminal's descriptor is the shell's
    too, and must not be left non-blocking); so does the sys stream served in place."""
    read, write = os.pipe()
    left, right = socket.socketpair()
    above = [fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 3) for fd in (read, left.fileno())]
    try:
        with open(above[0], "rb", closefd=False) as pipe:
            assert _own_pipe(pipe) == above[0]
        with open(above[1], "rb", closefd=False) as sock:
            assert _own_pipe(sock) == above[1]
        with (tmp_path / "file").open("wb") as file:
            assert _own_pipe(file) is None
        assert _own_pipe(io.BytesIO()) is None  # no descriptor at all
        assert _own_pipe(_Standard()) is None  # fd 0: the sys stream served in place
    finally:
        for fd in (read, write, *above):
            os.close(fd)
        left.close()
        right.close()


class _Standard:
    def fileno(self) -> int:
        return 0
