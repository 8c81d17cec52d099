"""The authorization endpoint and its consent page (``GET|POST /authorize``).

A GET with a valid request answers 200 with the page itself: a plain HTML form (no JavaScript)
showing the client's name, where it will send the answer (a loopback redirect gets a warning),
each requested scope as a checkbox with a plain-language line, a field for the owner's
passphrase (``pmem owner set-password``) and Approve / Deny buttons. The request travels in
hidden fields and is checked again on POST. The grant is what the owner ticked; only
``memory.read`` and ``memory.propose`` are ticked beforehand (least privilege: writing, deleting
and publishing are the owner's to add, each with its line saying what it allows).

Guessing is throttled (``throttle_wait``) by the wrong passphrases of the last 24 hours, per
source address, per client and in all: after 5 from one address (or for one client) every
further try from there waits 2, 4, 8 … up to 3600 s after the last failure, answered 429 with
Retry-After without looking at the passphrase. A client the owner approved before (it holds or
held tokens) is held up by its own failures from other addresses for at most ``KNOWN_CAP``
seconds and never by the failures of everyone else, so an attacker elsewhere cannot lock the
owner out; a new client waits too once 20 failures came from anywhere. A check is recorded as a
failure before the passphrase is looked at (and cleared when it was right), so a parallel burst
cannot slip several checks into one slot. A failure is stored as its time, address and client
id, and logged without the attempt.

Errors before the client and redirect URI are known are shown on a page (never redirected);
afterwards they go back to the client as ``error=…&state=…&iss=…``. ``iss`` (RFC 9207) is on
every redirect.
"""

from __future__ import annotations

import html
import logging
import re
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response

from mcp_server.oauth import Urls, is_loopback_redirect, match_redirect, with_params
from memory_api.limits import address_key
from store.oauth import Attempts, Client, OAuthStore
from store.tokens import DEFAULT_SCOPES, SCOPES

log = logging.getLogger("pmem.remote")

FAILURE_WINDOW = 24 * 3600
FREE_FAILURES = 5  # per address, per client
FREE_FOR_ALL = 20  # from everywhere, before a new client waits too
MAX_DELAY = 3600.0
KNOWN_CAP = 3.0  # the longest a known client waits for failures made elsewhere
#: ticked on the page before the owner changes anything
PRETICKED = ("memory.read", "memory.propose")
_CHALLENGE = re.compile(r"^[A-Za-z0-9_-]{43}$")  # base64url of a SHA-256, unpadded
#: the clock of the throttle (tests move it instead of sleeping)
clock = time.time

SCOPE_TEXT = {
    "memory.read": "Read your memories: the index, search, single memories and their history, and "
    "recall of what was said in your conversations.",
    "memory.propose": "Suggest new memories and changes. Suggestions wait in your queue "
    "(pmem proposals) until you accept them.",
    "memory.write": "Write memories without asking you first: create new ones and add to existing "
    "ones, recorded under this client's name. Leave unticked unless this client should write.",
    "memory.delete": "Ask to delete memories. Each request waits for your confirmation. Leave "
    "unticked unless this client should ask that.",
    "memory.publish": "Ask to publish memories to your public page. Each request waits for your "
    "confirmation. Leave unticked unless this client should ask that.",
}

UNKNOWN_CLIENT = (
    "This server does not know this client (its registration is unknown, or the owner revoked "
    "it). The client has to register again: Claude Code: claude mcp logout NAME, then claude "
    "mcp login NAME; Codex: codex mcp logout NAME, then codex mcp login NAME; mcp-remote (Claude Desktop): "
    "delete ~/.mcp-auth and restart; other clients: remove and add the server "
    '(docs/remote.md, "A client that is not known").'
)

FIELDS = (
    "client_id",
    "redirect_uri",
    "response_type",
    "code_challenge",
    "code_challenge_method",
    "state",
    "scope",
    "resource",
)


def throttle_delay(failures: int, cap: float = MAX_DELAY, free: int = FREE_FAILURES) -> float:
    """Seconds to wait after the last failure, given the failures in the window."""
    if failures < free:
        return 0.0
    return min(cap, 2.0 ** (failures - free + 1))


def _left(seen: tuple[int, float | None], cap: float, free: int = FREE_FAILURES) -> float:
    count, since = seen
    delay = throttle_delay(count, cap, free)
    return max(0.0, delay - (since or 0.0)) if delay else 0.0


def throttle_wait(seen: Attempts) -> float:
    """Seconds this check must wait (0: check now). Exponential per address and per client; a
    known client's own count is capped at ``KNOWN_CAP`` and it ignores the count of all."""
    waits = [
        _left(seen.address, MAX_DELAY),
        _left(seen.client, KNOWN_CAP if seen.known_client else MAX_DELAY),
    ]
    if not seen.known_client:
        waits.append(_left(seen.everyone, MAX_DELAY, FREE_FOR_ALL))
    return max(waits)


@dataclass
class Pending:
    client: Client
    redirect_uri: str
    explicit: bool
    state: str | None
    code_challenge: str
    scopes: list[str]  # what the client asked for (known scopes only), or the default
    resource: str | None
    raw: dict[str, str]


class ConsentError(Exception):
    def __init__(self, error: str, description: str, *, redirect: bool) -> None:
        super().__init__(description)
        self.error = error
        self.description = description
        self.redirect = redirect


class Authorize:
    def __init__(self, store: OAuthStore, urls: Urls) -> None:
        self.store = store
        self.urls = urls

    async def handle(self, request: Request) -> Response:
        params: dict[str, str] = {}
        source = request.query_params if request.method == "GET" else await request.form()
        for k in FIELDS:
            v = source.get(k)
            if isinstance(v, str):
                params[k] = v
        try:
            pending = await run_in_threadpool(self._check, params)
        except ConsentError as err:
            return self._error(err, params)
        if request.method == "GET":
            return await self._page(pending)
        form = await request.form()
        return await self._decide(pending, form, request.client.host if request.client else None)

    # ---------------------------------------------------------------- validation

    def _check(self, p: dict[str, str]) -> Pending:
        c = self.store.get_client(p.get("client_id", "")) if p.get("client_id") else None
        if c is None or c.revoked_at is not None:
            # never redirected (RFC 6749 §4.1.2.1); the page says how to register again, and
            # /token answers this client `invalid_client`, on which the SDKs register again
            raise ConsentError("invalid_client", UNKNOWN_CLIENT, redirect=False)
        registered = [str(u) for u in c.metadata.get("redirect_uris") or []]
        redirect = match_redirect(p.get("redirect_uri"), registered)
        if redirect is None:
            raise ConsentError(
                "invalid_request", "redirect_uri is not registered for this client", redirect=False
            )
        pending = Pending(
            c,
            redirect,
            "redirect_uri" in p,
            p.get("state"),
            p.get("code_challenge", ""),
            [],
            p.get("resource"),
            p,
        )
        if p.get("response_type") != "code":
            raise ConsentError(
                "unsupported_response_type", "response_type must be code", redirect=True
            )
        if not pending.code_challenge or p.get("code_challenge_method") != "S256":
            raise ConsentError(
                "invalid_request", "PKCE with code_challenge_method=S256 is required", redirect=True
            )
        if not _CHALLENGE.match(pending.code_challenge):
            raise ConsentError(
                "invalid_request",
                "code_challenge must be the base64url SHA-256 of the verifier (43 characters)",
                redirect=True,
            )
        if not self.urls.resource_ok(pending.resource):
            raise ConsentError("invalid_target", "this server is not that resource", redirect=True)
        asked = [s for s in (p.get("scope") or "").split() if s in SCOPES]
        pending.scopes = list(dict.fromkeys(asked)) or list(DEFAULT_SCOPES)
        return pending

    def _error(self, err: ConsentError, p: dict[str, str]) -> Response:
        if err.redirect:
            try:
                pending_redirect = match_redirect(
                    p.get("redirect_uri"),
                    [
                        str(u)
                        for u in (
                            self.store.get_client(p.get("client_id", "")) or _NO
                        ).metadata.get("redirect_uris")
                        or []
                    ],
                )
            except Exception:  # noqa: BLE001 - fall back to the page
                pending_redirect = None
            if pending_redirect:
                return _redirect(
                    with_params(
                        pending_redirect,
                        error=err.error,
                        error_description=err.description,
                        state=p.get("state"),
                        iss=self.urls.issuer,
                    )
                )
        return HTMLResponse(
            _shell("Cannot authorize", f"<p class=err>{html.escape(err.description)}</p>"),
            status_code=400,
            headers=_NO_STORE,
        )

    # ---------------------------------------------------------------- the page

    async def _page(
        self,
        pending: Pending,
        *,
        message: str = "",
        status: int = 200,
        ticked: list[str] | None = None,
        headers: dict[str, str] | None = None,
    ) -> Response:
        has_password = await run_in_threadpool(self.store.has_owner_password)
        target = urlsplit(pending.redirect_uri)
        # the form posts here and is answered with a redirect to the client: both allowed
        origin = (
            f"{target.scheme}://{target.netloc}"
            if target.scheme in ("http", "https")
            else f"{target.scheme}:"  # an editor's own scheme (cursor:, vscode:)
        )
        csp = _NO_STORE["Content-Security-Policy"] + f"; form-action 'self' {origin}"
        return HTMLResponse(
            self._render(pending, message, has_password, ticked),
            status_code=status,
            headers={**_NO_STORE, "Content-Security-Policy": csp, **(headers or {})},
        )

    def _render(
        self, pending: Pending, message: str, has_password: bool, ticked: list[str] | None
    ) -> str:
        c = pending.client
        name = html.escape(c.client_name or c.client_id)
        target = urlsplit(pending.redirect_uri)
        shown = (target.hostname or "") + (f":{target.port}" if target.port else "")
        host = html.escape(shown or pending.redirect_uri)
        warn = ""
        if is_loopback_redirect(pending.redirect_uri):
            warn = (
                "<p class=warn role=alert><strong>Warning:</strong> this client receives the answer on "
                "this computer (a loopback address). Approve only if you just started it yourself, "
                "e.g. Claude Code or Codex.</p>"
            )
        chosen = set(
            ticked if ticked is not None else [s for s in pending.scopes if s in PRETICKED]
        )
        boxes = "\n".join(
            f'<li><label><input type=checkbox name=grant value="{s}"{" checked" if s in chosen else ""}> '
            f"<code>{s}</code> — {html.escape(SCOPE_TEXT[s])}</label></li>"
            for s in pending.scopes
        )
        hidden = "\n".join(
            f'<input type=hidden name="{k}" value="{html.escape(v, quote=True)}">'
            for k, v in pending.raw.items()
        )
        note = f"<p class=err role=alert>{html.escape(message)}</p>" if message else ""
        if not has_password:
            note += (
                "<p class=err>No owner passphrase is set: run <code>pmem owner set-password</code> on the "
                "server first.</p>"
            )
        body = f"""
<p><strong>{name}</strong> asks to use your personal memory.</p>
<p>It will send the answer to <strong>{host}</strong>.</p>
{warn}{note}
<form method=post action="/authorize">
{hidden}
<fieldset><legend>Allow it to</legend>
<ul>
{boxes}
</ul></fieldset>
<p><label>Owner passphrase <input type=password name=passphrase autocomplete=current-password></label></p>
<p><button type=submit name=decision value=approve>Approve</button>
<button type=submit name=decision value=deny>Deny</button></p>
</form>"""
        return _shell(f"Allow {c.client_name or c.client_id}?", body)

    # ---------------------------------------------------------------- the decision

    async def _decide(self, pending: Pending, form: Any, host: str | None) -> Response:
        decision = form.get("decision")
        if decision != "approve":
            log.info("consent denied for client %s", pending.client.client_id)
            return _redirect(
                with_params(
                    pending.redirect_uri,
                    error="access_denied",
                    state=pending.state,
                    iss=self.urls.issuer,
                )
            )
        ticked = [s for s in form.getlist("grant") if s in pending.scopes]
        address = address_key(host)
        wait, attempt = await run_in_threadpool(
            lambda: self.store.attempt(
                address=address,
                client_id=pending.client.client_id,
                now=clock(),
                window_seconds=FAILURE_WINDOW,
                policy=throttle_wait,
            )
        )
        if attempt is None:
            seconds = max(1, int(wait + 0.999))
            log.warning("consent throttled for client %s", pending.client.client_id)
            return await self._page(
                pending,
                message=f"Too many wrong passphrases. Try again in {seconds} seconds.",
                status=429,
                ticked=ticked,
                headers={"Retry-After": str(seconds)},
            )
        password = form.get("passphrase")
        ok = isinstance(password, str) and await run_in_threadpool(
            self.store.check_owner_password, password
        )
        if not ok:
            log.warning("consent: wrong owner passphrase for client %s", pending.client.client_id)
            return await self._page(pending, message="Wrong passphrase.", status=401, ticked=ticked)
        await run_in_threadpool(self.store.clear_attempt, attempt)
        if not ticked:
            return await self._page(
                pending, message="Tick at least one permission, or deny.", status=400, ticked=ticked
            )
        code, _ = await run_in_threadpool(
            self.store.save_code,
            pending.client.client_id,
            ticked,
            pending.code_challenge,
            pending.redirect_uri,
            pending.explicit,
            self.urls.bound(pending.resource),  # the token's audience (oauth.Urls.audience_ok)
        )
        log.info("consent given to client %s (%s)", pending.client.client_id, " ".join(ticked))
        return _redirect(
            with_params(pending.redirect_uri, code=code, state=pending.state, iss=self.urls.issuer)
        )


class _NoClient:
    metadata: dict[str, Any] = {}


_NO = _NoClient()
_NO_STORE = {
    "Cache-Control": "no-store",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
    "Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'none'",
}


def _redirect(url: str) -> Response:
    return RedirectResponse(
        url,
        status_code=302,
        headers={"Cache-Control": "no-store", "Referrer-Policy": "no-referrer"},
    )


def _shell(title: str, body: str) -> str:
    return f"""<!doctype html>
<html lang=en><head><meta charset=utf-8><meta name=viewport content="width=device-width, initial-scale=1">
<title>{html.escape(title)} — personal-memory</title>
<style>
body {{ font: 16px/1.5 system-ui, sans-serif; max-width: 40rem; margin: 2rem auto; padding: 0 1rem; color: #222; }}
h1 {{ font-size: 1.4rem; }} ul {{ list-style: none; padding: 0; }} li {{ margin: .6rem 0; }}
fieldset {{ border: 1px solid #ccc; border-radius: 6px; }} code {{ background: #f3f3f3; padding: 0 .2rem; }}
.warn {{ background: #fff4d6; border: 1px solid #e0b84c; padding: .6rem; border-radius: 6px; }}
.err {{ color: #a40000; font-weight: 600; }}
button {{ font-size: 1rem; padding: .4rem 1.2rem; margin-right: .6rem; }}
</style></head>
<body><h1>{html.escape(title)}</h1>
{body}
</body></html>"""
