"""The dream reports over MCP (`dream://reports`, `dream://reports/{run}`), as the caller's
project may see them (SPEC §11): a cycle runs over the whole store, so its report names every
project's memories and skills; a caller in a project is shown only the changes to its
project's and global ones, and told how many others were left out. A caller in no project
sees every memory, and so the whole report. The dream prompt's own report goes through
`scoped` too."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import anyio.to_thread
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ResourceNotFoundError
from mcp.shared.exceptions import MCPError
from mcp.types import INVALID_PARAMS

from dreamwell.server.mcp.projects import caller_project
from dreamwell.server.runtime import CURRENT_REQUEST, Runtime, Tenant
from dreamwell.stores import PROJECT, StoreError

if TYPE_CHECKING:
    from dreamwell.dream.report import Change, Report


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


async def caller_tenant(runtime: Runtime) -> Tenant:
    """The stores of the caller's tenant (with bearer tokens, each token has its own)."""
    try:
        tenant_name, _ = runtime.caller(CURRENT_REQUEST.get())
        return await runtime.tenant(tenant_name)
    except StoreError as exc:
        raise MCPError(INVALID_PARAMS, str(exc)) from exc


def register_reports(mcp: MCPServer[Runtime], runtime: Runtime) -> None:
    @mcp.resource("dream://reports", description="Dream cycles run on this memory, newest first")
    async def reports() -> str:
        from dreamwell.dream.report import list_reports

        tenant = await caller_tenant(runtime)
        runs = await anyio.to_thread.run_sync(list_reports, tenant.data_dir)
        if not runs:
            return "No dream cycles yet."
        return "Dream reports (read dream://reports/{run}):\n" + "\n".join(f"- {r}" for r in runs)

    @mcp.resource("dream://reports/{run}", description="What one dream cycle changed")
    async def report(run: str, ctx: Context) -> str:
        from dreamwell.dream.report import load_report

        tenant = await caller_tenant(runtime)
        project = await caller_project(runtime, ctx)
        try:
            found = await anyio.to_thread.run_sync(load_report, tenant.data_dir, run)
        except KeyError as exc:
            raise ResourceNotFoundError(str(exc.args[0])) from exc
        return render_scoped(found, project.key if project is not None else None)
