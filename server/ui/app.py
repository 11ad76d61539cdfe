"""The memory browser: a page for people (plain HTML, CSS and JavaScript shipped in
`server/ui/static/`, nothing from the internet) and the small JSON API behind it.

`dreamwell ui` serves it alone on 127.0.0.1, to whoever holds the token it prints (secret.py);
`serve --transport http` serves it at `/` beside `/mcp`, where the page itself holds no data and
is public and the API under `/ui/api/` sits behind the same bearer tokens as MCP (each token
sees its own tenant). Every state-changing request must carry this process's CSRF token in a
header and, when the browser sends one, an Origin equal to the page's own; on a loopback bind
the Host must be loopback too (no DNS rebinding)."""

from __future__ import annotations

import hmac
import json
import secrets
from collections.abc import Awaitable, Callable
from importlib.resources import files
from typing import Any

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from dreamwell.dream import DreamBusy, run_cycle, undo
from dreamwell.dream.report import load_report
from dreamwell.server.config import LOOPBACK, Settings
from dreamwell.server.hooks.stats import hooks_mark
from dreamwell.server.runtime import TENANT_SCOPE_KEY, Runtime, Tenant
from dreamwell.server.ui import memories as ui_data
from dreamwell.server.ui import skills as ui_skills
from dreamwell.server.ui.memories import BadRequest
from dreamwell.stores import DataDir, SkillCatalog, StoreError, progress_of

# a request body over this gets 413: room for a skill's largest SKILL.md (8 MiB) as JSON text
MAX_BODY_BYTES = 12 * 1024 * 1024

CSRF_HEADER = "x-dreamwell-csrf"
_STATIC = {
    "ui.js": "text/javascript",
    "memories.js": "text/javascript",
    "dreams.js": "text/javascript",
    "skills.js": "text/javascript",
    "ui.css": "text/css",
    "favicon.svg": "image/svg+xml",
}
Handler = Callable[[Request], Awaitable[Response]]


def _asset(name: str) -> str:
    return files("dreamwell.server.ui").joinpath("static", name).read_text(encoding="utf-8")


def dream_now(tenant: Tenant, settings: Settings, dry_run: bool) -> dict[str, Any]:
    from dreamwell.server.dream_llm import dream_options, llm_for

    # a person asked for it: no waiting for quiet
    options = dream_options(settings, quiet_seconds=0)
    report = run_cycle(tenant.longterm, llm_for(settings), dry_run=dry_run, options=options)
    return ui_data.report_view(report, tenant.longterm)


def stored_report(tenant: Tenant, run: str) -> dict[str, Any]:
    return ui_data.report_view(load_report(tenant.data_dir, run), tenant.longterm)


def undone(tenant: Tenant, run: str) -> dict[str, Any]:
    return ui_data.report_view(undo(tenant.longterm, run), tenant.longterm)


# ---- the ASGI side -------------------------------------------------------------------------
class UI:
    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime
        self.csrf = secrets.token_urlsafe(32)
        self.loopback = runtime.settings.host in LOOPBACK
        self._catalogs: dict[str, SkillCatalog] = {}  # per tenant directory

    def catalog(self, tenant: Tenant) -> SkillCatalog:
        key = str(tenant.data_dir)
        found = self._catalogs.get(key)
        if found is None:
            found = self._catalogs[key] = SkillCatalog(tenant.data_dir)
        return found

    async def tenant(self, request: Request) -> Tenant:
        return await self.runtime.tenant(str(request.scope.get(TENANT_SCOPE_KEY, "")))

    def check_origin(self, request: Request) -> None:
        host = request.headers.get("host", "")
        if self.loopback and host.rsplit(":", 1)[0].strip("[]") not in (*LOOPBACK, "::1"):
            raise BadRequest(403, f"Host {host!r} is not a loopback address")
        if request.method in ("GET", "HEAD"):
            return
        token = request.headers.get(CSRF_HEADER, "")
        if not hmac.compare_digest(token.encode(), self.csrf.encode()):
            raise BadRequest(403, "missing or wrong CSRF token; reload the page")
        origin = request.headers.get("origin")
        if origin is not None and origin != f"{request.url.scheme}://{host}":
            raise BadRequest(403, f"cross-site request from {origin} refused")

    def guarded(self, handler: Handler) -> Handler:
        async def run(request: Request) -> Response:
            try:
                self.check_origin(request)
                return await handler(request)
            except BadRequest as exc:
                return JSONResponse({"error": str(exc), **exc.extra}, exc.status)
            except DreamBusy as exc:
                return JSONResponse({"error": str(exc)}, 409)
            except KeyError as exc:
                return JSONResponse({"error": str(exc.args[0])}, 404)
            except (StoreError, ValueError) as exc:
                return JSONResponse({"error": str(exc)}, 400)

        return run

    async def page(self, request: Request) -> Response:
        self.check_origin(request)
        html = _asset("ui.html").replace("{{csrf}}", self.csrf)
        return Response(html, media_type="text/html", headers=_NO_FRAMES)

    async def static(self, request: Request) -> Response:
        name = request.path_params["name"]
        if name not in _STATIC:
            return Response("not found", 404)
        return Response(_asset(name), media_type=_STATIC[name], headers=_NO_FRAMES)

    async def memories(self, request: Request) -> Response:
        tenant = await self.tenant(request)
        if request.method == "POST":
            body = await self.body(request)
            return JSONResponse(await run_in_threadpool(ui_data.create, tenant.longterm, body))
        params = dict(request.query_params)
        return JSONResponse(await run_in_threadpool(ui_data.find, tenant.longterm, params))

    async def categories(self, request: Request) -> Response:
        tenant = await self.tenant(request)
        return JSONResponse(await run_in_threadpool(ui_data.categories, tenant.longterm))

    async def version(self, request: Request) -> Response:
        """Cheap (a few stat() calls): the page polls it and reloads when it moves."""
        tenant = await self.tenant(request)
        seq = await run_in_threadpool(tenant.longterm.change_seq)
        skills = await run_in_threadpool(self.catalog(tenant).generation)
        dirs = DataDir(tenant.data_dir)
        importing = progress_of(dirs.import_progress, dirs.import_lock)  # another process's
        return JSONResponse(
            {"version": seq, "skills": skills, "hooks": hooks_mark(dirs), "importing": importing}
        )

    async def overview(self, request: Request) -> Response:
        tenant = await self.tenant(request)
        found = await run_in_threadpool(ui_data.overview, tenant.longterm, tenant.data_dir)
        return JSONResponse(found)

    @staticmethod
    async def body(request: Request) -> dict[str, Any]:
        """The request's JSON object, read up to MAX_BODY_BYTES (413 beyond, before it is
        all in memory); a body nested too deep for the parser is a 400, not a 500."""
        declared = request.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > MAX_BODY_BYTES:
            raise BadRequest(413, f"the request body is over {MAX_BODY_BYTES:,} bytes")
        raw = bytearray()
        async for chunk in request.stream():
            raw += chunk
            if len(raw) > MAX_BODY_BYTES:
                raise BadRequest(413, f"the request body is over {MAX_BODY_BYTES:,} bytes")
        try:
            body = json.loads(raw)
        except (ValueError, RecursionError):
            raise BadRequest(400, "expected a JSON object") from None
        if not isinstance(body, dict):
            raise BadRequest(400, "expected a JSON object")
        return body

    async def change(self, request: Request) -> Response:
        tenant, action = await self.tenant(request), request.path_params["action"]
        if action not in ui_data.ACTIONS:
            raise BadRequest(404, f"no action '{action}'; one of: {', '.join(ui_data.ACTIONS)}")
        body = await self.body(request)
        entry_id = request.path_params["id"]
        entry = await run_in_threadpool(ui_data.edit, tenant.longterm, entry_id, action, body)
        return JSONResponse({"memory": ui_data.entry_json(entry)})

    async def skills(self, request: Request) -> Response:
        tenant = await self.tenant(request)
        status = request.query_params.get("status", "all")
        found = await run_in_threadpool(
            ui_skills.listing, self.catalog(tenant), tenant.data_dir, status
        )
        return JSONResponse(found)

    async def skill(self, request: Request) -> Response:
        tenant, name = await self.tenant(request), request.path_params["name"]
        found = await run_in_threadpool(
            ui_skills.detail, self.catalog(tenant), tenant.data_dir, name
        )
        return JSONResponse(found)

    async def skill_change(self, request: Request) -> Response:
        tenant, action = await self.tenant(request), request.path_params["action"]
        if action not in ui_skills.ACTIONS:
            raise BadRequest(404, f"no action '{action}'; one of: {', '.join(ui_skills.ACTIONS)}")
        body, name = await self.body(request), request.path_params["name"]
        catalog = self.catalog(tenant)
        skill = await run_in_threadpool(ui_skills.change, catalog, name, action, body)
        return JSONResponse({"skill": ui_skills.skill_json(skill)})

    async def dreams(self, request: Request) -> Response:
        tenant = await self.tenant(request)
        return JSONResponse({"dreams": await run_in_threadpool(ui_data.dreams, tenant.data_dir)})

    async def dream(self, request: Request) -> Response:
        tenant = await self.tenant(request)
        found = await run_in_threadpool(stored_report, tenant, request.path_params["run"])
        return JSONResponse(found)

    async def run_dream(self, request: Request) -> Response:
        tenant, dry = await self.tenant(request), request.path_params["mode"] == "preview"
        found = await run_in_threadpool(dream_now, tenant, self.runtime.settings, dry)
        return JSONResponse(found)

    async def undo(self, request: Request) -> Response:
        tenant = await self.tenant(request)
        found = await run_in_threadpool(undone, tenant, request.path_params["run"])
        return JSONResponse(found)

    def api(self) -> Starlette:
        g = self.guarded
        return Starlette(
            routes=[
                Route("/ui/api/memories", g(self.memories), methods=["GET", "POST"]),
                Route("/ui/api/categories", g(self.categories)),
                Route("/ui/api/version", g(self.version)),
                Route("/ui/api/overview", g(self.overview)),
                Route(
                    "/ui/api/memories/{id}/{action:str}",
                    g(self.change),
                    methods=["POST"],
                ),
                Route("/ui/api/skills", g(self.skills)),
                Route("/ui/api/skills/{name}", g(self.skill)),
                Route("/ui/api/skills/{name}/{action:str}", g(self.skill_change), methods=["POST"]),
                Route("/ui/api/dreams", g(self.dreams)),
                Route("/ui/api/dreams/{run}", g(self.dream)),
                Route("/ui/api/dreams/{run}/undo", g(self.undo), methods=["POST"]),
                Route("/ui/api/dream/{mode:str}", g(self.run_dream), methods=["POST"]),
            ]
        )

    def public(self) -> Starlette:
        return Starlette(
            routes=[
                Route("/", self.guarded(self.page)),
                Route("/ui/static/{name}", self.static),
            ]
        )


_NO_FRAMES = {
    "x-frame-options": "DENY",
    "content-security-policy": "default-src 'self'; frame-ancestors 'none'",
    "cache-control": "no-store",
}


class Split:
    """Send the page and its files to `page`, the UI's API to `api`, the rest to `rest`."""

    def __init__(self, page: ASGIApp, api: ASGIApp, rest: ASGIApp) -> None:
        self.page, self.api, self.rest = page, api, rest

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "") if scope["type"] == "http" else ""
        if path == "/" or path.startswith("/ui/static/"):
            await self.page(scope, receive, send)
        elif path.startswith("/ui/api/"):
            await self.api(scope, receive, send)
        else:
            await self.rest(scope, receive, send)


def with_ui(
    app: ASGIApp, runtime: Runtime, auth: Callable[[ASGIApp], ASGIApp] | None = None
) -> ASGIApp:
    """`app` (e.g. MCP) with the browser at `/`; `auth` wraps everything but the page."""
    ui = UI(runtime)
    inner = Split(app, ui.api(), app)
    inner_app: ASGIApp = auth(inner) if auth else inner
    return Split(ui.public(), inner_app, inner_app)
