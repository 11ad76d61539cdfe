"""What is new in an agent's transcript (`transcript_path`, one JSON object a line) since
the byte offset a hook read up to: the user's own turns, the tools the agent called and the
skills it used — a `Skill` call whose result is not an error, or a `/name` command Claude Code
expanded (`<command-name>`; one it did not know stays plain text), not one of its own. A skill
counts under its own name: `x`, `/x`, `dreamwell:x` and `mcp__dreamwell__x` are one skill.

Lines are `{"type": "user" | "assistant" | ..., "timestamp", "message": {"role", "content"}}`,
`content` a string or a list of blocks (`text`, `tool_use` {name, input}, `tool_result`).
Anything else is skipped; a line still being written (no newline yet) is left for next time.
Only a regular file is read (a FIFO, device or socket is refused without blocking), at most
MAX_READ bytes a call; a line longer than that (a huge tool result) is skipped and counted,
and reading goes on after it. Each line is handed to the agent's reader (`take_claude` here;
the other agents' in server/hooks/agents/)."""

from __future__ import annotations

import json
import os
import re
import stat
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

Reader = Callable[[dict[str, Any], "TranscriptNews"], None]

MAX_READ = 8 * 1024 * 1024  # bytes read per call; the rest waits for the next event
MAX_SKIP = 64 * 1024 * 1024  # bytes of an over-long line passed over per call
_CHUNK = 1024 * 1024
_COMMAND = re.compile(r"<command-name>/?([A-Za-z0-9_.:-]+)</command-name>")
# Claude Code's own slash commands: not skills
_BUILTIN_NAMES = (
    "add-dir agents bug clear compact config context cost doctor exit export help hooks ide "
    "init install-github-app login logout mcp memory model output-style permissions plugin "
    "pr-comments release-notes resume review rewind security-review skills status statusline "
    "terminal-setup todos upgrade usage vim"
)
BUILTIN = frozenset(_BUILTIN_NAMES.split())
_NOT_TURNS = ("<command-", "<local-command-", "Caveat: ", "[Request interrupted")


@dataclass
class TranscriptNews:
    offset: int
    skill_calls: dict[str, str] = field(default_factory=dict)  # Skill tool_use id -> skill
    user_turns: list[tuple[str, str]] = field(default_factory=list)  # (timestamp, text)
    tools: Counter[str] = field(default_factory=Counter)
    skills: list[str] = field(default_factory=list)
    skipped: int = 0  # lines over MAX_READ passed over
    seen: set[str] = field(default_factory=set)  # ids of calls counted (a line written again)


def _open_regular(path: Path) -> int:
    """A descriptor of `path` opened for reading, never blocking: a FIFO opens at once with
    O_NONBLOCK and is then refused, as is anything but a regular file."""
    if not stat.S_ISREG(os.stat(path).st_mode):
        raise OSError(f"{path} is not a regular file")
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    if not stat.S_ISREG(os.fstat(fd).st_mode):  # swapped since the stat
        os.close(fd)
        raise OSError(f"{path} is not a regular file")
    return fd


def _past_line(fh: BinaryIO, start: int, size: int) -> int:
    """The offset just after the newline ending the line that runs through `start`, looking
    at most MAX_SKIP bytes ahead (the offset reached when there is none within that)."""
    fh.seek(start)
    at = start
    while at < min(size, start + MAX_SKIP):
        chunk = fh.read(min(_CHUNK, size - at))
        if not chunk:
            break
        newline = chunk.find(b"\n")
        if newline >= 0:
            return at + newline + 1
        at += len(chunk)
    return at


def _read(fh: BinaryIO, offset: int, size: int) -> bytes:
    fh.seek(offset)
    return fh.read(min(size - offset, MAX_READ))


def read_new(path: Path, offset: int, reader: Reader | None = None) -> TranscriptNews:
    """What was appended after `offset` (from the start if the file is shorter: a new or
    rewritten transcript), each line read by `reader` (Claude Code's by default). Raises
    OSError when the file cannot be read or is not a regular file."""
    with os.fdopen(_open_regular(path), "rb") as fh:
        size = fh.seek(0, 2)
        if offset > size:
            offset = 0
        skipped = 0
        data = _read(fh, offset, size)
        end = data.rfind(b"\n") + 1
        if not end and len(data) == MAX_READ:  # one line longer than MAX_READ: pass over it
            offset, skipped = _past_line(fh, offset + len(data), size), 1
            data = _read(fh, offset, size)
            end = data.rfind(b"\n") + 1
    news = TranscriptNews(offset + end, skipped=skipped)
    for line in data[:end].splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if isinstance(record, dict):
            (reader or take_claude)(record, news)
    return news


def take_claude(record: dict[str, Any], news: TranscriptNews) -> None:
    message = record.get("message")
    skipped = ("isMeta", "isSidechain", "isCompactSummary", "isVisibleInTranscriptOnly")
    if not isinstance(message, dict) or any(record.get(k) for k in skipped):
        return  # not the user's words: meta lines, subagents, compaction summaries
    content = message.get("content")
    blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
    if not isinstance(blocks, list):
        return
    kind = record.get("type") or message.get("role")
    for block in blocks:
        if not isinstance(block, dict):
            continue
        if kind == "assistant" and block.get("type") == "tool_use":
            _tool_use(block, news)
        elif kind == "user" and block.get("type") == "tool_result":
            _tool_result(block, news)
        elif kind == "user" and block.get("type") == "text":
            _user_text(str(block.get("text") or ""), str(record.get("timestamp") or ""), news)


def skill_name(given: str) -> str:
    """A skill's own name from the ways Claude Code names it (`/x`, `dreamwell:x`,
    `mcp__dreamwell__x`)."""
    name = given.strip().lstrip("/")
    for prefix in ("mcp__dreamwell__", "dreamwell:"):
        name = name.removeprefix(prefix)
    return name


def _tool_use(block: dict[str, Any], news: TranscriptNews) -> None:
    name = str(block.get("name") or "")
    if not name:
        return
    news.tools[name] += 1
    given = block.get("input")
    if name == "Skill" and isinstance(given, dict):
        skill = given.get("skill") or given.get("command") or given.get("name")
        if isinstance(skill, str) and skill_name(skill):
            news.skill_calls[str(block.get("id") or "")] = skill_name(skill)


def _tool_result(block: dict[str, Any], news: TranscriptNews) -> None:
    """A Skill call counts once its result says it loaded (`Unknown skill` is an error)."""
    skill = news.skill_calls.pop(str(block.get("tool_use_id") or ""), None)
    content = block.get("content")
    text = content if isinstance(content, str) else json.dumps(content)
    if skill and not block.get("is_error") and "<tool_use_error>" not in text:
        news.skills.append(skill)


def _user_text(text: str, ts: str, news: TranscriptNews) -> None:
    command = _COMMAND.search(text)
    if command and command.group(1) not in BUILTIN:
        news.skills.append(skill_name(command.group(1)))
    if text.strip() and not text.lstrip().startswith(_NOT_TURNS):
        news.user_turns.append((ts, text))
