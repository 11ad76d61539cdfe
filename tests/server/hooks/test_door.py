"""The hooks' HTTP door (server/hooks/door.py, resident.py): Claude Code's `http` hooks post
each event to the resident at 127.0.0.1 with the data directory's bearer token; the resident
answers them exactly as its socket's hooks, refuses anything else, and a stdio server keeps
one up (keep_alive) while its session lasts."""

from __future__ import annotations

import http.client
import json
import os
import socket
import threading
import time
from pathlib import Path

import pytest
from filelock import FileLock

from dreamwell.server.hooks import door as hook_door
from dreamwell.server.hooks.events import LOG_WAIT
from dreamwell.server.hooks.resident import SILENT
from dreamwell.stores import DataDir
from tests.support.hooks import (
    DEPLOY,
    PREF,
    Transcript,
    event,
    lately_asked,
    lean_hook,
    log_lines,
    prompt,
    residents,
    seeded,
    turns,
    wait_for_pid,
    wait_for_resident,
)


def post(
    door: hook_door.Door,
    path: str,
    body: bytes,
    token: str | None = None,
    method: str = "POST",
    headers: dict[str, str] | None = None,
) -> tuple[int, bytes]:
    conn = http.client.HTTPConnection(hook_door.HOST, door.port, timeout=30)
    try:
        sent = {"Authorization": f"Bearer {token or door.token}", **(headers or {})}
        conn.request(method, path, body=body, headers=sent)
        answer = conn.getresponse()
        got = answer.status, answer.read()
    finally:
        conn.close()
    if any(f"/hook/{name}" in path for name in SILENT):  # answered before its work:
        hook_door.ping(door, timeout=30)  # the resident takes the ping once that is done
    return got


def opened(tmp_path: Path, run: Path) -> hook_door.Door:
    """A seeded data directory with a door, and its resident started by a session start."""
    seeded(tmp_path)
    door = hook_door.ensure(DataDir(tmp_path).hook_door)
    start = event("s1", "SessionStart", tmp_path / "t.jsonl", source="startup")
    assert lean_hook("session-start", start, tmp_path, run).returncode == 0
    wait_for_resident(run)
    assert _wait(lambda: hook_door.ping(door)), "the resident never opened the door"
    return door


def _wait(check: object, timeout: float = 30.0) -> bool:
    import time

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if callable(check) and check():
            return True
        time.sleep(0.05)
    return False


def test_the_door_is_made_once_with_a_private_file_and_kept(tmp_path: Path) -> None:
    path = DataDir(tmp_path).hook_door
    made = hook_door.ensure(path)
    assert hook_door.ensure(path) == made and hook_door.read(path) == made
    assert os.stat(path).st_mode & 0o777 == 0o600
    assert hook_door.PORTS[0] <= made.port <= hook_door.PORTS[1] and len(made.token) >= 32
    os.chmod(path, 0o644)  # others could read the token: not a door to use
    assert hook_door.read(path) is None


def test_a_prompt_posted_to_the_door_is_answered_and_recorded_as_through_the_socket(
    tmp_path: Path, run: Path
) -> None:
    door = opened(tmp_path, run)
    body = json.dumps(prompt("s1", "how do I deploy the api?")).encode()
    status, answer = post(door, "/dreamwell/hook/user-prompt", body)
    assert status == 200
    context = json.loads(answer)["hookSpecificOutput"]
    assert context["hookEventName"] == "UserPromptSubmit"
    assert f"[{DEPLOY}]" in context["additionalContext"]
    by_socket = lean_hook("user-prompt", prompt("s2", "how do I deploy the api?"), tmp_path, run)
    assert by_socket.stdout.rstrip("\n") == context["additionalContext"]
    assert [t["session"] for t in turns(tmp_path)] == ["s1", "s2"]
    assert sum(" user-prompt ok: " in line for line in log_lines(tmp_path)) == 2


def test_the_door_refuses_what_is_not_a_hook_and_records_nothing(tmp_path: Path, run: Path) -> None:
    door = opened(tmp_path, run)
    body = json.dumps(prompt("s9", "how do I deploy the api?")).encode()
    user_prompt = "/dreamwell/hook/user-prompt"
    assert post(door, user_prompt, body, token="x" * 32)[0] == 401
    assert post(door, "/dreamwell/hook/no-such-event", body)[0] == 404
    assert post(door, "/elsewhere", body)[0] == 404
    assert post(door, user_prompt, body, method="GET")[0] == 405
    assert post(door, user_prompt + "?arg=--bogus", body)[0] == 404  # flags only argparse judges
    with socket.create_connection((hook_door.HOST, door.port), timeout=30) as sock:
        head = f"POST {user_prompt} HTTP/1.1\r\nAuthorization: Bearer {door.token}\r\n"
        sock.sendall(f"{head}Content-Length: {2**30}\r\n\r\n".encode())
        assert sock.recv(100).startswith(b"HTTP/1.1 413")
    with socket.create_connection((hook_door.HOST, door.port), timeout=30) as sock:
        sock.sendall(b"POST " + b"x" * 20000)  # no end of headers in sight
        assert sock.recv(100).startswith(b"HTTP/1.1 4")
    assert not [t for t in turns(tmp_path) if t["session"] == "s9"]
    status, _ = post(door, user_prompt, body)  # and it still answers hooks
    assert status == 200 and [t["session"] for t in turns(tmp_path)][-1] == "s9"


def test_a_silent_hook_is_answered_before_its_work(tmp_path: Path, run: Path) -> None:
    """Claude Code waits for each hook, `Stop` and `SessionEnd` at every `claude -p` run's
    end, and they print nothing: the resident answers them first, then does their work. The
    window: the conversation log is held locked by another process meanwhile; the answer
    still comes at once, and the turn is recorded once the lock is let go (before, the
    answer waited for the lock, LOG_WAIT at most, and the turn was lost to it)."""
    door = opened(tmp_path, run)
    transcript = Transcript(tmp_path / "t.jsonl", "s1")
    transcript.user("we deploy with make ship")
    stop = json.dumps(event("s1", "Stop", transcript.path)).encode()
    with FileLock(str(tmp_path / ".conversation.jsonl.lock")):
        began = time.monotonic()
        conn = http.client.HTTPConnection(hook_door.HOST, door.port, timeout=30)
        conn.request(
            "POST", "/dreamwell/hook/stop", stop, {"Authorization": f"Bearer {door.token}"}
        )
        answer = conn.getresponse()
        assert (answer.status, answer.read()) == (200, b"")
        took = time.monotonic() - began
        conn.close()
        assert not turns(tmp_path)  # its work waits for the lock
    assert took < LOG_WAIT, took
    assert hook_door.ping(door, timeout=30)  # taken once the stop's work is done
    assert [t["content"] for t in turns(tmp_path)] == ["we deploy with make ship"]


def test_a_session_end_posted_with_flags_is_answered_with_them(tmp_path: Path, run: Path) -> None:
    door = opened(tmp_path, run)
    transcript = Transcript(tmp_path / "t.jsonl", "s1")
    transcript.user("we use pnpm here")
    end = json.dumps(event("s1", "SessionEnd", transcript.path)).encode()
    assert post(door, "/dreamwell/hook/session-end", end) == (200, b"")
    assert [t["content"] for t in turns(tmp_path)] == ["we use pnpm here"]
    assert not [line for line in log_lines(tmp_path) if "started a dream" in line]  # 1 of 5
    url = door.url("session-end", ("--dream-auto-sessions", "1"))
    assert post(door, url[url.index("/dreamwell/") :], end) == (200, b"")
    [started] = [line for line in log_lines(tmp_path) if "session-end started a dream" in line]
    wait_for_pid(int(started.rsplit("pid ", 1)[1].rstrip(")")))


def test_a_server_keeps_a_resident_at_the_door_and_starts_one_when_none_answers(
    tmp_path: Path, run: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seeded(tmp_path)
    lately_asked(tmp_path)
    door = hook_door.ensure(DataDir(tmp_path).hook_door)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(run))
    monkeypatch.setenv("DREAMWELL_EMBEDDER", "none")
    monkeypatch.setattr(hook_door, "FIRST_CHECK", 0.01)
    monkeypatch.setattr(hook_door, "KEEP_ALIVE_EVERY", 0.5)
    assert not hook_door.ping(door)  # no resident: a post would be lost to Claude Code
    stop = threading.Event()
    keeper = threading.Thread(
        target=hook_door.keep_alive,
        args=(DataDir(tmp_path).hook_door, ["--data-dir", str(tmp_path)], stop),
    )
    keeper.start()
    try:
        assert _wait(lambda: hook_door.ping(door)), "keep_alive started no resident"
        [first] = residents(run)
        os.kill(first, 9)  # gone mid-session
        assert _wait(lambda: hook_door.ping(door) and residents(run) not in ([], [first]))
        body = json.dumps(event("s2", "SessionStart", tmp_path / "t.jsonl", source="startup"))
        status, answer = post(door, "/dreamwell/hook/session-start", body.encode())
        context = json.loads(answer)["hookSpecificOutput"]["additionalContext"]
        assert status == 200 and f"[{PREF}]" in context
    finally:
        stop.set()
        keeper.join(10)


def test_a_newer_resident_takes_the_door_and_the_older_one_leaves_it(
    tmp_path: Path, run: Path
) -> None:
    """An upgrade (or other settings) starts a resident of another key: it asks the one at
    the door to leave, so that hooks reach the newest code, and the old one stays on its
    socket alone until it idles out."""
    door = opened(tmp_path, run)
    [old] = residents(run)
    start = event("s2", "SessionStart", tmp_path / "t.jsonl", source="startup")
    lean_hook("session-start", start, tmp_path, run, "--dream-auto-sessions", "3")
    # its pid file is written once it holds the door
    assert _wait(lambda: len(list((run / "dreamwell").glob("*.pid"))) == 2)
    [new] = [pid for pid in residents(run) if pid != old]
    os.kill(new, 9)
    assert _wait(lambda: not hook_door.ping(door))  # the old one no longer answers there
    assert residents(run) == [old]


def test_the_first_session_start_returns_once_its_resident_is_at_the_door(
    tmp_path: Path, run: Path
) -> None:
    """After a boot no resident answers: the session start runs itself and starts one, and
    returns only when it is up, because the prompt's hook right after it is a post to the
    door that nothing would answer (Claude Code goes on without it)."""
    seeded(tmp_path)
    lately_asked(tmp_path)
    door = hook_door.ensure(DataDir(tmp_path).hook_door)
    start = event("s1", "SessionStart", tmp_path / "t.jsonl", source="startup")
    done = lean_hook("session-start", start, tmp_path, run)
    assert done.returncode == 0 and f"[{PREF}]" in done.stdout
    assert hook_door.ping(door)  # at once, with no waiting here
    body = json.dumps(prompt("s1", "how do I deploy the api?")).encode()
    status, answer = post(door, "/dreamwell/hook/user-prompt", body)
    assert status == 200 and f"[{DEPLOY}]" in answer.decode()
