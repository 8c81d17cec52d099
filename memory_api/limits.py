"""What every request to our HTTP servers (`pmem api`, `pmem serve --http`) must fit, checked
before any route, handler or SDK sees it.

``Limits`` is an ASGI middleware:

- **body size**: ``Content-Length`` over the path's limit is ``413`` before a byte is read; a
  body that grows past it while read is ``413`` too (``MAX_BODY``, 4 MiB; ``/register`` 16 KiB;
  the OAuth forms 64 KiB);
- **slow bodies**: a body not complete within ``BODY_SECONDS`` of the request is ``408`` and
  the connection closed (a half-sent request holds nothing longer);
- **NUL** in the path or the query string: ``400 invalid_request``;
- **an error nobody caught** is answered ``500 internal_error`` and logged as its type and the
  place it was raised, never its message (a message can quote the request).

``StrictJson`` checks the body's content once the caller is known (behind the token check):

- **JSON** (``application/json``, ``…+json``): UTF-8, at most ``MAX_DEPTH`` levels, no ``NaN``
  or ``Infinity``, no NUL character and no lone surrogate in any string or key (PostgreSQL's text
  cannot hold them): otherwise ``400 invalid_json`` with the reason;
- **NUL** in a form body: ``400 invalid_request``.

No answer or log line here holds the body or the query string. The connection-level limits
(idle and half-sent headers: ``TimedH11``, keep-alive) are set where uvicorn is configured
(``memory_api/server.py``).
"""

from __future__ import annotations

import asyncio
import ipaddress
import json
import logging
import re
import traceback
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from uvicorn.protocols.http.h11_impl import H11Protocol

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

log = logging.getLogger("pmem.http")

MAX_BODY = 4 * 1024 * 1024
#: smaller limits by path: registration metadata, the OAuth forms
PATH_LIMITS = {
    "/register": 16 * 1024,
    "/token": 64 * 1024,
    "/revoke": 64 * 1024,
    "/authorize": 64 * 1024,
}
BODY_SECONDS = 30.0
MAX_DEPTH = 64
#: a connection that has not sent a whole request head this long after it opened is closed
HEADER_SECONDS = 10.0
KEEP_ALIVE_SECONDS = 5
MAX_CONNECTIONS = 256  # uvicorn's limit_concurrency: beyond it, 503
_STRINGS = re.compile(rb'"(?:[^"\\]|\\.)*"', re.DOTALL)
_NOT_BRACKETS = re.compile(rb"[^\[\]{}]")


class TimedH11(H11Protocol):
    """uvicorn's h11 protocol with a deadline for each request head: a connection that opens
    (or finishes a response) and then sends nothing, or half a head, for ``HEADER_SECONDS`` is
    closed. uvicorn itself times out only a keep-alive connection that sends nothing at all, and
    forgets that timer as soon as a byte arrives."""

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm()

    def _arm(self) -> None:
        self._head_deadline = self.loop.call_later(HEADER_SECONDS, self._head_timeout, self.cycle)

    def _head_timeout(self, cycle: object) -> None:
        # no new request began since the deadline was set, and none is being answered
        waiting = cycle is None or getattr(cycle, "response_complete", False)
        if self.cycle is cycle and waiting and not self.transport.is_closing():
            self.transport.close()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        self._head_deadline.cancel()
        if not self.transport.is_closing():
            self._arm()

    def connection_lost(self, exc: Exception | None) -> None:
        self._head_deadline.cancel()
        super().connection_lost(exc)


def uvicorn_limits() -> dict[str, Any]:
    """The connection-level limits, as uvicorn.Config keywords."""
    return {
        "http": TimedH11,
        "timeout_keep_alive": KEEP_ALIVE_SECONDS,
        "limit_concurrency": MAX_CONNECTIONS,
        "h11_max_incomplete_event_size": 64 * 1024,
    }


def address_key(host: str | None) -> str:
    """A source address as limits count it: the address itself, an IPv6 one by its /64 (one
    host usually holds a whole /64)."""
    if not host:
        return "unknown"
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        return host[:64]
    if ip.version == 6 and not ip.is_loopback:
        return str(ipaddress.ip_network(f"{ip}/64", strict=False))
    return str(ip)


def json_problem(body: bytes) -> str | None:
    """Why ``body`` is JSON this server refuses (too deep, NaN, NUL, a lone surrogate, not
    UTF-8), or None; a body that is not JSON at all is left to the app's own parser."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        return "not UTF-8"
    bare = _NOT_BRACKETS.sub(b"", _STRINGS.sub(b"", body))
    depth = 0
    for b in bare:
        depth += 1 if b in (0x5B, 0x7B) else -1
        if depth > MAX_DEPTH:
            return f"nested deeper than {MAX_DEPTH} levels"

    def constant(name: str) -> Any:
        raise ValueError(name)

    try:
        value = json.loads(text, parse_constant=constant)
    except RecursionError:
        return f"nested deeper than {MAX_DEPTH} levels"
    except ValueError as err:
        if str(err) in ("NaN", "Infinity", "-Infinity"):
            return "NaN or Infinity is not JSON"
        return None  # plain invalid JSON: the app answers it its own way (422, -32700)
    return _strings_problem(value, 0)


def _strings_problem(value: Any, depth: int) -> str | None:
    if depth > MAX_DEPTH:
        return f"nested deeper than {MAX_DEPTH} levels"
    if isinstance(value, str):
        return _text_problem(value)
    if isinstance(value, dict):
        for k, v in value.items():
            why = _text_problem(k) or _strings_problem(v, depth + 1)
            if why:
                return why
    elif isinstance(value, list):
        for v in value:
            why = _strings_problem(v, depth + 1)
            if why:
                return why
    return None


def _text_problem(s: str) -> str | None:
    if "\x00" in s:
        return "NUL character in a string"
    try:
        s.encode("utf-8")
    except UnicodeEncodeError:
        return "lone surrogate in a string"
    return None


async def _answer(send: Send, status: int, body: dict[str, Any], close: bool = False) -> None:
    payload = json.dumps(body).encode()
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(payload)).encode()),
        (b"cache-control", b"no-store"),
    ]
    if close:
        headers.append((b"connection", b"close"))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": payload})


class Limits:
    def __init__(self, app: ASGIApp, *, path_limits: dict[str, int] | None = None) -> None:
        self.app = app
        self.path_limits = PATH_LIMITS if path_limits is None else path_limits

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path = scope.get("path", "")
        query = scope.get("query_string", b"") or b""
        if "\x00" in path or b"\x00" in query or b"%00" in query.lower():
            await _answer(send, 400, {"error": "invalid_request", "reason": "NUL character"})
            return
        headers = {k.lower(): v for k, v in scope.get("headers", [])}
        limit = self.path_limits.get(path.rstrip("/") or "/", MAX_BODY)
        length = headers.get(b"content-length")
        if length is not None:
            try:
                declared = int(length)
            except ValueError:
                await _answer(send, 400, {"error": "invalid_request", "reason": "Content-Length"})
                return
            if declared > limit:
                await _answer(send, 413, {"error": "body_too_large", "limit": limit}, close=True)
                return
        if scope.get("method") in ("POST", "PUT", "PATCH", "DELETE"):
            try:
                with_deadline = await asyncio.wait_for(_read(receive, limit), BODY_SECONDS)
            except TimeoutError:
                await _answer(send, 408, {"error": "request_timeout"}, close=True)
                return
            if with_deadline is None:
                await _answer(send, 413, {"error": "body_too_large", "limit": limit}, close=True)
                return
            receive = with_deadline[1]
        started = False

        async def tracked(message: MutableMapping[str, Any]) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, receive, tracked)
        except Exception as err:  # noqa: BLE001 - answered and logged without its message
            frame = traceback.extract_tb(err.__traceback__)[-1:]
            where = f"{frame[0].filename.rsplit('/', 1)[-1]}:{frame[0].lineno}" if frame else "?"
            log.error("unhandled %s on %s (at %s)", type(err).__name__, path, where)
            if not started:
                await _answer(send, 500, {"error": "internal_error"})


async def _read(receive: Receive, limit: int) -> tuple[bytes, Receive] | None:
    """The whole body (None when it passes ``limit``) and a ``receive`` that replays it."""
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return b"", _replay(b"", receive, message)
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            return None
        chunks.append(chunk)
        if not message.get("more_body"):
            break
    body = b"".join(chunks)
    return body, _replay(body, receive, None)


class StrictJson:
    """The body's content, checked after the caller is known (a request without a valid token
    is answered 401 before its body is looked at): a JSON body must pass ``json_problem``
    (``400 invalid_json`` with the reason), a form body must hold no NUL. Behind ``Limits``,
    which has capped the body's size and time."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope.get("method") not in ("POST", "PUT", "PATCH"):
            await self.app(scope, receive, send)
            return
        headers = {k.lower(): v for k, v in scope.get("headers", [])}
        ctype = headers.get(b"content-type", b"").split(b";")[0].strip().lower()
        is_json = ctype == b"application/json" or ctype.endswith(b"+json")
        is_form = ctype == b"application/x-www-form-urlencoded"
        if not (is_json or is_form):
            await self.app(scope, receive, send)
            return
        read = await _read(receive, MAX_BODY)
        if read is None:
            await _answer(send, 413, {"error": "body_too_large", "limit": MAX_BODY}, close=True)
            return
        body, receive = read
        if body and is_json:
            why = json_problem(body)
            if why:
                log.info("refused a JSON body on %s: %s", scope.get("path", ""), why)
                await _answer(send, 400, {"error": "invalid_json", "reason": why})
                return
        elif is_form and (b"\x00" in body or b"%00" in body.lower()):
            await _answer(send, 400, {"error": "invalid_request", "reason": "NUL character"})
            return
        await self.app(scope, receive, send)


def _replay(body: bytes, receive: Receive, first: MutableMapping[str, Any] | None) -> Receive:
    sent = False

    async def replay() -> MutableMapping[str, Any]:
        nonlocal sent
        if not sent:
            sent = True
            if first is not None:
                return first
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay
