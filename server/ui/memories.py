"""What the memory browser's API reads and writes on one tenant's store (blocking calls: the
ASGI side runs them in a worker thread). No HTTP here, only the answers and `BadRequest`.

Every entry the page gets carries a `revision` (a digest of what a person can see and edit,
and `updated_at`); an edit or a delete sends back the revision it was shown, and a store that
holds another one refuses it with 409 and the current text, so no edit is silently lost."""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from dataclasses import replace
from datetime import timedelta
from typing import Any

from dreamwell.dream.report import NO_LLM, Report, list_reports, load_report, spend
from dreamwell.server.hooks.stats import hook_activity
from dreamwell.stores import (
    ANY,
    MAX_CONTENT_CHARS,
    PROJECT,
    PROJECT_NAME,
    DataDir,
    LongTermStore,
    MemoryEntry,
    Write,
    check_category,
    check_tags,
    entry_to_dict,
    fold_text,
    redact_category,
    redact_content,
    redact_tags,
    utcnow,
)

LIMIT = 200  # memories per page; "more" asks for the next LIMIT
ACTIONS = ("edit", "archive", "restore")
DAYS = 14  # the overview's "added per day"


class BadRequest(Exception):
    def __init__(self, status: int, message: str, **extra: Any) -> None:
        super().__init__(message)
        self.status = status
        self.extra = extra


def revision(e: MemoryEntry) -> str:
    """Moves with every change a person could see or make (not with a search touching it)."""
    seen = [
        e.content,
        e.category,
        list(e.tags),
        e.importance,
        str(e.archived_at),
        str(e.updated_at),
    ]
    return hashlib.blake2b(json.dumps(seen).encode(), digest_size=8).hexdigest()


def entry_json(e: MemoryEntry, match: float | None = None) -> dict[str, Any]:
    out = entry_to_dict(e) | {"live": e.live, "revision": revision(e)}
    return out | ({"match": round(match, 3)} if match is not None else {})


def _page_size(limit: str) -> int:
    try:
        return max(1, min(int(limit or LIMIT), 10_000))
    except ValueError:
        raise BadRequest(400, "limit must be a whole number") from None


GLOBAL = "(global)"  # the project filter's value for the memories of no project


def _in_project(e: MemoryEntry, project: str) -> bool:
    """The browser's project filter: '' every memory, GLOBAL the global ones, else exactly
    that project's (the browser sees every project, docs/projects.md)."""
    own = e.metadata.get(PROJECT, "")
    return not project or own == ("" if project == GLOBAL else project)


def find(store: LongTermStore, params: dict[str, str]) -> dict[str, Any]:
    """params: q, category, uncategorised ('1'), tags, archived ('live', 'archived', 'all'),
    project ('' every one, '(global)', or a key), limit. Answers the memories shown, how
    many match in all, whether there are more, and whether the store holds none at all."""
    q, archived = params.get("q", ""), params.get("archived", "live")
    category = check_category(params.get("category") or None)
    tags = check_tags(params.get("tags") or None)
    limit = _page_size(params.get("limit", ""))
    bare = params.get("uncategorised") == "1"
    project = params.get("project", "")
    if q and archived == "live" and not bare and not project:
        hits = store.search(q, category, tags, limit + 1)
        shown = [entry_json(h.entry, h.score) for h in hits[:limit]]
        empty = not shown and _nothing_stored(store)
        return {"memories": shown, "total": None, "more": len(hits) > limit, "empty": empty}
    words = fold_text(q).split()
    chosen = []
    for e in store.entries(include_archived=archived != "live"):
        if archived == "archived" and e.live:
            continue
        cat = e.category or ""
        if bare and cat:
            continue
        if category and not (cat == category or cat.startswith(category + "/")):
            continue
        if not all(t in e.tags for t in tags) or not _in_project(e, project):
            continue
        if all(w in fold_text(e.content) for w in words):
            chosen.append(e)
    chosen.sort(key=lambda e: (e.last_seen_at, e.created_at), reverse=True)
    shown = [entry_json(e) for e in chosen[:limit]]
    empty = not shown and _nothing_stored(store)
    return {"memories": shown, "total": len(chosen), "more": len(chosen) > limit, "empty": empty}


def _nothing_stored(store: LongTermStore) -> bool:
    """No memory at all, live or archived: the page says how memories arrive, not that
    nothing matches (asked only when nothing was found, so a full store never pays)."""
    return not store.entries(include_archived=True)


def categories(store: LongTermStore) -> dict[str, Any]:
    """The live memories per category, and per project (with the project's name)."""
    counts: Counter[str] = Counter()
    projects: Counter[str] = Counter()
    names: dict[str, str] = {}
    bare = 0
    for e in store.entries():
        if e.category:
            counts[e.category] += 1
        else:
            bare += 1
        key = e.metadata.get(PROJECT, "")
        projects[key] += 1
        if key:
            names[key] = e.metadata.get(PROJECT_NAME) or key.rsplit("/", 1)[-1]
    rows = [{"category": c, "count": n} for c, n in sorted(counts.items())]
    own = [
        {"project": k, "name": names[k], "count": n}
        for k, n in sorted(projects.items(), key=lambda kv: names.get(kv[0], "").casefold())
        if k
    ]
    return {"categories": rows, "uncategorised": bare, "projects": own, "global": projects[""]}


def _importance(value: Any) -> float:
    try:
        importance = float(value)
    except (TypeError, ValueError):
        importance = -1.0
    if not 0.0 <= importance <= 1.0:
        raise BadRequest(400, "importance must be a number from 0 to 1")
    return importance


def _content(value: Any) -> str:
    content = str(value or "").strip()
    if not content or len(content) > MAX_CONTENT_CHARS:
        raise BadRequest(400, f"content must be 1 to {MAX_CONTENT_CHARS} characters")
    return content


def _edited(old: MemoryEntry, body: dict[str, Any]) -> MemoryEntry:
    changes: dict[str, Any] = {}
    if "content" in body:  # redacted as every save is (stores/redact.py)
        changes["content"] = redact_content(_content(body["content"]))[0]
    if "category" in body:
        changes["category"] = check_category(
            redact_category(str(body["category"] or "") or None)[0]
        )
    if "tags" in body:
        changes["tags"] = check_tags(redact_tags(body["tags"])[0])
    if "importance" in body:
        changes["importance"] = _importance(body["importance"])
    return replace(old, **changes, updated_at=utcnow())


def _gone(entry_id: str) -> BadRequest:
    return BadRequest(
        404,
        f"This memory ({entry_id}) no longer exists: it was deleted elsewhere (an agent, the "
        "dream or another tab). Your text is still in the editor: copy it, or save it as a "
        "new memory.",
        gone=True,
    )


def _conflict(store: LongTermStore, entry_id: str) -> BadRequest:
    now = store.get(entry_id)
    if now is None:
        return _gone(entry_id)
    return BadRequest(
        409,
        "This memory was changed elsewhere since you opened it: reload to see the new text, "
        "or overwrite it with yours",
        current=entry_json(now),
    )


def edit(store: LongTermStore, entry_id: str, action: str, body: dict[str, Any]) -> MemoryEntry:
    """Compare-and-set against the revision the page was shown (edits must send one); a change
    made elsewhere meanwhile is refused with 409, never overwritten."""
    if action not in ACTIONS:
        raise BadRequest(404, f"no action '{action}'; one of: {', '.join(ACTIONS)}")
    old = store.get(entry_id)
    if old is None:
        raise _gone(entry_id)
    shown = body.get("revision")
    if action == "edit" and not shown:
        raise BadRequest(400, "an edit must send the revision it was made on ('revision')")
    if shown and shown != revision(old):
        raise _conflict(store, entry_id)
    if action == "archive":
        new = replace(old, archived_at=old.archived_at or utcnow(), updated_at=utcnow())
    elif action == "restore":
        new = replace(old, archived_at=None, updated_at=utcnow())
    else:
        new = _edited(old, body)
    # a changed text drops the entry's vector; the backfill embeds the new one
    if store.write([[Write(entry_id, old, new)]]) != [True]:
        raise _conflict(store, entry_id)
    return new


def create(store: LongTermStore, body: dict[str, Any]) -> dict[str, Any]:
    """A new memory, or (same text and category) the one it repeats, reinforced."""
    content = _content(body.get("content"))
    importance = (
        _importance(body["importance"]) if body.get("importance") not in (None, "") else None
    )
    saved = store.save(content, str(body.get("category") or "") or None, body.get("tags") or None)
    entry = saved.entry
    if importance is not None and importance != entry.importance:
        entry = replace(entry, importance=importance)
        store.write([[Write(entry.id, ANY, entry)]])
    return {"memory": entry_json(entry), "reinforced": saved.reinforced}


# what a run's label calls each kind of change: (one, many)
KIND_LABELS = {
    "decay": ("decayed", "decayed"),
    "merge": ("merged", "merged"),
    "archive": ("archived", "archived"),
    "prune": ("pruned", "pruned"),
    "score": ("rescored", "rescored"),
    "used": ("marked used", "marked used"),
    "preference": ("preference learned", "preferences learned"),
    "anti-pattern": ("anti-pattern learned", "anti-patterns learned"),
    "derived": ("fact derived", "facts derived"),
    "skill-create": ("skill created", "skills created"),
    "skill-guide": ("guide skill created", "guide skills created"),
    "skill-merge": ("skill merged", "skills merged"),
    "skill-archive": ("skill archived", "skills archived"),
    "skill-see-also": ("skill linked", "skills linked"),
    "skill-update": ("skill updated", "skills updated"),
    "skill-improve": ("skill improved", "skills improved"),
}


def dream_summary(kinds: Counter[str]) -> str:
    """'3 decayed, 1 merged, 1 preference learned' (nothing: 'no changes')."""
    parts = []
    for kind, n in kinds.most_common():
        one, many = KIND_LABELS.get(kind, (kind, kind))
        parts.append(f"{n} {one if n == 1 else many}")
    return ", ".join(parts) or "no changes"


def report_view(report: Report, store: LongTermStore) -> dict[str, Any]:
    """A report as the page reads it: its JSON, the label of what it changed, and the texts
    of the memories its changes name as sources but do not hold (read from the store)."""
    held = {e.id for c in report.changes() for e in (c.before, c.after) if e}
    texts: dict[str, str] = {}
    for c in report.changes():
        if c.is_skill or c.kind == "anti-pattern":  # sources are skill names, sessions
            continue
        for i in c.sources:
            found = None if i in held or i in texts else store.get(i)
            if found is not None:
                texts[i] = found.content
    summary = dream_summary(Counter(c.kind for c in report.changes()))
    # which LLM ran and what it spent, worded as `dreamwell dream` words it; and, when passes
    # were skipped for want of an LLM, the settings that would run them
    from dreamwell.server.dream_llm import CONFIGURE_LLM

    no_llm = any(p.reason.startswith(NO_LLM) for p in report.passes if p.status == "skipped")
    configure = CONFIGURE_LLM if no_llm else None
    return report.to_json() | {
        "summary": summary,
        "texts": texts,
        "spend": spend(report),
        "configure_llm": configure,
    }


def dreams(data_dir: Any, limit: int = 50) -> list[dict[str, Any]]:
    out = []
    # newest first by start time: two runs in the same second have names in random order
    loaded = sorted(
        (load_report(data_dir, run) for run in list_reports(data_dir)[:limit]),
        key=lambda r: r.started,
        reverse=True,
    )
    for r in loaded:
        run = r.run
        kinds = Counter(c.kind for c in r.changes())
        out.append(
            {
                "run": run,
                "started": r.started,
                "dry_run": r.dry_run,
                "undone": r.undone,
                "changes": sum(kinds.values()),
                "summary": dream_summary(kinds),
            }
        )
    return out


def overview(store: LongTermStore, data_dir: Any) -> dict[str, Any]:
    everything = store.entries(include_archived=True)
    live = [e for e in everything if e.live]
    today = utcnow().date()
    added: Counter[str] = Counter()
    for e in everything:
        if (today - e.created_at.date()).days < DAYS:
            added[e.created_at.date().isoformat()] += 1
    days = [(today - timedelta(days=n)).isoformat() for n in range(DAYS - 1, -1, -1)]
    real = [d for d in dreams(data_dir, 10) if not d["dry_run"]]
    return {
        "live": len(live),
        "archived": len(everything) - len(live),
        "categories": len({e.category for e in live if e.category}),
        "added": [{"day": d, "count": added.get(d, 0)} for d in days],
        "vectors_pending": store.missing_vectors(),
        "last_dream": real[0] if real else None,
        "hooks": hook_activity(DataDir(data_dir)).to_json(stored=len(live)),
    }
