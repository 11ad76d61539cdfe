"""Built-in dream prompts, overridden by `dream.md`, `pref-dream.md` and `memory-rules.md` in
the data directory (re-read every cycle; a file replaces the built-in text entirely)."""

from __future__ import annotations

from pathlib import Path

MEMORY_RULES = """\
Memory rules:
- A memory is one durable fact, preference, lesson or episode, written so it stands alone.
- Keep every name, number, date, place, version and identifier exactly as given.
- Never invent facts, ids or details that are not in the entries you were shown.
"""

DREAM = """\
You consolidate an AI agent's long-term memory. You see numbered entries with their id,
category, tags, first= (first seen), last= (last seen), reinforced=N× and subject= (when the
fact happened, if known), and recent user feedback.

Be conservative: when unsure, leave entries alone. An empty plan is a good answer.
- Merge only true duplicates or near-duplicates that state the same durable fact. A merged
  entry must keep every name, number and date of its sources.
- Widely separated observations of the same durable fact are reinforcement: merge them.
- Entries that sound alike but describe distinct real-world moments (different trips,
  meetings, incidents, dates) stay separate, especially when their subject time differs.
- Delete only entries that are noise or fully superseded by another entry you keep or write.
- Every id you use must be one of the ids shown. Never make up an id.
- List every source of a merge in its sourceIds; sources are retired when the merge is saved.

Answer with JSON only: {"toDelete": ["id", ...], "toSave": [{"content": "...",
"category": "...", "tags": ["..."], "sourceIds": ["id", ...], "importance": 0.0-1.0}]}
"""

ANTI_PATTERNS = """\
From the user's corrections below, write anti-patterns: things the agent did that produced
wrong or unhelpful results, and what to do instead. Only clear, repeatable failure patterns;
none is a fine answer. Each content reads "Don't [X] for [Y] — instead [Z]"; domain is one
short lowercase word or hyphenated phrase (file-operations, email, ...); sessions lists the
session ids of the corrections it comes from.

Answer with JSON only: {"antiPatterns": [{"domain": "...", "content": "Don't ...",
"sessions": ["..."]}]}
"""

PREFERENCES = """\
Infer durable user preferences from the conversation log below (formatting, tools,
communication style, recurring corrections). For each, give how the user expressed it:
sentiment "strong" (very irritated, repeated strong correction), "mild" (gentle pushback) or
"casual" (minor suggestion), and in how many separate occurrences. Mark sensitive=true for
anything touching security, credentials, passwords, keys, money, payments or financial
decisions. Only preferences the log supports; none is a fine answer.

Answer with JSON only: {"preferences": [{"content": "...", "sentiment": "strong|mild|casual",
"occurrences": 1, "sensitive": false}]}
"""


def directive(data_dir: Path, name: str, builtin: str) -> str:
    """The data directory's file `name` if it exists and is not empty, else `builtin`."""
    try:
        text = (data_dir / name).read_text(encoding="utf-8").strip()
    except OSError:
        return builtin
    return text or builtin


def system_prompt(data_dir: Path, name: str, builtin: str) -> str:
    rules = directive(data_dir, "memory-rules.md", MEMORY_RULES)
    return directive(data_dir, name, builtin) + "\n\n" + rules
