"""The dream reports over MCP (`dream://reports`, `dream://reports/{run}`), as the caller's
project may see them (docs/projects.md): a cycle runs over the whole store, so its report names
every project's memories and skills; a caller in a project is shown only the changes to its
project's and global ones, and told how many others were left out. A caller in no project
sees every memory, and so the whole report. The dream prompt's own report goes through
`scoped` too."""

from __future__ import annotations

from typing import TYPE_CHECKING

import anyio.to_thread
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ResourceNotFoundError
from mcp.shared.exceptions import MCPError
from mcp.types import INVALID_PARAMS

from dreamwell.server.dreaming import render_scoped
from dreamwell.server.mcp.projects import caller_project
from dreamwell.server.runtime import CURRENT_REQUEST, Runtime, Tenant
from dreamwell.stores import StoreError

if TYPE_CHECKING:
    pass


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
