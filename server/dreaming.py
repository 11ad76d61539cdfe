"""The dream worker every caller shares: one cycle on a tenant's store with the LLM configured
(or the client's, through MCP sampling), refused at once on a read-only disk, off the event
loop when asked from one; and a report as a caller in a project may see it
(docs/projects.md). The `dream` prompt (server/mcp/dream.py), `dreamwell dream`
(server/cli/dream.py) and the timer in server/loops.py all run cycles through here.

The dream layer (and its LLM client, httpx) is imported where a dream, a report or an
enrichment runs, never at start-up: a server that is only answering tool calls does not load it."""

from __future__ import annotations

import errno
import json
import logging
import os
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import anyio.to_thread

from dreamwell.server.config import Settings
from dreamwell.server.dream_llm import NO_LLM, NO_LLM_HINT, dream_options, llm_for
from dreamwell.server.runtime import Runtime, Tenant
from dreamwell.stores import PROJECT, DataDir, StoreError, WriteFailed, advice, read_only_mount

if TYPE_CHECKING:
    from dreamwell.dream import LLM, DreamOptions
    from dreamwell.dream.report import Change, Report

logger = logging.getLogger(__name__)


_EROFS = OSError(errno.EROFS, os.strerror(errno.EROFS))


def dream_once(
    tenant: Tenant,
    settings: Settings,
    dry_run: bool,
    options: DreamOptions | None = None,
    client_llm: LLM | None = None,
    no_llm_reason: str = NO_LLM,
    project: str | None = None,
) -> str:
    """One cycle with the configured LLM, else `client_llm` (the invoking client's model,
    asked through MCP sampling), else the passes that need none. With `project` (the
    caller's), the report shows only that project's and global memories (reports.py)."""
    from dreamwell.dream import run_cycle

    refuse_read_only(tenant.data_dir)
    llm = llm_for(settings) or client_llm
    try:
        report = run_cycle(
            tenant.longterm, llm, dry_run=dry_run, options=options, no_llm_reason=no_llm_reason
        )
    except OSError as exc:  # a lock, a log or the report could not be written
        raise WriteFailed(
            f"cannot dream in {tenant.data_dir}: {advice(tenant.data_dir, exc)}"
        ) from exc
    hint = report.llm is None and no_llm_reason == NO_LLM  # else the caller says it
    return render_scoped(report, project) + (f"\n{NO_LLM_HINT}" if hint else "")


def refuse_read_only(data_dir: Path) -> None:
    """One line, before anything opens: even a preview takes the dream lock and reports."""
    if read_only_mount(data_dir):
        raise WriteFailed(f"cannot dream in {data_dir}: {advice(data_dir, _EROFS)}")


async def dream_in_thread(
    tenant: Tenant,
    settings: Settings,
    dry_run: bool,
    quiet_seconds: float = 30.0,
    client_llm: LLM | None = None,
    no_llm_reason: str = NO_LLM,
    project: str | None = None,
) -> str:
    """One cycle off the event loop. Cancelling this (the server stops) tells the cycle to
    stop between steps and interrupts its LLM call."""
    options = dream_options(settings, quiet_seconds=quiet_seconds)
    try:
        return await anyio.to_thread.run_sync(
            dream_once,
            tenant,
            settings,
            dry_run,
            options,
            client_llm,
            no_llm_reason,
            project,
            abandon_on_cancel=True,
        )
    finally:
        options.cancel.set()


def tenant_names(runtime: Runtime, only: str | None = None) -> list[str]:
    """The root store and every tenant under it, or just `only`."""
    if only is not None:
        return [runtime.settings.known_tenant(only) if only else ""]
    return ["", *DataDir(runtime.settings.data_dir).tenants()]


def _skill_of(record: dict[str, Any] | None, key: str) -> bool:
    """Whether a skill record (a report's before/after image) is served in project `key`."""
    if record is None:
        return True
    from dreamwell.stores.skills import skill_from_json, skill_project

    try:
        owner = skill_project(skill_from_json(json.dumps(record)))
    except (ValueError, KeyError, TypeError, StoreError):  # an image we cannot read: not shown
        return False
    return owner in (None, key)


def _shown(change: Change, key: str) -> bool:
    """Whether every memory or skill `change` names is project `key`'s or global."""
    if change.is_skill:
        return _skill_of(change.skill_before, key) and _skill_of(change.skill_after, key)
    entries = [e for e in (change.before, change.after) if e is not None]
    return all(e.metadata.get(PROJECT) in (None, "", key) for e in entries)


def scoped(report: Report, key: str | None) -> tuple[Report, int]:
    """`report` with only the changes a caller in project `key` may see (None: all), and
    how many were left out."""
    if key is None:
        return report, 0
    left_out = 0
    passes = []
    for p in report.passes:
        kept = [c for c in p.changes if _shown(c, key)]
        left_out += len(p.changes) - len(kept)
        passes.append(replace(p, changes=kept))
    return replace(report, passes=passes), left_out


def render_scoped(report: Report, key: str | None) -> str:
    from dreamwell.dream.report import render

    shown, left_out = scoped(report, key)
    if not left_out:
        return render(shown)
    return render(shown) + f"\n({left_out} change(s) to other projects' memory not shown)"
