"""Catalog changes from any process reach every client as list_changed notifications.

Every skills write bumps the catalog's generation (stores/skills/catalog.py). `SkillsWatch.run`
polls its version for each tenant being served every PERIOD seconds (one `stat` of
`skills/.generation` per tenant, or one HEAD of that object when the data directory is on
object storage, so a write on another replica is heard too; no read unless it changed), and
when the generation moved it sends `notifications/prompts/list_changed` and
`notifications/resources/list_changed`:
- 2025-era sessions (stdio, SSE, stateful streamable HTTP): on each session of that tenant,
  remembered (weakly) from the requests it made;
- 2026-07-28 clients: through the SDK's subscription bus, to every `subscriptions/listen`
  stream (the bus has no notion of tenant: a listener of another tenant refetches for nothing).
When the skills are kept as folders a client loads (`install claude-code`, stores/skills/sync.py),
the same change also brings those folders in step, before the clients are told.
One loop runs per server however many lifespans are entered (SSE enters one per connection),
and the generation each tenant was announced at is shared, so each change is announced once.
"""

from __future__ import annotations

import logging
import weakref
from typing import TYPE_CHECKING, Any

import anyio
import anyio.to_thread
from mcp.server.lowlevel.server import NotificationOptions
from mcp.shared.subscriptions import PromptsListChanged, ResourcesListChanged
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from dreamwell.server.mcp import sdk
from dreamwell.stores import StoreError

if TYPE_CHECKING:
    from mcp.server.connection import Connection
    from mcp.server.context import ServerRequestContext
    from mcp.server.mcpserver import MCPServer

    from dreamwell.server.runtime import Runtime
    from dreamwell.stores import SkillCatalog

logger = logging.getLogger(__name__)

PERIOD = 0.5
# cosine below this does not make a skill relevant to a message (skills are few and their
# texts long, so the memories' floors would let every skill through)
MIN_SIMILARITY = {"e5": 0.8, "minilm": 0.35, "ollama": 0.6}


class SkillsWatch:
    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime
        self._catalogs: dict[str, SkillCatalog] = {}
        # 2025-era connections and their tenant (ctx.session is a per-request proxy; the
        # connection is what lasts and owns the channel for notifications outside requests)
        self._sessions: weakref.WeakKeyDictionary[Connection, str] = weakref.WeakKeyDictionary()
        self._tenants: set[str] = set()
        self._stat: dict[str, object] = {}
        self._announced: dict[str, int] = {}
        self._mcp: MCPServer[Any] | None = None
        self.wakeups = 0  # loop iterations, for the idle-cost benchmark
        self._running = False
        self._handover: anyio.Event | None = None

    def attach(self, mcp: MCPServer[Any]) -> None:
        """Declare `listChanged` for prompts and resources in 2025-era handshakes (2026 ones
        derive it from `subscriptions/listen` being served)."""
        self._mcp = mcp
        lowlevel = sdk.lowlevel(mcp)
        original = lowlevel.create_initialization_options

        def with_list_changed(
            notification_options: NotificationOptions | None = None, *args: Any, **kwargs: Any
        ) -> Any:
            options = notification_options or NotificationOptions(True, True, False)
            return original(options, *args, **kwargs)

        setattr(lowlevel, "create_initialization_options", with_list_changed)  # noqa: B010

    def catalog(self, tenant: str) -> SkillCatalog:
        found = self._catalogs.get(tenant)
        if found is None:
            from dreamwell.stores import SkillCatalog

            floor = MIN_SIMILARITY.get(self.runtime.settings.embedder, 0.0)
            found = SkillCatalog(
                self.runtime.tenant_dir(tenant), self.runtime.embedder, min_similarity=floor
            )
            self._catalogs[tenant] = found
        return found

    async def note(self, ctx: ServerRequestContext[Any, Any]) -> str | None:
        """The caller's tenant (None when its request names no valid one); remembers the
        tenant for watching (its generation read off the event loop when that is a request to
        an object store; a local stat stays inline) and a 2025-era session for notifying."""
        try:
            tenant = self.runtime.caller(ctx.request)[0]
            self.runtime.tenant_dir(tenant)
        except (StoreError, ValueError):
            return None
        if tenant not in self._tenants:
            if self.catalog(tenant).blocking:
                await anyio.to_thread.run_sync(self._first_sight, tenant)
            else:
                self._first_sight(tenant)
        connection = getattr(ctx.session, "_connection", None)
        if ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS and connection is not None:
            self._sessions.setdefault(connection, tenant)
        return tenant

    def _first_sight(self, tenant: str) -> None:
        if tenant in self._tenants:
            return
        try:
            self._stat[tenant] = self._stat_of(tenant)
            self._announced.setdefault(tenant, self.catalog(tenant).generation())
        except StoreError as exc:  # the object store is away: heard by the next poll
            logger.warning("cannot read the skills' generation of %r: %s", tenant, exc)
        self._tenants.add(tenant)

    def _stat_of(self, tenant: str) -> object:
        return self.catalog(tenant).version()

    def changed(self) -> list[str]:
        """Tenants whose generation moved since it was last announced (a stat each)."""
        out = []
        for tenant in list(self._tenants):
            try:
                found = self._stat_of(tenant)
                if found == self._stat.get(tenant):
                    continue
                generation = self.catalog(tenant).generation()
            except StoreError as exc:
                logger.warning("cannot poll the skills of %r: %s", tenant or "the root", exc)
                continue
            self._stat[tenant] = found
            if generation != self._announced.get(tenant):
                self._announced[tenant] = generation
                out.append(tenant)
        return out

    async def run(self, period: float = PERIOD) -> None:
        """The watch loop, owned by the server's lifespan. SSE enters a lifespan per
        connection: one of them watches, the others wait to take over when it ends."""
        while self._running:
            self._handover = self._handover or anyio.Event()
            await self._handover.wait()
        self._running = True
        try:
            while True:
                await anyio.sleep(period)
                self.wakeups += 1
                remote = any(self.catalog(t).blocking for t in list(self._tenants))
                found = await anyio.to_thread.run_sync(self.changed) if remote else self.changed()
                for tenant in found:
                    await self.keep_folders(tenant)
                    await self.announce(tenant)
        finally:
            self._running = False
            if self._handover is not None:
                self._handover.set()
                self._handover = None

    async def keep_folders(self, tenant: str) -> None:
        """Claude Code's `Skill` tool loads only skill folders: bring the ones kept for it in
        step with the changed catalog (nothing when that sync is off)."""
        from dreamwell.stores.skills import sync_skills

        try:
            await anyio.to_thread.run_sync(sync_skills, self.catalog(tenant))
        except (StoreError, OSError) as exc:
            logger.warning("cannot keep the skills' folders of %r: %s", tenant or "root", exc)

    async def announce(self, tenant: str) -> None:
        logger.info("skills of %s changed; notifying clients", tenant or "the root store")
        for session, owner in list(self._sessions.items()):
            if owner != tenant:
                continue
            try:
                await session.send_prompt_list_changed()
                await session.send_resource_list_changed()
            except (anyio.ClosedResourceError, anyio.BrokenResourceError, RuntimeError):
                self._sessions.pop(session, None)  # the client has gone
        if self._mcp is not None:
            bus = sdk.subscriptions(self._mcp)
            await bus.publish(PromptsListChanged())
            await bus.publish(ResourcesListChanged())
