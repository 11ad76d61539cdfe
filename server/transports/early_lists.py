"""The list requests answered while the server loads (docs/claude-code.md#starting-fast): Claude
Code in print mode sends `tools/list`, `prompts/list`, `resources/list` and
`resources/templates/list` right after the handshake and waits for the answers before its first
model request, and the SDK needs ~1.7 s to import before it can give them. So the stdio server keeps
its last answers (the SDK's own, as sent) in the data directory (`DataDir.mcp_lists`), and the next
one answers from them while it loads (server/transports/early.py), for the same settings and version
only.

They are given to a client that listens for list changes (a `subscriptions/listen`
acknowledged early): when the SDK has loaded, that client is told that every list it listens
to changed (server/transports/stdio.py) and asks again, so a skill added since the last
session is seen at once. A client that opened with a 2025 `initialize` (Codex, which waits for
`tools/list` before its first model request; Gemini CLI, which asks `prompts/list` first) gets
them too: our answer to its `initialize` declares `listChanged` for the prompts and resources,
so a list the SDK answers otherwise is announced with a 2025 `notifications/*/list_changed`
(server/transports/stdio.py; Gemini CLI asks again on one). The tools are the same eight for
the version and settings the answers were kept for.

The answers vouch for the data directory too: they are kept with its `format.json` as it was
(a newer dreamwell's mark), so a directory that cannot hold this version's store holds no
answers this server gives (unreadable, a file, or marked since by a newer dreamwell), and the
reader need not wait for the layout module to check it. Standard library only (the early
reader's rule)."""

from __future__ import annotations

import json
import os
import sys

from dreamwell.server.mcp.handshake import META_VERSION, VERSION

TYPE_CHECKING = False  # `typing` and `pathlib` are not imported: the first reply waits for them
if TYPE_CHECKING:
    from pathlib import Path
    from typing import Any

METHODS = ("tools/list", "prompts/list", "resources/list", "resources/templates/list")
# in the data directory: `DataDir.mcp_lists` and `DataDir.format_file` (a test holds them equal)
FILE, FORMAT_FILE = "mcp-lists.json", "format.json"


def kept_in(data_dir: str) -> str:
    """Where the lists are kept for the data directory `data_dir`, found without importing
    the layout (stores/layout.py, ~50 ms of imports the first reply would wait for)."""
    return os.path.join(data_dir, FILE)


def cache_key(argv: list[str] | None = None, env: dict[str, str] | None = None) -> str:
    """What the lists depend on besides the store: this version, the command's flags and the
    `DREAMWELL_*` settings (the tenant, the transport, the skills' settings, ...)."""
    given = os.environ if env is None else env
    settings = sorted(f"{k}={v}" for k, v in given.items() if k.startswith("DREAMWELL_"))
    return json.dumps([VERSION, sys.argv[1:] if argv is None else argv, settings])


def of_request(frame: Any) -> tuple[str, str] | None:
    """(method, protocol version) of a list request that can be answered from the cache: no
    cursor or other parameter, the version in its `_meta` (2026 era) or "" (None: another)."""
    if not isinstance(frame, dict) or frame.get("method") not in METHODS or "id" not in frame:
        return None
    params = frame.get("params") or {}
    if not isinstance(params, dict) or set(params) - {"_meta"}:
        return None
    meta = params.get("_meta") or {}
    version = meta.get(META_VERSION, "") if isinstance(meta, dict) else ""
    return (str(frame["method"]), str(version)) if isinstance(version, str) else None


class ListCache:
    """The last answers, per (method, protocol version), for one cache key."""

    def __init__(self, path: str | os.PathLike[str], key: str) -> None:
        self.path = os.fspath(path)
        self.key = key
        self._answers: dict[str, Any] = {}
        try:
            with open(self.path, encoding="utf-8") as file:
                found = json.load(file)
        except (OSError, ValueError):  # none yet, or damaged: it is written anew
            return
        if not isinstance(found, dict) or found.get("format") != self._format():
            return
        if found.get("key") == key:
            answers = found.get("answers")
            self._answers = answers if isinstance(answers, dict) else {}

    @property
    def vouches(self) -> bool:
        """Whether a server with these very settings answered before from this data directory
        as it is: the settings are read from the flags and `DREAMWELL_*` variables the key
        holds, so they are good again, and the directory's mark is unchanged, so the early
        reader need not wait for either to be judged."""
        return bool(self._answers)

    def reply(self, frame: Any) -> dict[str, Any] | None:
        """The answer to list request `frame` as the SDK gave it last time (None: none)."""
        wanted = of_request(frame)
        result = self._answers.get(" ".join(wanted)) if wanted else None
        if not isinstance(result, dict):
            return None
        return {"jsonrpc": "2.0", "id": frame["id"], "result": result}

    def record(self, wanted: tuple[str, str], result: Any) -> None:
        """The SDK's answer to a list request: kept when it differs from the one kept."""
        name = " ".join(wanted)
        if not isinstance(result, dict) or self._answers.get(name) == result:
            return
        self._answers[name] = result
        import contextlib
        from pathlib import Path

        from dreamwell.stores import write_atomic

        kept = {"key": self.key, "format": self._format(), "answers": self._answers}
        with contextlib.suppress(OSError):  # a read-only data directory: answered later
            write_atomic(Path(self.path), json.dumps(kept))

    def _format(self) -> str | None:
        """The data directory's `format.json` as it is now (None: none, or unreadable)."""
        try:
            with open(os.path.join(os.path.dirname(self.path), FORMAT_FILE), "rb") as file:
                return file.read(4096).decode("utf-8", "replace")
        except OSError:
            return None


PRIME_WAIT = 60.0  # seconds a priming server may take to load and answer
LEGACY = "2025-06-18"  # the `initialize` Codex 0.171 sends


def _opening(legacy: bool) -> list[dict[str, Any]]:
    """A client's opening: Claude Code's (2026: discover, listen, the four lists), or, with
    `legacy`, Codex's (a 2025 `initialize`, then `tools/list`, the one list it waits for)."""
    from dreamwell.server.mcp.handshake import META_CAPABILITIES, META_CLIENT, MODERN

    client = {"name": "dreamwell-install", "version": VERSION}
    if legacy:
        start = {"protocolVersion": LEGACY, "capabilities": {}, "clientInfo": client}
        return [
            {"jsonrpc": "2.0", "id": "init", "method": "initialize", "params": start},
            {"jsonrpc": "2.0", "method": "notifications/initialized"},
            {"jsonrpc": "2.0", "id": 0, "method": "tools/list"},
        ]
    meta = {META_VERSION: MODERN, META_CLIENT: client, META_CAPABILITIES: {}}
    wanted = dict.fromkeys(("toolsListChanged", "promptsListChanged", "resourcesListChanged"), True)
    return [
        {
            "jsonrpc": "2.0",
            "id": "discover",
            "method": "server/discover",
            "params": {"_meta": meta},
        },
        {
            "jsonrpc": "2.0",
            "id": "listen",
            "method": "subscriptions/listen",
            "params": {"_meta": meta, "notifications": wanted},
        },
        *(
            {"jsonrpc": "2.0", "id": i, "method": m, "params": {"_meta": meta}}
            for i, m in enumerate(METHODS)
        ),
    ]


def prime(
    args: list[str], env: dict[str, str], cwd: Path, legacy: bool = False, inherit: bool = True
) -> bool:
    """Have the server as a client's config starts it (`dreamwell ARGS`, `env` over this
    environment, by this interpreter; `inherit=False`: over it without its `DREAMWELL_*`
    variables, as Codex starts a server) answer the lists once (`legacy`: `tools/list` after
    a 2025 `initialize`, as Codex asks), so that its answers are kept before the client's
    first session: a short session (`claude -p` on a loaded machine) may end before the SDK
    has loaded, and then nothing is ever kept. Whether they are kept."""
    import subprocess

    frames = _opening(legacy)
    asked = [f["id"] for f in frames if str(f.get("method", "")).endswith("/list")]
    text = "".join(json.dumps(f) + "\n" for f in frames)
    base = {k: v for k, v in os.environ.items() if inherit or not k.startswith("DREAMWELL_")}
    try:  # stdin ends after the lists: the server answers what it read, then leaves
        done = subprocess.run(
            [sys.executable, "-m", "dreamwell.server", *args],
            input=text.encode(),
            capture_output=True,
            env={**base, **env},
            cwd=cwd,
            timeout=PRIME_WAIT,
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    answered = [json.loads(line) for line in done.stdout.splitlines() if line.startswith(b"{")]
    return sum("result" in a and a.get("id") in asked for a in answered) == len(asked)
