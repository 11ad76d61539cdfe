"""The eight tools of docs/reference.md#tools, and nothing else."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Annotated, Any

import anyio.to_thread
from mcp.server.mcpserver import Context, MCPServer
from mcp.types import CallToolResult, TextContent
from pydantic import Field

from dreamwell.server.mcp import render
from dreamwell.server.mcp.projects import caller_project
from dreamwell.server.mcp.recording import record
from dreamwell.server.runtime import Runtime, Tenant
from dreamwell.stores import (
    MAX_CONTENT_CHARS,
    MAX_QUERY_CHARS,
    MAX_TTL_MINUTES,
    InvalidInput,
    StoreError,
    redact,
    redact_memory,
    utcnow,
)

logger = logging.getLogger(__name__)

NOT_LOGGED = "search served, but not recorded in the recall log"

TagsArg = Annotated[
    Annotated[str, Field(max_length=2200)]
    | Annotated[list[Annotated[str, Field(max_length=64)]], Field(max_length=32)]
    | None,
    Field(description='Tags: \'a, b\' or ["a", "b"]'),
]
CategoryArg = Annotated[
    str | None,
    Field(description="Category path, e.g. user-preferences/timezone", max_length=200),
]
QueryArg = Annotated[
    str | None, Field(description="Words to search for", max_length=MAX_QUERY_CHARS)
]
NamespaceArg = Annotated[
    str | None, Field(description="Namespace prefix, e.g. patrol/heartbeat", max_length=256)
]


def visible(text: str, what: str) -> str:
    """Refuse text with nothing to read in it (NUL and other control characters; blank text is
    the store's own 'content is empty')."""
    if text.strip() and not any(ch.isprintable() and not ch.isspace() for ch in text):
        raise InvalidInput(
            f"{what} has no visible text (only spaces or control characters); "
            "pass the fact to remember as text."
        )
    return text


def private_content(
    text: str, category: str | None, tags: str | list[str] | None
) -> tuple[str, str | None, list[str] | None, int]:
    """Content, category and tags with the hooks' redaction applied (`<private>` spans
    dropped, secrets replaced), and how many spans that took out in all; refuses content
    that was nothing but them."""
    return redact_memory(visible(text, "content"), category, tags)


def valid_unicode(text: str) -> str:
    """Lone surrogates (only a damaged file can hold them) become U+FFFD: a reply that cannot
    be encoded as UTF-8 would take the whole stdio transport down."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    return text


def text_result(text: str, error: bool = False) -> CallToolResult:
    return CallToolResult(
        content=[TextContent(type="text", text=valid_unicode(text))], is_error=error
    )


Work = Callable[[Tenant, str], str]  # a tool's blocking work on the caller's tenant and namespace
Call = Callable[[Context, Work], Awaitable[CallToolResult]]


def register_tools(mcp: MCPServer, runtime: Runtime) -> None:
    """The eight tools, in the order tools/list shows them."""
    call = _caller(runtime)
    for register in (
        _save_memory,
        _search_memory,
        _delete_memory,
        _list_memory_categories,
        _save_to_working_memory,
        _get_from_working_memory,
        _list_working_memory,
        _search_working_memory,
    ):
        register(mcp, runtime, call)


def _caller(runtime: Runtime) -> Call:
    """How every tool runs: the caller's tenant opened, its work in a worker thread, a store's
    error as the tool's error text, an OS error worded for the user."""

    async def call(ctx: Context, work: Work) -> CallToolResult:
        try:
            tenant_name, namespace = runtime.caller(ctx.request_context.request)
            tenant = await runtime.tenant(tenant_name)
            runtime.touch(tenant)
            text = await anyio.to_thread.run_sync(work, tenant, namespace)
        except StoreError as exc:
            return text_result(str(exc), error=True)
        except OSError as exc:  # an infrastructure fault the store did not word: say what it is
            logger.error("%s failed in the data directory: %s", ctx.request_context.method, exc)
            return text_result(
                f"The data directory refused this operation ({exc.strerror or exc}); check its "
                "free space and permissions, then try again.",
                error=True,
            )
        return text_result(text)

    return call


def _save_memory(mcp: MCPServer, runtime: Runtime, call: Call) -> None:
    @mcp.tool(
        description="Save a fact, preference or lesson to long-term memory.",
        structured_output=False,
    )
    async def save_memory(
        content: Annotated[
            str,
            Field(description="The fact to remember", min_length=1, max_length=MAX_CONTENT_CHARS),
        ],
        ctx: Context,
        category: CategoryArg = None,
        tags: TagsArg = None,
    ) -> CallToolResult:
        project = await caller_project(runtime, ctx)

        def work(t: Tenant, ns: str) -> str:
            kept, cat, tag_list, redacted = private_content(content, category, tags)
            scope = runtime.projects.scope_metadata(project, cat)
            saved = t.longterm.save(kept, cat, tag_list, metadata=scope, caller=ns)
            if runtime.enriching and not saved.reinforced:
                from dreamwell.dream.enrichment import enqueue

                enqueue(t.longterm, saved.entry)  # the LLM expands it later; never waits
            return render.saved(saved) + render.redacted(redacted)

        return await call(ctx, work)


def _search_memory(mcp: MCPServer, runtime: Runtime, call: Call) -> None:
    @mcp.tool(
        description="Search long-term memory (keywords + meaning). No query: most recent.",
        structured_output=False,
    )
    async def search_memory(
        ctx: Context,
        query: QueryArg = None,
        category: Annotated[
            str | None, Field(description="Category prefix", max_length=200)
        ] = None,
        tags: TagsArg = None,
    ) -> CallToolResult:
        key = await _project_key(runtime, ctx)

        def work(t: Tenant, ns: str) -> str:
            hits = t.longterm.search(query, category, tags, limit=20, project=key)
            if query and hits:  # which memories each caller was shown: the dream's scoring input
                asked = redact(query)[:500]  # no secret reaches the log
                shown = {"caller": ns, "query": asked, "ids": [h.entry.id for h in hits]}
                now = utcnow()
                log = t.recall_log
                record(log.blocking, NOT_LOGGED, lambda: log.append(shown, now))
            return render.found([h.entry for h in hits], utcnow()) + _stale(t)

        return await call(ctx, work)


def _delete_memory(mcp: MCPServer, runtime: Runtime, call: Call) -> None:
    @mcp.tool(description="Delete one long-term memory by its id.", structured_output=False)
    async def delete_memory(
        id: Annotated[
            str, Field(description="Memory id from search_memory", min_length=1, max_length=64)
        ],
        ctx: Context,
    ) -> CallToolResult:
        key = await _project_key(runtime, ctx)  # another project's memory is not found
        return await call(ctx, lambda t, _ns: render.deleted(t.longterm.delete(id.strip(), key)))


def _list_memory_categories(mcp: MCPServer, runtime: Runtime, call: Call) -> None:
    @mcp.tool(description="List long-term memory categories with counts.", structured_output=False)
    async def list_memory_categories(ctx: Context) -> CallToolResult:
        key = await _project_key(runtime, ctx)  # the caller's project's and global memories

        def work(t: Tenant, _ns: str) -> str:
            found = t.longterm.categories(key)
            return render.categories(found, t.longterm.count(key)) + _stale(t)

        return await call(ctx, work)


def _save_to_working_memory(mcp: MCPServer, _runtime: Runtime, call: Call) -> None:
    @mcp.tool(
        description="Store scratch data under a key in your namespace, with a TTL.",
        structured_output=False,
    )
    async def save_to_working_memory(
        key: Annotated[
            str, Field(description="Key, e.g. draft_reply", min_length=1, max_length=256)
        ],
        data: Annotated[
            str, Field(description="The value to store (≤ 1 MiB)", max_length=1024 * 1024)
        ],
        ctx: Context,
        ttl_minutes: Annotated[
            int | None, Field(description="Minutes to keep (default 5)", ge=1, le=MAX_TTL_MINUTES)
        ] = None,
        category: CategoryArg = None,
        tags: TagsArg = None,
    ) -> CallToolResult:
        def work(t: Tenant, ns: str) -> str:
            now = utcnow()
            outcome = t.working.save(ns, key, data, ttl_minutes, category, tags, now=now)
            return render.wm_saved(outcome, now)

        return await call(ctx, work)


def _get_from_working_memory(mcp: MCPServer, _runtime: Runtime, call: Call) -> None:
    @mcp.tool(
        description="Read a working-memory entry: plain key (yours) or full path.",
        structured_output=False,
    )
    async def get_from_working_memory(
        key: Annotated[
            str, Field(description="Plain key or full path", min_length=1, max_length=256)
        ],
        ctx: Context,
    ) -> CallToolResult:
        return await call(ctx, lambda t, ns: t.working.get(key, ns).value)


def _list_working_memory(mcp: MCPServer, _runtime: Runtime, call: Call) -> None:
    @mcp.tool(
        description="List working-memory keys (default: your namespace).", structured_output=False
    )
    async def list_working_memory(ctx: Context, namespace: NamespaceArg = None) -> CallToolResult:
        def work(t: Tenant, ns: str) -> str:
            prefix = _prefix(namespace) if namespace else ns
            return render.wm_list(prefix, t.working.listing(prefix), prefix == ns, utcnow())

        return await call(ctx, work)


def _search_working_memory(mcp: MCPServer, _runtime: Runtime, call: Call) -> None:
    @mcp.tool(
        description="Search working memory by words, category or tags.", structured_output=False
    )
    async def search_working_memory(
        ctx: Context,
        query: QueryArg = None,
        category: CategoryArg = None,
        tags: TagsArg = None,
        namespace: NamespaceArg = None,
    ) -> CallToolResult:
        def work(t: Tenant, ns: str) -> str:
            prefix = _prefix(namespace) if namespace else ns
            found = t.working.search(prefix, query, category, tags)
            filters = [
                (k, v)
                for k, v in (("query", query), ("category", category), ("tags", _tags_text(tags)))
                if v
            ]
            return render.wm_search(prefix, filters, found, utcnow())

        return await call(ctx, work)


def _stale(t: Tenant) -> str:
    """The staleness line of a read served while the object store does not answer."""
    return render.stale(t.longterm.silent_since())


async def _project_key(runtime: Runtime, ctx: Context) -> str | None:
    """The key of the caller's project (None: no project, sees every memory)."""
    project = await caller_project(runtime, ctx)
    return project.key if project is not None else None


def _prefix(namespace: str) -> str:
    """A checked namespace prefix (working memory's module loads with the stores, not here)."""
    from dreamwell.stores.working import check_prefix

    return check_prefix(namespace)


def _tags_text(tags: Any) -> str | None:
    if tags is None or isinstance(tags, str):
        return tags
    return ", ".join(str(t) for t in tags)
