"""`dreamwell hook EVENT` as the installed program Claude Code runs: what it imports (each
import is time the user waits for, docs/claude-code.md's budget) and how it reads its flags without
argparse."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from dreamwell.stores.layout import DataDir
from dreamwell.stores.skills.catalog import SkillCatalog
from dreamwell.stores.skills.folders import make_folder
from tests.support.hooks import event, hook, log_lines, prompt, seeded, turns

PROGRAM = Path(sys.executable).parent / "dreamwell"  # the console script install writes
# never wanted by any hook: the server's libraries, and the whole command line's parser
NEVER = (
    "argparse",
    "pydantic",
    "mcp",
    "lancedb",
    "pyarrow",
    "numpy",
    "onnxruntime",
    "anyio",
    "ctypes",
    "dreamwell.server.cli.parsing",
    "dreamwell.server.config",
)
# a stop hook records what is new in the transcript: it renders and searches nothing
# (nor the skills' SKILL.md parser, yaml, which the other two import to bring the skills'
# folders in step)
NOT_FOR_STOP = (
    "dreamwell.server.recall_text",
    "sqlite3",
    "tantivy",
    "dreamwell.stores.index",
    "yaml",
)


def imported(name: str, data: Path, payload: dict[str, object]) -> set[str]:
    """The modules one hook process imported (`python -X importtime`), run as Claude Code
    runs it: the installed program, the hook JSON on stdin."""
    done = subprocess.run(
        [sys.executable, "-X", "importtime", str(PROGRAM), "hook", name, "--data-dir", str(data)],
        input=json.dumps(payload).encode(),
        capture_output=True,
        timeout=60,
        env={**os.environ, "DREAMWELL_EMBEDDER": "none"},
        check=True,
    )
    lines = done.stderr.decode().splitlines()
    return {line.rsplit("|", 1)[1].strip() for line in lines if line.startswith("import time:")}


def loaded(modules: set[str], names: tuple[str, ...]) -> list[str]:
    return sorted(n for n in names if n in modules or any(m.startswith(n + ".") for m in modules))


@pytest.mark.parametrize("name", ["session-start", "user-prompt", "stop"])
def test_a_hook_imports_only_what_its_event_needs(name: str, tmp_path: Path) -> None:
    seeded(tmp_path)
    skill = b"---\nname: deploy-api\ndescription: Deploy the api\n---\n\nRun make deploy.\n"
    SkillCatalog(tmp_path).put(make_folder("deploy-api", {"SKILL.md": skill}, "deploy-api"))
    transcript = tmp_path / "t.jsonl"
    user = {"type": "user", "message": {"role": "user", "content": "ship the api"}}
    transcript.write_text(json.dumps(user) + "\n")
    payload = prompt("s1", "deploy the api", transcript_path=str(transcript))
    modules = imported(name, tmp_path, payload)
    assert "dreamwell.server.hooks.events" in modules  # the hook ran
    assert loaded(modules, NEVER) == []
    if name == "stop":
        assert loaded(modules, NOT_FOR_STOP) == []
        assert [t["content"] for t in turns(tmp_path)][-1] == "ship the api"
    assert "failed" not in (tmp_path / "hooks.log").read_text()


def test_flags_as_install_writes_them_or_with_equals_signs(tmp_path: Path) -> None:
    data = tmp_path / "d"
    done = hook("user-prompt", prompt("s1", "hi there"), tmp_path / "unused", f"--data-dir={data}")
    assert done.returncode == 0 and done.stderr == ""
    assert [t["content"] for t in turns(data)] == ["hi there"]  # the last --data-dir wins
    hook("user-prompt", prompt("s1", "for the tenant"), data, "--tenant", "team-a")
    assert [t["content"] for t in turns(DataDir(data).tenant("team-a").root)] == ["for the tenant"]


@pytest.mark.parametrize(
    "extra",
    [["--bogus"], ["--tenant"], ["--tenant", "-x"], ["stop"], ["--", "x"], ["bogus"], ["-h"]],
)
def test_flags_argparse_would_refuse_are_still_refused_and_logged(
    extra: list[str], tmp_path: Path
) -> None:
    done = hook("stop", event("s1", "Stop", tmp_path / "t.jsonl"), tmp_path, *extra)
    assert done.returncode == 0
    if extra == ["-h"]:  # help, as every command gives it
        assert done.stdout.startswith("usage: dreamwell hook")
        return
    assert done.stdout == ""
    assert "bad arguments" in log_lines(tmp_path)[-1]


def test_a_value_that_looks_like_an_event_is_the_flags_value(tmp_path: Path) -> None:
    hook("user-prompt", prompt("s1", "tenant named stop"), tmp_path, "--tenant", "stop")
    assert [t["content"] for t in turns(DataDir(tmp_path).tenant("stop").root)] == [
        "tenant named stop"
    ]
