"""The plain-text results of docs/reference.md#tools: what the agent reads."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING

from dreamwell.server.wording import duration, plural
from dreamwell.stores import MemoryEntry, WorkingEntry

if TYPE_CHECKING:
    from dreamwell.stores import SaveOutcome, SaveResult

LIST_CAP = 500
SNIPPET_CHARS = 120


UNCATEGORIZED = "uncategorized"  # the one name of "no category", everywhere it is shown


def saved(result: SaveResult) -> str:
    e = result.entry
    if result.reinforced:
        return f"Reinforced memory [{e.id}] (seen {e.reinforcement_count}×)."
    return f"Saved memory [{e.id}] ({e.category or UNCATEGORIZED})."


def redacted(spans: int) -> str:
    """What save_memory adds to its reply when it redacted the content ('' when nothing)."""
    if not spans:
        return ""
    return f" Redacted {spans} secret{'s' if spans > 1 else ''}."


def age(entry: MemoryEntry, now: datetime) -> str:
    if entry.reinforcement_count <= 1:
        days = (now.date() - entry.created_at.date()).days
        if days <= 0:
            return "first seen today"
        return "first seen 1 day ago" if days == 1 else f"first seen {days} days ago"
    first = entry.created_at.date().isoformat()
    last = entry.last_seen_at.date().isoformat()
    return f"seen {entry.reinforcement_count}× from {first} to {last}"


def memory_line(entry: MemoryEntry, now: datetime) -> str:
    line = (
        f"- [{entry.id}] ({entry.category or UNCATEGORIZED}, "
        f"importance={entry.importance:.2f}, {age(entry, now)}): {entry.content}"
    )
    if entry.tags:
        line += "\n  Tags: " + ", ".join(entry.tags)
    return line


def found(entries: Sequence[MemoryEntry], now: datetime) -> str:
    if not entries:
        return "No memories found matching the search criteria."
    lines = [memory_line(e, now) for e in entries]
    return f"Found {plural(len(entries), 'memory entry', 'memory entries')}:\n\n" + "\n".join(lines)


def deleted(entry: MemoryEntry) -> str:
    return f"Deleted memory entry '{entry.id}': \"{entry.content}\""


def categories(counts: Sequence[tuple[str, int]], live: int | None = None) -> str:
    """Every category with its count, and the memories without one (`live`: all live ones)."""
    bare = 0 if live is None else live - sum(n for _, n in counts)
    if not counts and not bare:
        return "No categories yet. Save a memory with a category to create one."
    rows = [*counts, *([(UNCATEGORIZED, bare)] if bare > 0 else [])]
    return "Memory categories:\n" + "\n".join(f"- {c} ({n})" for c, n in rows)


def stale(since: datetime | None) -> str:
    """The line a read served from this replica's view adds while its object store does not
    answer (empty while it does)."""
    if since is None:
        return ""
    return f"\n\n(answered from memory as of {since:%H:%M:%S} UTC; the store is not responding)"


def wm_saved(outcome: SaveOutcome, now: datetime) -> str:
    e = outcome.entry
    text = (
        f"Saved to working memory under key '{e.key}' (expires in {duration(e.expires_at - now)})"
    )
    if outcome.evicted:
        text += f" (namespace full: evicted '{outcome.evicted}')"
    return text + "."


def wm_attrs(entry: WorkingEntry, now: datetime) -> str:
    parts = [f"expires in {duration(entry.expires_at - now)}"]
    if entry.category:
        parts.append(f"category: {entry.category}")
    if entry.tags:
        parts.append("tags: " + ", ".join(entry.tags))
    return "(" + ", ".join(parts) + ")"


def wm_list(prefix: str, entries: Sequence[WorkingEntry], own: bool, now: datetime) -> str:
    if not entries:
        return "Working memory is empty." if own else f"No entries found in namespace '{prefix}'."
    shown = entries[:LIST_CAP]
    lines = [f"- {e.key} {wm_attrs(e, now)}" for e in shown]
    text = f"Working memory '{prefix}' ({len(entries)} entries):\n" + "\n".join(lines)
    if len(entries) > LIST_CAP:
        text += (
            f"\n(listing capped at {LIST_CAP} of {len(entries)} entries; "
            "pass a narrower namespace or use search_working_memory)"
        )
    return text


def snippet(value: str) -> str:
    flat = " ".join(value.split())
    return flat if len(flat) <= SNIPPET_CHARS else flat[:SNIPPET_CHARS] + "…"


def wm_search(
    prefix: str,
    filters: Sequence[tuple[str, str]],
    entries: Sequence[WorkingEntry],
    now: datetime,
) -> str:
    desc = "(" + ", ".join(f"{k}='{v}'" for k, v in filters) + ")" if filters else "(no filters)"
    head = f"Working memory search {desc} in '{prefix}' — {len(entries)} result(s):"
    lines = [f"- {e.key} {wm_attrs(e, now)}: {snippet(e.value)}" for e in entries]
    return "\n".join([head, *lines])
