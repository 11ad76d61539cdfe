"""Skills at the MCP edge (docs/skills.md): each active skill of the caller's tenant is a prompt of
its name, its files are `skill://<name>/<path>` resources (template `skill://{name}/SKILL.md`),
and the Skills Extension (`io.modelcontextprotocol/skills`, SEP-2640) is declared with
`skills/list` and `skills/get`. The catalog is per tenant, so these are answered by a middleware
in front of the SDK's handlers (the SDK's prompt and resource registries are per process).
Gets of a skill prompt and reads of a SKILL.md are recorded as uses. The watch loop that turns
catalog changes into list_changed notifications is in server/mcp/skills_watch.py."""

from __future__ import annotations

import base64
import hashlib
import json
import logging
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, unquote

import anyio.to_thread
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.extension import Extension, MethodBinding
from mcp.shared.exceptions import MCPError
from mcp.types import (
    INVALID_PARAMS,
    BlobResourceContents,
    GetPromptResult,
    PaginatedRequestParams,
    Prompt,
    PromptArgument,
    PromptMessage,
    ReadResourceResult,
    RequestParams,
    Resource,
    ResourceTemplate,
    TextContent,
    TextResourceContents,
)
from pydantic import BaseModel

from dreamwell.server.mcp import sdk
from dreamwell.server.mcp.projects import caller_project, serves
from dreamwell.server.mcp.recording import record
from dreamwell.server.mcp.skills_recall import InjectedSkills
from dreamwell.server.mcp.skills_watch import SkillsWatch
from dreamwell.stores import StoreError

if TYPE_CHECKING:
    from mcp.server.mcpserver import MCPServer

    from dreamwell.server.runtime import Runtime
    from dreamwell.stores import Skill, SkillCatalog

logger = logging.getLogger(__name__)

EXTENSION = "io.modelcontextprotocol/skills"
SCHEME = "skill://"
TEMPLATE = "skill://{name}/SKILL.md"
TASK = PromptArgument(name="task", description="What to do with this skill (optional)")
MAX_TASK_CHARS = 10_000
_MIME = {".md": "text/markdown", ".py": "text/x-python", ".sh": "text/x-shellscript"}


def skill_uri(name: str, path: str = "SKILL.md") -> str:
    """A file's URI, its path percent-encoded (RFC 3986: a space or 'ü' is not valid raw)."""
    return f"{SCHEME}{name}/{quote(path, safe='/')}"


def _mime(path: str) -> str:
    suffix = path[path.rfind(".") :] if "." in path else ""
    return _MIME.get(suffix, "text/plain")


_LISTS = {
    "prompts/list": "prompts",
    "resources/list": "resources",
    "resources/templates/list": "resourceTemplates",
}
SKILL_TEMPLATE = ResourceTemplate(
    uri_template=TEMPLATE,
    name="skill",
    description="The SKILL.md of an active skill (SEP-2640 Skills Extension)",
    mime_type="text/markdown",
)


class SkillsGetParams(RequestParams):
    uri: str


class SkillsEdge:
    """Per-process: the catalogs of the tenants served, and the watch loop's state."""

    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime
        self.watch = SkillsWatch(runtime)
        self.injected = InjectedSkills()

    # ---- wiring ----------------------------------------------------------------------------
    def extension(self) -> Extension:
        edge = self

        class SkillsExtension(Extension):
            identifier = EXTENSION

            def settings(self) -> dict[str, Any]:
                return {"directoryRead": False}

            def methods(self) -> Sequence[MethodBinding]:
                return (
                    MethodBinding("skills/list", PaginatedRequestParams, edge._skills_list),
                    MethodBinding("skills/get", SkillsGetParams, edge._skills_get),
                )

        return SkillsExtension()

    def attach(self, mcp: MCPServer[Any]) -> None:
        """Add the middleware (call before any middleware that refuses unknown prompts)."""
        self.watch.attach(mcp)
        sdk.lowlevel(mcp).middleware.append(self._middleware(mcp))

    def _middleware(self, mcp: MCPServer[Any]) -> Any:
        async def middleware(
            ctx: ServerRequestContext[Any, Any], call_next: CallNext
        ) -> HandlerResult:
            tenant = await self.watch.note(ctx)
            params = ctx.params or {}
            if ctx.method == "prompts/get" and sdk.prompt(mcp, str(params.get("name", ""))) is None:
                found = await self._skill_prompt(ctx, tenant, params)
                if found is not None:
                    return found
            if ctx.method == "resources/read" and str(params.get("uri", "")).startswith(SCHEME):
                return await self._read(ctx, tenant, str(params["uri"]))
            result = await call_next(ctx)
            return await self._extended(ctx, tenant, result)

        return middleware

    async def _extended(
        self, ctx: ServerRequestContext[Any, Any], tenant: str | None, result: HandlerResult
    ) -> HandlerResult:
        method = ctx.method
        """A list result of the SDK with the caller's skills added."""
        key = _LISTS.get(method)
        if tenant is None or key is None or not isinstance(result, dict | BaseModel):
            return result
        if method == "resources/templates/list":
            extra: list[BaseModel] = [SKILL_TEMPLATE]
        else:
            skills = await self._active(tenant, ctx)
            if method == "prompts/list":
                extra = [
                    Prompt(name=s.name, description=s.description, arguments=[TASK]) for s in skills
                ]
            else:
                extra = [_resource(s, path) for s in skills for path in sorted(s.files)]
        if isinstance(result, BaseModel):
            field = {"resourceTemplates": "resource_templates"}.get(key, key)
            return result.model_copy(update={field: [*getattr(result, field), *extra]})
        dumped = [e.model_dump(by_alias=True, mode="json", exclude_none=True) for e in extra]
        return {**result, key: [*result.get(key, []), *dumped]}

    # ---- catalog access --------------------------------------------------------------------
    def catalog(self, tenant: str) -> SkillCatalog:
        return self.watch.catalog(tenant)

    async def _active(self, tenant: str, ctx: ServerRequestContext[Any, Any]) -> list[Skill]:
        """The active skills served to the caller of `ctx` (a project's only in it)."""
        try:
            skills = await anyio.to_thread.run_sync(self.catalog(tenant).list, "active")
        except StoreError as exc:
            logger.warning("skills of %r are unavailable: %s", tenant, exc)
            return []
        project = await caller_project(self.runtime, ctx)
        return [s for s in skills if serves(s, project)]

    async def _find(
        self, tenant: str, name: str, ctx: ServerRequestContext[Any, Any]
    ) -> Skill | None:
        catalog = self.catalog(tenant)
        found = await anyio.to_thread.run_sync(catalog.find, name)
        if found is None or found.status != "active":
            return None
        return found if serves(found, await caller_project(self.runtime, ctx)) else None

    def _record(
        self, ctx: ServerRequestContext[Any, Any], tenant: str, name: str, via: str
    ) -> None:
        from dreamwell.stores import SkillUsage, utcnow

        try:
            session = self.runtime.caller(ctx.request)[1]
            usage, now = SkillUsage(self.runtime.tenant_dir(tenant)), utcnow()
        except StoreError as exc:  # a use not recorded never fails the read
            logger.warning("could not record a use of skill %r: %s", name, exc)
            return
        use = f"could not record a use of skill {name!r}"  # nor does it fail the read here
        record(usage.log.blocking, use, lambda: usage.record_use(session, name, via, now))

    # ---- prompts and resources -------------------------------------------------------------
    async def _skill_prompt(
        self, ctx: ServerRequestContext[Any, Any], tenant: str | None, params: Mapping[str, Any]
    ) -> GetPromptResult | None:
        name = str(params.get("name", ""))
        skill = None if tenant is None else await self._find(tenant, name, ctx)
        if skill is None or tenant is None:
            return None
        args = params.get("arguments") or {}
        if not isinstance(args, Mapping) or any(k != "task" for k in args):
            raise MCPError(INVALID_PARAMS, f"Prompt '{name}' takes one optional argument: task.")
        task = args.get("task")
        if task is not None and (not isinstance(task, str) or len(task) > MAX_TASK_CHARS):
            raise MCPError(
                INVALID_PARAMS, f"task must be text of at most {MAX_TASK_CHARS} characters."
            )
        await anyio.to_thread.run_sync(self._record, ctx, tenant, name, "prompt")
        return GetPromptResult(
            description=skill.description,
            messages=[
                PromptMessage(
                    role="user", content=TextContent(type="text", text=prompt_text(skill, task))
                )
            ],
        )

    async def _read(
        self, ctx: ServerRequestContext[Any, Any], tenant: str | None, uri: str
    ) -> ReadResourceResult:
        name, _, encoded = uri[len(SCHEME) :].partition("/")
        path = unquote(encoded)  # as listed; a raw path reads too ('..' is in no skill's files)
        skill = None if tenant is None else await self._find(tenant, name, ctx)
        if skill is None or tenant is None or path not in skill.files:
            raise MCPError(
                INVALID_PARAMS, f"Unknown resource {uri}; resources/list shows the skills' files."
            )
        if path == "SKILL.md":
            await anyio.to_thread.run_sync(self._record, ctx, tenant, name, "resource")
        data = skill.files[path]
        try:
            content: TextResourceContents | BlobResourceContents = TextResourceContents(
                uri=uri, text=data.decode("utf-8"), mime_type=_mime(path)
            )
        except UnicodeDecodeError:
            blob = base64.b64encode(data).decode("ascii")
            content = BlobResourceContents(uri=uri, blob=blob, mime_type="application/octet-stream")
        return ReadResourceResult(contents=[content])

    # ---- Skills Extension methods ----------------------------------------------------------
    async def _skills_list(
        self, ctx: ServerRequestContext[Any, Any], params: Any
    ) -> dict[str, Any]:
        tenant = await self.watch.note(ctx)
        skills = [] if tenant is None else await self._active(tenant, ctx)
        return {"skills": [manifest(s) for s in skills]}

    async def _skills_get(
        self, ctx: ServerRequestContext[Any, Any], params: SkillsGetParams
    ) -> dict[str, Any]:
        tenant = await self.watch.note(ctx)
        uri = params.uri
        name = uri[len(SCHEME) :].split("/", 1)[0] if uri.startswith(SCHEME) else ""
        skill = None if tenant is None or not name else await self._find(tenant, name, ctx)
        if skill is None:
            raise MCPError(INVALID_PARAMS, f"Unknown skill {uri}; skills/list shows them.")
        return {"skill": manifest(skill)}


def _resource(skill: Skill, path: str) -> Resource:
    return Resource(
        uri=skill_uri(skill.name, path),
        name=f"{skill.name}/{path}",
        description=skill.description if path == "SKILL.md" else None,
        mime_type=_mime(path),
        size=len(skill.files[path]),
    )


def manifest(skill: Skill) -> dict[str, Any]:
    """A Skills Extension list entry: URI, the front matter, and every file with its digest."""
    return {
        "uri": skill_uri(skill.name),
        "frontmatter": json.loads(json.dumps(dict(skill.front_matter), default=str)),
        "resources": [
            {
                "uri": skill_uri(skill.name, path),
                "digest": "sha256:" + hashlib.sha256(data).hexdigest(),
                "size": len(data),
            }
            for path, data in sorted(skill.files.items())
        ],
    }


def prompt_text(skill: Skill, task: str | None) -> str:
    """The skill's body, a pointer to its other files, and the task when one is given."""
    parts = [skill.body.strip()]
    others = [p for p in sorted(skill.files) if p != "SKILL.md"]
    if others:
        parts.append("Files of this skill: " + ", ".join(skill_uri(skill.name, p) for p in others))
    if task:
        parts.append(f"Task: {task}")
    return "\n\n".join(parts)
