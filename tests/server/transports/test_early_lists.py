"""The list requests answered while the server loads (server/transports/early_lists.py):
Claude Code waits for `tools/list`, `prompts/list` and `resources/list` before its first model
request, and the SDK takes ~1.7 s to import. A client that listens for list changes gets the
last server's answers at once; once the SDK has loaded, a list it answers otherwise is
announced as changed, and one it answers alike is not (a client told of a change asks again:
Claude Code, asking while it stopped a short session, waited seconds for a server gone)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from dreamwell.server.mcp.handshake import VERSION
from dreamwell.server.transports.early_lists import FORMAT_FILE, kept_in
from dreamwell.stores import DataDir
from tests.support.cli import dreamwell
from tests.support.wire import CLAUDE_CODE, Wire

pytestmark = pytest.mark.anyio

ANSWERED = re.compile(r"answered (.+) before loading the server, as the last server did")
LOADED = re.compile(r"answered the handshake before loading the server; of (.+), loaded then: (.+)")
LISTS = ("tools/list", "prompts/list")
SKILL = "---\nname: go-release\ndescription: Cut a release of the Go service\n---\n\nmake it\n"


async def session(data: Path, listen: bool = True) -> tuple[dict[str, Any], list[str], str]:
    """Claude Code's opening (the probe, a listen, the lists), then a tool call answered by
    the SDK, then the end: the list answers by method, the notifications, the server's log."""
    async with Wire(data, "--log-level", "INFO") as wire:
        await wire.send_json(CLAUDE_CODE.discover("probe"))
        await wire.reply()
        opening = [CLAUDE_CODE.listen("listen:0")] if listen else []
        opening += [CLAUDE_CODE.request(i, m) for i, m in enumerate(LISTS, 1)]
        call = CLAUDE_CODE.request(9, "tools/call", name="list_memory_categories", arguments={})
        await wire.send_json(*opening, call)
        frames = [await wire.reply()]
        while frames[-1].get("id") != 9:
            frames.append(await wire.reply())
        frames += await wire.close()
    answers = {LISTS[f["id"] - 1]: f["result"] for f in frames if f.get("id") in (1, 2)}
    notified = [f["method"] for f in frames if f.get("method", "").endswith("/list_changed")]
    return answers, notified, wire.stderr()


async def test_the_lists_are_answered_before_the_sdk_loads_and_a_change_is_announced(
    tmp_path: Path,
) -> None:
    data = tmp_path / "data"
    first, _, log = await session(data)  # no answers kept yet: the SDK answers
    assert ANSWERED.search(log) is None and len(first["tools/list"]["tools"]) == 8
    again, notified, log = await session(data)
    found = ANSWERED.search(log)
    assert found is not None and found.group(1) == "prompts/list, tools/list", log
    assert again == first  # the same answers, given before the SDK loaded
    assert "notifications/tools/list_changed" not in notified
    assert "notifications/prompts/list_changed" not in notified
    source = tmp_path / "src" / "go-release"
    source.mkdir(parents=True)
    (source / "SKILL.md").write_text(SKILL)
    assert (
        dreamwell("skills", "import", str(source.parent), "--data-dir", str(data)).returncode == 0
    )
    stale, notified, _ = await session(data)  # answered early as before the skill came
    assert stale["prompts/list"] == first["prompts/list"]
    assert "notifications/prompts/list_changed" in notified  # so the client asks again
    assert "notifications/tools/list_changed" not in notified
    fresh, notified, _ = await session(data)
    names = [p["name"] for p in fresh["prompts/list"]["prompts"]]
    assert "go-release" in names and "notifications/prompts/list_changed" not in notified


async def test_with_the_lists_kept_the_handshake_waits_for_no_settings_nor_stores_code(
    tmp_path: Path,
) -> None:
    """A start whose kept lists vouch answers before `main` imports pydantic or the stores
    (the data directory's layout alone cost ~50 ms): the reply goes once the standard
    library's few modules are loaded; the server logs which of those it had loaded then."""
    data = tmp_path / "data"
    await session(data)
    _, _, log = await session(data)
    found = LOADED.search(log)
    assert found is not None, log
    assert found.group(1).endswith("pydantic, dreamwell.stores") and found.group(2) == "none"


def test_the_lists_file_and_the_mark_are_where_the_layout_says(tmp_path: Path) -> None:
    """The early reader finds them without importing the layout (stores/layout.py)."""
    where = DataDir(tmp_path)
    assert Path(kept_in(str(tmp_path))) == where.mcp_lists
    assert where.format_file.name == FORMAT_FILE


async def test_a_client_that_does_not_listen_gets_the_lists_from_the_sdk(tmp_path: Path) -> None:
    data = tmp_path / "data"
    await session(data)
    answers, _, log = await session(data, listen=False)
    assert ANSWERED.search(log) is None and len(answers["tools/list"]["tools"]) == 8


async def test_answers_kept_for_other_settings_are_not_given(tmp_path: Path) -> None:
    data = tmp_path / "data"
    await session(data)
    kept = json.loads((data / "mcp-lists.json").read_text())
    kept["key"] = kept["key"].replace("DREAMWELL_", "DREAMWELL_OTHER_")
    (data / "mcp-lists.json").write_text(json.dumps(kept))
    _, _, log = await session(data)
    assert ANSWERED.search(log) is None


async def test_a_server_that_cannot_start_answers_the_lists_with_the_cause(tmp_path: Path) -> None:
    """The lists wait for the server to know it can start: a data directory written by a
    newer dreamwell is the answer to them, not the last server's lists."""
    data = tmp_path / "data"
    await session(data)
    (data / "format.json").write_text('{"format": 999}')
    async with Wire(data) as wire:
        await wire.send_json(CLAUDE_CODE.discover("probe"))
        await wire.reply()
        opening = [CLAUDE_CODE.listen("listen:0")]
        opening += [CLAUDE_CODE.request(i, m) for i, m in enumerate(LISTS, 1)]
        await wire.send_json(*opening)
        answers = [await wire.reply() for _ in range(3)]
        await wire.close()
    lists = [a for a in answers if a.get("id") in (1, 2)]
    assert len(lists) == 2 and all("result" not in a for a in lists), answers
    assert all(a["error"]["message"].startswith("dreamwell cannot start: ") for a in lists)


WINDOW = """
import json, os, sys, time
from pathlib import Path
from dreamwell.server.transports.early import EarlyStdio
from dreamwell.server.transports.early_lists import ListCache, cache_key
cache = ListCache(Path(sys.argv[1]), cache_key())
early = EarlyStdio(hold=float(sys.argv[2]), lists=cache).start()
time.sleep(1.0)  # the settings are being read: the client's frames arrive meanwhile
print(json.dumps({"judged": True}), flush=True)
early.refuse("bad setting x", wait=0.5)
"""


def window(kept: Path, frames: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """What WINDOW's early reader (lists kept at `kept`, a hold of 10 s) wrote for `frames`."""
    done = subprocess.run(
        [sys.executable, "-c", WINDOW, str(kept), "10"],
        input=b"".join(json.dumps(f).encode() + b"\n" for f in frames),
        capture_output=True,
        timeout=60,
        env={k: v for k, v in os.environ.items() if not k.startswith("DREAMWELL_")},
    )
    return [json.loads(line) for line in done.stdout.splitlines()]


def test_lists_kept_for_these_settings_are_answered_before_they_are_judged(
    tmp_path: Path,
) -> None:
    """The window: kept lists vouch for the settings (a server with the very same ones
    answered them), so the handshake and the lists go out at once, not after the ~0.4 s the
    settings take to read (the hold of 10 s here is not waited for); a server that then
    cannot start after all answers the client's next request with the cause."""
    kept = tmp_path / "mcp-lists.json"
    answer = {"tools": [], "_meta": {}}
    key = json.dumps([VERSION, [str(kept), "10"], []])  # as cache_key() reads it there
    kept.write_text(json.dumps({"key": key, "answers": {"tools/list 2026-07-28": answer}}))
    frames = [
        CLAUDE_CODE.discover("probe"),
        CLAUDE_CODE.listen("listen:0"),
        CLAUDE_CODE.request(1, "tools/list"),
        CLAUDE_CODE.request(2, "tools/call"),
    ]
    replies = window(kept, frames)
    judged = replies.index({"judged": True})
    assert [r["id"] for r in replies[:judged] if "id" in r] == ["probe", 1], replies
    assert replies[judged - 1]["result"] == answer
    [called] = [r for r in replies[judged:] if r.get("id") == 2]
    assert called["error"]["message"] == "dreamwell cannot start: bad setting x"


def test_without_kept_lists_the_handshake_waits_for_the_settings(tmp_path: Path) -> None:
    """No lists kept (a first start, other settings): the handshake waits for the settings
    (up to its hold), so that a server that cannot start says why in its answer."""
    replies = window(tmp_path / "mcp-lists.json", [CLAUDE_CODE.discover("probe")])
    assert replies[0] == {"judged": True}, replies
    assert replies[1]["error"]["message"] == "dreamwell cannot start: bad setting x"


IDLE = """
import json, sys, time
from pathlib import Path
from dreamwell.server.transports.early import EarlyStdio
from dreamwell.server.transports.early_lists import ListCache, cache_key
began = time.monotonic()
early = EarlyStdio(lists=ListCache(Path(sys.argv[1]), cache_key())).start()
early.idle(float(sys.argv[2]))
print(json.dumps({"idled": time.monotonic() - began}), flush=True)
"""


def idled(kept: Path, grace: float, frames: list[dict[str, Any]], then: Any = None) -> Any:
    """IDLE's early reader (lists kept at `kept`) given `frames`, then, 1 s later, `then`
    (a frame, or "close" for the end of stdin; None: nothing, stdin stays open): its replies
    until it stopped idling, and how long it idled (seconds)."""
    key = json.dumps([VERSION, [str(kept), str(grace)], []])  # as cache_key() reads it there
    answer = {"tools": [], "_meta": {}}
    kept.write_text(json.dumps({"key": key, "answers": {"tools/list 2026-07-28": answer}}))
    env = {k: v for k, v in os.environ.items() if not k.startswith("DREAMWELL_")}
    with subprocess.Popen(
        [sys.executable, "-c", IDLE, str(kept), str(grace)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        env=env,
    ) as process:
        assert process.stdin is not None and process.stdout is not None
        process.stdin.write(b"".join(json.dumps(f).encode() + b"\n" for f in frames))
        process.stdin.flush()
        replies = [json.loads(process.stdout.readline()) for _ in range(3)]  # probe, ack, list
        time.sleep(1.0)
        if then == "close":
            process.stdin.close()
        elif then is not None:
            process.stdin.write(json.dumps(then).encode() + b"\n")
            process.stdin.flush()
        replies.append(json.loads(process.stdout.readline()))
        process.kill()
    return replies


OPENING = [
    CLAUDE_CODE.discover("probe"),
    CLAUDE_CODE.listen("listen:0"),
    CLAUDE_CODE.request(1, "tools/list"),
]


def test_with_the_lists_kept_nothing_loads_until_a_request_needs_the_server(
    tmp_path: Path,
) -> None:
    """A `claude -p` run that never calls dreamwell ends ~1 s after it started the server;
    loading it meanwhile (1-3 s of CPU) slowed Claude Code's own start on two cores. With the
    lists kept, the server's opening is answered from them and the loading waits (`idle`):
    until a request only the server answers comes (here 1 s into a wait of 60 s), or stdin
    closes, or the grace has passed, so a server no frame needs still loads by itself."""
    kept = tmp_path / "mcp-lists.json"
    *opening, woke = idled(kept, 60, OPENING, CLAUDE_CODE.request(2, "tools/call"))
    assert [r.get("id") for r in opening] == ["probe", None, 1], opening  # while idle
    assert 1.0 <= woke["idled"] < 30, woke  # woken by the call, not the grace
    *_, woke = idled(kept, 60, OPENING, "close")
    assert 1.0 <= woke["idled"] < 30, woke  # the client left
    *_, woke = idled(kept, 2.0, OPENING)
    assert woke["idled"] >= 2.0, woke  # nothing needed it: the grace, then it loads


def test_without_kept_lists_loading_does_not_wait(tmp_path: Path) -> None:
    """No lists vouch: the handshake waits for the settings, so nothing idles."""
    script = IDLE.replace("ListCache(Path(sys.argv[1]), cache_key())", "None")
    done = subprocess.run(
        [sys.executable, "-c", script, str(tmp_path / "none"), "60"],
        input=b"",
        capture_output=True,
        timeout=60,
    )
    assert json.loads(done.stdout)["idled"] < 30, done


# Codex 0.171 opens with a 2025 `initialize` and, with `required = true`, waits for `tools/list`
# before its first model request (these are its frames, captured from its stdin)
CODEX = [
    {
        "jsonrpc": "2.0",
        "id": 0,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {"elicitation": {"form": {}, "url": {}}},
            "clientInfo": {"name": "codex-mcp-client", "title": "Codex", "version": "0.171.0"},
        },
    },
    {"jsonrpc": "2.0", "method": "notifications/initialized"},
    {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": {"progressToken": 0}}},
    {"jsonrpc": "2.0", "id": 2, "method": "prompts/list"},
]
# `dreamwell serve` whose server and stores load only once the file argv[1] exists (the
# stores' and the SDK's imports wait for it): a load as slow as the test wants
GATED = """
import os, sys, time
gate = sys.argv.pop(1)
class Slow:
    def find_spec(self, name, path=None, target=None):
        while name in ("mcp", "dreamwell.stores") and not os.path.exists(gate):
            time.sleep(0.01)
        return None
sys.meta_path.insert(0, Slow())
from dreamwell.server.cli.main import run
run()
"""


def lines_before(process: subprocess.Popen[bytes], count: int, seconds: float) -> list[Any]:
    """The next `count` frames `process` writes within `seconds` (fewer: it wrote no more)."""
    import selectors

    assert process.stdout is not None
    frames: list[Any] = []
    with selectors.DefaultSelector() as watch:
        watch.register(process.stdout, selectors.EVENT_READ)
        deadline = time.monotonic() + seconds
        while len(frames) < count and watch.select(max(0.0, deadline - time.monotonic())):
            line = process.stdout.readline()
            if not line:  # it left
                break
            frames.append(json.loads(line))
    return frames


def gated(data: Path, gate: Path) -> subprocess.Popen[bytes]:
    """GATED's server on `data`, its log in `data`'s sibling `serve.log`."""
    args = ["serve", "--data-dir", str(data), "--log-level", "INFO"]
    env = {k: v for k, v in os.environ.items() if not k.startswith("DREAMWELL_")}
    with (data.parent / "serve.log").open("wb") as log:
        return subprocess.Popen(
            [sys.executable, "-c", GATED, str(gate), *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            bufsize=0,  # lines_before selects on the pipe: no frame may wait in a buffer
            stderr=log,
            env=env | {"DREAMWELL_EMBEDDER": "none"},
        )


def test_a_2025_client_gets_the_lists_before_the_server_and_stores_load(tmp_path: Path) -> None:
    """The window: Codex waits for `tools/list`, Gemini CLI for `prompts/list` (then the
    tools and resources), before the first model request. With the answers kept by the last
    server for these settings, the lists are answered while the stores and the SDK have not
    loaded (here: not before the test lets them); once loaded the SDK answers the rest and
    nothing twice. A skill added since the kept answers is announced as a 2025 server
    announces it (our `initialize` answer declares `listChanged` for prompts): the client
    asks again and gets it."""
    data, gate = tmp_path / "data", tmp_path / "gate"
    gate.touch()  # a first server, loading at once, answers and keeps its lists
    first = gated(data, gate)
    out, _ = first.communicate(b"".join(json.dumps(f).encode() + b"\n" for f in CODEX), 60)
    sdk = {a["id"]: a for a in map(json.loads, out.splitlines()) if "id" in a}
    assert len(sdk[1]["result"]["tools"]) == 8 and "prompts" in sdk[2]["result"], sdk
    source = tmp_path / "src" / "go-release"
    source.mkdir(parents=True)
    (source / "SKILL.md").write_text(SKILL)
    imported = dreamwell("skills", "import", str(source.parent), "--data-dir", str(data))
    assert imported.returncode == 0, imported
    gate.unlink()
    process = gated(data, gate)
    assert process.stdin is not None and process.stdout is not None
    try:
        process.stdin.write(b"".join(json.dumps(f).encode() + b"\n" for f in CODEX))
        process.stdin.flush()
        early = lines_before(process, 3, 20)
        assert [f.get("id") for f in early] == [0, 1, 2], early
        assert early[1:] == [sdk[1], sdk[2]]  # the last SDK's very answers
        gate.touch()
        call = {"jsonrpc": "2.0", "id": 3, "method": "tools/call"}
        call["params"] = {"name": "list_memory_categories", "arguments": {}}
        process.stdin.write(json.dumps(call).encode() + b"\n")
        process.stdin.flush()
        rest = lines_before(process, 2, 60)
        again = {"jsonrpc": "2.0", "id": 4, "method": "prompts/list"}
        process.stdin.write(json.dumps(again).encode() + b"\n")
        process.stdin.close()
        rest += lines_before(process, 9, 60)
        process.wait(30)
    finally:  # a server still held at the gate
        process.kill()
        process.wait()
        process.stdout.close()
    log = (tmp_path / "serve.log").read_text()
    assert sorted(str(f.get("id", f.get("method"))) for f in rest[:2]) == [
        "3",
        "notifications/prompts/list_changed",
    ], rest
    assert "error" not in next(f for f in rest if f.get("id") == 3), rest
    assert [f.get("id") for f in rest[2:]] == [4], rest  # nothing answered twice
    assert "go-release" in [p["name"] for p in rest[2]["result"]["prompts"]], rest
    found = ANSWERED.search(log)
    assert found is not None and found.group(1) == "prompts/list, tools/list", log


def test_a_client_that_leaves_with_all_it_asked_answered_early_does_not_wait_for_the_load(
    tmp_path: Path,
) -> None:
    """Codex lists the tools and, in a session that never calls one, closes stdin: the server
    then has nothing to do, and loading the SDK and the stores anyway took 1-3 s of CPU
    beside the agent on two cores. Here the load is held for good: the server must leave
    by itself, having answered the handshake and the tools."""
    data, gate = tmp_path / "data", tmp_path / "gate"
    gate.touch()
    first = gated(data, gate)  # keeps the lists for these settings
    first.communicate(b"".join(json.dumps(f).encode() + b"\n" for f in CODEX), 60)
    gate.unlink()
    process = gated(data, gate)
    try:  # the gate never opens: a server that loads waits there until killed
        out, _ = process.communicate(
            b"".join(json.dumps(f).encode() + b"\n" for f in CODEX[:3]), timeout=30
        )
    finally:
        process.kill()
        process.communicate()
    replies = [json.loads(line) for line in out.splitlines()]
    assert [r.get("id") for r in replies] == [0, 1] and process.returncode == 0, replies
