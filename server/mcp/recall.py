"""The MCP prompt `recall(message, max_tokens?)`: the seeds' per-turn memory injection."""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Iterable
from typing import TYPE_CHECKING, Annotated

import anyio.to_thread
from mcp.server.mcpserver import Context, MCPServer
from mcp.shared.exceptions import MCPError
from mcp.types import INVALID_PARAMS
from pydantic import Field

from dreamwell.server.mcp import render
from dreamwell.server.mcp.projects import caller_project
from dreamwell.server.mcp.recording import record
from dreamwell.server.mcp.tools import valid_unicode
from dreamwell.server.recall_text import (
    OWN,
    PATROL,
    RECALLED,
    fill,
    memory_line,
    wm_line,
)
from dreamwell.server.runtime import Runtime, Tenant
from dreamwell.stores import (
    MemoryEntry,
    Project,
    StoreError,
    redact,
    utcnow,
)

if TYPE_CHECKING:
    from dreamwell.server.mcp.skills import SkillsEdge

logger = logging.getLogger(__name__)

DEFAULT_TOKENS = 1000
MAX_MESSAGE_CHARS = 10_000
_CALLERS_KEPT = 1024


class Injected:
    """Which memory ids each caller has already been shown (bounded, least recent dropped)."""

    def __init__(self) -> None:
        self._seen: OrderedDict[tuple[str, str], set[str]] = OrderedDict()

    def first_turn(self, caller: tuple[str, str]) -> bool:
        return caller not in self._seen

    def seen(self, caller: tuple[str, str]) -> set[str]:
        return self._seen.get(caller, set())

    def mark(self, caller: tuple[str, str], ids: Iterable[str]) -> None:
        seen = self._seen.setdefault(caller, set())
        seen.update(ids)
        self._seen.move_to_end(caller)
        while len(self._seen) > _CALLERS_KEPT:
            self._seen.popitem(last=False)


def _recalled(
    tenant: Tenant,
    message: str,
    injected: Injected,
    caller: tuple[str, str],
    project: str | None = None,
) -> list[MemoryEntry]:
    """Up to MAX_RECALLED memories relevant to `message` (of the caller's project and global
    ones) not yet shown to the caller: what every injecting path recalls
    (stores/hooks/inject.py), as `search_memory` ranks them."""
    from dreamwell.stores.hooks import StoreRanker, recalled

    return recalled(StoreRanker(tenant.longterm), message, project, injected.seen(caller))


def build_block(
    tenant: Tenant,
    namespace: str,
    message: str,
    injected: Injected,
    caller: tuple[str, str],
    max_tokens: int,
    project: str | None = None,
) -> str:
    from dreamwell.stores.hooks import RECALL_CHARS
    from dreamwell.stores.hooks import shown as excerpted

    unavailable, said = "", redact(message)
    try:
        # ranked by what the user said, less private spans and secrets (as search_memory's
        # query and every hook's prompt are)
        recalled = _recalled(tenant, said, injected, caller, project)
    except StoreError as exc:  # working memory can still be shown
        recalled, unavailable = [], f"Long-term memory is unavailable: {exc}"
    lines = excerpted(recalled, said, memory_line, min(RECALL_CHARS, max_tokens * 4))
    sections = [(RECALLED, lines), (OWN, _listed(tenant, namespace))]
    if not namespace.startswith("patrol/"):
        sections.append((PATROL, _listed(tenant, "patrol")))
    block = fill(sections, max_tokens * 4)
    shown = {e.id for e in recalled if f"[{e.id}]" in block}
    injected.mark(caller, shown)
    if shown:  # what the caller was shown, for the dream's judge (as search_memory records)
        log, now = tenant.recall_log, utcnow()
        asked = {"caller": namespace, "query": said[:500], "ids": sorted(shown)}
        entry = asked | {"skills": [], "via": "prompt"}
        record(
            log.blocking,
            "recall served, but not recorded in the recall log",
            lambda: log.append(entry, now),
        )
    if unavailable:
        return "\n\n".join(part for part in (unavailable, block) if part)
    return block or "Nothing recalled: long-term and working memory have nothing for this yet."


def _stale(tenant: Tenant) -> str:
    """The staleness line while the object store does not answer (render.stale)."""
    store = tenant.opened_longterm
    return render.stale(store.silent_since() if store is not None else None)


def _listed(tenant: Tenant, prefix: str) -> list[str]:
    """Working-memory lines under `prefix`; none when its store cannot say (a segment this
    replica never read, on an object store that does not answer): the recall goes on."""
    try:
        return [wm_line(e) for e in tenant.working.listing(prefix)]
    except StoreError as exc:
        logger.warning("recall without the working memory of %s: %s", prefix, exc)
        return []


def record_turn(
    tenant: Tenant, namespace: str, message: str, project: Project | None = None
) -> None:
    """The user's message, per caller and timestamped, into the conversation log that the
    dream's preference, correction and judging passes read (bounded in size). A failure to
    record never fails the prompt."""
    from dreamwell.stores import CONVERSATION, CONVERSATION_MAX_BYTES, JsonlLog

    message = redact(message)  # private spans and secrets never reach the log
    if not message.strip():
        return

    log = JsonlLog(tenant.data_dir, CONVERSATION, max_bytes=CONVERSATION_MAX_BYTES)
    turn = {"session": namespace, "role": "user", "content": message, "via": "recall"}
    if project is not None:  # the dream keeps what it learns from it in that project
        turn |= {"project": project.key, "project_root": str(project.root)}
    now = utcnow()
    record(log.blocking, "could not record the conversation turn", lambda: log.append(turn, now))


def with_skills(
    skills: SkillsEdge | None,
    caller: tuple[str, str],
    message: str,
    block: str,
    budget: int,
    project: str | None = None,
) -> str:
    """The block with the relevant skills added (docs/skills.md; server/mcp/skills_recall.py), in
    the thread that built the block."""
    if skills is None:
        return block
    from dreamwell.server.mcp.skills_recall import skills_section

    kept = "" if block.startswith("Nothing recalled") else block
    catalog = skills.catalog(caller[0])
    room = budget * 4 - len(kept)
    section = skills_section(catalog, skills.injected, caller, message, room, project)
    return "\n\n".join(part for part in (kept, section) if part) or block


def _checked(message: str, max_tokens: str | None) -> int:
    """The token budget of a recall whose arguments are valid; else MCPError in one line."""
    if len(message) > MAX_MESSAGE_CHARS:
        raise MCPError(
            INVALID_PARAMS,
            f"message is {len(message)} characters; the limit is {MAX_MESSAGE_CHARS}.",
        )
    if max_tokens in (None, ""):
        return DEFAULT_TOKENS
    if not max_tokens.strip().isdigit() or not 50 <= int(max_tokens) <= 32_000:
        raise MCPError(
            INVALID_PARAMS,
            f"max_tokens must be a whole number from 50 to 32000; got {max_tokens!r}",
        )
    return int(max_tokens)


def register_recall(
    mcp: MCPServer[Runtime], runtime: Runtime, skills: SkillsEdge | None = None
) -> None:
    injected = Injected()

    @mcp.prompt(
        description="Memory context for a user message: recalled memories not yet shown "
        "in this session, plus working-memory keys."
    )
    async def recall(
        message: Annotated[str, Field(description="The user's message (≤ 10,000 characters)")],
        ctx: Context,
        max_tokens: Annotated[
            str | None, Field(description="Budget (≈ chars/4), default 1000")
        ] = None,
    ) -> str:
        budget = _checked(message, max_tokens)
        try:
            tenant_name, namespace = runtime.caller(ctx.request_context.request)
            tenant = await runtime.tenant(tenant_name)
            caller = (tenant_name, namespace)
            project = await caller_project(runtime, ctx)
            key = project.key if project is not None else None

            def compose() -> str:
                block = build_block(tenant, namespace, message, injected, caller, budget, key)
                return with_skills(skills, caller, message, block, budget, key) + _stale(tenant)

            block = await anyio.to_thread.run_sync(compose)
            if runtime.settings.record_conversation:
                await anyio.to_thread.run_sync(record_turn, tenant, namespace, message, project)
            return valid_unicode(block)
        except StoreError as exc:
            raise MCPError(INVALID_PARAMS, str(exc)) from exc
