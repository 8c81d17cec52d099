"""The remote memory server: `pmem serve --http` (MCP over streamable HTTP, OAuth-protected).

One ASGI app on one port:

    /mcp                                       the MCP tools (the SDK's streamable HTTP transport,
                                               stateless: no session a restart could lose), behind
                                               ``McpGuard``: Host and Origin checks, an OAuth
                                               access token issued for /mcp, per-client budget,
                                               scope of the tool called
    /.well-known/oauth-authorization-server    RFC 8414 metadata (issuer, endpoints, S256, iss)
    /.well-known/oauth-protected-resource[/mcp] RFC 9728 metadata (resource = issuer + /mcp)
    /authorize                                 the consent page (mcp_server/consent.py)
    /token /register /revoke                   the SDK's handlers on our provider (oauth.py)
    /v1/…                                      the memory API (memory_api/app.py), OAuth tokens
                                               issued for it and `pmem token` tokens
    /public                                    the public projection (a role that reads only it)

Everything goes through ``memory_api.limits.Limits`` first (body sizes, slow bodies, NUL in the
query), each app through ``StrictJson`` once its caller is known (JSON depth, NaN, NUL), and
uvicorn runs with its connection limits (``uvicorn_limits``).

Scopes per tool (``TOOL_SCOPES``): a call beyond the grant is answered 403 ``insufficient_scope``
before it reaches the server, with ``WWW-Authenticate: Bearer error="insufficient_scope",
scope="<granted and needed>"`` (RFC 6750 §3.1, the MCP authorization spec's step-up), on which
the SDK clients start a new authorization; ``tools/list`` shows only the tools the grant allows.
Every write records the calling client's name (from its token), never a name it chose.
"""

from __future__ import annotations

import contextvars
import json
import logging
import math
import os
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

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
from memory_api.auth import allowed_hosts, host_name, is_loopback, step_up_scope
from memory_api.limits import Limits, StrictJson, address_key
from store.budget import PgWindow, purge_buckets
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
REGISTRATIONS = 30  # Dynamic Client Registrations accepted per 10 minutes, all addresses together
REGISTRATIONS_PER_ADDRESS = 10  # registration requests per 10 minutes from one address, any answer
ORIGINS_ENV = "PMEM_ALLOWED_ORIGINS"
MAX_SESSIONS = 10_000  # session ids remembered with their client
SESSION_HEADER = b"mcp-session-id"


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


def allowed_origins(public_url: str | None) -> set[str]:
    """Origins a browser may call /mcp from: the public URL's own, and those the operator names
    (``PMEM_ALLOWED_ORIGINS``, comma-separated); loopback origins are always allowed."""
    out = {o.strip().rstrip("/").lower() for o in os.environ.get(ORIGINS_ENV, "").split(",")}
    if public_url:
        parts = urlsplit(public_url)
        out.add(f"{parts.scheme}://{parts.netloc}".lower())
    return {o for o in out if o}


def origin_ok(origin: str | None, allowed: set[str]) -> bool:
    """No Origin (not a browser): fine. Otherwise a loopback origin or an allowed one; anything
    else (a page elsewhere, DNS rebinding, ``null``) is refused (MCP transport spec)."""
    if origin is None:
        return True
    o = origin.strip().rstrip("/").lower()
    if o in allowed:
        return True
    parts = urlsplit(o)
    return (
        parts.scheme in ("http", "https")
        and bool(parts.hostname)
        and is_loopback(parts.hostname or "")
    )


class Sessions:
    """Which client opened which MCP session: a session id is used only with a token of the
    client it was opened for (another client that learns the id gets 404, as for an unknown
    one). Ids are remembered as the server hands them out; one it has not seen (a server that
    restarted) is bound to the first client that uses it successfully."""

    def __init__(self) -> None:
        self._owner: dict[str, str] = {}

    def allowed(self, session: str, client: str) -> bool:
        owner = self._owner.get(session)
        return owner is None or owner == client

    def bind(self, session: str, client: str) -> None:
        if session not in self._owner and len(self._owner) >= MAX_SESSIONS:
            self._owner.pop(next(iter(self._owner)))
        self._owner.setdefault(session, client)

    def forget(self, session: str) -> None:
        self._owner.pop(session, None)


class McpGuard:
    """In front of /mcp: Host, Origin, bearer access token (kind ``access``, issued for this
    resource), the client's budget, the session's client, and the scope of a ``tools/call``.
    The owner's passphrase and `pmem api` tokens are never accepted here."""

    def __init__(
        self,
        app: Any,
        *,
        tokens: TokenStore,
        urls: Urls,
        hosts: set[str],
        budgets: Budgets,
        origins: set[str] | None = None,
    ) -> None:
        self.app = app
        self.tokens = tokens
        self.urls = urls
        self.hosts = hosts
        self.budgets = budgets
        self.origins = origins or set()
        self.sessions = Sessions()
        self.challenge = f'Bearer resource_metadata="{urls.resource_metadata}"'

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        headers = {k.lower(): v for k, v in scope.get("headers", [])}
        host = host_name(headers.get(b"host", b"").decode("latin-1"))
        if host not in self.hosts and not is_loopback(host):
            await _send_json(send, 400, {"error": "invalid_host"})
            return
        origin = headers.get(b"origin")
        if not origin_ok(origin.decode("latin-1") if origin is not None else None, self.origins):
            await _send_json(send, 403, {"error": "invalid_origin"})
            return
        scheme, _, token = headers.get(b"authorization", b"").decode("latin-1").partition(" ")
        info = None
        if scheme.lower() == "bearer" and token.strip():
            info = await run_in_threadpool(self.tokens.verify, token.strip(), kind="access")
            if info is not None and not self.urls.audience_ok(info.resource, "mcp"):
                info = None  # issued for another resource (the memory API): not here
        if info is None:
            challenge = self.challenge + (', error="invalid_token"' if token.strip() else "")
            await _send_json(
                send,
                401,
                {"error": "invalid_token" if token.strip() else "unauthorized"},
                [(b"www-authenticate", challenge.encode())],
            )
            return
        client = info.client_id or info.name
        session = headers.get(SESSION_HEADER, b"").decode("latin-1").strip()
        if session and not self.sessions.allowed(session, client):
            await _send_json(
                send,
                404,
                {
                    "jsonrpc": "2.0",
                    "id": None,
                    "error": {"code": -32001, "message": "Session not found"},
                },
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
                wanted = step_up_scope(info.scopes, missing)
                if info.family_id:  # its next refresh is refused: the client authorizes again
                    await run_in_threadpool(self.tokens.mark_step_up, info.family_id)
                await _send_json(
                    send,
                    403,
                    {"error": "insufficient_scope", "scope": missing},
                    [
                        (
                            b"www-authenticate",
                            f'Bearer error="insufficient_scope", scope="{wanted}", '
                            f'resource_metadata="{self.urls.resource_metadata}", '
                            f'error_description="this call needs {missing}"'.encode(),
                        )
                    ],
                )
                return
        scope[TOKEN_KEY] = info
        sessions = self.sessions
        closing = scope.get("method") == "DELETE" and bool(session)

        async def bound(message: Any) -> None:
            if message["type"] == "http.response.start" and message.get("status", 500) < 400:
                given = next(
                    (v for k, v in message.get("headers", []) if k.lower() == SESSION_HEADER), None
                )
                sid = given.decode("latin-1") if given is not None else session
                if closing:
                    sessions.forget(session)
                elif sid:
                    sessions.bind(sid, client)
            await send(message)

        await self.app(scope, receive, bound)


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
    except (ValueError, RecursionError):
        return None  # StrictJson (too deep, NaN) or the transport (a parse error) answers it
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
    guard = McpGuard(
        StrictJson(mcp_app),
        tokens=tokens,
        urls=urls,
        hosts=hosts,
        budgets=budgets,
        origins=allowed_origins(public_url),
    )
    endpoints = OAuthEndpoints(store, urls)
    authorize = Authorize(store, urls)

    async def public(request: Request) -> Response:
        items = await run_in_threadpool(public_reader.items) if public_reader is not None else []
        return JSONResponse({"items": items})

    async def register(request: Request) -> Response:
        # anyone on the internet may register: REGISTRATIONS_PER_ADDRESS requests per address
        # (whatever the answer), and REGISTRATIONS accepted ones in all; a refused request
        # (too large, bad metadata, refused URIs) never uses up the shared budget
        address = address_key(request.client.host if request.client else None)
        await run_in_threadpool(purge_buckets, db, "dcr:", 600.0)  # other addresses' old events
        per_address = PgWindow(db, f"dcr:{address}", REGISTRATIONS_PER_ADDRESS, 600.0)
        registrations = PgWindow(db, "server:registrations", REGISTRATIONS, 600.0)
        wait = await run_in_threadpool(per_address.try_acquire)
        if wait <= 0 and await run_in_threadpool(registrations.in_window) >= REGISTRATIONS:
            wait = 60.0
        if wait > 0:
            return JSONResponse(
                {"error": "temporarily_unavailable", "error_description": "too many registrations"},
                status_code=429,
                headers={"Retry-After": str(max(1, math.ceil(wait)))},
            )
        answer = await endpoints.register(request)
        if answer.status_code == 201:
            await run_in_threadpool(registrations.try_acquire)
        return answer

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
    oauth_app = _HostChecked(StrictJson(Starlette(routes=routes)), hosts)
    api = create_api(
        db,
        budget=budget,
        public_url=public_url,
        token_kinds=("api", "access"),
        audience=lambda resource: urls.audience_ok(resource, "api"),
        limits=False,  # Limits is in front of everything
    )
    return Limits(Dispatch(mcp_app, guard, api, oauth_app))


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
