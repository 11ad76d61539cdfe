"""The caller's project over MCP (docs/projects.md): the client's roots, asked once per connection
(`roots/list`, on the connections whose protocol lets a server ask mid-request: the
initialize-handshake eras) and asked again after `notifications/roots/list_changed`; the
rest of the choice (pinned, roots, the process's directory) is `server/projects.py`'s."""

from __future__ import annotations

import logging
import warnings
from typing import Any

import anyio
import anyio.to_thread
from mcp.server.context import ServerRequestContext
from mcp.server.mcpserver import Context, MCPServer
from mcp.shared.exceptions import MCPDeprecationWarning, MCPError
from mcp.types import NotificationParams
from mcp_types.version import is_version_at_least

from dreamwell.server.mcp import sdk
from dreamwell.server.mcp.handshake import MODERN
from dreamwell.server.runtime import Runtime
from dreamwell.stores import Project, Skill

logger = logging.getLogger(__name__)

ROOTS_WAIT = 2.0  # seconds a call waits for the client's roots before going on without them


def _offers_roots(ctx: Context | ServerRequestContext[Any, Any]) -> bool:
    caps = ctx.session.client_capabilities
    version = ctx.protocol_version
    modern = version is not None and is_version_at_least(version, MODERN)
    return caps is not None and caps.roots is not None and not modern


async def _roots(ctx: Context | ServerRequestContext[Any, Any]) -> list[str]:
    """The URIs of the client's roots; none when it cannot or does not answer in time."""
    try:
        with warnings.catch_warnings():  # SEP-2577 deprecates roots for 2026-07-28 only
            warnings.simplefilter("ignore", MCPDeprecationWarning)
            asked = ctx.session.list_roots()
        with anyio.fail_after(ROOTS_WAIT):
            result = await asked
    except (MCPError, TimeoutError, anyio.BrokenResourceError, anyio.ClosedResourceError) as exc:
        logger.info("the client's roots are unknown (%s); its project comes from elsewhere", exc)
        return []
    return [str(root.uri) for root in result.roots]


async def caller_project(
    runtime: Runtime, ctx: Context | ServerRequestContext[Any, Any]
) -> Project | None:
    """The project of the caller of this request (None: no project, sees everything); `ctx`
    is a tool's or prompt's context or a middleware's request context."""
    projects = runtime.projects
    if projects.pinned is not None:
        return projects.pinned
    connection = sdk.connection(ctx.session)
    if not projects.knows_roots(connection) and _offers_roots(ctx):
        uris = await _roots(ctx)
        await anyio.to_thread.run_sync(projects.set_roots, connection, uris)
    return await anyio.to_thread.run_sync(projects.of, connection)


def register_projects(mcp: MCPServer[Any], runtime: Runtime) -> None:
    """A client's `roots/list_changed` moves its later calls to the project of its new roots."""

    async def roots_changed(ctx: Any, _params: NotificationParams) -> None:
        runtime.projects.forget_roots(sdk.connection(ctx.session))

    sdk.lowlevel(mcp).add_notification_handler(
        "notifications/roots/list_changed", NotificationParams, roots_changed
    )


def serves(skill: Skill, project: Project | str | None) -> bool:
    """Whether a caller in `project` (or of that key) is served `skill`: a project's skill
    (its record's project, else the one its SKILL.md names) only in that project; a caller
    in no project is served every skill, as it sees every memory."""
    from dreamwell.stores.skills import skill_project

    if project is None:
        return True
    key = project if isinstance(project, str) else project.key
    return skill_project(skill) in (None, key)
