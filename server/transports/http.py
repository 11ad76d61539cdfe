"""SSE and streamable HTTP: ASGI apps behind optional bearer-token auth, served by uvicorn."""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
from typing import Any

from mcp.server.mcpserver import MCPServer
from mcp.server.transport_security import TransportSecuritySettings
from starlette.types import ASGIApp, Receive, Scope, Send

from dreamwell.server.config import LOOPBACK, Settings
from dreamwell.server.runtime import PRINCIPAL_SCOPE_KEY, TENANT_SCOPE_KEY, Runtime

logger = logging.getLogger(__name__)
# A request body larger than this gets 413 before it is read or parsed: room for the largest
# working-memory value (1 MiB of UTF-8) plus its JSON-RPC envelope.
MAX_BODY_BYTES = 2 * 1024 * 1024


class BearerAuth:
    """Every HTTP request needs `Authorization: Bearer <token>`; the token names the tenant."""

    def __init__(self, app: ASGIApp, tokens: dict[str, str]) -> None:
        self.app = app
        self._tokens = [(token.encode(), tenant) for token, tenant in tokens.items()]

    def _tenant(self, scope: Scope) -> tuple[str, str] | None:
        """The tenant of the request's bearer token, compared in constant time against every
        known token (no early exit that would tell which one came close), and the principal:
        a digest of the token, the same on every replica and after a restart."""
        offered = b""
        for name, value in scope.get("headers", []):
            if name.lower() == b"authorization":
                scheme, _, token = value.partition(b" ")
                if scheme.lower() == b"bearer":
                    offered = token.strip()
                break
        found: str | None = None
        for known, tenant in self._tokens:
            if hmac.compare_digest(known, offered) and offered:
                found = tenant
        if found is None:
            return None
        return found, hashlib.sha256(b"dreamwell-principal\0" + offered).hexdigest()[:24]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        known = self._tenant(scope)
        if known is None:
            body = json.dumps(
                {
                    "error": "unauthorized",
                    "error_description": "a valid Authorization: Bearer token is required",
                }
            )
            await send(
                {
                    "type": "http.response.start",
                    "status": 401,
                    "headers": [
                        (b"content-type", b"application/json"),
                        (b"www-authenticate", b'Bearer realm="dreamwell"'),
                    ],
                }
            )
            await send({"type": "http.response.body", "body": body.encode()})
            return
        scope[TENANT_SCOPE_KEY], scope[PRINCIPAL_SCOPE_KEY] = known
        await self.app(scope, receive, send)


def _security(host: str) -> TransportSecuritySettings | None:
    if host in LOOPBACK:
        return TransportSecuritySettings(
            enable_dns_rebinding_protection=True,
            allowed_hosts=["127.0.0.1:*", "localhost:*", "[::1]:*"],
            allowed_origins=["http://127.0.0.1:*", "http://localhost:*", "http://[::1]:*"],
        )
    return None  # a non-loopback bind requires bearer tokens instead


def build_asgi(mcp: MCPServer[Any], settings: Settings, runtime: Runtime | None = None) -> ASGIApp:
    """The MCP endpoint; with `runtime`, streamable HTTP also serves the memory browser at `/`
    (its API behind the same bearer tokens)."""
    security = _security(settings.host)
    app: ASGIApp
    if settings.transport == "sse":
        app = mcp.sse_app(
            transport_security=security, host=settings.host, max_request_body_size=MAX_BODY_BYTES
        )
    else:
        app = mcp.streamable_http_app(
            transport_security=security,
            host=settings.host,
            stateless_http=settings.stateless_http,
            max_request_body_size=MAX_BODY_BYTES,
        )
    tokens = settings.tenant_tokens()
    if runtime is not None and settings.transport == "http":
        from dreamwell.server.ui.app import with_ui

        return with_ui(app, runtime, (lambda inner: BearerAuth(inner, tokens)) if tokens else None)
    return BearerAuth(app, tokens) if tokens else app
