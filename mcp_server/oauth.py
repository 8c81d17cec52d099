"""The remote server's OAuth 2.1 authorization server, on the ``mcp`` SDK's protocol pieces.

The SDK gives the protocol (``OAuthAuthorizationServerProvider``, the token, registration and
revocation handlers, the metadata models); this module gives the policy the SDK leaves out:

- **clients** register by Dynamic Client Registration (``/register``); a redirect URI must be a
  loopback one (``http://localhost|127.0.0.1|[::1]…``, any port at use time, RFC 8252 §7.3), one
  of the web clients' known callbacks, or one the operator allows (``PMEM_OAUTH_REDIRECT_URIS``);
  at ``/authorize`` it must match a registered URI exactly, except a loopback port;
- **the consent page** (``GET /authorize`` answers 200 with it; ``mcp_server/consent.py``) is
  where the owner decides the grant; ``iss`` (RFC 9207) is on every authorization response;
- **PKCE S256 only**, ``resource`` (RFC 8707) checked at ``/authorize`` and ``/token``;
- **tokens** are opaque and stored hashed in the one token store (``store/oauth.py``): access 15
  minutes, refresh rotated on every use, a replay of the previous one accepted within
  ``PMEM_REFRESH_GRACE_SECONDS`` (default 30), any other reuse revokes the family;
- client secrets are kept as SHA-256 (our ``ClientAuthenticator`` checks them; the SDK's
  compares a stored plain secret).

Nothing here logs a token, a code, a query string, a passphrase or a redirect URI.
"""

from __future__ import annotations

import logging
import os
import secrets
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode, urlsplit, urlunsplit

from mcp.server.auth.handlers.register import RegistrationHandler
from mcp.server.auth.handlers.revoke import RevocationHandler
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
from store.oauth import Client, InvalidGrant, OAuthStore, RefreshReuse
from store.tokens import SCOPES, TokenStore

log = logging.getLogger("pmem.remote")

GRACE_ENV = "PMEM_REFRESH_GRACE_SECONDS"
REDIRECTS_ENV = "PMEM_OAUTH_REDIRECT_URIS"
#: the web clients' fixed callbacks (docs/remote.md)
KNOWN_REDIRECTS = (
    "https://claude.ai/api/mcp/auth_callback",
    "https://claude.com/api/mcp/auth_callback",
    "https://chatgpt.com/connector_platform_oauth_redirect",
)


def grace_seconds() -> float:
    raw = os.environ.get(GRACE_ENV, "30")
    try:
        return max(0.0, float(raw))
    except ValueError:
        return 30.0


def allowed_redirects() -> set[str]:
    extra = {u.strip() for u in os.environ.get(REDIRECTS_ENV, "").split(",") if u.strip()}
    return set(KNOWN_REDIRECTS) | extra


def is_loopback_redirect(uri: str) -> bool:
    parts = urlsplit(uri)
    return parts.scheme == "http" and parts.hostname is not None and is_loopback(parts.hostname)


def _without_port(uri: str) -> tuple[str, str, str, str]:
    parts = urlsplit(uri)
    return parts.scheme, (parts.hostname or "").lower(), parts.path or "/", parts.query


def redirect_allowed_at_registration(uri: str) -> bool:
    return is_loopback_redirect(uri) or uri in allowed_redirects()


def match_redirect(requested: str | None, registered: list[str]) -> str | None:
    """The redirect URI to use: exact match with a registered one, or a loopback one that
    differs only in its port (RFC 8252 §7.3); without ``requested``, the only registered one."""
    if requested is None:
        return registered[0] if len(registered) == 1 else None
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

    def resource_ok(self, value: str | None) -> bool:
        """RFC 8707: the resource a client asks a token for must be this server (``/mcp``, or
        the issuer itself for the memory API under ``/v1``)."""
        if value is None:
            return True
        v = value.rstrip("/")
        return v in (self.resource, self.issuer, self.issuer + "/v1")


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
        if refused or not uris:
            raise RegistrationError(
                "invalid_redirect_uri",
                "redirect URIs must be loopback (http://127.0.0.1:PORT/…, http://localhost:PORT/…) "
                f"or allowed by the operator ({REDIRECTS_ENV})",
            )
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
        if row is None:
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
            try:
                row = self.store.take_code(authorization_code.code, client.client_id or "")
            except InvalidGrant:
                raise TokenError(
                    "invalid_grant", "authorization code unknown, used or expired"
                ) from None
            c = self.store.get_client(row["client_id"])
            if c is None or c.revoked_at is not None:
                raise TokenError("invalid_client", "client revoked")
            access, refresh = self.store.issue(c, row["scopes"], row["resource"])
            log.info("tokens issued to client %s", c.client_id)
            return _oauth_token(access.token, refresh.token if refresh else None, row["scopes"])

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
                access, refresh = self.store.rotate(
                    refresh_token.token, c, asked, grace_seconds=grace_seconds()
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
            except InvalidGrant as err:
                raise TokenError("invalid_grant", str(err)) from None
            return _oauth_token(access.token, refresh.token, list(access.info.scopes))

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


def _oauth_token(
    access: str, refresh: str | None, scopes: list[str] | tuple[str, ...]
) -> OAuthToken:
    from store.oauth import access_seconds

    return OAuthToken(
        access_token=access,
        token_type="Bearer",
        expires_in=access_seconds(),
        scope=" ".join(scopes),
        refresh_token=refresh,
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
        auth = PgClientAuthenticator(self.provider)
        self._token = TokenHandler(self.provider, auth)  # type: ignore[arg-type]
        self._register = RegistrationHandler(self.provider, ClientRegistrationOptions(enabled=True))  # type: ignore[arg-type]
        self._revoke = RevocationHandler(self.provider, auth)  # type: ignore[arg-type]

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
        if form.get("grant_type") == "authorization_code" and isinstance(form.get("code"), str):
            row = await run_in_threadpool(self.provider.store.load_code, str(form.get("code")))
            if (
                row is not None
                and isinstance(resource, str)
                and row["resource"] not in (None, resource)
            ):
                return _token_error(
                    "invalid_target", "resource differs from the authorization request"
                )
        request._form = FormData(items)  # noqa: SLF001  (the SDK's handler reads the cached form)
        return await self._token.handle(request)

    async def register(self, request: Request) -> Response:
        return await self._register.handle(request)

    async def revoke(self, request: Request) -> Response:
        return await self._revoke.handle(request)

    async def authorization_server(self, request: Request) -> Response:
        return JSONResponse(
            authorization_metadata(self.urls), headers={"Cache-Control": "public, max-age=300"}
        )

    async def protected_resource(self, request: Request) -> Response:
        return JSONResponse(
            resource_metadata(self.urls), headers={"Cache-Control": "public, max-age=300"}
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
