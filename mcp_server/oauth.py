"""The remote server's OAuth 2.1 authorization server, on the ``mcp`` SDK's protocol pieces.

The SDK gives the protocol (``OAuthAuthorizationServerProvider``, the token, registration and
revocation handlers, the metadata models); this module gives the policy the SDK leaves out:

- **clients** register by Dynamic Client Registration (``/register``). A redirect URI is parsed
  strictly (``redirect_problem``: no userinfo, no fragment, a lower-case scheme and host, a valid
  port, no spaces or control characters) and must be a loopback one (``http://localhost|
  127.0.0.1|[::1]…``, any port at use time, RFC 8252 §7.3), one of the web clients' and editors'
  known callbacks, an editor's own scheme (``cursor://…``, ``vscode://…``: ``EDITOR_SCHEMES``), or
  one the operator allows (``PMEM_OAUTH_REDIRECT_URIS``). A registration keeps the URIs that pass
  and names the refused ones (``refused_redirect_uris``); at ``/authorize`` the URI must match a
  registered one exactly, except a loopback port;
- **the consent page** (``GET /authorize`` answers 200 with it; ``mcp_server/consent.py``) is
  where the owner decides the grant; ``iss`` (RFC 9207) is on every authorization response;
- **PKCE S256 only**, a verifier of 43-128 unreserved characters (RFC 7636 §4.1);
- **audience**: ``resource`` (RFC 8707) checked at ``/authorize`` and ``/token``; a token is
  bound to the resource it was issued for (``/mcp``, the default, or the memory API ``/v1``) and
  works only there (``Urls.audience_ok``);
- **tokens** are opaque and stored hashed in the one token store (``store/oauth.py``): access 15
  minutes, refresh rotated on every use, a replay of the previous one inside
  ``PMEM_REFRESH_GRACE_SECONDS`` (default 30) answered with the same successor, any other reuse
  revokes the family; a reused code revokes what it issued;
- ``/revoke`` (RFC 7009) takes public clients by their ``client_id`` alone;
- client secrets are kept as SHA-256 (our ``ClientAuthenticator`` checks them; the SDK's
  compares a stored plain secret).

Nothing here logs a token, a code, a query string, a passphrase or a redirect URI.
"""

from __future__ import annotations

import json
import logging
import os
import re
import secrets
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode, urlsplit, urlunsplit

from mcp.server.auth.handlers.register import RegistrationHandler
from mcp.server.auth.handlers.token import TokenHandler
from mcp.server.auth.middleware.client_auth import AuthenticationError, ClientAuthenticator
from mcp.server.auth.provider import (
    AccessToken,
    AuthorizationCode,
    AuthorizationParams,
    RefreshToken,
    RegistrationError,
    TokenError,
)
from mcp.server.auth.settings import ClientRegistrationOptions
from mcp.shared.auth import (
    OAuthClientInformationFull,
    OAuthMetadata,
    OAuthToken,
    ProtectedResourceMetadata,
)
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import FormData
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from memory_api.auth import is_loopback
from store.oauth import (
    Client,
    CodeReuse,
    Exchanged,
    InvalidGrant,
    OAuthStore,
    RefreshReuse,
    StepUpPending,
)
from store.tokens import SCOPES, TokenStore

log = logging.getLogger("pmem.remote")

GRACE_ENV = "PMEM_REFRESH_GRACE_SECONDS"
REDIRECT_RULE = (
    "redirect URIs must be loopback (http://127.0.0.1:PORT/…, http://localhost:PORT/…), a known "
    "client's or editor's callback, or allowed by the operator (PMEM_OAUTH_REDIRECT_URIS); no "
    "userinfo, fragment or upper-case scheme"
)
REDIRECTS_ENV = "PMEM_OAUTH_REDIRECT_URIS"
#: the web clients' and editors' fixed callbacks (docs/remote.md)
KNOWN_REDIRECTS = (
    "https://claude.ai/api/mcp/auth_callback",
    "https://claude.com/api/mcp/auth_callback",
    "https://chatgpt.com/connector_platform_oauth_redirect",
    "https://vscode.dev/redirect",
    "https://insiders.vscode.dev/redirect",
)
#: editors that receive the answer on their own URI scheme (``cursor://anysphere.…/…``): any
#: URI of these schemes may be registered, and is then matched exactly
EDITOR_SCHEMES = ("cursor", "vscode", "vscode-insiders", "vscodium", "windsurf")
MAX_REDIRECT_LENGTH = 2000
_SCHEME = re.compile(r"^[a-z][a-z0-9+.-]*$")
#: RFC 7636 §4.1: code_verifier = 43*128unreserved
_VERIFIER = re.compile(r"^[A-Za-z0-9\-._~]{43,128}$")


def grace_seconds() -> float:
    raw = os.environ.get(GRACE_ENV, "30")
    try:
        return max(0.0, float(raw))
    except ValueError:
        return 30.0


def allowed_redirects() -> set[str]:
    extra = {u.strip() for u in os.environ.get(REDIRECTS_ENV, "").split(",") if u.strip()}
    return set(KNOWN_REDIRECTS) | extra


def redirect_problem(uri: object) -> str | None:
    """Why ``uri`` cannot be a redirect URI (strict shape, RFC 6749 §3.1.2, RFC 8252), or None.

    Its shape: at most 2000 characters, no space, control character or backslash, a lower-case
    scheme, no fragment, no userinfo, a lower-case host, a valid port (1-65535). Its kind:
    ``http`` only on a loopback host (``localhost`` or an IP literal), ``https`` only as a known
    callback or one the operator allows, an editor's scheme (``EDITOR_SCHEMES``) with a host and
    no port; nothing else."""
    if not isinstance(uri, str) or not uri:
        return "not a string"
    if len(uri) > MAX_REDIRECT_LENGTH:
        return "too long"
    if any(c.isspace() or ord(c) < 0x20 or ord(c) == 0x7F or c == "\\" for c in uri):
        return "space, control character or backslash"
    scheme, colon, _ = uri.partition(":")
    if not colon or not _SCHEME.match(scheme):
        return "scheme missing or not lower case"
    if "#" in uri:
        return "fragment"
    parts = urlsplit(uri)
    if "@" in parts.netloc:
        return "userinfo"
    try:
        port = parts.port
    except ValueError:
        return "invalid port"
    host = parts.netloc.rsplit(":", 1)[0] if port is not None else parts.netloc
    if not parts.hostname or host != host.lower():
        return "host missing or not lower case"
    if port is not None and not 1 <= port <= 65535:
        return "invalid port"
    if scheme == "http":
        if not _loopback_literal(parts.hostname):
            return "http only on a loopback host"
        return None
    if scheme == "https":
        return None if uri in allowed_redirects() else "https URI not known to this server"
    if scheme in EDITOR_SCHEMES:
        return None if port is None else "port on an editor URI"
    return None if uri in allowed_redirects() else "scheme not allowed"


def _loopback_literal(host: str) -> bool:
    """Loopback as RFC 8252 means it: ``localhost`` or an IP literal (never a name that happens
    to resolve there, such as ``127.0.0.1.nip.io``)."""
    return is_loopback(host)


def is_loopback_redirect(uri: str) -> bool:
    parts = urlsplit(uri)
    return parts.scheme == "http" and parts.hostname is not None and is_loopback(parts.hostname)


def _without_port(uri: str) -> tuple[str, str, str, str]:
    parts = urlsplit(uri)
    return parts.scheme, (parts.hostname or "").lower(), parts.path or "/", parts.query


def redirect_allowed_at_registration(uri: str) -> bool:
    return redirect_problem(uri) is None


def match_redirect(requested: str | None, registered: list[str]) -> str | None:
    """The redirect URI to use: exact match with a registered one, or a loopback one that
    differs only in its port (RFC 8252 §7.3); without ``requested``, the only registered one.
    ``requested`` is held to the registration's strict shape first."""
    if requested is None:
        return registered[0] if len(registered) == 1 else None
    if redirect_problem(requested) is not None:
        return None
    if requested in registered:
        return requested
    if is_loopback_redirect(requested):
        want = _without_port(requested)
        if any(is_loopback_redirect(r) and _without_port(r) == want for r in registered):
            return requested
    return None


def with_params(uri: str, **params: str | None) -> str:
    parts = urlsplit(uri)
    extra = urlencode({k: v for k, v in params.items() if v is not None})
    query = f"{parts.query}&{extra}" if parts.query else extra
    return urlunsplit(parts._replace(query=query))


@dataclass(frozen=True)
class Urls:
    """The issuer (``http://127.0.0.1:PORT`` or ``--public-url``) and what hangs off it."""

    issuer: str

    @property
    def resource(self) -> str:
        return self.issuer + "/mcp"

    @property
    def resource_metadata(self) -> str:
        return self.issuer + "/.well-known/oauth-protected-resource"

    @property
    def api(self) -> str:
        return self.issuer + "/v1"

    def resource_ok(self, value: str | None) -> bool:
        """RFC 8707: the resource a client asks a token for must be this server (``/mcp``, or
        the issuer itself for the memory API under ``/v1``)."""
        if value is None:
            return True
        v = value.rstrip("/")
        return v in (self.resource, self.issuer, self.api)

    def bound(self, value: str | None) -> str:
        """The audience a token asked for with ``resource`` ``value`` is bound to: ``/mcp``
        when none is named (the resource the metadata advertises), the memory API for the
        issuer itself or ``/v1``."""
        if value is None or value.rstrip("/") == self.resource:
            return self.resource
        return self.api

    def audience_ok(self, token_resource: str | None, where: str) -> bool:
        """A token works only at the resource it was issued for: ``where`` is ``"mcp"`` or
        ``"api"``. A token without a resource (`pmem auth token`, a first-party client) is
        the owner's own and works at both."""
        if token_resource is None:
            return True
        v = token_resource.rstrip("/")
        if where == "mcp":
            return v == self.resource
        return v in (self.issuer, self.api)


def authorization_metadata(urls: Urls) -> dict[str, Any]:
    meta = OAuthMetadata(
        issuer=urls.issuer,  # type: ignore[arg-type]
        authorization_endpoint=urls.issuer + "/authorize",  # type: ignore[arg-type]
        token_endpoint=urls.issuer + "/token",  # type: ignore[arg-type]
        registration_endpoint=urls.issuer + "/register",  # type: ignore[arg-type]
        revocation_endpoint=urls.issuer + "/revoke",  # type: ignore[arg-type]
        scopes_supported=list(SCOPES),
        response_types_supported=["code"],
        grant_types_supported=["authorization_code", "refresh_token"],
        token_endpoint_auth_methods_supported=["client_secret_post", "client_secret_basic", "none"],
        revocation_endpoint_auth_methods_supported=[
            "client_secret_post",
            "client_secret_basic",
            "none",
        ],
        code_challenge_methods_supported=["S256"],
        authorization_response_iss_parameter_supported=True,
    )
    return meta.model_dump(mode="json", exclude_none=True)


def resource_metadata(urls: Urls) -> dict[str, Any]:
    meta = ProtectedResourceMetadata(
        resource=urls.resource,  # type: ignore[arg-type]
        authorization_servers=[urls.issuer],  # type: ignore[list-item]
        scopes_supported=list(SCOPES),
        resource_name="personal-memory",
    )
    return meta.model_dump(mode="json", exclude_none=True)


def _sdk_client(c: Client) -> OAuthClientInformationFull:
    """The SDK's view of a client. The secret stays with us (hashed): ``client_secret`` is left
    empty and ``PgClientAuthenticator`` checks it."""
    meta = dict(c.metadata)
    meta.pop("client_secret", None)
    meta["client_id"] = c.client_id
    return OAuthClientInformationFull.model_validate(meta)


class PgOAuthProvider:
    """``OAuthAuthorizationServerProvider`` over PostgreSQL (``store/oauth.py``)."""

    def __init__(self, store: OAuthStore, urls: Urls) -> None:
        self.store = store
        self.urls = urls

    async def get_client(self, client_id: str) -> OAuthClientInformationFull | None:
        c = await run_in_threadpool(self.store.get_client, client_id)
        if c is None or c.revoked_at is not None:
            return None
        return _sdk_client(c)

    async def register_client(self, client_info: OAuthClientInformationFull) -> None:
        uris = [str(u) for u in client_info.redirect_uris or []]
        refused = [u for u in uris if not redirect_allowed_at_registration(u)]
        if refused or not uris:  # OAuthEndpoints.register filtered them already: a safety net
            raise RegistrationError("invalid_redirect_uri", REDIRECT_RULE)
        meta = client_info.model_dump(mode="json", exclude_none=True)
        secret = meta.pop("client_secret", None)
        c = await run_in_threadpool(
            lambda: self.store.register_client(client_info.client_id or "", meta, secret=secret)
        )
        log.info("client registered: %s (%s)", c.client_id, c.name)

    async def authorize(
        self, client: OAuthClientInformationFull, params: AuthorizationParams
    ) -> str:
        raise NotImplementedError("the consent page handles /authorize")

    async def load_authorization_code(
        self, client: OAuthClientInformationFull, authorization_code: str
    ) -> AuthorizationCode | None:
        row = await run_in_threadpool(self.store.load_code, authorization_code)
        if row is None or row["used_at"] is not None:  # a reuse: OAuthEndpoints.token revokes
            return None
        return AuthorizationCode(
            code=authorization_code,
            scopes=list(row["scopes"]),
            expires_at=row["expires_at"].timestamp(),
            client_id=row["client_id"],
            code_challenge=row["code_challenge"],
            redirect_uri=row["redirect_uri"],
            redirect_uri_provided_explicitly=row["redirect_explicit"],
            resource=row["resource"],
        )

    async def exchange_authorization_code(
        self, client: OAuthClientInformationFull, authorization_code: AuthorizationCode
    ) -> OAuthToken:
        def run() -> OAuthToken:
            c = self.store.get_client(client.client_id or "")
            if c is None or c.revoked_at is not None:
                raise TokenError("invalid_client", "client revoked")
            try:
                out = self.store.redeem_code(authorization_code.code, c)
            except CodeReuse as reuse:
                log.warning(
                    "authorization code reuse by client %s: %d tokens revoked",
                    c.client_id,
                    reuse.revoked,
                )
                raise TokenError("invalid_grant", "authorization code already used") from None
            except InvalidGrant:
                raise TokenError(
                    "invalid_grant", "authorization code unknown, used or expired"
                ) from None
            log.info("tokens issued to client %s", c.client_id)
            return _oauth_token(out)

        return await run_in_threadpool(run)

    async def load_refresh_token(
        self, client: OAuthClientInformationFull, refresh_token: str
    ) -> RefreshToken | None:
        row = await run_in_threadpool(self.store.load_refresh, refresh_token)
        if row is None or row["revoked_at"] is not None or row["expired"]:
            return None
        # every known scope may be *asked* for; exchange_refresh_token narrows to the grant
        return RefreshToken(
            token=refresh_token,
            client_id=row["client_id"],
            scopes=list(SCOPES),
            expires_at=int(row["expires_at"].timestamp()),
            resource=row["resource"],
        )

    async def exchange_refresh_token(
        self, client: OAuthClientInformationFull, refresh_token: RefreshToken, scopes: list[str]
    ) -> OAuthToken:
        def run() -> OAuthToken:
            c = self.store.get_client(client.client_id or "")
            if c is None or c.revoked_at is not None:
                raise TokenError("invalid_client", "client revoked")
            asked = None if sorted(scopes) == sorted(SCOPES) else scopes
            try:
                out = self.store.rotate(
                    refresh_token.token,
                    c,
                    asked,
                    grace_seconds=grace_seconds(),
                    default_resource=self.urls.resource,  # an older grant: bound to /mcp now
                )
            except RefreshReuse as reuse:
                log.warning(
                    "refresh token reuse by client %s: family %s revoked (%d tokens)",
                    c.client_id,
                    reuse.family_id,
                    reuse.revoked,
                )
                raise TokenError(
                    "invalid_grant", "refresh token reused: every token of this grant is revoked"
                ) from None
            except StepUpPending as err:
                log.info("refresh refused for client %s: a step-up is pending", c.client_id)
                raise TokenError("invalid_grant", str(err)) from None
            except InvalidGrant as err:
                raise TokenError("invalid_grant", str(err)) from None
            return _oauth_token(out)

        return await run_in_threadpool(run)

    async def load_access_token(self, token: str) -> AccessToken | None:
        info = await run_in_threadpool(
            lambda: TokenStore(self.store.db).verify(token, kind="access")
        )
        if info is None:
            return None
        return AccessToken(
            token=token,
            client_id=info.client_id or "",
            scopes=list(info.scopes),
            expires_at=int(info.expires_at.timestamp()) if info.expires_at else None,
            resource=info.resource,
        )

    async def revoke_token(self, token: AccessToken | RefreshToken) -> None:
        n = await run_in_threadpool(self.store.revoke_token, token.token)
        log.info("token revoked by its client (%d tokens of the grant)", n)

    async def exchange_identity_assertion(self, client: Any, params: Any) -> OAuthToken:
        raise TokenError("unsupported_grant_type", "not supported")


def _oauth_token(out: Exchanged) -> OAuthToken:
    return OAuthToken(
        access_token=out.access,
        token_type="Bearer",
        expires_in=out.expires_in,
        scope=" ".join(out.scopes),
        refresh_token=out.refresh,
    )


class PgClientAuthenticator(ClientAuthenticator):
    """Client authentication at /token and /revoke against the stored SHA-256 of the secret."""

    def __init__(self, provider: PgOAuthProvider) -> None:
        super().__init__(provider)  # type: ignore[arg-type]
        self.pg = provider

    async def authenticate_request(self, request: Request) -> OAuthClientInformationFull:
        import base64
        from urllib.parse import unquote

        form = await request.form()
        client_id = form.get("client_id")
        secret: str | None = None
        header = request.headers.get("Authorization", "")
        if header.startswith("Basic "):
            try:
                raw = base64.b64decode(header[6:]).decode("utf-8")
                basic_id, _, basic_secret = raw.partition(":")
                basic_id, secret = unquote(basic_id), unquote(basic_secret)
            except (ValueError, UnicodeDecodeError):
                raise AuthenticationError("invalid Basic authentication") from None
            if client_id and basic_id != client_id:
                raise AuthenticationError("client id mismatch")
            client_id = basic_id
        elif isinstance(form.get("client_secret"), str):
            secret = str(form.get("client_secret"))
        if not client_id:
            raise AuthenticationError("missing client_id")
        c = await run_in_threadpool(self.pg.store.get_client, str(client_id))
        if c is None or c.revoked_at is not None:
            raise AuthenticationError("unknown or revoked client")
        if c.secret_hash is not None and not c.secret_matches(secret):
            raise AuthenticationError("invalid client secret")
        if "client_id" not in form:  # the SDK's handlers read it from the form
            request._form = FormData([*form.multi_items(), ("client_id", c.client_id)])  # noqa: SLF001
        return _sdk_client(c)


class OAuthEndpoints:
    """``/token``, ``/register``, ``/revoke`` (the SDK's handlers behind our checks) and the two
    metadata documents."""

    def __init__(self, store: OAuthStore, urls: Urls) -> None:
        self.urls = urls
        self.provider = PgOAuthProvider(store, urls)
        self._auth = PgClientAuthenticator(self.provider)
        self._token = TokenHandler(self.provider, self._auth)  # type: ignore[arg-type]
        self._register = RegistrationHandler(self.provider, ClientRegistrationOptions(enabled=True))  # type: ignore[arg-type]

    async def token(self, request: Request) -> Response:
        form = await request.form()
        resource = form.get("resource")
        if isinstance(resource, str) and not self.urls.resource_ok(resource):
            return _token_error("invalid_target", "this server is not that resource")
        items = list(form.multi_items())
        if isinstance(
            form.get("scope"), str
        ):  # unknown scopes (offline_access, openid) are ignored
            known = [s for s in str(form.get("scope")).split() if s in SCOPES]
            items = [(k, v) for k, v in items if k != "scope"] + (
                [("scope", " ".join(known))] if known else []
            )
        store = self.provider.store
        grant = form.get("grant_type")
        if grant == "authorization_code" and isinstance(form.get("code"), str):
            code = str(form.get("code"))
            revoked = await run_in_threadpool(store.revoke_reused_code, code)
            if revoked is not None:  # RFC 6749 §4.1.2: deny, and revoke what it issued
                log.warning("authorization code reuse: %d tokens of its grant revoked", revoked)
                return _token_error("invalid_grant", "authorization code already used")
            verifier = form.get("code_verifier")
            if not isinstance(verifier, str) or not _VERIFIER.match(verifier):
                return _token_error(
                    "invalid_request",
                    "code_verifier must be 43-128 characters of A-Z a-z 0-9 - . _ ~ (RFC 7636)",
                )
            row = await run_in_threadpool(store.load_code, code)
            if (
                row is not None
                and isinstance(resource, str)
                and row["resource"] not in (None, self.urls.bound(resource))
            ):
                return _token_error(
                    "invalid_target", "resource differs from the authorization request"
                )
        if grant == "refresh_token" and isinstance(form.get("refresh_token"), str):
            ref = await run_in_threadpool(store.load_refresh, str(form.get("refresh_token")))
            if (
                ref is not None
                and isinstance(resource, str)
                and ref["resource"] not in (None, self.urls.bound(resource))
            ):
                return _token_error("invalid_target", "the grant is for another resource")
        request._form = FormData(items)  # noqa: SLF001  (the SDK's handler reads the cached form)
        return await self._token.handle(request)

    async def register(self, request: Request) -> Response:
        """The SDK's registration, given only the redirect URIs that pass ``redirect_problem``;
        the answer names the refused ones (``refused_redirect_uris``: URI and reason). None
        passing: ``400 invalid_redirect_uri``. The caller has capped the body's size."""
        try:
            meta = json.loads(await request.body())
        except ValueError:
            meta = None
        if not isinstance(meta, dict):
            return _register_error("invalid_client_metadata", "the body must be a JSON object")
        uris = meta.get("redirect_uris")
        if not isinstance(uris, list) or not uris:
            return _register_error("invalid_redirect_uri", "redirect_uris must be a list of URIs")
        refused = [
            {"redirect_uri": u if isinstance(u, str) else repr(u)[:80], "reason": why}
            for u in uris
            if (why := redirect_problem(u)) is not None
        ]
        kept = list(dict.fromkeys(u for u in uris if redirect_problem(u) is None))
        if not kept:
            return _register_error(
                "invalid_redirect_uri", REDIRECT_RULE, refused_redirect_uris=refused
            )
        request._body = json.dumps(dict(meta, redirect_uris=kept)).encode()  # noqa: SLF001
        answer = await self._register.handle(request)
        if answer.status_code != 201 or not refused:
            return answer
        body = json.loads(bytes(answer.body))
        log.info("client registered with %d redirect URIs refused", len(refused))
        return JSONResponse(
            dict(body, refused_redirect_uris=refused),
            status_code=201,
            headers={"Cache-Control": "no-store", "Pragma": "no-cache"},
        )

    async def revoke(self, request: Request) -> Response:
        """RFC 7009: a confidential client authenticates, a public one names its ``client_id``
        alone; the token and its grant are revoked when it is the client's; 200 whatever the
        token was (an unknown one too)."""
        try:
            client = await self._auth.authenticate_request(request)
        except AuthenticationError as err:
            return JSONResponse(
                {"error": "invalid_client", "error_description": err.message},
                status_code=401,
                headers={"Cache-Control": "no-store", "Pragma": "no-cache"},
            )
        token = (await request.form()).get("token")
        if not isinstance(token, str) or not token:
            return _token_error("invalid_request", "token is required")
        store = self.provider.store
        owner = await run_in_threadpool(store.token_client, token)
        if owner is not None and owner == client.client_id:
            n = await run_in_threadpool(store.revoke_token, token)
            log.info("token revoked by its client (%d tokens of the grant)", n)
        return Response(
            status_code=200, headers={"Cache-Control": "no-store", "Pragma": "no-cache"}
        )

    async def authorization_server(self, request: Request) -> Response:
        return JSONResponse(
            authorization_metadata(self.urls), headers={"Cache-Control": "public, max-age=300"}
        )

    async def protected_resource(self, request: Request) -> Response:
        return JSONResponse(
            resource_metadata(self.urls), headers={"Cache-Control": "public, max-age=300"}
        )


def _register_error(code: str, description: str, **extra: Any) -> Response:
    return JSONResponse(
        {"error": code, "error_description": description, **extra},
        status_code=400,
        headers={"Cache-Control": "no-store", "Pragma": "no-cache"},
    )


def _token_error(code: str, description: str) -> Response:
    return JSONResponse(
        {"error": code, "error_description": description},
        status_code=400,
        headers={"Cache-Control": "no-store", "Pragma": "no-cache"},
    )


def first_party_client(store: OAuthStore, name: str) -> Client:
    """The owner's own client ``name`` (``pmem auth token --client NAME``): client id = name,
    a public client that only refreshes."""
    c = store.get_client(name)
    if c is not None and c.revoked_at is None:
        return c
    # revoked earlier: a new client under a new id keeps the audit trail
    cid = f"{name}-{secrets.token_hex(3)}" if c is not None else name
    meta = {
        "client_name": name,
        "redirect_uris": ["http://127.0.0.1/unused"],
        "grant_types": ["refresh_token"],
        "response_types": ["code"],
        "token_endpoint_auth_method": "none",
    }
    return store.register_client(
        cid, meta, name=name if c is None else f"{name}-{cid[-6:]}", first_party=True
    )


def now() -> float:
    return time.time()
