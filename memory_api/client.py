"""The memory API over HTTP: implements the MemoryAPI port with httpx."""

from __future__ import annotations

import hashlib
import json
import os
import re
import threading
import time
from collections.abc import Generator
from pathlib import Path
from typing import Any

import httpx

from core.errors import (
    ConfigError,
    ConfirmationRequired,
    EvidenceRefused,
    MemoryNotFound,
    RateLimited,
    StaleRevision,
    StoreError,
    TombstonedMemory,
    TransientDraftError,
)
from core.models import (
    ActionRequest,
    CommitRequest,
    CommitResult,
    MemoryIndexEntry,
    MemoryView,
    SearchHit,
)

REFRESH_ENV = "PMEM_MEMORY_REFRESH_TOKEN"
CLIENT_ID_ENV = "PMEM_MEMORY_CLIENT_ID"
CREDENTIAL_FILE = "memory-credential.json"


class RefreshingAuth(httpx.Auth):
    """OAuth for the remote server (`pmem serve --http`): a refresh token from `pmem auth token
    --client NAME` buys 15-minute access tokens, renewed before they lapse and after a 401.
    Refresh tokens rotate on every use, so the current one is kept in ``state_file`` (0600,
    under the data dir) and used on the next run instead of the one the environment gave, as
    long as that one is unchanged (a new token in the environment starts over)."""

    requires_response_body = True

    def __init__(
        self,
        base_url: str,
        refresh_token: str,
        *,
        client_id: str = "backfill",
        state_file: Path | None = None,
    ) -> None:
        self.token_url = base_url.rstrip("/") + "/token"
        self.client_id = client_id
        self.origin = hashlib.sha256(refresh_token.encode()).hexdigest()[:16]
        self.refresh_token = refresh_token
        self.state_file = state_file
        self.access: str | None = None
        self.expires = 0.0
        self._lock = threading.Lock()
        if state_file is not None and state_file.exists():
            try:
                saved = json.loads(state_file.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                saved = {}
            if (
                saved.get("origin") == self.origin
                and saved.get("client_id") == client_id
                and saved.get("refresh_token")
            ):
                self.refresh_token = str(saved["refresh_token"])

    def auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response, None]:
        with self._lock:
            if self.access is None or time.time() > self.expires - 60:
                yield from self._refresh()
            request.headers["Authorization"] = f"Bearer {self.access}"
        response = yield request
        if response.status_code == 401:
            with self._lock:
                yield from self._refresh()
                request.headers["Authorization"] = f"Bearer {self.access}"
            yield request

    def _refresh(self) -> Generator[httpx.Request, httpx.Response, None]:
        resp = yield httpx.Request(
            "POST",
            self.token_url,
            data={
                "grant_type": "refresh_token",
                "refresh_token": self.refresh_token,
                "client_id": self.client_id,
            },
        )
        if resp.status_code != 200:
            raise ConfigError(
                f"the memory server at {self.token_url} refused the refresh token ({resp.status_code})",
                hint=f"issue a new one on the server: pmem auth token --client {self.client_id} "
                f"--scope memory.write, and set {REFRESH_ENV}",
            )
        body = resp.json()
        self.access = str(body["access_token"])
        self.expires = time.time() + float(body.get("expires_in") or 900)
        self.refresh_token = str(body.get("refresh_token") or self.refresh_token)
        if self.state_file is not None:
            from core.private import open_private

            self.state_file.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            tmp = self.state_file.with_suffix(".tmp")
            with open_private(tmp, "w", encoding="utf-8") as f:
                json.dump(
                    {
                        "origin": self.origin,
                        "client_id": self.client_id,
                        "refresh_token": self.refresh_token,
                    },
                    f,
                )
            tmp.replace(self.state_file)


def _scope_of(resp: httpx.Response) -> str:
    """The scope a 403 names (the body's ``scope``, else WWW-Authenticate's)."""
    try:
        scope = resp.json().get("scope")
    except ValueError:
        scope = None
    if not scope:
        found = re.search(r'scope="([^"]+)"', resp.headers.get("www-authenticate", ""))
        scope = found.group(1) if found else "it needs"
    return str(scope)


class HttpMemoryAPI:
    """``token``: a bearer token from `pmem auth api-token create NAME`; default PMEM_MEMORY_TOKEN (the
    settings). Or, for the remote server, ``refresh_token`` (default PMEM_MEMORY_REFRESH_TOKEN,
    from `pmem auth token --client NAME`; client id PMEM_MEMORY_CLIENT_ID, default backfill):
    see ``RefreshingAuth``. The server names the client after its token; ``client_name`` is only
    a hint."""

    def __init__(
        self,
        base_url: str,
        *,
        client_name: str = "pmem",
        timeout: float = 30.0,
        token: str | None = None,
        refresh_token: str | None = None,
        client_id: str | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        auth: httpx.Auth | None = None
        if token is None:
            from core.settings import get_settings

            settings = get_settings()
            token = settings.memory_token
            refresh_token = refresh_token or os.environ.get(REFRESH_ENV) or None
            if not token and refresh_token:
                auth = RefreshingAuth(
                    self.base_url,
                    refresh_token,
                    client_id=client_id or os.environ.get(CLIENT_ID_ENV) or "backfill",
                    state_file=settings.data_dir / CREDENTIAL_FILE,
                )
        headers = {"X-Pmem-Client": client_name}
        if token:
            headers["Authorization"] = f"Bearer {token}"
        self._http = httpx.Client(
            base_url=self.base_url, timeout=timeout, headers=headers, auth=auth
        )

    def close(self) -> None:
        self._http.close()

    def _call(self, method: str, path: str, **kw: Any) -> Any:
        try:
            resp = self._http.request(method, path, **kw)
        except httpx.TransportError as err:
            raise TransientDraftError(
                f"memory API at {self.base_url} unreachable ({type(err).__name__})"
            ) from None
        if resp.status_code == 429:
            # the body carries the exact wait; the header (whole seconds) is for other clients
            try:
                retry = float(resp.json()["retry_after"])
            except (ValueError, KeyError, TypeError):
                retry = float(resp.headers.get("Retry-After", "1"))
            raise RateLimited(
                f"memory API rate limited (retry after {retry:g}s)", retry_after=retry
            )
        if resp.status_code in (401, 403):
            raise ConfigError(
                f"the memory API at {self.base_url} refused the request ({resp.status_code}: "
                + (
                    f"the token lacks the scope {_scope_of(resp)}"
                    if resp.status_code == 403
                    else "the token is unknown, expired or revoked"
                )
                + ")",
                hint=self._credential_hint(),
            )
        if resp.status_code >= 400:
            body = (
                resp.json()
                if resp.headers.get("content-type", "").startswith("application/json")
                else {}
            )
            code = body.get("error")
            mid = body.get("memory_id", "")
            if code == "stale_revision":
                raise StaleRevision(mid, body.get("expected"), int(body["current"]))
            if code == "tombstoned":
                raise TombstonedMemory(mid)
            if code == "not_found":
                raise MemoryNotFound(mid)
            if code == "invalid_marker":
                raise ConfigError(str(body.get("message") or "the marker was refused"))
            if code == "evidence_refused":
                raise EvidenceRefused(
                    int(body.get("index", 0)),
                    str(body.get("source_key", "")),
                    str(body.get("reason", "")),
                )
            raise StoreError(f"memory API answered {resp.status_code} ({code or 'no error code'})")
        if resp.status_code == 202:  # queued for the owner, not performed
            body = resp.json()
            raise ConfirmationRequired(
                str(body.get("action", "")), str(body.get("proposal_id", ""))
            )
        return resp.json()

    def _credential_hint(self) -> str:
        """Where a credential with the committer's scopes comes from, for the one in use."""
        from store.tokens import DEFAULT_SCOPES

        scopes = ", ".join(DEFAULT_SCOPES)
        if isinstance(self._http.auth, RefreshingAuth):
            flags = " ".join(f"--scope {s}" for s in DEFAULT_SCOPES)
            return (
                f"a backfill needs {scopes}: on the server run `pmem auth token --client "
                f"{self._http.auth.client_id} {flags}` and set PMEM_MEMORY_REFRESH_TOKEN to it"
            )
        return (
            f"a backfill needs {scopes}: on the server run `pmem auth api-token create NAME` "
            "(those scopes by default) and set PMEM_MEMORY_TOKEN to it"
        )

    def search(self, query: str, limit: int = 10) -> list[SearchHit]:
        data = self._call("POST", "/v1/search", json={"query": query, "limit": limit})
        return [SearchHit(**h) for h in data["hits"]]

    def related(self, conversation_keys: list[str], titles: list[str]) -> list[MemoryIndexEntry]:
        data = self._call(
            "POST", "/v1/related", json={"conversation_keys": conversation_keys, "titles": titles}
        )
        return [MemoryIndexEntry(**e) for e in data["items"]]

    def propose(self, run_id: str, batch_id: str, draft_id: str, payload: dict) -> str:
        data = self._call(
            "POST",
            "/v1/proposals",
            json={"run_id": run_id, "batch_id": batch_id, "draft_id": draft_id, "payload": payload},
        )
        return str(data["proposal_id"])

    def commit(self, request: CommitRequest) -> CommitResult:
        data = self._call(
            "POST",
            "/v1/commits",
            content=request.model_dump_json(),
            headers={
                "Content-Type": "application/json",
                "Idempotency-Key": request.idempotency_key,
            },
        )
        return CommitResult(**data)

    def add_marker(self, text: str, session: str | None = None) -> dict[str, Any]:
        """Record a topic marker: ``{"marker": {...}, "created": bool}``."""
        return dict(self._call("POST", "/v1/markers", json={"text": text, "session": session}))

    def request_action(self, request: ActionRequest) -> str:
        """Queue a request for the owner (``ConfirmationRequired`` carries its id)."""
        try:
            self._call(
                "POST",
                "/v1/requests",
                content=request.model_dump_json(),
                headers={"Content-Type": "application/json"},
            )
        except ConfirmationRequired as queued:
            return queued.proposal_id
        raise StoreError("memory API did not queue the request")

    def get(self, memory_id: str) -> MemoryView:
        return MemoryView(**self._call("GET", f"/v1/memories/{memory_id}"))
