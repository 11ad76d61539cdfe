"""The hooks' lean client and resident process (server/hooks/client.py, resident.py): a hook
runs as `python -I -S client.py EVENT FLAGS`, handed to a resident process over a Unix socket,
or run by itself (and a resident started) when none answers. Whatever path a hook takes, it
prints and records what `dreamwell hook` does."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest
from filelock import FileLock

from dreamwell.server.hooks import client, resident
from dreamwell.server.hooks.events import LOG_WAIT
from dreamwell.server.hooks.refresh import refresh
from dreamwell.stores import PROJECT, DataDir, LongTermStore
from tests.support.hooks import (
    CLIENT,
    DEPLOY,
    PREF,
    Transcript,
    event,
    hook,
    lately_asked,
    lean_hook,
    log_lines,
    prompt,
    residents,
    seeded,
    settle,
    turns,
    wait_for_pid,
    wait_for_resident,
)
from tests.support.repos import two_projects

SHOP, BILLING = {PROJECT: "github.com/acme/shop"}, {PROJECT: "github.com/acme/billing"}


def via_resident(data: Path) -> list[str]:
    return [line for line in log_lines(data) if line.endswith("(resident)")]


def test_a_hook_runs_itself_when_no_resident_answers_then_one_does(
    tmp_path: Path, run: Path
) -> None:
    seeded(tmp_path)
    first = lean_hook("user-prompt", prompt("s1", "how do I deploy the api?"), tmp_path, run)
    assert first.returncode == 0 and first.stderr == ""
    assert f"[{DEPLOY}]" in first.stdout and not via_resident(tmp_path)
    wait_for_resident(run)
    again = lean_hook("user-prompt", prompt("s2", "how do I deploy the api?"), tmp_path, run)
    assert again.stdout == first.stdout  # the same text, from the resident
    [line] = via_resident(tmp_path)
    assert " user-prompt ok: " in line
    assert [t["session"] for t in turns(tmp_path)] == ["s1", "s2"]


def test_each_event_prints_and_records_through_the_resident_as_by_itself(
    tmp_path: Path, run: Path
) -> None:
    seeded(tmp_path / "a")
    seeded(tmp_path / "b")
    lately_asked(tmp_path / "a")
    lately_asked(tmp_path / "b")
    start = event("s1", "SessionStart", tmp_path / "t.jsonl", source="startup")
    by_itself = hook("session-start", start, tmp_path / "a")
    lean_hook("stop", event("warm", "Stop", tmp_path / "t.jsonl"), tmp_path / "b", run)
    wait_for_resident(run)
    resident_start = lean_hook("session-start", start, tmp_path / "b", run)
    assert PREF in by_itself.stdout and resident_start.stdout == by_itself.stdout
    assert len(via_resident(tmp_path / "b")) == 1


def test_a_silent_hook_is_answered_before_its_work_through_the_socket(
    tmp_path: Path, run: Path
) -> None:
    """As at the HTTP door (test_door.py): a stop's client gets its (empty) answer at once,
    while the conversation log is held locked by another process; the resident records the
    turn once the lock is let go, before it takes its next connection."""
    seeded(tmp_path)
    lean_hook("user-prompt", prompt("s0", "hello"), tmp_path, run)
    wait_for_resident(run)
    transcript = Transcript(tmp_path / "t.jsonl", "s1")
    transcript.user("we deploy with make ship")
    stop = json.dumps(event("s1", "Stop", transcript.path)).encode()
    command = [sys.executable, "-I", "-S", str(CLIENT), "stop", "--data-dir", str(tmp_path)]
    env = {**os.environ, "DREAMWELL_EMBEDDER": "none", "XDG_RUNTIME_DIR": str(run)}
    with FileLock(str(tmp_path / ".conversation.jsonl.lock")):
        began = time.monotonic()
        done = subprocess.run(command, input=stop, capture_output=True, timeout=60, env=env)
        took = time.monotonic() - began
        assert (done.returncode, done.stdout) == (0, b"") and took < LOG_WAIT, took
        assert [t["session"] for t in turns(tmp_path)] == ["s0"]  # its work waits
    settle(run)
    assert [t["content"] for t in turns(tmp_path)][-1] == "we deploy with make ship"
    assert " stop ok: " in via_resident(tmp_path)[-1]


def test_a_killed_resident_leaves_no_hook_unanswered(tmp_path: Path, run: Path) -> None:
    seeded(tmp_path)
    lean_hook("stop", event("s0", "Stop", tmp_path / "t.jsonl"), tmp_path, run)
    first = wait_for_resident(run)
    os.kill(first, signal.SIGKILL)  # its socket stays behind, refusing connections
    wait_for_pid(first)
    done = lean_hook("user-prompt", prompt("s1", "deploy the api"), tmp_path, run)
    assert f"[{DEPLOY}]" in done.stdout and not via_resident(tmp_path)
    second = wait_for_resident(run)
    assert second != first
    done = lean_hook("user-prompt", prompt("s2", "deploy the api"), tmp_path, run)
    assert f"[{DEPLOY}]" in done.stdout and len(via_resident(tmp_path)) == 1


def test_hooks_racing_with_no_resident_all_answer_and_leave_one_resident(
    tmp_path: Path, run: Path
) -> None:
    seeded(tmp_path)
    results: dict[int, str] = {}

    def one(i: int) -> None:
        results[i] = lean_hook("user-prompt", prompt(f"s{i}", "deploy"), tmp_path, run).stdout

    threads = [threading.Thread(target=one, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(f"[{DEPLOY}]" in out for out in results.values()) and len(results) == 4
    wait_for_resident(run)  # exactly one: the others gave up on the lock
    deadline = time.monotonic() + 30
    while len(residents(run)) > 1:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    assert sorted(t["session"] for t in turns(tmp_path)) == ["s0", "s1", "s2", "s3"]


def test_a_connection_that_sends_nothing_is_dropped_and_the_next_hook_answered(
    tmp_path: Path, run: Path
) -> None:
    seeded(tmp_path)
    lean_hook("stop", event("s0", "Stop", tmp_path / "t.jsonl"), tmp_path, run)
    wait_for_resident(run)
    [path] = (run / "dreamwell").glob("*.sock")
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as silent:
        silent.connect(str(path))  # and never sends
        done = lean_hook("user-prompt", prompt("s1", "deploy the api"), tmp_path, run)
    assert f"[{DEPLOY}]" in done.stdout and len(via_resident(tmp_path)) == 1


def test_an_idle_resident_removes_its_socket_and_still_answers_who_had_connected(
    tmp_path: Path,
) -> None:
    path = Path(tempfile.mkdtemp(prefix="dw", dir="/tmp")) / "k.sock"
    server = resident.listen(path)
    late = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    late.connect(str(path))  # connected as the resident reaches its idle limit
    late.sendall(b"user-prompt\0/\0{}")
    late.shutdown(socket.SHUT_WR)
    resident.serve(server, path, lambda event, raw: f"{event}:{raw.decode()}".encode(), idle=0)
    server.close()
    assert late.recv(100) == b"user-prompt:{}" and not path.exists()
    late.close()
    path.parent.rmdir()


def test_a_run_directory_others_may_enter_is_not_used(tmp_path: Path, run: Path) -> None:
    seeded(tmp_path)
    (run / "dreamwell").mkdir(mode=0o755)
    os.chmod(run / "dreamwell", 0o755)
    for i in range(2):
        done = lean_hook("user-prompt", prompt(f"s{i}", "deploy the api"), tmp_path, run)
        assert f"[{DEPLOY}]" in done.stdout
    assert not via_resident(tmp_path) and not list((run / "dreamwell").iterdir())
    assert residents(run) == []


def test_flags_only_the_full_parser_can_judge_leave_the_hooks_as_processes(
    tmp_path: Path, run: Path
) -> None:
    seeded(tmp_path)
    flags = ("--dream-auto-after", "soon")  # `Settings` says what is wrong, in hooks.log
    lean_hook("stop", event("s0", "Stop", tmp_path / "t.jsonl"), tmp_path, run, *flags)
    deadline = time.monotonic() + 30
    while not list((run / "dreamwell").glob("*.refused")):
        assert time.monotonic() < deadline, "the resident did not refuse"
        time.sleep(0.05)
    lean_hook("stop", event("s1", "Stop", tmp_path / "t.jsonl"), tmp_path, run, *flags)
    while residents(run):  # the one that refused, on its way out; no other was started
        assert time.monotonic() < deadline, "a resident is still running"
        time.sleep(0.05)
    assert not via_resident(tmp_path) and not list((run / "dreamwell").glob("*.sock"))
    assert sum("bad settings" in line for line in log_lines(tmp_path)) == 2


def test_the_client_imports_only_builtin_modules(tmp_path: Path, run: Path) -> None:
    """What every hook pays before the resident answers: no dreamwell, no site-packages."""
    seeded(tmp_path)
    lean_hook("stop", event("s0", "Stop", tmp_path / "t.jsonl"), tmp_path, run)
    wait_for_resident(run)
    env = {**os.environ, "XDG_RUNTIME_DIR": str(run), "DREAMWELL_EMBEDDER": "none"}
    command = [sys.executable, "-I", "-S", "-X", "importtime", str(CLIENT), "stop"]
    done = subprocess.run(
        [*command, "--data-dir", str(tmp_path)],
        input=json.dumps(event("s1", "Stop", tmp_path / "t.jsonl")).encode(),
        capture_output=True,
        env=env,
        timeout=60,
    )
    imported = {
        line.split("|")[-1].strip() for line in done.stderr.decode().splitlines() if "|" in line
    } - {"imported package"}
    assert "_socket" in imported and len(via_resident(tmp_path)) == 1
    assert not {m for m in imported if m.startswith(("dreamwell", "json", "site", "socket"))}


def test_the_key_changes_with_the_data_directory_and_settings_not_the_event(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    base = client.key(["--data-dir", "/a"])
    assert client.key(["--data-dir", "/a"]) == base
    assert client.key(["--data-dir", "/b"]) != base
    monkeypatch.setenv("DREAMWELL_HOOK_MAX_CHARS", "500")
    assert client.key(["--data-dir", "/a"]) != base


def test_the_resident_runs_each_hook_in_the_directory_claude_code_ran_it_in(
    tmp_path: Path, run: Path
) -> None:
    """A hook's JSON without `cwd` belongs to the project the hook ran in (its process's
    directory), not to the one the resident was started from."""
    shop, billing = two_projects(tmp_path / "src")
    data = tmp_path / "data"
    store = LongTermStore(data)
    mine = store.save("Deploy the shop with make deploy-shop", metadata=SHOP).entry.id
    theirs = store.save("Deploy billing with kubectl apply", metadata=BILLING).entry.id
    assert store.checkpoint()
    refresh(DataDir(data))
    lean_hook("stop", {"session_id": "s0", "transcript_path": "/none"}, data, run, cwd=billing)
    wait_for_resident(run)  # started in billing's directory
    ask = {"session_id": "s1", "prompt": "how do I deploy?", "transcript_path": "/none"}
    done = lean_hook("user-prompt", ask, data, run, cwd=shop)
    assert mine in done.stdout and theirs not in done.stdout
    assert len(via_resident(data)) == 1
