"""Who may talk to the memory API: the Host check, bearer tokens, scopes, the client's name.

An ASGI middleware in front of every route, so it answers before FastAPI reads or validates a
body:

1. **Host**: the ``Host`` header must name a loopback host (``localhost``, ``127.0.0.0/8``,
   ``[::1]``) or the host of ``--public-url``; anything else is ``400 invalid_host`` (a web page
   that rebinds its own name to 127.0.0.1 cannot reach the API).
2. **Token**: every route but ``GET /v1/health`` needs ``Authorization: Bearer pmem_…``, a live
   token of the token store (``pmem token create NAME``); otherwise ``401`` with
   ``WWW-Authenticate: Bearer``.
3. **Scope**: reads need ``memory.read``, proposals and requests ``memory.propose``, commits
   ``memory.write``; a commit or request whose ``reason`` / ``action`` is ``delete`` or
   ``publish`` needs ``memory.delete`` / ``memory.publish`` as well; otherwise
   ``403 insufficient_scope`` with the scopes to ask for in ``WWW-Authenticate`` (RFC 6750
   §3.1: the grant's and the missing one, so a client that asks again keeps what it had). An
   OAuth access token works here only when it was issued for this API (``audience``).
4. **Client name**: taken from the token. Any ``X-Pmem-Client`` the caller sent is dropped and
   replaced by the token's name, which the routes record on revisions and key budgets by.
"""

from __future__ import annotations

import ipaddress
import json
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any
from urllib.parse import urlsplit

from starlette.concurrency import run_in_threadpool

from core.errors import ConfigError
from store.tokens import TokenInfo, TokenStore

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

LOOPBACK_NAMES = ("localhost", "127.0.0.1", "::1")
OPEN_PATHS = {("GET", "/v1/health")}
CLIENT_HEADER = b"x-pmem-client"


def is_loopback(host: str) -> bool:
    host = host.strip("[]").lower()
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def public_host(public_url: str | None) -> str | None:
    if not public_url:
        return None
    parts = urlsplit(public_url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigError(f"--public-url must be an http(s) URL with a host, not {public_url!r}")
    return parts.hostname.lower()


def check_public_url(public_url: str | None) -> None:
    """A public URL is https, unless its host is loopback as an IP literal or ``localhost``
    (``http://127.0.0.1.nip.io`` is not: it is a name that resolves there)."""
    if not public_url:
        return
    host = public_host(public_url)
    if urlsplit(public_url).scheme != "https" and not (host and is_loopback(host)):
        raise ConfigError(
            f"--public-url must be an https:// address, not {urlsplit(public_url).scheme}:// "
            "(only a loopback IP literal or localhost may use http)",
            hint="put a TLS proxy in front (docs/remote.md) and give its https address",
        )


def check_bind(host: str, public_url: str | None) -> None:
    """A non-loopback bind only behind a public URL (the TLS proxy in front of it); a public
    URL is https unless it is loopback itself."""
    check_public_url(public_url)
    if is_loopback(host):
        return
    named = public_host(public_url)
    if not public_url or (named and is_loopback(named)):
        raise ConfigError(
            f"refusing to listen on {host}: the memory API listens on loopback only unless "
            "--public-url names the https address a TLS proxy serves it at",
            hint="keep the default --host 127.0.0.1, or give --public-url https://…",
        )


def allowed_hosts(public_url: str | None) -> set[str]:
    hosts = set(LOOPBACK_NAMES)
    extra = public_host(public_url)
    if extra:
        hosts.add(extra)
    return hosts


def host_name(header: str) -> str:
    """The host part of a Host header value (``[::1]:8765`` → ``::1``)."""
    header = header.strip().lower()
    if header.startswith("["):
        return header[1 : header.find("]")] if "]" in header else header
    return header.rsplit(":", 1)[0] if header.count(":") == 1 else header


#: a commit ``reason`` or request ``action`` that needs its own scope besides the route's
ACTION_SCOPES = {"delete": "memory.delete", "publish": "memory.publish"}
SCOPE_ORDER = ("memory.read", "memory.propose", "memory.write", "memory.delete", "memory.publish")


def step_up_scope(granted: tuple[str, ...] | list[str], needed: str) -> str:
    """The ``scope`` of an ``insufficient_scope`` challenge: what the token has and what it
    lacks, so that a client which asks for exactly this keeps its grant."""
    want = set(granted) | {needed}
    return " ".join([s for s in SCOPE_ORDER if s in want] + sorted(want - set(SCOPE_ORDER)))


def action_scope(path: str, body: bytes) -> str | None:
    """The extra scope a ``/v1/commits`` or ``/v1/requests`` body asks for, if any."""
    key = "reason" if path.startswith("/v1/commits") else "action"
    try:
        value = json.loads(body)
    except (ValueError, RecursionError):  # memory_api/limits.py's StrictJson answers it
        return None
    action = value.get(key) if isinstance(value, dict) else None
    return ACTION_SCOPES.get(action) if isinstance(action, str) else None


def required_scope(method: str, path: str) -> str:
    if path.startswith("/v1/commits") or (
        path.startswith("/v1/markers") and method.upper() != "GET"
    ):
        return "memory.write"
    if path.startswith(("/v1/proposals", "/v1/requests")):
        return "memory.propose"
    return "memory.read"


class AuthMiddleware:
    def __init__(
        self,
        app: ASGIApp,
        *,
        tokens: TokenStore,
        hosts: set[str],
        kinds: tuple[str, ...] = ("api",),
        audience: Callable[[str | None], bool] | None = None,
    ) -> None:
        self.app = app
        self.tokens = tokens
        self.hosts = hosts
        self.kinds = kinds
        self.audience = audience

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.lower(): v for k, v in scope.get("headers", [])}
        host = host_name(headers.get(b"host", b"").decode("latin-1"))
        if host not in self.hosts and not is_loopback(host):
            await _answer(send, 400, {"error": "invalid_host"})
            return
        method, path = scope["method"].upper(), scope["path"]
        if (method, path) in OPEN_PATHS:
            await self.app(scope, receive, send)
            return
        info = await self._identify(headers.get(b"authorization", b"").decode("latin-1"))
        if (
            info is not None
            and info.kind == "access"
            and self.audience is not None
            and not self.audience(info.resource)
        ):  # an OAuth token for another resource (/mcp)
            info = None
        if info is None:
            await _answer(
                send,
                401,
                {"error": "unauthorized"},
                [(b"www-authenticate", b'Bearer realm="pmem"')],
            )
            return
        needed = [required_scope(method, path)]
        if method == "POST" and path in ("/v1/commits", "/v1/requests"):
            body, receive = await _buffered(receive)
            extra = action_scope(path, body)
            if extra:
                needed.append(extra)
        missing = next((n for n in needed if n not in info.scopes), None)
        if missing is not None:
            challenge = step_up_scope(info.scopes, missing)
            if info.family_id:  # an OAuth grant: its next refresh is refused (step-up)
                await run_in_threadpool(self.tokens.mark_step_up, info.family_id)
            await _answer(
                send,
                403,
                {"error": "insufficient_scope", "scope": missing},
                [
                    (
                        b"www-authenticate",
                        f'Bearer error="insufficient_scope", scope="{challenge}"'.encode(),
                    )
                ],
            )
            return
        scope["headers"] = [(k, v) for k, v in scope["headers"] if k.lower() != CLIENT_HEADER]
        scope["headers"].append((CLIENT_HEADER, info.name.encode()))
        scope.setdefault("state", {})["token"] = info
        await self.app(scope, receive, send)

    async def _identify(self, authorization: str) -> TokenInfo | None:
        scheme, _, token = authorization.partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            return None
        return await run_in_threadpool(lambda: self.tokens.verify(token.strip(), kind=self.kinds))


async def _buffered(receive: Receive) -> tuple[bytes, Receive]:
    """The body (memory_api/limits.py has capped its size) and a ``receive`` that replays it."""
    chunks: list[bytes] = []
    while True:
        message = await receive()
        if message["type"] != "http.request":
            break
        chunks.append(message.get("body", b""))
        if not message.get("more_body"):
            break
    body = b"".join(chunks)
    sent = False

    async def replay() -> MutableMapping[str, Any]:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return body, replay


async def _answer(
    send: Send, status: int, body: dict[str, Any], extra: list[tuple[bytes, bytes]] | None = None
) -> None:
    payload = json.dumps(body).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(payload)).encode()),
                *(extra or []),
            ],
        }
    )
    await send({"type": "http.response.body", "body": payload})
