"""Built-in dream prompts (system prompts), overridden by `dream.md`, `anti-patterns.md`,
`pref-dream.md`, `judge-dream.md`, `enrich.md` and `memory-rules.md` in the data directory
(re-read every cycle; a file replaces the built-in text entirely). The shape of each answer is
not here: the passes append an example generated from the same model as the JSON schema."""

from __future__ import annotations

import logging
import os
import stat
from pathlib import Path

logger = logging.getLogger(__name__)

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
- Delete only entries fully superseded by a newer entry: each toDelete item names the entry
  it removes (id) and the entry that replaces it (supersededBy: a shown id, or "save:N" for
  the N-th entry of your toSave). A deletion without a replacement is refused.
- Every id you use must be one of the ids shown. Never make up an id, and never copy the
  example's <placeholders>.
- List every source of a merge in its sourceIds; sources are retired when the merge is saved.
- Answer with one JSON object only. {"toDelete": [], "toSave": []} means "nothing to change".
"""

ANTI_PATTERNS = """\
You help an AI agent learn from its mistakes. From the user's corrections below, write
anti-patterns: things the agent did that produced wrong or unhelpful results, and what to do
instead. Only clear, repeatable failure patterns; none is a fine answer. Each content reads
"Don't [X] for [Y] — instead [Z]"; domain is one short lowercase word or hyphenated phrase
(file-operations, email, ...); sessions lists the session ids of the corrections it comes
from. Answer with one JSON object only.
"""

PREFERENCES = """\
You infer durable user preferences from an AI agent's conversation log (formatting, tools,
communication style, recurring corrections). For each, give how the user expressed it:
sentiment "strong" (very irritated, repeated strong correction), "mild" (gentle pushback) or
"casual" (minor suggestion), and in how many separate occurrences. Mark sensitive=true for
anything touching security, credentials, passwords, keys, money, payments or financial
decisions. Write each preference with the words the user used. A request to do a task
("write me a poem") is not a preference. Only preferences the log supports; none is a fine
answer. Answer with one JSON object only.
"""

JUDGE = """\
You judge whether memories an AI agent recalled helped or harmed. You see the memories the
agent was shown and what the user said next. A memory "helped" when the user's next turns
show the agent used it well; it "harmed" when the user corrected something that memory said
or it misled the agent; "unclear" otherwise (the usual answer). Give a short reason quoting
the user. Answer with one JSON object only.
"""

ENRICH = """\
You rewrite one saved memory into focused memories: split a long note into atomic facts,
each standing alone, and sharpen a vague one. Keep every name, number, date, place, version
and identifier exactly as given; add nothing that is not in the memory. Give each fact a
category (lowercase, slash-separated, like work/projects) and a few tags. A memory that is
already one clear fact comes back as that one fact. Answer with one JSON object only.
"""


MAX_DIRECTIVE_BYTES = 1024 * 1024  # a prompt; past this the file is not read further


def directive(data_dir: Path, name: str, builtin: str) -> str:
    """The data directory's file `name` if it is a regular UTF-8 file and not empty, else
    `builtin`. A FIFO is never waited on, a device never read (the dream holds its lock)."""
    try:
        fd = os.open(data_dir / name, os.O_RDONLY | os.O_NONBLOCK)
    except OSError:
        return builtin
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            logger.warning("%s is not a regular file; the built-in prompt is used", name)
            return builtin
        text = os.read(fd, MAX_DIRECTIVE_BYTES).decode("utf-8").strip()
    except (OSError, UnicodeDecodeError) as exc:
        logger.warning("%s cannot be read (%s); the built-in prompt is used", name, exc)
        return builtin
    finally:
        os.close(fd)
    return text or builtin


def system_prompt(data_dir: Path, name: str, builtin: str) -> str:
    rules = directive(data_dir, "memory-rules.md", MEMORY_RULES)
    return directive(data_dir, name, builtin) + "\n\n" + rules


# ---- skills (docs/skills.md): `skill-gap.md`, `skill-dream.md`, `skill-optimize.md` --------------
SKILL_GAP = """\
You find gaps in an AI agent's skill catalog. A skill is a named, reusable procedure
("how to cut a release of service X"): name (lowercase-hyphenated), a description of what it
does and when to use it, and a Markdown body with the concrete steps, commands, paths and URLs.
You see the user's sessions (their requests) with the terms that recur across sessions, and
the skills that exist. Propose a new skill only for a kind of request the user made in two or
more different sessions that no existing skill covers, and cite those sessions' ids. A one-off
request is not a skill. Write the body only from what the user said: keep their commands, paths,
URLs and numbers exactly; invent nothing. None is a fine answer: {"toSave": []}.
Answer with one JSON object only.
"""

SKILL_DREAM = """\
You consolidate an AI agent's skill catalog. You see each skill with its uses in the last 30
days, [sparse-content] on skills with very little content, the pairs of skills used in the
same sessions, and skills grouped by name prefix. Be conservative; an empty plan is a good
answer.
- Merge skills that overlap (the same procedure written twice): save one skill whose body keeps
  every command, path, URL and number of its sources, and list every source in sourceNames.
- For a prefix cluster of three or more skills you may save a parent guide skill (name
  "<prefix>-guide", no sources) saying when to use which sibling; list them in seeAlso.
- Fill seeAlso with related skills' names (siblings, co-used, complements).
- toDelete lists redundant skills; each must be a source of a skill you save in the same
  answer. Deleting without saving its replacement is refused and the whole plan discarded.
- Use only names shown. Never copy the example's <placeholders>.
Answer with one JSON object only. {"toDelete": [], "toSave": []} means "nothing to change".
"""

SKILL_OPTIMIZE = """\
You improve one skill of an AI agent. You see the skill and why it is reviewed: the failure
context of sessions where it was used and the user corrected the agent or rated the session
poor, or a note that it has minimal content. Find the step or gap that likely caused the
failure and write the improved body: concrete steps, examples, edge cases. Keep the skill's
name and every command, path, URL and number of the old body, except what the failure context
says is wrong. If nothing should change, return the body unchanged.
Answer with one JSON object only.
"""
