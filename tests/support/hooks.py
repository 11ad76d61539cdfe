"""Running `dreamwell hook` the way Claude Code does: a fresh process, JSON on stdin, and a
transcript JSONL written like Claude Code's."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

from dreamwell.server.hooks import client as client_module
from dreamwell.server.hooks.refresh import refresh
from dreamwell.stores import CONVERSATION, RECALL, JsonlLog, LongTermStore, MemoryEntry, utcnow
from dreamwell.stores.layout import DataDir


def hook(
    event: str,
    payload: dict[str, Any] | bytes,
    data: Path,
    *extra: str,
    env: dict[str, str] | None = None,
    limit_file_size: int | None = None,
) -> subprocess.CompletedProcess[str]:
    raw = payload if isinstance(payload, bytes) else json.dumps(payload).encode()

    def limit() -> None:
        if limit_file_size is not None:
            import resource

            resource.setrlimit(resource.RLIMIT_FSIZE, (limit_file_size, limit_file_size))

    done = subprocess.run(
        [sys.executable, "-m", "dreamwell.server", "hook", event, "--data-dir", str(data), *extra],
        input=raw,
        capture_output=True,
        timeout=60,
        env={**os.environ, "DREAMWELL_EMBEDDER": "none", **(env or {})},
        preexec_fn=limit if limit_file_size is not None else None,
        check=False,
    )
    return subprocess.CompletedProcess(
        done.args, done.returncode, done.stdout.decode(), done.stderr.decode()
    )


CLIENT = Path(client_module.__file__)


def lean_hook(
    event: str,
    payload: dict[str, Any] | bytes,
    data: Path,
    run: Path,
    *extra: str,
    cwd: Path | None = None,
) -> subprocess.CompletedProcess[str]:
    """The hook as install writes it on POSIX: the lean client (server/hooks/client.py) under
    `python -I -S`, its residents' sockets in `run` (its XDG_RUNTIME_DIR)."""
    raw = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
    env = {**os.environ, "DREAMWELL_EMBEDDER": "none", "XDG_RUNTIME_DIR": str(run)}
    command = [sys.executable, "-I", "-S", str(CLIENT), event, "--data-dir", str(data), *extra]
    done = subprocess.run(command, input=raw, capture_output=True, timeout=60, env=env, cwd=cwd)
    settle(run)
    return subprocess.CompletedProcess(
        done.args, done.returncode, done.stdout.decode(), done.stderr.decode()
    )


def processes(match: Callable[[bytes, list[bytes]], bool]) -> list[int]:
    """The pids of the running processes (from /proc, this one left out) whose command line
    and environment entries `match` accepts."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) == os.getpid():
            continue
        try:
            command = (proc / "cmdline").read_bytes()
            environ = (proc / "environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if match(command, environ):
            found.append(int(proc.name))
    return sorted(pid for pid in found if _running(pid))


def residents(run: Path) -> list[int]:
    """The pids of the resident hook processes started with `run` as their XDG_RUNTIME_DIR
    (from /proc: also those starting, or giving up, that wrote no pid file)."""
    wanted = f"XDG_RUNTIME_DIR={run}".encode()
    command_of = b"dreamwell.server.hooks.resident"
    return processes(lambda command, environ: command_of in command and wanted in environ)


def wait_for_resident(run: Path, timeout: float = 30.0) -> int:
    """The pid of the one resident in `run`, once its socket answers."""
    deadline = time.monotonic() + timeout
    while True:
        pids = residents(run)
        if len(pids) == 1 and any(map(_answers, (run / "dreamwell").glob("*.sock"))):
            return pids[0]
        assert time.monotonic() < deadline, "no resident hook process started"
        time.sleep(0.02)


def settle(run: Path) -> None:
    """Once the hooks of `run` still running have ended (Claude Code does not wait for those
    it runs in the background: install writes the silent ones `async`) and its residents have
    done the work of the hooks they already answered (a silent hook is answered before its
    work, server/hooks/resident.py): each runs one hook at a time, so the answer to a
    request for no event comes after that work."""
    wanted = f"XDG_RUNTIME_DIR={run}".encode()
    hooks = (str(CLIENT).encode(), b"dreamwell.server\0hook\0")  # or run by itself

    def running(command: bytes, environ: list[bytes]) -> bool:
        return wanted in environ and any(h in command for h in hooks)

    deadline = time.monotonic() + 60
    while processes(running):
        assert time.monotonic() < deadline, "a hook is still running"
        time.sleep(0.02)
    for path in (run / "dreamwell").glob("*.sock"):
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
            probe.settimeout(60)
            try:
                probe.connect(str(path))
                probe.sendall(b"settle\0/\0{}")
                probe.shutdown(socket.SHUT_WR)
                while probe.recv(65536):
                    pass
            except OSError:  # a dead resident's socket: nothing left to do
                continue


def _answers(path: Path) -> bool:
    """Whether a process listens on the socket at `path` (a dead one's refuses)."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
        try:
            probe.connect(str(path))
        except OSError:
            return False
    return True


def stop_residents(run: Path) -> None:
    """Stop, by their pids, the resident hook processes of `run`, and remove it."""
    for pid in residents(run):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
        wait_for_pid(pid, timeout=10)
    shutil.rmtree(run, ignore_errors=True)


def prompt(session: str, text: str, cwd: str = "/work/proj", **more: Any) -> dict[str, Any]:
    return {
        "session_id": session,
        "transcript_path": more.pop("transcript_path", "/nonexistent.jsonl"),
        "cwd": cwd,
        "hook_event_name": "UserPromptSubmit",
        "permission_mode": "default",
        "prompt": text,
        **more,
    }


def event(session: str, name: str, transcript: Path, **more: Any) -> dict[str, Any]:
    return {
        "session_id": session,
        "transcript_path": str(transcript),
        "cwd": "/work/proj",
        "hook_event_name": name,
        **more,
    }


class Transcript:
    """A Claude Code session transcript, appended line by line."""

    def __init__(self, path: Path, session: str) -> None:
        self.path, self.session, self.n = path, session, 0

    def _line(self, kind: str, content: Any, **more: Any) -> None:
        self.n += 1
        record = {
            "type": kind,
            "sessionId": self.session,
            "uuid": f"u{self.n}",
            "timestamp": f"2026-11-26T00:00:{self.n:02d}.000Z",
            "cwd": "/work/proj",
            "message": {"role": kind, "content": content},
            **more,
        }
        with open(self.path, "a", encoding="utf-8") as fh:
            fh.write(json.dumps(record) + "\n")

    def user(self, text: str, **more: Any) -> None:
        self._line("user", text, **more)

    def tool(
        self, name: str, given: dict[str, Any], result: str = "ok", error: bool = False
    ) -> None:
        """A tool call and its result (`error`: as Claude Code writes a failed call, e.g.
        `<tool_use_error>Unknown skill: x</tool_use_error>`)."""
        self._line(
            "assistant", [{"type": "tool_use", "id": f"t{self.n}", "name": name, "input": given}]
        )
        answer = {"type": "tool_result", "tool_use_id": f"t{self.n - 1}", "content": result}
        self._line("user", [answer | ({"is_error": True} if error else {})])

    def assistant(self, text: str) -> None:
        self._line("assistant", [{"type": "text", "text": text}])


def turns(data: Path) -> list[dict[str, Any]]:
    return JsonlLog(data, CONVERSATION).read()


def recalls(data: Path) -> list[dict[str, Any]]:
    return JsonlLog(data, RECALL).read()


def log_lines(data: Path) -> list[str]:
    path = DataDir(data).hooks_log
    return path.read_text().splitlines() if path.exists() else []


def wait_for_refresher(data: Path, timeout: float = 60.0) -> None:
    """Until every refresher a hook started has exited."""
    pid_file = DataDir(data).hook_refresh_pid
    if not pid_file.exists():
        return
    deadline = time.monotonic() + timeout
    for pid in map(int, pid_file.read_text().split()):
        while _running(pid):
            assert time.monotonic() < deadline, f"refresher {pid} still running"
            time.sleep(0.02)


def wait_for_pid(pid: int, timeout: float = 120.0) -> None:
    """Until process `pid` (started by a hook, detached: not our child) has exited."""
    deadline = time.monotonic() + timeout
    while _running(pid):
        assert time.monotonic() < deadline, f"process {pid} still running"
        time.sleep(0.05)


def _running(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0]
    except OSError:
        return False
    return state != "Z"


PREF, ANTI, DEPLOY, TEA = "a1" * 6, "b2" * 6, "c3" * 6, "d4" * 6


def seeded(data: Path) -> LongTermStore:
    """Four memories, checkpointed into LanceDB and Tantivy, and the hooks' snapshot."""
    store = LongTermStore(data)
    when = utcnow() - timedelta(days=1)

    def entry(i: str, text: str, category: str) -> MemoryEntry:
        return MemoryEntry(i, text, category, (), when, when, when)

    store.apply(
        [
            entry(
                PREF,
                "The user prefers prose answers without bullet points",
                "user-preferences/style",
            ),
            entry(
                ANTI, "Don't run find / to search code — instead use ripgrep", "anti-patterns/files"
            ),
            entry(DEPLOY, "Deploy the api with make deploy from the repo root", "projects/api"),
            entry(TEA, "The user drinks green tea in the afternoon", "personal"),
        ]
    )
    store.checkpoint()
    refresh(DataDir(data))
    return store


def install_claude_code(home: Path, data: Path, *flags: str) -> None:
    """`dreamwell install claude-code --data-dir DATA FLAGS` in this process (the real
    install code) for a user whose HOME is `home`; the server's lists are not primed (that
    starts a server: seconds this needs not pay)."""
    from unittest import mock

    import pytest

    from dreamwell.server.cli import install
    from dreamwell.server.cli.main import main

    environ = {"HOME": str(home), "XDG_CONFIG_HOME": str(home / ".config")}
    with (
        mock.patch.dict(os.environ, environ),
        mock.patch.object(install, "prime_lists"),
        pytest.raises(SystemExit) as done,
    ):
        main(["install", "claude-code", "--data-dir", str(data), *flags])
    assert done.value.code == 0, done.value.code


def installed_hooks(settings: Path) -> dict[str, dict[str, Any]]:
    """The one hook of each Claude Code event in the settings file install wrote."""
    hooks = json.loads(settings.read_text())["hooks"]
    return {name: groups[-1]["hooks"][-1] for name, groups in hooks.items()}


def run_installed(
    entry: dict[str, Any], payload: dict[str, Any], run: Path, env: dict[str, str] | None = None
) -> str:
    """What a command hook install wrote prints, run as Claude Code runs one (`sh -c`, the
    hook JSON on stdin, the residents' sockets in `run`), once the resident has done its work."""
    assert entry["type"] == "command", entry  # never a post to a port
    environ = {**os.environ, "DREAMWELL_EMBEDDER": "none", "XDG_RUNTIME_DIR": str(run)}
    done = subprocess.run(
        ["sh", "-c", str(entry["command"])],
        input=json.dumps(payload).encode(),
        capture_output=True,
        env={**environ, **(env or {})},
        timeout=60,
    )
    settle(run)
    return done.stdout.decode()
