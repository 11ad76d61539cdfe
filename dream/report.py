"""What a dream cycle changed: every change with before/after images and source ids, stored
as `dreams/<run>.json` (a file, or an object on an object store: `stores.DreamReports`),
rendered as text for people and agents."""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dreamwell.stores import DreamReports, MemoryEntry, entry_from_dict, entry_to_dict

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Change:
    kind: str  # decay, merge, archive, anti-pattern, preference, score, used, prune, skill-*
    before: MemoryEntry | None
    after: MemoryEntry | None
    sources: tuple[str, ...] = ()
    note: str = ""
    # a skill change (kind skill-*): the skill's whole record before and after (None: absent)
    skill_before: dict[str, Any] | None = None
    skill_after: dict[str, Any] | None = None

    @property
    def is_skill(self) -> bool:
        return self.kind.startswith("skill-")

    def to_json(self) -> dict[str, Any]:
        out = {
            "kind": self.kind,
            "before": entry_to_dict(self.before) if self.before else None,
            "after": entry_to_dict(self.after) if self.after else None,
            "sources": list(self.sources),
            "note": self.note,
        }
        if self.is_skill:
            out |= {"skill_before": self.skill_before, "skill_after": self.skill_after}
        return out

    @staticmethod
    def from_json(data: dict[str, Any]) -> Change:
        return Change(
            data["kind"],
            entry_from_dict(data["before"]) if data.get("before") else None,
            entry_from_dict(data["after"]) if data.get("after") else None,
            tuple(data.get("sources") or ()),
            str(data.get("note") or ""),
            data.get("skill_before"),
            data.get("skill_after"),
        )


NO_LLM = "no LLM"  # how a pass skipped for want of an LLM gives its reason
INCOMPLETE = "the cycle did not finish: it is still running, or it was killed"
BUDGET = "token budget"  # ... and one skipped because the cycle's LLM budget was spent
STOPPED = "LLM stopped"  # ... and one skipped because the LLM failed earlier in the cycle
CHUNK_SKIPPED = "skipped a chunk"  # a note: part of the pass's input got no answer


def failure(name: str, exc: Exception) -> str:
    """A failed pass's reason, said once on stderr as one line (`dream --once`); the
    traceback only at debug level: the LLM's failures are expected, a bug is in the log."""
    from dreamwell.dream.llm import LLMError  # loaded already: a pass asked it

    reason = str(exc) if isinstance(exc, LLMError) else f"{type(exc).__name__}: {exc}"
    logger.warning("dream pass %s failed: %s", name, reason)
    logger.debug("dream pass %s failed", name, exc_info=exc)
    return reason


@dataclass
class PassResult:
    name: str
    status: str = "ran"  # ran, skipped, failed
    reason: str = ""
    changes: list[Change] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


@dataclass
class Report:
    run: str
    started: str
    dry_run: bool
    llm: str | None
    passes: list[PassResult] = field(default_factory=list)
    finished: str = ""
    undone: str = ""
    llm_calls: int = 0  # questions the LLM was asked in this cycle
    llm_tokens: int = 0  # what they spent, input + output
    llm_budget: int | None = None  # the cycle's cap (dream_budget_tokens)
    llm_failed: int = 0  # of the calls, those that failed (booked at what they reported)
    llm_stopped: str = ""  # the failure that ended the cycle's questions (dream/budget.py)
    # why the cycle did not run to its end; saved as INCOMPLETE when it starts, so the
    # report of a cycle killed half-way says so
    cut_short: str = ""

    def changes(self) -> list[Change]:
        return [c for p in self.passes for c in p.changes]

    def to_json(self) -> dict[str, Any]:
        return {
            "run": self.run,
            "started": self.started,
            "finished": self.finished,
            "dry_run": self.dry_run,
            "llm": self.llm,
            "undone": self.undone,
            "llm_calls": self.llm_calls,
            "llm_tokens": self.llm_tokens,
            "llm_budget": self.llm_budget,
            "llm_failed": self.llm_failed,
            "llm_stopped": self.llm_stopped,
            "cut_short": self.cut_short,
            "passes": [
                {
                    "name": p.name,
                    "status": p.status,
                    "reason": p.reason,
                    "notes": p.notes,
                    "changes": [c.to_json() for c in p.changes],
                }
                for p in self.passes
            ],
        }

    @staticmethod
    def from_json(data: dict[str, Any]) -> Report:
        report = Report(
            data["run"],
            data["started"],
            bool(data["dry_run"]),
            data.get("llm"),
            finished=data.get("finished", ""),
            undone=data.get("undone", ""),
            llm_calls=int(data.get("llm_calls") or 0),
            llm_tokens=int(data.get("llm_tokens") or 0),
            llm_budget=data.get("llm_budget"),
            llm_failed=int(data.get("llm_failed") or 0),
            llm_stopped=str(data.get("llm_stopped") or ""),
            cut_short=str(data.get("cut_short") or ""),
        )
        for p in data.get("passes", []):
            report.passes.append(
                PassResult(
                    p["name"],
                    p["status"],
                    p.get("reason", ""),
                    [Change.from_json(c) for c in p.get("changes", [])],
                    list(p.get("notes", [])),
                )
            )
        return report


def save_report(data_dir: Path, report: Report, expect: str | None = None) -> str:
    """Store the report (`dreams/<run>.json`, a file or an object: stores.DreamReports);
    with `expect` only over that version (else ReportChanged). Returns the new version."""
    data = json.dumps(report.to_json(), ensure_ascii=False, indent=1).encode("utf-8")
    return DreamReports(data_dir).write(report.run, data, expect)


def list_reports(data_dir: Path) -> list[str]:
    return DreamReports(data_dir).names()


def load_report(data_dir: Path, run: str) -> Report:
    """Raises KeyError for an unknown run (names are checked: no path can escape)."""
    return load_versioned(data_dir, run)[0]


def load_versioned(data_dir: Path, run: str) -> tuple[Report, str]:
    """The report and the version read (for a compare-and-set `save_report`)."""
    reports = DreamReports(data_dir)
    try:
        data, version = reports.read(run)
    except KeyError:
        known = ", ".join(reports.names()[:5])
        raise KeyError(f"no dream report '{run}'; known: {known}") from None
    return Report.from_json(json.loads(data.decode("utf-8"))), version


def _describe_skill(change: Change) -> str:
    b, a = change.skill_before, change.skill_after
    name = str((a or b or {}).get("name", "?"))
    what = change.kind.removeprefix("skill-")
    why = f" ({change.note})" if change.note else ""
    src = f" from {', '.join(change.sources)}" if change.sources else ""
    state = f" [{a.get('status')}]" if a else ""
    return f"skill {what} {name}{state}{src}{why}"


def _describe(change: Change) -> str:
    if change.is_skill:
        return _describe_skill(change)
    b, a = change.before, change.after
    if change.kind == "decay" and b and a:
        return f"decay [{b.id}] importance {b.importance:.2f} → {a.importance:.2f}"
    if change.kind == "merge" and a:
        return (
            f"merge {', '.join(change.sources)} → [{a.id}] ({a.category or 'uncategorized'},"
            f" seen {a.reinforcement_count}×): {a.content}"
        )
    if change.kind in ("archive", "prune") and b:
        why = f" ({change.note})" if change.note else ""
        return f"{change.kind} [{b.id}]{why}: {b.content}"
    if change.kind == "score" and b and a:
        return f"score [{b.id}] {b.score:+.2f} → {a.score:+.2f}"
    if change.kind == "used" and a:
        return f"last used [{a.id}] → {a.last_used_at.isoformat() if a.last_used_at else '-'}"
    if a:
        return f"{change.kind} → [{a.id}] ({a.category}): {a.content}"
    return change.kind


def spend(report: Report) -> str:
    """Which LLM ran and what it spent: `claude-code:haiku, 3 calls, 4,210 of 200,000 tokens`."""
    if not report.llm:
        return "none"
    of = f" of {report.llm_budget:,}" if report.llm_budget is not None else ""
    calls = "call" if report.llm_calls == 1 else "calls"
    failed = f" ({report.llm_failed} failed)" if report.llm_failed else ""
    return f"{report.llm}, {report.llm_calls} {calls}{failed}, {report.llm_tokens:,}{of} tokens"


def render(report: Report) -> str:
    mode = "plan (dry run: nothing was changed)" if report.dry_run else "report"
    lines = [f"Dream {mode} {report.run} — LLM: {spend(report)}"]
    if report.cut_short:
        lines.append(f"INCOMPLETE: {report.cut_short}.")
    if report.llm_stopped:
        lines.append(
            f"LLM stopped at its first failure, no more questions this cycle: {report.llm_stopped}"
        )
    if report.undone:
        lines.append(f"Undone at {report.undone}.")
    for p in report.passes:
        head = f"- {p.name}: {p.status}"
        if p.reason:
            head += f" ({p.reason})"
        counted = p.status in ("ran", "partial")
        lines.append(head + (f", {len(p.changes)} change(s)" if counted else ""))
        lines += [f"    {_describe(c)}" for c in p.changes[:50]]
        if len(p.changes) > 50:
            lines.append(f"    … and {len(p.changes) - 50} more (see the JSON report)")
        lines += [f"    note: {n}" for n in p.notes[:20]]
    return "\n".join(lines)
