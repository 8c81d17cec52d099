"""The remote memory server: `pmem serve --http` (MCP over streamable HTTP, OAuth-protected).

One ASGI app on one port:

    /mcp                                       the MCP tools (the SDK's streamable HTTP transport,
                                               stateless: no session a restart could lose), behind
                                               ``McpGuard``: Host check, OAuth access token,
                                               per-client budget, scope of the tool called
    /.well-known/oauth-authorization-server    RFC 8414 metadata (issuer, endpoints, S256, iss)
    /.well-known/oauth-protected-resource[/mcp] RFC 9728 metadata (resource = issuer + /mcp)
    /authorize                                 the consent page (mcp_server/consent.py)
    /token /register /revoke                   the SDK's handlers on our provider (oauth.py)
    /v1/…                                      the memory API (memory_api/app.py), same tokens
    /public                                    the public projection (a role that reads only it)

Scopes per tool (``TOOL_SCOPES``): a call beyond the grant is answered 403 ``insufficient_scope``
before it reaches the server, and ``tools/list`` shows only the tools the grant allows. Every
write records the calling client's name (from its token), never a name it chose.
"""

from __future__ import annotations

import contextvars
import json
import logging
import math
from collections.abc import Callable
from typing import Any

from mcp.server.mcpserver import MCPServer
from mcp.server.transport_security import TransportSecuritySettings
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from core.models import ActionRequest, CommitRequest, CommitResult
from core.settings import Settings, get_settings
from mcp_server.consent import Authorize
from mcp_server.oauth import OAuthEndpoints, Urls
from mcp_server.service import MemoryService
from memory_api.auth import allowed_hosts, host_name, is_loopback
from store.budget import PgWindow
from store.db import Database
from store.oauth import OAuthStore
from store.tokens import TokenInfo, TokenStore

log = logging.getLogger("pmem.remote")

READ, PROPOSE, WRITE, DELETE, PUBLISH = SCOPES_ = (
    "memory.read",
    "memory.propose",
    "memory.write",
    "memory.delete",
    "memory.publish",
)

#: the scope each tool needs; a tool missing here needs memory.write and memory.read both
#: (tests/test_remote.py fails when the server has a tool this table does not name)
TOOL_SCOPES: dict[str, str] = {
    "load_context": READ,
    "search_memory": READ,
    "get_memory": READ,
    "recall": READ,
    "memory_history": READ,
    "get_profile": READ,
    "get_month_summary": READ,
    "related_memories": READ,
    "current_state": READ,
    "propose_memory": PROPOSE,
    "commit_memory": WRITE,
    "add_marker": WRITE,
}
#: propose_memory with these actions needs their own scope instead of memory.propose
ACTION_SCOPES = {"delete": DELETE, "publish": PUBLISH}

CURRENT_CLIENT: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "pmem_client", default=None
)
TOKEN_KEY = "pmem.token"
MAX_BODY = 4 * 1024 * 1024
REGISTRATIONS = 30  # Dynamic Client Registrations per 10 minutes, all clients together


def tool_scopes(name: str, arguments: dict[str, Any] | None = None) -> tuple[str, ...]:
    """The scopes a call of ``name`` with ``arguments`` needs (all of them)."""
    if name == "propose_memory" and isinstance(arguments, dict):
        action = arguments.get("action")
        if action in ACTION_SCOPES:
            return (ACTION_SCOPES[action],)
    scope = TOOL_SCOPES.get(name)
    return (scope,) if scope else (READ, WRITE)


def tool_visible(name: str, granted: tuple[str, ...] | list[str]) -> bool:
    if name == "propose_memory":
        return any(s in granted for s in (PROPOSE, DELETE, PUBLISH))
    return all(s in granted for s in tool_scopes(name))


class ClientScopedService(MemoryService):
    """The service whose writes carry the calling client's name (set per request from its
    token), whatever the tool put there."""

    def _client(self, fallback: str | None) -> str | None:
        return CURRENT_CLIENT.get() or fallback

    def propose(self, request: ActionRequest) -> str:
        return super().propose(request.model_copy(update={"client": self._client(request.client)}))

    def commit(self, request: CommitRequest) -> CommitResult:
        return super().commit(request.model_copy(update={"client": self._client(request.client)}))

    def add_marker(
        self, text: str, *, session: str | None = None, client: str | None = "mcp"
    ) -> Any:
        return super().add_marker(text, session=session, client=self._client(client))


async def scope_middleware(ctx: Any, call_next: Any) -> Any:
    """MCP-level: the calling client's name for the tools, ``tools/list`` filtered by scope."""
    request = getattr(ctx, "request", None)
    info: TokenInfo | None = (
        request.scope.get(TOKEN_KEY) if request is not None and hasattr(request, "scope") else None
    )
    if info is None:
        return await call_next(ctx)
    reset = CURRENT_CLIENT.set(info.name)
    try:
        result = await call_next(ctx)
    finally:
        CURRENT_CLIENT.reset(reset)
    if ctx.method == "tools/list" and result is not None:
        if isinstance(result, dict):
            result = dict(
                result,
                tools=[t for t in result.get("tools", []) if tool_visible(t["name"], info.scopes)],
            )
        else:
            result = result.model_copy(
                update={"tools": [t for t in result.tools if tool_visible(t.name, info.scopes)]}
            )
    return result


# ---------------------------------------------------------------- ASGI pieces


async def _send_json(
    send: Any, status: int, body: dict[str, Any], headers: list[tuple[bytes, bytes]] | None = None
) -> None:
    payload = json.dumps(body).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(payload)).encode()),
                (b"cache-control", b"no-store"),
                *(headers or []),
            ],
        }
    )
    await send({"type": "http.response.body", "body": payload})


class Budgets:
    """300 requests / 600 s per client (PMEM_COMMIT_BUDGET), shared with the memory API's
    buckets (``server:<client>``), so /mcp and /v1 count together."""

    def __init__(self, db: Database, budget: tuple[int, float]) -> None:
        self.db = db
        self.limit, self.window = budget
        self._windows: dict[str, PgWindow] = {}

    def wait(self, client: str) -> float:
        w = self._windows.get(client)
        if w is None:
            w = self._windows[client] = PgWindow(
                self.db, f"server:{client}", self.limit, self.window
            )
        return w.try_acquire()


class McpGuard:
    """In front of /mcp: Host, bearer access token (kind ``access``, for this resource), the
    client's budget, and the scope of a ``tools/call``. The owner's passphrase and `pmem api`
    tokens are never accepted here."""

    def __init__(
        self, app: Any, *, tokens: TokenStore, urls: Urls, hosts: set[str], budgets: Budgets
    ) -> None:
        self.app = app
        self.tokens = tokens
        self.urls = urls
        self.hosts = hosts
        self.budgets = budgets
        self.challenge = f'Bearer resource_metadata="{urls.resource_metadata}"'

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        headers = {k.lower(): v for k, v in scope.get("headers", [])}
        host = host_name(headers.get(b"host", b"").decode("latin-1"))
        if host not in self.hosts and not is_loopback(host):
            await _send_json(send, 400, {"error": "invalid_host"})
            return
        scheme, _, token = headers.get(b"authorization", b"").decode("latin-1").partition(" ")
        info = None
        if scheme.lower() == "bearer" and token.strip():
            info = await run_in_threadpool(self.tokens.verify, token.strip(), kind="access")
            if info is not None and not self.urls.resource_ok(info.resource):
                info = None
        if info is None:
            challenge = self.challenge + (', error="invalid_token"' if token.strip() else "")
            await _send_json(
                send,
                401,
                {"error": "invalid_token" if token.strip() else "unauthorized"},
                [(b"www-authenticate", challenge.encode())],
            )
            return
        wait = await run_in_threadpool(self.budgets.wait, info.name)
        if wait > 0:
            await _send_json(
                send,
                429,
                {"error": "rate_limited", "retry_after": wait},
                [(b"retry-after", str(max(1, math.ceil(wait))).encode())],
            )
            return
        if scope.get("method") == "POST":
            body, receive = await _buffer(receive)
            if body is None:
                await _send_json(send, 413, {"error": "body_too_large"})
                return
            missing = _missing_scope(body, info.scopes)
            if missing:
                await _send_json(
                    send,
                    403,
                    {"error": "insufficient_scope", "scope": missing},
                    [
                        (
                            b"www-authenticate",
                            f'Bearer error="insufficient_scope", scope="{missing}", resource_metadata="{self.urls.resource_metadata}"'.encode(),
                        )
                    ],
                )
                return
        scope[TOKEN_KEY] = info
        await self.app(scope, receive, send)


async def _buffer(receive: Any) -> tuple[bytes | None, Any]:
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] != "http.request":
            break
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > MAX_BODY:
            return None, receive
        chunks.append(chunk)
        if not message.get("more_body"):
            break
    body = b"".join(chunks)
    sent = False

    async def replay() -> Any:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return body, replay


def _missing_scope(body: bytes, granted: tuple[str, ...]) -> str | None:
    try:
        message = json.loads(body)
    except ValueError:
        return None  # the transport answers a parse error itself
    for m in message if isinstance(message, list) else [message]:
        if not isinstance(m, dict) or m.get("method") != "tools/call":
            continue
        params = m.get("params") or {}
        name = params.get("name") if isinstance(params, dict) else None
        if not isinstance(name, str):
            continue
        for needed in tool_scopes(name, params.get("arguments")):
            if needed not in granted:
                return needed
    return None


class Dispatch:
    """Path dispatch: /mcp → guard → the SDK's app; /v1 → the memory API; else OAuth routes.
    The lifespan goes to the SDK's app (it runs the session manager)."""

    def __init__(self, mcp_app: Any, guard: McpGuard, api: Any, oauth: Any) -> None:
        self.mcp_app = mcp_app
        self.guard = guard
        self.api = api
        self.oauth = oauth

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            await self.mcp_app(scope, receive, send)
            return
        path = scope.get("path", "")
        if path in ("/mcp", "/mcp/"):
            if path == "/mcp/":
                scope = dict(scope, path="/mcp", raw_path=b"/mcp")
            await self.guard(scope, receive, send)
        elif path == "/v1" or path.startswith("/v1/"):
            await self.api(scope, receive, send)
        else:
            await self.oauth(scope, receive, send)


def issuer_for(port: int, public_url: str | None) -> str:
    if public_url:
        return public_url.rstrip("/")
    return f"http://127.0.0.1:{port}"


def create_app(
    db: Database,
    *,
    issuer: str,
    public_url: str | None = None,
    budget: tuple[int, float] = (300, 600.0),
    service_factory: Callable[[], MemoryService] | None = None,
    public_reader: Any = None,
) -> Any:
    """The whole remote server as one ASGI app (see the module docstring)."""
    from mcp_server.server import build_server
    from memory_api.app import create_app as create_api

    urls = Urls(issuer.rstrip("/"))
    hosts = allowed_hosts(public_url)
    store = OAuthStore(db)
    tokens = TokenStore(db)
    budgets = Budgets(db, budget)

    def factory() -> MemoryService:
        if service_factory is not None:
            return service_factory()
        settings: Settings = get_settings()
        return ClientScopedService.open(settings)

    server: MCPServer = build_server(factory)
    server.middleware.append(scope_middleware)
    mcp_app = server.streamable_http_app(
        streamable_http_path="/mcp",
        stateless_http=True,  # no session to lose: a restart is invisible to clients (ADR 0043)
        transport_security=TransportSecuritySettings(
            enable_dns_rebinding_protection=False
        ),  # McpGuard checks Host
    )
    guard = McpGuard(mcp_app, tokens=tokens, urls=urls, hosts=hosts, budgets=budgets)
    endpoints = OAuthEndpoints(store, urls)
    authorize = Authorize(store, urls)
    registrations = PgWindow(db, "server:registrations", REGISTRATIONS, 600.0)

    async def public(request: Request) -> Response:
        items = await run_in_threadpool(public_reader.items) if public_reader is not None else []
        return JSONResponse({"items": items})

    async def register(request: Request) -> Response:
        # anyone on the internet may register: at most REGISTRATIONS per 10 minutes in all
        wait = await run_in_threadpool(registrations.try_acquire)
        if wait > 0:
            return JSONResponse(
                {"error": "temporarily_unavailable", "error_description": "too many registrations"},
                status_code=429,
                headers={"Retry-After": str(max(1, math.ceil(wait)))},
            )
        return await endpoints.register(request)

    async def health(request: Request) -> Response:
        return JSONResponse({"status": "ok"})

    routes = [
        Route(
            "/.well-known/oauth-authorization-server",
            endpoints.authorization_server,
            methods=["GET"],
        ),
        Route(
            "/.well-known/oauth-protected-resource", endpoints.protected_resource, methods=["GET"]
        ),
        Route(
            "/.well-known/oauth-protected-resource/mcp",
            endpoints.protected_resource,
            methods=["GET"],
        ),
        Route("/authorize", authorize.handle, methods=["GET", "POST"]),
        Route("/token", endpoints.token, methods=["POST"]),
        Route("/register", register, methods=["POST"]),
        Route("/revoke", endpoints.revoke, methods=["POST"]),
        Route("/public", public, methods=["GET"]),
        Route("/health", health, methods=["GET"]),
    ]
    oauth_app = _HostChecked(Starlette(routes=routes), hosts)
    api = create_api(db, budget=budget, public_url=public_url, token_kinds=("api", "access"))
    return Dispatch(mcp_app, guard, api, oauth_app)


class _HostChecked:
    def __init__(self, app: Any, hosts: set[str]) -> None:
        self.app = app
        self.hosts = hosts

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            headers = {k.lower(): v for k, v in scope.get("headers", [])}
            host = host_name(headers.get(b"host", b"").decode("latin-1"))
            if host not in self.hosts and not is_loopback(host):
                await _send_json(send, 400, {"error": "invalid_host"})
                return
        await self.app(scope, receive, send)


def quiet_logging(level: str = "info") -> None:
    """Our loggers at ``level``; the libraries that could print a request (URLs with query
    strings, bodies, headers) never below WARNING; uvicorn's access log off (serve_forever)."""
    logging.basicConfig(
        level=level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    logging.getLogger().setLevel(level.upper())
    for name in (
        "mcp",
        "httpx",
        "httpx2",
        "httpcore",
        "httpcore2",
        "sse_starlette",
        "uvicorn.access",
        "starlette",
        "multipart",
        "python_multipart",
        "psycopg",
        "anyio",
        "asyncio",
    ):
        logging.getLogger(name).setLevel(max(logging.WARNING, logging.getLogger().level))
