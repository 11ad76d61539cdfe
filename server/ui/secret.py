"""The browser's secret: `dreamwell ui` answers only whoever holds it, so that other users of
the machine, who can reach 127.0.0.1 too, can neither read nor change the memories.

A random token made at start is printed in the address `dreamwell ui` gives
(`http://127.0.0.1:PORT/?token=…`). The first request that carries it gets an HttpOnly,
SameSite=Strict cookie holding it and is sent on to the same address without the token; then
every request (the page, its files, the API) must carry the cookie or an
`Authorization: Bearer <token>` header, compared in constant time. Anything else gets 401 and
a short page saying to open the address `dreamwell ui` printed. The CSRF check (app.py) still
applies on top."""

from __future__ import annotations

import hmac
import secrets
from urllib.parse import urlencode

from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from starlette.types import ASGIApp, Receive, Scope, Send

QUERY = "token"
_HEADERS = {
    "cache-control": "no-store",
    "referrer-policy": "no-referrer",
    "x-frame-options": "DENY",
    "content-security-policy": "default-src 'none'; frame-ancestors 'none'",
}
REFUSED = (
    "this is dreamwell's memory browser; open the address that `dreamwell ui` printed "
    "(it holds a token, http://127.0.0.1:PORT/?token=...)"
)
_PAGE = (
    "<!doctype html><html lang=en><meta charset=utf-8><title>dreamwell: open the address "
    "dreamwell ui printed</title><h1>Open the address <code>dreamwell ui</code> printed</h1>"
    "<p>This is dreamwell's memory browser. It answers only the address that "
    "<code>dreamwell ui</code> printed when it started (it ends in <code>?token=…</code>): "
    "open that one. Other users of this machine cannot open it.</p></html>"
)


def new_secret() -> str:
    return secrets.token_urlsafe(32)


class RequireSecret:
    """`app` behind the secret; `cookie` names the cookie (one per port: cookies are shared
    by every port of a host, and two browsers side by side must not overwrite each other's)."""

    def __init__(self, app: ASGIApp, secret: str, cookie: str) -> None:
        self.app, self.cookie = app, cookie
        self._secret = secret.encode()

    def holds(self, given: str | None) -> bool:
        return given is not None and hmac.compare_digest(given.encode(), self._secret)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "websocket":  # none served: refused before anything is read
            await send({"type": "websocket.close", "code": 1008})
            return
        if scope["type"] != "http":
            await self.app(scope, receive, send)  # lifespan
            return
        request = Request(scope)
        if request.method in ("GET", "HEAD") and self.holds(request.query_params.get(QUERY)):
            await self.welcome(request)(scope, receive, send)
            return
        scheme, _, token = request.headers.get("authorization", "").partition(" ")
        if self.holds(request.cookies.get(self.cookie)) or (
            scheme.lower() == "bearer" and self.holds(token.strip())
        ):
            await self.app(scope, receive, send)
            return
        await self.refusal(request)(scope, receive, send)

    def welcome(self, request: Request) -> Response:
        """The cookie, and the same address without the token (kept out of the address bar)."""
        rest = [(k, v) for k, v in request.query_params.multi_items() if k != QUERY]
        target = request.url.path + (f"?{urlencode(rest)}" if rest else "")
        response = RedirectResponse(target, 303, headers=_HEADERS)
        response.set_cookie(
            self.cookie, self._secret.decode(), httponly=True, samesite="strict", path="/"
        )
        return response

    def refusal(self, request: Request) -> Response:
        """401: a short page saying which address to open (JSON for the API)."""
        headers = {**_HEADERS, "www-authenticate": 'Bearer realm="dreamwell ui"'}
        if request.url.path.startswith("/ui/api/"):
            return JSONResponse({"error": REFUSED}, 401, headers=headers)
        return HTMLResponse(_PAGE, 401, headers=headers)
