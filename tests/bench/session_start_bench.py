"""What a session start injects at 100 and 1,000 memories (issue 54). Not collected by pytest;
in process, on real stores in a temporary directory with the shipped e5 model.

The store is the mix of ../shared/research/claude-code-turn5.md scenario B (about 15 %
user-preferences, 7 % anti-patterns, the rest project facts and people, generated from
templates; plus "The user always uses tabs, never spaces, to indent Go code." and a gofmt
fact). A session starts in a directory where nothing was asked yet; then a prompt is asked
there ("How should I indent the Go code in this repository?", or "what is 2+2"), and the next
session starts in the same directory. Each start is run through `hook_output` as the hook
runs it, by keywords (a hook in its own process) and by the resident's hybrid ranking
(server/hooks/hybrid.py, started as the resident starts it). Printed per start: characters,
preference lines, and whether the tabs preference is among them.

Before issue 54 every start injected the 40 most recently seen preference and anti-pattern
lines whatever the task: 3,123 characters at 100 memories, 5,188 at 1,000 (the report).

Run: python tests/bench/session_start_bench.py [--sizes 100,1000]
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import sys
import tempfile
import time
from pathlib import Path

from dreamwell.server.hooks import hybrid
from dreamwell.server.hooks.events import hook_output
from dreamwell.server.hooks.refresh import refresh
from dreamwell.server.hooks.settings import HookSettings
from dreamwell.stores import DataDir, LongTermStore, OnnxE5

TABS = "The user always uses tabs, never spaces, to indent Go code."
GOFMT = "Run gofmt -w on every Go file before committing in the widgets repository."
TOOLS = ("pytest", "ruff", "docker", "terraform", "vim", "tmux", "make", "poetry", "npm", "cargo")
TOPICS = ("commit messages", "code review", "logging", "error handling", "naming", "tests")
STYLES = ("short", "detailed", "plain", "formal", "bullet-free", "example-first")
SERVICES = ("billing", "search", "auth", "widgets", "reports", "gateway", "mailer", "ledger")
PEOPLE = ("Anna", "Marco", "Priya", "Tom", "Lena", "Jonas", "Sofia", "Ken", "Ines", "Omar")
ASKED = {
    "related": "How should I indent the Go code in this repository?",
    "unrelated": "what is 2+2",
}


def say(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def memories(n: int) -> list[tuple[str, str]]:
    """(content, category) × n in scenario B's mix, the tabs preference and gofmt among them."""
    prefs = (
        (f"The user prefers {s} {t}, and uses {tool} for them.", "user-preferences")
        for s, t, tool in itertools.product(STYLES, TOPICS, TOOLS)
    )
    antis = (
        (f"Never skip {t} in the {svc} service; it broke {tool} runs before.", "anti-patterns")
        for t, svc, tool in itertools.product(TOPICS, SERVICES, TOOLS)
    )
    facts = (
        (f"The {svc} service is deployed by {tool}; {p} owns it since release {k}.", "projects")
        for k, svc, tool, p in itertools.product(range(100), SERVICES, TOOLS, PEOPLE)
    )
    out = [(TABS, "user-preferences"), (GOFMT, "projects/widgets")]
    for k in range(n - len(out)):
        source = prefs if k % 100 < 15 else antis if k % 100 < 22 else facts
        out.append(next(source))
    return out


def start(settings: HookSettings, session: str, cwd: str) -> str:
    raw = {"session_id": session, "cwd": cwd, "hook_event_name": "SessionStart"}
    return hook_output(
        settings, "session-start", None, json.dumps(raw | {"source": "startup"}).encode()
    )


def ask(settings: HookSettings, session: str, cwd: str, text: str) -> str:
    raw = {"session_id": session, "cwd": cwd, "hook_event_name": "UserPromptSubmit"}
    return hook_output(settings, "user-prompt", None, json.dumps(raw | {"prompt": text}).encode())


def figures(block: str) -> str:
    lines = [line for line in block.splitlines() if line.startswith("- [")]
    return f"{len(block):5d} chars, {len(lines)} lines, tabs {'in' if TABS in block else 'out'}"


def sessions(settings: HookSettings, how: str, n: int) -> None:
    for label, text in ASKED.items():
        cwd = f"/work/{label}-{how.split()[0]}"
        fresh = start(settings, f"{label}-{how}-0", cwd)
        ask(settings, f"{label}-{how}-0", cwd, text)
        after = start(settings, f"{label}-{how}-1", cwd)
        say(f"  {n:5d} memories, {how:9s}: a fresh directory: {figures(fresh)}")
        say(f"  {n:5d} memories, {how:9s}: after '{text}': {figures(after)}")


def run(n: int, model: OnnxE5, tmp: Path) -> None:
    root = tmp / f"n{n}"
    store = LongTermStore(root, embedder=model)
    for content, category in memories(n):
        store.save(content, category, caller="bench")
    while store.backfill(batch=256):
        pass
    store.checkpoint()
    refresh(DataDir(root))
    settings = HookSettings(data_dir=root, dream_auto=False)
    sessions(settings, "keywords", n)
    hybrid.start(root, "", {})
    began = time.monotonic()
    while hybrid.ranker(DataDir(root))[0] is None:
        if time.monotonic() - began > 300:
            raise SystemExit("the resident's hybrid ranking did not come up in 300 s")
        time.sleep(0.2)
    sessions(settings, "hybrid", n)
    if hybrid._resident is not None:  # the next size opens its own store
        hybrid._resident.stop()
        hybrid._resident = None


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="100,1000")
    args = parser.parse_args()
    say(f"session start, load average {os.getloadavg()[0]:.2f}")
    model = OnnxE5()
    with tempfile.TemporaryDirectory() as tmp:
        for n in (int(s) for s in args.sizes.split(",")):
            run(n, model, Path(tmp))
    say(f"load average {os.getloadavg()[0]:.2f} at the end")


if __name__ == "__main__":
    main()
