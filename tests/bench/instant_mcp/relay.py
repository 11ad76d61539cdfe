"""A stdio MCP "server" for claude_code_bench.py --breakdown, standard library only, run as
`python -I -S relay.py record LOG COMMAND...` or `python -I -S relay.py replay LOG`.

record: runs COMMAND (dreamwell's server) and copies every frame both ways, appending each to
LOG ("C " from the client, "S " from the server). replay: answers each request with the
reply dreamwell gave to the first request of that method in LOG (the id swapped in), and a
`subscriptions/listen` with the notifications dreamwell sent: a server that does no work at
all, to measure what any stdio server with dreamwell's lists costs Claude Code."""

import io
import json
import os
import subprocess
import sys
import threading


def record(log_path: str, command: list[str]) -> None:
    with open(log_path, "a", encoding="utf-8") as log:
        relay(log, command)


def relay(log: "io.TextIOWrapper", command: list[str]) -> None:
    lock = threading.Lock()
    child = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE)

    def note(side: str, line: bytes) -> None:
        with lock:
            log.write(side + " " + line.decode("utf-8", "replace").rstrip("\n") + "\n")
            log.flush()

    def upstream() -> None:
        for line in sys.stdin.buffer:
            note("C", line)
            child.stdin.write(line)
            child.stdin.flush()
        child.stdin.close()

    threading.Thread(target=upstream, daemon=True).start()
    for line in child.stdout:
        note("S", line)
        sys.stdout.buffer.write(line)
        sys.stdout.flush()


def replies(log_path: str) -> dict[str, dict]:
    methods: dict[str, str] = {}
    found: dict[str, dict] = {}
    with open(log_path, encoding="utf-8") as log:
        for line in log:
            side, _, body = line.partition(" ")
            frame = json.loads(body)
            key = json.dumps(frame.get("id"))
            if side == "C" and "method" in frame and "id" in frame:
                methods[key] = frame["method"]
            elif side == "S" and "id" in frame and key in methods:
                found.setdefault(methods[key], frame)
            elif side == "S" and "method" in frame:
                found.setdefault("notify " + frame["method"], frame)
    return found


def replay(log_path: str) -> None:
    found = replies(log_path)
    pending = b""
    while chunk := os.read(0, 65536):
        pending += chunk
        while b"\n" in pending:
            line, pending = pending.split(b"\n", 1)
            frame = json.loads(line)
            method = frame.get("method")
            out = []
            if "id" in frame and method in found:
                out.append(dict(found[method], id=frame["id"]))
            elif method == "subscriptions/listen":
                out += [v for k, v in found.items() if k.startswith("notify ")]
            for reply in out:
                os.write(1, (json.dumps(reply) + "\n").encode())


if __name__ == "__main__":
    if sys.argv[1] == "record":
        record(sys.argv[2], sys.argv[3:])
    else:
        replay(sys.argv[2])
