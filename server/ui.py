"""The memory browser: a page for people (plain HTML, CSS and JavaScript shipped in
`server/static/`, nothing from the internet) and the small JSON API behind it.

`dreamwell ui` serves it alone on 127.0.0.1; `serve --transport http` serves it at `/` beside
`/mcp`. The page itself holds no data and is public; the API under `/ui/api/` sits behind the
same bearer tokens as MCP (each token sees its own tenant). Every state-changing request must
carry this process's CSRF token in a header and, when the browser sends one, an Origin equal
to the page's own; on a loopback bind the Host must be loopback too (no DNS rebinding)."""

from __future__ import annotations

import hmac
import secrets
from collections.abc import Awaitable, Callable
from dataclasses import replace
from importlib.resources import files
from typing import Any

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from dreamwell.dream import DreamBusy, DreamOptions, run_cycle, undo
from dreamwell.dream.report import Report, list_reports, load_report
from dreamwell.server.config import LOOPBACK, Settings
from dreamwell.server.runtime import TENANT_SCOPE_KEY, Runtime, Tenant
from dreamwell.stores import (
    MAX_CONTENT_CHARS,
    LongTermStore,
    MemoryEntry,
    StoreError,
    Write,
    check_category,
    check_tags,
    entry_to_dict,
    fold_text,
    utcnow,
)

CSRF_HEADER = "x-dreamwell-csrf"
_STATIC = {"ui.js": "text/javascript", "ui.css": "text/css"}
_LIMIT = 200
Handler = Callable[[Request], Awaitable[Response]]


def _asset(name: str) -> str:
    return files("dreamwell.server").joinpath("static", name).read_text(encoding="utf-8")


class BadRequest(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


# ---- reads and writes on one tenant's store (blocking: run in a worker thread) --------------
def entry_json(e: MemoryEntry) -> dict[str, Any]:
    return entry_to_dict(e) | {"live": e.live}


def find(store: LongTermStore, q: str, category: str, tags: str, archived: str) -> list[Any]:
    """archived: 'live' (default), 'archived' or 'all'."""
    category_ = check_category(category or None)
    tags_ = check_tags(tags or None)
    if q and archived == "live":
        return [entry_json(h.entry) for h in store.search(q, category_, tags_, _LIMIT)]
    words = fold_text(q).split()
    chosen = []
    for e in store.entries(include_archived=archived != "live"):
        if archived == "archived" and e.live:
            continue
        cat = e.category or ""
        if category_ and not (cat == category_ or cat.startswith(category_ + "/")):
            continue
        if not all(t in e.tags for t in tags_):
            continue
        text = fold_text(e.content)
        if all(w in text for w in words):
            chosen.append(e)
    chosen.sort(key=lambda e: (e.last_seen_at, e.created_at), reverse=True)
    return [entry_json(e) for e in chosen[:_LIMIT]]


def categories(store: LongTermStore) -> list[dict[str, Any]]:
    counts: dict[str, int] = {}
    for e in store.entries(include_archived=True):
        if e.live and e.category:
            counts[e.category] = counts.get(e.category, 0) + 1
    return [{"category": c, "count": n} for c, n in sorted(counts.items())]


def _edited(old: MemoryEntry, body: dict[str, Any]) -> MemoryEntry:
    changes: dict[str, Any] = {}
    if "content" in body:
        content = str(body["content"]).strip()
        if not content or len(content) > MAX_CONTENT_CHARS:
            raise BadRequest(400, f"content must be 1 to {MAX_CONTENT_CHARS} characters")
        changes["content"] = content
    if "category" in body:
        changes["category"] = check_category(str(body["category"] or "") or None)
    if "tags" in body:
        changes["tags"] = check_tags(body["tags"])
    if "importance" in body:
        try:
            importance = float(body["importance"])
        except (TypeError, ValueError):
            importance = -1.0
        if not 0.0 <= importance <= 1.0:
            raise BadRequest(400, "importance must be a number from 0 to 1")
        changes["importance"] = importance
    return replace(old, **changes, updated_at=utcnow())


def edit(store: LongTermStore, entry_id: str, action: str, body: dict[str, Any]) -> MemoryEntry:
    old = store.get(entry_id)
    if old is None:
        raise BadRequest(404, f"no memory with id '{entry_id}'")
    if action == "archive":
        new = replace(old, archived_at=old.archived_at or utcnow(), updated_at=utcnow())
    elif action == "restore":
        new = replace(old, archived_at=None, updated_at=utcnow())
    else:
        new = _edited(old, body)
    # compare-and-set: an edit made elsewhere meanwhile is not overwritten (a changed text
    # drops the entry's vector; the backfill embeds the new one)
    if store.write([[Write(entry_id, old, new)]]) != [True]:
        raise BadRequest(409, "the memory changed meanwhile; reload and edit it again")
    return new


def report_json(report: Report) -> dict[str, Any]:
    return report.to_json()


def dream_now(tenant: Tenant, settings: Settings, dry_run: bool) -> Report:
    from dreamwell.server.dream_edge import llm_for

    options = DreamOptions(quiet_seconds=0)  # a person asked for it: no waiting for quiet
    return run_cycle(tenant.longterm, llm_for(settings), dry_run=dry_run, options=options)


def dreams(tenant: Tenant) -> list[dict[str, Any]]:
    out = []
    for run in list_reports(tenant.data_dir)[:50]:
        r = load_report(tenant.data_dir, run)
        out.append(
            {
                "run": run,
                "started": r.started,
                "dry_run": r.dry_run,
                "undone": r.undone,
                "changes": len(r.changes()),
            }
        )
    return out


# ---- the ASGI side -------------------------------------------------------------------------
class UI:
    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime
        self.csrf = secrets.token_urlsafe(32)
        self.loopback = runtime.settings.host in LOOPBACK

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
                return JSONResponse({"error": str(exc)}, exc.status)
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
        tenant, p = await self.tenant(request), request.query_params
        found = await run_in_threadpool(
            find,
            tenant.longterm,
            p.get("q", ""),
            p.get("category", ""),
            p.get("tags", ""),
            p.get("archived", "live"),
        )
        return JSONResponse({"memories": found})

    async def categories(self, request: Request) -> Response:
        tenant = await self.tenant(request)
        return JSONResponse({"categories": await run_in_threadpool(categories, tenant.longterm)})

    async def change(self, request: Request) -> Response:
        tenant = await self.tenant(request)
        body = await request.json() if request.path_params["action"] == "edit" else {}
        if not isinstance(body, dict):
            raise BadRequest(400, "expected a JSON object")
        args = (tenant.longterm, request.path_params["id"], request.path_params["action"], body)
        entry = await run_in_threadpool(edit, *args)
        return JSONResponse({"memory": entry_json(entry)})

    async def dreams(self, request: Request) -> Response:
        tenant = await self.tenant(request)
        return JSONResponse({"dreams": await run_in_threadpool(dreams, tenant)})

    async def dream(self, request: Request) -> Response:
        tenant = await self.tenant(request)
        report = await run_in_threadpool(load_report, tenant.data_dir, request.path_params["run"])
        return JSONResponse(report_json(report))

    async def run_dream(self, request: Request) -> Response:
        tenant, dry = await self.tenant(request), request.path_params["mode"] == "preview"
        report = await run_in_threadpool(dream_now, tenant, self.runtime.settings, dry)
        return JSONResponse(report_json(report))

    async def undo(self, request: Request) -> Response:
        tenant = await self.tenant(request)
        report = await run_in_threadpool(undo, tenant.longterm, request.path_params["run"])
        return JSONResponse(report_json(report))

    def api(self) -> Starlette:
        g = self.guarded
        return Starlette(
            routes=[
                Route("/ui/api/memories", g(self.memories)),
                Route("/ui/api/categories", g(self.categories)),
                Route(
                    "/ui/api/memories/{id}/{action:str}",
                    g(self.change),
                    methods=["POST"],
                ),
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


def ui_command(settings: Settings) -> int:
    """Serve the browser on 127.0.0.1 only; prints the address once it accepts connections."""
    import socket
    import sys

    import anyio

    from dreamwell.server.http import uvicorn_server
    from dreamwell.server.stats import ensure_format

    settings = settings.model_copy(update={"host": "127.0.0.1", "transport": "http"})
    ensure_format(settings.data_dir)
    app = with_ui(Starlette(), Runtime(settings))
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind(("127.0.0.1", settings.port))
        except OSError as exc:
            sys.stderr.write(
                f"dreamwell: cannot listen on 127.0.0.1:{settings.port} ({exc}); "
                "pick another with --port\n"
            )
            return 1
        sock.listen(128)
        port = sock.getsockname()[1]
        sys.stderr.write(f"dreamwell ui: http://127.0.0.1:{port}/ (Ctrl-C stops it)\n")
        sys.stderr.flush()
        anyio.run(uvicorn_server(app, settings).serve, [sock])
    return 0
