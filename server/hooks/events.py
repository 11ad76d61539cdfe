"""`dreamwell hook EVENT`: every agent's hooks (docs/claude-code.md, docs/codex.md, docs/gemini.md,
docs/copilot.md), run as a fresh process per event (or by the resident). `AGENT:EVENT` runs EVENT
for another agent than Claude Code: what differs — event names, stdin, the output's shape, the
transcript's format, the name each record gives the client — is that agent's table
(server/hooks/agents/).

stdin is the client's hook JSON (`session_id`, `transcript_path`, `cwd`, `hook_event_name`,
`prompt`, `source`; anything else is ignored). `session-start` and `user-prompt` print plain
text, which Claude Code adds to the model's context; `stop`, `pre-compact` and `session-end`
read what is new in the transcript and print nothing. The exit code is always 0 and a failure
prints nothing: it is one line in `hooks.log` instead, because a hook must never break the
user's prompt.

The read path imports no MCP SDK, LanceDB, numpy or onnxruntime (see stores/hooks/quick_recall.py),
and each event only what it needs: the recall text (server/recall_text.py) only for the two
events that print, the transcript reader only for the three that read one.
Skills come from the skill catalog (stores/skills/catalog.py, through server/hooks/skills.py): the
active ones listed at session start, up to 3 relevant ones per prompt, each once a session."""

from __future__ import annotations

import contextlib
import json
import os
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dreamwell.server.hooks.agents.claude import CLAUDE_CODE
from dreamwell.server.hooks.agents.core import EVENTS as EVENTS
from dreamwell.server.hooks.agents.core import Agent
from dreamwell.server.hooks.agents.table import agent_of
from dreamwell.server.hooks.client import MAX_INPUT
from dreamwell.stores import DataDir, MemoryEntry, Project, pinned_project, project_of, redact
from dreamwell.stores.hooks import HookSession, HookSessions, hooks_log

if TYPE_CHECKING:
    from dreamwell.server.hooks.settings import HookSettings
    from dreamwell.stores.hooks import QuickRecall, Ranker

CLIENT = CLAUDE_CODE.name  # the agent of a bare EVENT
MAX_TURN_CHARS = 16_000  # of one recorded turn (a log line holds 64 KiB; the dream reads 800)
LOG_WAIT = 2.0  # seconds a hook waits for a log's lock before giving up (and logging that)
PREFERENCES = ("user-preferences", "preferences", "anti-patterns")
PREFERENCES_HEADER = "The user's preferences and anti-patterns (from long-term memory):"
SKILLS_HEADER = "Skills available (load one with the Skill tool):"
WORKING_HEADER = "Working memory (use get_from_working_memory with the full key to read):"
PREFERENCE_LINES = 8  # preferences a session start injects at most: those relevant to it
RECENT_PROMPTS = 3  # prompts of the session's project its preferences are ranked against
TAIL_BYTES = 64 * 1024  # of the conversation log read for them


class HookInputError(ValueError):
    """The hook's stdin is not what the client sends."""


@dataclass(frozen=True)
class Call:
    event: str
    dirs: DataDir
    payload: dict[str, Any]
    session: str
    settings: HookSettings
    agent: Agent = CLAUDE_CODE


# ---- skills: from the skill catalog (server/hooks/skills.py) --------------------------------
def _sync_project(project: Project | None) -> tuple[str, Path] | None:
    """The project as the skill sync takes it: (key, the folder whose .claude/skills/ holds
    that project's skills)."""
    return (project.key, project.root) if project is not None else None


def skills_for_session_start(
    dirs: DataDir, state: HookSession, project: Project | None = None
) -> list[tuple[str, str]]:
    """(name, description) of the active skills to list at session start: those the client
    can load, after bringing its skill folders in step (the user's, and `project`'s in its
    `.claude/skills/`), leaving out those already shown in this session's context and other
    projects'; the caller fits them to hook_max_chars."""
    from dreamwell.server.hooks.skills import active, synced
    from dreamwell.stores.skills import SkillCatalog

    catalog = SkillCatalog(dirs)
    can_load = synced(catalog, _sync_project(project))
    return active(catalog, state.skills, can_load, _key(project))


def skills_for_prompt(
    dirs: DataDir, state: HookSession, prompt: str, project: Project | None = None
) -> list[tuple[str, str]]:
    """(name, description) of up to 3 active skills the client can load relevant to `prompt`
    not yet shown in this session (nor of another project)."""
    from dreamwell.server.hooks.skills import relevant

    return relevant(dirs, prompt, state.skills, project=_sync_project(project))


def record_skill_uses(
    dirs: DataDir,
    session: str,
    skills: Sequence[str],
    tools: Counter[str],
    client: str = CLIENT,
) -> None:
    """The skills and tools the agent used, into `skill-usage.jsonl` (usage counts are derived
    from it). Every skill name is kept, the catalog's or not: a skill the user wrote by hand
    and uses often is what the dream's gap detection should know about."""
    from dreamwell.stores.inputs import SKILL_USAGE, SKILL_USAGE_MAX_BYTES, JsonlLog

    if not skills and not tools:
        return
    log = JsonlLog(dirs.root, SKILL_USAGE, lock_timeout=LOG_WAIT, max_bytes=SKILL_USAGE_MAX_BYTES)
    for skill in skills:
        log.append({"session": session, "skill": redact(skill), "via": "hook", "client": client})
    for tool, count in sorted(tools.items()):
        log.append(
            {"session": session, "tool": tool, "count": count, "via": "hook", "client": client}
        )


# ---- the project (docs/projects.md): pinned, else the hook input's cwd ---------------------------
def caller_project(call: Call) -> Project | None:
    """The project this hook call belongs to: the pinned `project` setting, else the
    repository of the hook input's `cwd` (else of this process's directory)."""
    if call.settings.project:
        return pinned_project(call.settings.project)
    cwd = call.payload.get("cwd")
    return project_of(cwd if isinstance(cwd, str) and cwd else os.getcwd())


def _key(project: Project | None) -> str | None:
    return project.key if project is not None else None


# ---- recording -----------------------------------------------------------------------------
def _append(dirs: DataDir, name: str, record: dict[str, Any], now: datetime | None = None) -> None:
    from dreamwell.stores.inputs import CONVERSATION, CONVERSATION_MAX_BYTES, JsonlLog

    bound = CONVERSATION_MAX_BYTES if name == CONVERSATION else None
    JsonlLog(dirs.root, name, lock_timeout=LOG_WAIT, max_bytes=bound).append(record, now)


def record_turn(call: Call, state: HookSession, text: str, ts: str = "") -> bool:
    """One user turn (redacted) into the conversation log, once per session."""
    text = redact(text).strip()
    if not call.settings.record_conversation or not text or not state.mark_recorded(text):
        return False
    record = {"session": call.session, "role": "user", "content": text[:MAX_TURN_CHARS]}
    record |= {"cwd": redact(str(call.payload.get("cwd") or "")), "via": "hook"}
    record["client"] = call.agent.name
    project = caller_project(call)
    if project is not None:  # the dream keeps what it learns from it in that project
        record |= {"project": project.key, "project_root": str(project.root)}
    when = None
    if ts:
        try:
            when = datetime.fromisoformat(ts.replace("Z", "+00:00"))
        except ValueError:
            when = None
    _append(call.dirs, "conversation.jsonl", record, when)
    state.turns += 1
    state.note("turn")
    return True


def record_recall(
    call: Call, state: HookSession, query: str, ids: list[str], skills: list[str]
) -> None:
    """What a hook injected, so the dream's judge sees what the agent was shown (and, for
    `dreamwell stats`, that it ran, even when it had nothing to show)."""
    state.note("start" if call.event == "session-start" else "recall", len(ids))
    if not ids and not skills:
        return
    record = {"session": call.session, "query": query[:2000], "ids": ids, "skills": skills}
    _append(call.dirs, "recall.jsonl", record | {"via": "hook", "client": call.agent.name})
    state.mark_injected(ids)
    state.skills = [*state.skills, *(s for s in skills if s not in state.skills)]
    state.recalls += 1


# ---- events -------------------------------------------------------------------------------------
def _recall(dirs: DataDir) -> QuickRecall:
    from dreamwell.stores.hooks import QuickRecall

    reader = QuickRecall(dirs)
    for problem in reader.problems:
        hooks_log(dirs, problem)
    if reader.stale:
        from dreamwell.server.hooks.refresh import start_refresh

        start_refresh(dirs)
    return reader


@contextlib.contextmanager
def ranking(call: Call) -> Iterator[Ranker]:
    """How this hook ranks: as `search_memory` does in a resident that holds the store and
    its embedder (server/hooks/hybrid.py), else by keywords under the same relevance rule
    (and hooks.log says why)."""
    from dreamwell.server.hooks import hybrid

    found, why = hybrid.ranker(call.dirs)
    if found is not None:
        yield found
        return
    hooks_log(call.dirs, f"{call.event} keyword-only: {why}")
    reader = _recall(call.dirs)
    try:
        yield reader
    finally:
        reader.close()


def _working_lines(call: Call) -> list[str]:
    from dreamwell.server.recall_text import wm_line
    from dreamwell.stores.working import WorkingMemory

    working = WorkingMemory(call.dirs.root)
    prefixes = [p for p in (call.settings.namespace, "patrol") if p]
    return [wm_line(e) for p in prefixes for e in working.listing(p)]


def _room(call: Call, state: HookSession) -> int:
    """Characters this hook may inject: hook_max_chars, within what is left of the
    session's budget (hook_session_chars) since its context last started afresh."""
    left = call.settings.hook_session_chars - state.budget_used
    if left <= 0:
        hooks_log(call.dirs, f"{call.event}: the session's budget of injected text is spent")
    return max(0, min(call.settings.hook_max_chars, left))


def _spent(state: HookSession, block: str) -> None:
    state.budget_used += len(block)
    state.injected_chars += len(block)


def where_queries(call: Call, project: Project | None) -> list[str]:
    """What a session start's preferences are ranked against, each alone: where the session
    is (its project's or directory's name) and what was asked there lately (the last
    RECENT_PROMPTS prompts recorded in that project, else in that directory), newest first."""
    from dreamwell.stores.inputs import CONVERSATION

    cwd = redact(str(call.payload.get("cwd") or ""))
    words = [project.root.name if project is not None else Path(cwd).name]
    path = call.dirs.root / CONVERSATION
    try:
        with open(path, "rb") as fh:
            start = fh.seek(max(0, fh.seek(0, os.SEEK_END) - TAIL_BYTES))
            lines = fh.read().splitlines()[1 if start else 0 :]  # no line cut in two
    except OSError:
        lines = []
    prompts: list[str] = []
    for line in reversed(lines):
        try:
            record = json.loads(line)
        except ValueError:
            continue
        mine = project.key == record.get("project") if project is not None else False
        if isinstance(record, dict) and (mine or (cwd and record.get("cwd") == cwd)):
            prompts.append(str(record.get("content") or "")[:500])
        if len(prompts) >= RECENT_PROMPTS:
            break
    return [q for q in [*prompts, *words] if q.strip()]


def _preferences(ranker: Ranker, queries: list[str], project: str | None) -> list[MemoryEntry]:
    """The preferences relevant to any of `queries`, taken from each in turn."""
    from dreamwell.stores.hooks import recalled

    found = [recalled(ranker, q, project, (), PREFERENCE_LINES, PREFERENCES) for q in queries]
    out: dict[str, MemoryEntry] = {}
    for rank in range(PREFERENCE_LINES):
        for hits in found:
            if rank < len(hits) and len(out) < PREFERENCE_LINES:
                out.setdefault(hits[rank].id, hits[rank])
    return list(out.values())


def session_start(call: Call, state: HookSession) -> str:
    from dreamwell.server.recall_text import fill
    from dreamwell.server.recall_text import memory_line as _line
    from dreamwell.stores.hooks import RECALL_CHARS, shown

    if call.payload.get("source") in ("clear", "compact"):
        state.injected, state.skills = [], []  # the context no longer holds what was shown
        state.budget_used = 0
    project = caller_project(call)
    key = _key(project)
    queries = where_queries(call, project)
    with ranking(call) as ranker:
        preferences = _preferences(ranker, queries, key)
    skills = skills_for_session_start(call.dirs, state, project)
    room = _room(call, state)
    sections = [
        (PREFERENCES_HEADER, shown(preferences, " ".join(queries), _line, min(RECALL_CHARS, room))),
        (SKILLS_HEADER, [f"- {name}: {about}" for name, about in skills]),
        (WORKING_HEADER, _working_lines(call)),
    ]
    block = fill(sections, room)
    ids = [e.id for e in preferences if f"[{e.id}]" in block]
    record_recall(
        call, state, " / ".join(queries), ids, [n for n, _ in skills if f"- {n}:" in block]
    )
    _spent(state, block)
    HookSessions(call.dirs).prune()
    return block


def user_prompt(call: Call, state: HookSession) -> str:
    from dreamwell.server.recall_text import RECALLED, fill
    from dreamwell.server.recall_text import memory_line as _line
    from dreamwell.stores.hooks import RECALL_CHARS, recalled, shown

    prompt = call.payload.get("prompt")
    if not isinstance(prompt, str):
        raise HookInputError("the hook input has no 'prompt' text")
    text = redact(prompt)
    record_turn(call, state, text)
    project = caller_project(call)
    room = _room(call, state)
    if not room:
        record_recall(call, state, text, [], [])
        return ""
    with ranking(call) as ranker:
        fresh = recalled(ranker, text, _key(project), state.injected)
    skills = skills_for_prompt(call.dirs, state, text, project)
    sections = [
        (RECALLED, shown(fresh, text, _line, min(RECALL_CHARS, room))),
        (SKILLS_HEADER, [f"- {name}: {about}" for name, about in skills]),
    ]
    block = fill(sections, room)
    ids = [e.id for e in fresh if f"[{e.id}]" in block]
    record_recall(call, state, text, ids, [n for n, _ in skills if f"- {n}:" in block])
    _spent(state, block)
    return block


def transcript_event(call: Call, state: HookSession) -> str:
    """stop / pre-compact / session-end: record what is new in the transcript."""
    from dreamwell.server.hooks.transcript import read_new

    path = call.payload.get("transcript_path")
    # none given (Copilot's session end: its stop read the transcript), or a session that
    # wrote none (`claude mcp list`): nothing to read, the session still ends
    if isinstance(path, str) and path and Path(path).expanduser().exists():
        news = read_new(Path(path).expanduser(), state.offset, call.agent.reader)
        if news.skipped:
            hooks_log(
                call.dirs, f"{call.event}: skipped {news.skipped} transcript line(s) over 8 MiB"
            )
        for ts, text in news.user_turns:
            record_turn(call, state, call.agent.prompt(text), ts)
        record_skill_uses(call.dirs, call.session, news.skills, news.tools, call.agent.name)
        state.offset = news.offset
    elif path is not None and not isinstance(path, str):
        raise HookInputError("the hook input's 'transcript_path' is not text")
    if call.event == "session-end":
        HookSessions(call.dirs).prune()
    return ""


def start_dream_if_due(call: Call) -> None:
    """`dream_auto`: a detached `dreamwell dream --once` when one is due (server/auto_dream.py;
    a few stat() calls when it is not)."""
    from dreamwell.server.auto_dream import AutoDream, maybe_start

    s = call.settings
    auto = AutoDream(s.dream_auto, s.dream_auto_after, s.dream_auto_sessions, s.dream_flags)
    tenant = "" if call.dirs.root == DataDir(s.data_dir).root else call.dirs.root.name
    pid = maybe_start(s.data_dir, tenant, auto)
    if pid is not None:
        hooks_log(call.dirs, f"session-end started a dream (pid {pid})")


HANDLERS: dict[str, Callable[[Call, HookSession], str]] = {
    "session-start": session_start,
    "user-prompt": user_prompt,
    "stop": transcript_event,
    "pre-compact": transcript_event,
    "session-end": transcript_event,
}


# ---- the command ------------------------------------------------------------------------------
def read_payload(raw: bytes) -> dict[str, Any]:
    try:
        payload = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise HookInputError(f"the hook input is not JSON ({exc})") from None
    except RecursionError:  # the parser's depth bound (the interpreter's recursion limit)
        raise HookInputError("the hook input is nested too deeply") from None
    if not isinstance(payload, dict):
        raise HookInputError("the hook input is not a JSON object")
    session = payload.get("session_id")
    if not isinstance(session, str) or not session.strip():
        raise HookInputError("the hook input has no 'session_id'")
    return payload


def run_hook(
    event: str, dirs: DataDir, settings: HookSettings, raw: bytes, agent: Agent = CLAUDE_CODE
) -> str:
    """What `agent`'s hook prints for one call; raises on any failure (the caller logs it)."""
    payload = agent.payload(read_payload(raw))
    session = str(payload["session_id"])[:200]
    dirs.ensure()
    sessions = HookSessions(dirs)
    call = Call(event, dirs, payload, session, settings, agent)
    # one hook of a session at a time from its load to its save: an agent may run two at
    # once (Copilot CLI its session start and prompt), Claude Code a stop and the session end
    # in the background; a prompt waits 2 s at most, a background hook longer
    with sessions.held(session, 2.0 if event in ("session-start", "user-prompt") else 5.0) as had:
        if not had:
            hooks_log(dirs, f"{event}: another hook of the session held it; went on")
        state = sessions.load(session)
        state.cwd = redact(str(payload.get("cwd") or "")) or state.cwd
        state.client = agent.name
        out = agent.output(event, HANDLERS[event](call, state))
        sessions.save(state)
    if event == "session-end":  # this session counts among those recorded
        start_dream_if_due(call)
    return out


def hook_command(settings: HookSettings, event: str, tenant: str | None) -> int:
    """Run one hook as a process: print its text on success; on any failure print nothing,
    log one line to hooks.log and still exit 0."""
    out = hook_output(settings, event, tenant, sys.stdin.buffer.read(MAX_INPUT))
    if out:
        sys.stdout.write(out)
        sys.stdout.flush()
    return 0


def hook_output(
    settings: HookSettings, event: str, tenant: str | None, raw: bytes, via: str = ""
) -> str:
    """What one hook prints for the hook JSON `raw` ("" on any failure, logged as one line
    to hooks.log): run by the hook's own process or by the resident (resident.py, `via`);
    `event` as the hook command names it (`gemini:user-prompt`: agents/table.py)."""
    began = time.perf_counter()
    dirs = DataDir(settings.data_dir)
    try:
        dirs = dirs.tenant(tenant or "")
        agent, canonical = agent_of(event)
        out = run_hook(canonical, dirs, settings, raw, agent)
        if canonical == "session-start" and settings.fell_back:  # said where the user looks
            out = "\n".join(filter(None, [fell_back_line(settings.fell_back), out]))
    except Exception as exc:
        fail_log(dirs, f"{event} failed: {type(exc).__name__}: {exc}")
        return ""
    took = 1000 * (time.perf_counter() - began)
    hooks_log(dirs, f"{event} ok: {len(out)} chars in {took:.0f} ms{via}")
    return out + "\n" if out else ""


def fell_back_line(problems: tuple[str, ...]) -> str:
    """The session start's one line about settings that took their default."""
    more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
    return f"[dreamwell] {problems[0]}{more}; `dreamwell doctor` says more."


def fail_log(dirs: DataDir, line: str) -> None:
    with contextlib.suppress(OSError):
        dirs.root.mkdir(parents=True, exist_ok=True)
    hooks_log(dirs, line)
