"""Built-in dream prompts (system prompts), overridden by `dream.md`, `anti-patterns.md`,
`pref-dream.md`, `judge-dream.md`, `enrich.md` and `memory-rules.md` in the data directory
(re-read every cycle; a file replaces the built-in text entirely). The shape of each answer is
not here: the passes append an example generated from the same model as the JSON schema."""

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
