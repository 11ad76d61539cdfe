"""`dreamwell hook EVENT` as Claude Code runs it: a fresh process per event with the hook JSON
on stdin. What it prints is added to the model's context; what it records feeds the dream."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
from pydantic import ValidationError

from dreamwell.server.config import Settings
from dreamwell.server.hooks import settings as hook_settings
from dreamwell.server.hooks.refresh import refresh
from dreamwell.stores import LongTermStore
from dreamwell.stores.hooks import RECALL_CHARS
from dreamwell.stores.layout import DataDir
from dreamwell.stores.longterm import snapshot
from dreamwell.stores.skills.catalog import SkillCatalog
from dreamwell.stores.skills.folders import make_folder
from dreamwell.stores.skills.sync import enable_sync
from tests.support.hooks import (
    ANTI,
    DEPLOY,
    PREF,
    TEA,
    Transcript,
    event,
    hook,
    log_lines,
    prompt,
    recalls,
    seeded,
    turns,
    wait_for_refresher,
)


def test_user_prompt_prints_the_memories_for_the_prompt_and_records_the_turn(
    tmp_path: Path,
) -> None:
    seeded(tmp_path)
    done = hook("user-prompt", prompt("s1", "how do I deploy the api?"), tmp_path)
    assert done.returncode == 0 and done.stderr == ""
    assert done.stdout.startswith("Recalled from long-term memory")
    assert f"[{DEPLOY}] (projects/api): Deploy the api with make deploy" in done.stdout
    assert TEA not in done.stdout
    [turn] = turns(tmp_path)
    assert turn["content"] == "how do I deploy the api?" and turn["session"] == "s1"
    assert (turn["role"], turn["cwd"], turn["via"], turn["client"]) == (
        "user",
        "/work/proj",
        "hook",
        "claude-code",
    )
    [shown] = recalls(tmp_path)
    assert DEPLOY in shown["ids"] and shown["session"] == "s1" and shown["via"] == "hook"
    assert shown["query"] == "how do I deploy the api?" and shown["ts"]


def test_a_memory_is_injected_once_per_session_and_again_after_a_compaction(tmp_path: Path) -> None:
    seeded(tmp_path)
    first = hook("user-prompt", prompt("s1", "deploy the api"), tmp_path)
    again = hook("user-prompt", prompt("s1", "deploy the api now"), tmp_path)
    other = hook("user-prompt", prompt("s2", "deploy the api"), tmp_path)
    assert DEPLOY in first.stdout and DEPLOY not in again.stdout and DEPLOY in other.stdout
    compacted = event("s1", "SessionStart", tmp_path / "t.jsonl", source="compact")
    assert DEPLOY not in hook("session-start", compacted, tmp_path).stdout
    assert DEPLOY in hook("user-prompt", prompt("s1", "deploy the api"), tmp_path).stdout
    assert len(turns(tmp_path)) == 3  # the repeated prompt of s1 is one turn


def test_session_start_prints_the_preferences_relevant_to_where_the_session_is(
    tmp_path: Path,
) -> None:
    """Ranked against the project's name and the prompts lately asked there, not the most
    recent whatever they are: a session in a directory where nothing was asked gets none."""
    seeded(tmp_path)
    start = event("s1", "SessionStart", tmp_path / "t.jsonl", source="startup")
    assert hook("session-start", start, tmp_path).stdout == ""
    asked = "answer in prose without bullet points; search code with ripgrep, not find"
    assert hook("user-prompt", prompt("s1", asked), tmp_path).returncode == 0
    done = hook("session-start", start | {"session_id": "s2"}, tmp_path)
    assert done.returncode == 0
    assert done.stdout.startswith("The user's preferences and anti-patterns")
    assert PREF in done.stdout and ANTI in done.stdout
    assert DEPLOY not in done.stdout and TEA not in done.stdout
    elsewhere = start | {"session_id": "s3", "cwd": "/work/other"}
    assert hook("session-start", elsewhere, tmp_path).stdout == ""
    assert {PREF, ANTI} <= set(recalls(tmp_path)[-1]["ids"])


def test_a_prompt_s_recall_fits_its_room_each_memory_keeping_its_line_and_the_asked_words(
    tmp_path: Path,
) -> None:
    """Eight long relevant memories took 8 whole lines (issue 54: a median 1,648 characters
    a LoCoMo question); now their texts are cut around the prompt's words to fit."""
    store = LongTermStore(tmp_path)
    filler = "We talked about the weather, the traffic and the new coffee machine. " * 4
    ids = [
        store.save(f"{filler}Note {n}: the pottery class moved to Tuesday. {filler}", "notes")
        for n in range(8)
    ]
    store.checkpoint()
    refresh(DataDir(tmp_path))
    done = hook("user-prompt", prompt("s1", "when is the pottery class?"), tmp_path)
    header, *lines = done.stdout.splitlines()
    assert header.startswith("Recalled from long-term memory") and len(lines) == 8
    assert sum(len(line) + 1 for line in lines) <= RECALL_CHARS
    assert {f"[{s.entry.id}]" for s in ids} == {line.split()[1] for line in lines}
    assert all("pottery class" in line and "…" in line for line in lines)


def test_session_start_stays_within_hook_max_chars(tmp_path: Path) -> None:
    store = LongTermStore(tmp_path)
    for i in range(60):
        store.save(f"preference number {i} " + "x" * 80, category="user-preferences/long")
    store.checkpoint()
    refresh(DataDir(tmp_path))
    env = {"DREAMWELL_HOOK_MAX_CHARS": "500"}
    hook("user-prompt", prompt("s0", "which preference number?"), tmp_path, env=env)
    done = hook(
        "session-start", event("s1", "SessionStart", tmp_path / "t.jsonl"), tmp_path, env=env
    )
    assert 250 < len(done.stdout) <= 501


def test_memories_not_yet_checkpointed_are_found_from_the_log(tmp_path: Path) -> None:
    store = seeded(tmp_path)
    saved = store.save("The staging cluster is called quokka", category="infra")
    gone = store.save("The old cluster was called wombat", category="infra")
    store.delete(gone.entry.id)
    edited = replace(store.get(TEA) or store.entries()[0], content="The user drinks mint tea")
    store.apply([edited])
    done = hook("user-prompt", prompt("s1", "staging cluster quokka wombat, tea?"), tmp_path)
    assert saved.entry.id in done.stdout and "wombat" not in done.stdout
    assert "mint tea" in done.stdout and "green tea" not in done.stdout
    assert not DataDir(tmp_path).hook_refresh_pid.exists()  # the snapshot was good enough


def test_without_a_snapshot_a_hook_starts_one_refresher_and_later_hooks_use_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(snapshot, "SNAPSHOT_EVERY", 1)  # the log drops what a snapshot covers
    store = LongTermStore(tmp_path)
    store.save("Deploy the api with make deploy", category="projects/api")
    store.checkpoint()
    store.save("The api has a health check", category="projects/api")
    store.checkpoint()  # the first is in the index, no longer in the log: its text needs
    assert not list(DataDir(tmp_path).wal.glob("00000000000000000001.log"))  # the snapshot
    first = hook("user-prompt", prompt("s1", "deploy the api"), tmp_path)
    assert first.returncode == 0 and "make deploy" not in first.stdout
    wait_for_refresher(tmp_path)
    assert DataDir(tmp_path).hook_entries.exists()
    later = hook("user-prompt", prompt("s2", "deploy the api"), tmp_path)
    assert "make deploy" in later.stdout


def test_stop_records_new_user_turns_tools_and_skills_from_the_transcript(tmp_path: Path) -> None:
    seeded(tmp_path)
    t = Transcript(tmp_path / "session.jsonl", "s1")
    t.user("deploy the api please")
    hook("user-prompt", prompt("s1", "deploy the api please"), tmp_path)  # recorded here
    t.tool("Bash", {"command": "make deploy"})
    t.tool("Skill", {"skill": "release-checklist"})
    t.assistant("Deployed.")
    t.user("<command-name>/cut-release</command-name>\n<command-args>v2</command-args>")
    t.user("<command-name>/clear</command-name>")
    t.user("and tag it v2 <private>my token is in ~/.tok</private>")
    t.user("This session is being continued: summary …", isCompactSummary=True)
    t.user("a subagent's prompt", isSidechain=True)
    t.tool("Bash", {"command": "git tag v2"})
    assert hook("stop", event("s1", "Stop", t.path), tmp_path).stdout == ""
    contents = [r["content"] for r in turns(tmp_path)]
    assert contents == ["deploy the api please", "and tag it v2"]
    usage = [json.loads(line) for line in (tmp_path / "skill-usage.jsonl").read_text().splitlines()]
    assert [u["skill"] for u in usage if "skill" in u] == ["release-checklist", "cut-release"]
    tools = {u["tool"]: u["count"] for u in usage if "tool" in u}
    assert tools == {"Bash": 2, "Skill": 1}
    assert all(u["via"] == "hook" and u["session"] == "s1" for u in usage)
    t.user("one more thing")  # only what is new is read by the next event
    hook("session-end", event("s1", "SessionEnd", t.path, reason="exit"), tmp_path)
    assert [r["content"] for r in turns(tmp_path)][-1] == "one more thing"
    assert (
        len(turns(tmp_path)) == 3
        and len((tmp_path / "skill-usage.jsonl").read_text().splitlines()) == 4
    )


def test_nothing_private_or_secret_is_recorded(tmp_path: Path) -> None:
    secret = "ghp_aB3dE5fG7hJ9kL1mN3pQ5rS7tU9vW1xY3zA5"
    text = f"use token {secret} <private>my salary is 90k</private> for the deploy"
    hook("user-prompt", prompt("s1", text), tmp_path)
    written = "".join(p.read_text(errors="replace") for p in tmp_path.rglob("*") if p.is_file())
    assert secret not in written and "salary" not in written
    assert turns(tmp_path)[0]["content"] == "use token [REDACTED]  for the deploy"


def test_record_conversation_false_records_no_turn_but_still_recalls(tmp_path: Path) -> None:
    seeded(tmp_path)
    t = Transcript(tmp_path / "session.jsonl", "s1")
    t.user("typed in the session")
    off = {"DREAMWELL_RECORD_CONVERSATION": "false"}
    done = hook("user-prompt", prompt("s1", "deploy the api"), tmp_path, env=off)
    hook("stop", event("s1", "Stop", t.path), tmp_path, env=off)
    assert DEPLOY in done.stdout
    assert turns(tmp_path) == []


def test_a_tenant_hook_works_on_the_tenants_directory(tmp_path: Path) -> None:
    seeded(tmp_path / "tenants" / "alice")
    done = hook("user-prompt", prompt("s1", "deploy the api"), tmp_path, "--tenant", "alice")
    assert DEPLOY in done.stdout
    assert turns(tmp_path / "tenants" / "alice") and not (tmp_path / "conversation.jsonl").exists()


def test_unknown_fields_are_ignored(tmp_path: Path) -> None:
    seeded(tmp_path)
    payload = prompt("s1", "deploy the api", prompt_id="p1", agent_id="a", extra={"x": [1]})
    assert DEPLOY in hook("user-prompt", payload, tmp_path).stdout


def test_session_files_older_than_a_week_are_pruned(tmp_path: Path) -> None:
    hook("user-prompt", prompt("old-session", "hello"), tmp_path)
    path = DataDir(tmp_path).hook_session("old-session")
    week = 8 * 86400
    os.utime(path, (path.stat().st_atime - week, path.stat().st_mtime - week))
    hook("session-start", event("new", "SessionStart", tmp_path / "t.jsonl"), tmp_path)
    assert not path.exists() and DataDir(tmp_path).hook_session("new").exists()


@pytest.mark.parametrize(
    "env",
    [
        {},
        {"RECORD_CONVERSATION": "False", "HOOK_MAX_CHARS": "900", "NAMESPACE": "patrol/x"},
        {"RECORD_CONVERSATION": "off", "HOOK_MAX_CHARS": "200"},
        {"DREAM_AUTO": "false", "DREAM_AUTO_AFTER": "12h", "DREAM_AUTO_SESSIONS": "2"},
        {"PROJECT": "github.com/acme/shop"},
    ],
)
def test_the_hooks_fast_settings_agree_with_settings(
    env: dict[str, str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    for key, value in {**env, "DATA_DIR": str(tmp_path)}.items():
        monkeypatch.setenv(f"DREAMWELL_{key}", value)
    assert hook_settings.read(None) == hook_settings.from_settings(Settings())


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("HOOK_MAX_CHARS", "lots"),
        ("HOOK_MAX_CHARS", "50"),
        ("RECORD_CONVERSATION", "maybe"),
        ("DREAM_AUTO_AFTER", "soon"),
        ("DREAM_AUTO_SESSIONS", "many"),
    ],
)
def test_what_the_fast_settings_cannot_judge_goes_to_settings(
    key: str, value: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(f"DREAMWELL_{key}", value)
    with pytest.raises(hook_settings.NotPlain):
        hook_settings.read(None)
    with pytest.raises(ValidationError):
        Settings()


HEAVY = ("mcp", "lancedb", "pyarrow", "numpy", "onnxruntime", "pydantic", "uvicorn", "anyio")


@pytest.mark.parametrize("name", ["session-start", "user-prompt", "stop"])
def test_a_hook_imports_no_heavy_library(name: str, tmp_path: Path) -> None:
    seeded(tmp_path)
    skill = b"---\nname: deploy-api\ndescription: Deploy the api\n---\n\nRun make deploy.\n"
    folder = make_folder("deploy-api", {"SKILL.md": skill}, "deploy-api")
    SkillCatalog(tmp_path).put(folder)  # the skills' read path runs too,
    enable_sync(DataDir(tmp_path), tmp_path / "claude-skills")  # and their folders' sync
    (tmp_path / "t.jsonl").write_text("")
    given = json.dumps(prompt("s1", "deploy the api", transcript_path=str(tmp_path / "t.jsonl")))
    probe = (
        "import io, sys\n"
        f"sys.stdin = io.TextIOWrapper(io.BytesIO({given.encode()!r}))\n"
        "from dreamwell.server.cli.hook import hook_main\n"
        f"code = hook_main(['hook', {name!r}, '--data-dir', {str(tmp_path)!r}])\n"
        f"print('\\nloaded', sorted({{m.split('.')[0] for m in sys.modules}} & set({HEAVY!r})))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60
    )
    assert done.stdout.splitlines()[-1] == "loaded []"
    if name != "stop":
        assert "- deploy-api: Deploy the api" in done.stdout
    assert "failed" not in (tmp_path / "hooks.log").read_text()


def test_a_transcript_line_still_being_written_is_read_by_the_next_event(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    line = json.dumps({"type": "user", "message": {"role": "user", "content": "ship it today"}})
    path.write_text(line[:20])  # Claude Code has not finished the line
    hook("stop", event("s1", "Stop", path), tmp_path)
    assert turns(tmp_path) == []
    with open(path, "a") as fh:
        fh.write(line[20:] + "\n")
    hook("stop", event("s1", "Stop", path), tmp_path)
    assert [r["content"] for r in turns(tmp_path)] == ["ship it today"]


def test_a_failing_refresher_is_not_started_again_for_a_minute(tmp_path: Path) -> None:
    (tmp_path / "lancedb").write_text("not a directory")  # the store cannot be opened
    hook("user-prompt", prompt("s1", "anything"), tmp_path)
    wait_for_refresher(tmp_path)
    dirs = DataDir(tmp_path)
    assert "refresh failed" in "\n".join(log_lines(tmp_path))
    assert dirs.hook_refresh_failed.exists()
    started = dirs.hook_refresh_pid.read_text().split()
    hook("user-prompt", prompt("s1", "anything else"), tmp_path)
    assert dirs.hook_refresh_pid.read_text().split() == started  # no second refresher
