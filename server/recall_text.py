"""How recalled memory is worded for the model, shared by the `recall` prompt and the client
hooks (which must not import the MCP SDK, so this module imports nothing heavy)."""

from __future__ import annotations

from dreamwell.server.wording import duration
from dreamwell.stores import MemoryEntry, WorkingEntry, utcnow

RECALLED = "Recalled from long-term memory (relevant to this message):"
OWN = (
    "Working memory (scratch space — use search_working_memory or get_from_working_memory "
    "to retrieve):"
)
PATROL = (
    "Patrol findings in working memory (use get_from_working_memory with the full key to read):"
)
MAX_RECALLED = 8  # stores/hooks/inject.py recalls as many


def memory_line(entry: MemoryEntry, content: str | None = None) -> str:
    """`entry`'s line, showing `content` (a part of its text) if given."""
    shown = entry.content if content is None else content
    return f"- [{entry.id}] ({entry.category or 'general'}): {shown}"


def wm_line(entry: WorkingEntry) -> str:
    parts = [f"expires in {duration(entry.expires_at - utcnow())}"]
    if entry.category:
        parts.append(f"category: {entry.category}")
    if entry.tags:
        parts.append("tags: " + ", ".join(entry.tags))
    return f"- {entry.key}: " + ", ".join(parts)


def fill(sections: list[tuple[str, list[str]]], budget_chars: int) -> str:
    """Whole lines in order of relevance while they fit; a header only with a line under it."""
    out: list[str] = []
    used = 0
    for header, lines in sections:
        taken: list[str] = []
        for line in lines:
            cost = len(line) + 1 + (0 if taken else len(header) + 2)
            if used + cost > budget_chars:
                continue
            taken.append(line)
            used += cost
        if taken:
            out.append("\n".join([header, *taken]))
    return "\n\n".join(out)
