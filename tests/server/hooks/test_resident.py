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
    install_claude_code,
    installed_hooks,
    lean_hook,
    log_lines,
    prompt,
    residents,
    run_installed,
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
    """A stop's client gets its (empty) answer at once, while the conversation log is held
    locked by another process; the resident records the turn once the lock is let go,
    before it runs the next hook."""
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
    settle(run)
    assert "_socket" in imported and len(via_resident(tmp_path)) == 1, log_lines(tmp_path)
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


def test_slow_and_silent_senders_never_keep_a_hook_from_its_answer(
    tmp_path: Path, run: Path
) -> None:
    """Connections are read side by side, each within CONN_WAIT of its accept: one sender
    dribbling a byte at a time and twenty that send nothing hold no other hook (they held
    the resident 30-40 s, past Claude Code's 10 s, when it read one connection at a time)."""
    seeded(tmp_path)
    lean_hook("stop", event("s0", "Stop", tmp_path / "t.jsonl"), tmp_path, run)
    wait_for_resident(run)
    [path] = (run / "dreamwell").glob("*.sock")
    stop = threading.Event()
    silent = [socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) for _ in range(20)]

    def dribble() -> None:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as slow:
            slow.connect(str(path))
            while not stop.wait(0.3):
                try:
                    slow.sendall(b"u")
                except OSError:  # dropped at its deadline
                    return

    sender = threading.Thread(target=dribble)
    sender.start()
    try:
        for sock in silent:
            sock.connect(str(path))
        done = lean_hook("user-prompt", prompt("s1", "deploy the api"), tmp_path, run)
    finally:
        stop.set()
        sender.join()
        for sock in silent:
            sock.close()
    assert f"[{DEPLOY}]" in done.stdout and len(via_resident(tmp_path)) == 1


def test_deeply_nested_hook_input_is_one_log_line_and_the_resident_lives_on(
    tmp_path: Path, run: Path
) -> None:
    """400 KB of nested arrays: the parse fails as bad input (one hooks.log line, an empty
    answer), and the same resident answers the next hook."""
    seeded(tmp_path)
    lean_hook("stop", event("s0", "Stop", tmp_path / "t.jsonl"), tmp_path, run)
    first = wait_for_resident(run)
    deep = b'{"session_id": "s1", "x": ' + b"[" * 200_000 + b"]" * 200_000 + b"}"
    done = lean_hook("user-prompt", deep, tmp_path, run)
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")
    [failed] = [line for line in log_lines(tmp_path) if "failed" in line]
    assert "user-prompt failed:" in failed and "the hook input is nested too deeply" in failed
    again = lean_hook("user-prompt", prompt("s2", "deploy the api"), tmp_path, run)
    assert f"[{DEPLOY}]" in again.stdout and residents(run) == [first]


def test_a_session_end_whose_resident_was_killed_is_recorded_by_the_installed_hook(
    tmp_path: Path, run: Path
) -> None:
    """The hooks `install claude-code` writes, run as Claude Code runs them, after `kill -9`
    of the resident: the session end runs itself, the session's last turn is recorded, and
    the next hook has a resident again."""
    data, home = tmp_path / "data", tmp_path / "home"
    seeded(data)
    install_claude_code(home, data)
    hooks = installed_hooks(home / ".claude" / "settings.json")
    assert f"[{DEPLOY}]" in run_installed(hooks["UserPromptSubmit"], prompt("s1", "deploy"), run)
    os.kill(wait_for_resident(run), signal.SIGKILL)  # its socket stays, refusing
    transcript = Transcript(tmp_path / "t.jsonl", "s1")
    transcript.user("we ship on fridays")
    end = event("s1", "SessionEnd", transcript.path, reason="other")
    assert run_installed(hooks["SessionEnd"], end, run) == ""
    assert [t["content"] for t in turns(data)][-1] == "we ship on fridays"
    assert any(" session-end ok: " in line for line in log_lines(data))
    wait_for_resident(run)  # the session end started a new one
    assert f"[{DEPLOY}]" in run_installed(hooks["UserPromptSubmit"], prompt("s2", "deploy"), run)
    assert " user-prompt ok: " in via_resident(data)[-1]


def test_a_stop_and_a_session_end_running_at_once_record_a_turn_once(tmp_path: Path) -> None:
    """Claude Code does not wait for the hooks install writes `async`, so a stop and the
    session end of one session may run at once as processes (no resident yet): the second
    starts from the state the first saved. Both are held at the conversation log's lock
    (as a slow disk would) until both have started."""
    seeded(tmp_path)
    transcript = Transcript(tmp_path / "t.jsonl", "s1")
    transcript.user("we ship on fridays")  # a turn no prompt hook recorded
    env = {**os.environ, "DREAMWELL_EMBEDDER": "none"}
    started = []
    with FileLock(str(tmp_path / ".conversation.jsonl.lock")):
        for name, kind in (("stop", "Stop"), ("session-end", "SessionEnd")):
            command = [sys.executable, "-m", "dreamwell.server", "hook", name]
            proc = subprocess.Popen(
                [*command, "--data-dir", str(tmp_path)], stdin=subprocess.PIPE, env=env
            )
            assert proc.stdin is not None
            proc.stdin.write(json.dumps(event("s1", kind, transcript.path)).encode())
            proc.stdin.close()
            started.append(proc)
        threading.Event().wait(LOG_WAIT * 0.8)  # both read the transcript meanwhile
    assert [p.wait(60) for p in started] == [0, 0]
    assert [t["content"] for t in turns(tmp_path)] == ["we ship on fridays"]
    assert sum(" ok: " in line for line in log_lines(tmp_path)) == 2, log_lines(tmp_path)


def test_a_session_end_whose_resident_dies_during_its_work_is_done_by_the_next_resident(
    tmp_path: Path, run: Path
) -> None:
    """A silent hook is answered before its work: a resident killed (`kill -9`) in that
    work leaves it in its journal, and the next resident of the key does it, once."""
    seeded(tmp_path)
    lean_hook("stop", event("s0", "Stop", tmp_path / "t.jsonl"), tmp_path, run)
    first = wait_for_resident(run)
    transcript = Transcript(tmp_path / "t.jsonl", "s1")
    transcript.user("we ship on fridays")
    end = json.dumps(event("s1", "SessionEnd", transcript.path, reason="other")).encode()
    command = [sys.executable, "-I", "-S", str(CLIENT), "session-end", "--data-dir"]
    env = {**os.environ, "DREAMWELL_EMBEDDER": "none", "XDG_RUNTIME_DIR": str(run)}
    with FileLock(str(tmp_path / ".conversation.jsonl.lock")):  # its work waits here
        done = subprocess.run(
            [*command, str(tmp_path)], input=end, capture_output=True, timeout=60, env=env
        )
        assert (done.returncode, done.stdout) == (0, b"")  # answered
        os.kill(first, signal.SIGKILL)
        wait_for_pid(first)
    assert turns(tmp_path) == []  # lost with it, for now
    lean_hook("user-prompt", prompt("s2", "deploy the api"), tmp_path, run)
    assert wait_for_resident(run) != first
    settle(run)
    # the prompt runs as its own process while the new resident replays its journal: either
    # may record first; the session end's turn is there once
    recorded = sorted(t["content"] for t in turns(tmp_path))
    assert recorded == ["deploy the api", "we ship on fridays"]
    assert [line for line in via_resident(tmp_path) if " session-end ok: " in line]
