"""The memory API over HTTP: implements the MemoryAPI port with httpx."""

from __future__ import annotations

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


class HttpMemoryAPI:
    """``token``: a bearer token from `pmem token create NAME`; default PMEM_MEMORY_TOKEN (the
    settings). The server names the client after its token; ``client_name`` is only a hint."""

    def __init__(self, base_url: str, *, client_name: str = "pmem", timeout: float = 30.0,
                 token: str | None = None) -> None:  # fmt: skip
        self.base_url = base_url.rstrip("/")
        if token is None:
            from core.settings import get_settings

            token = get_settings().memory_token
        headers = {"X-Pmem-Client": client_name}
        if token:
            headers["Authorization"] = f"Bearer {token}"
        self._http = httpx.Client(base_url=self.base_url, timeout=timeout, headers=headers)

    def close(self) -> None:
        self._http.close()

    def _call(self, method: str, path: str, **kw: Any) -> Any:
        try:
            resp = self._http.request(method, path, **kw)
        except httpx.TransportError as err:
            raise TransientDraftError(f"memory API at {self.base_url} unreachable ({type(err).__name__})") from None
        if resp.status_code == 429:
            # the body carries the exact wait; the header (whole seconds) is for other clients
            try:
                retry = float(resp.json()["retry_after"])
            except (ValueError, KeyError, TypeError):
                retry = float(resp.headers.get("Retry-After", "1"))
            raise RateLimited(f"memory API rate limited (retry after {retry:g}s)", retry_after=retry)
        if resp.status_code in (401, 403):
            raise ConfigError(
                f"the memory API at {self.base_url} refused the request ({resp.status_code}"
                f"{': missing scope' if resp.status_code == 403 else ''})",
                hint="set PMEM_MEMORY_TOKEN to a token from `pmem token create NAME` on that server",
            )
        if resp.status_code >= 400:
            body = resp.json() if resp.headers.get("content-type", "").startswith("application/json") else {}
            code = body.get("error")
            mid = body.get("memory_id", "")
            if code == "stale_revision":
                raise StaleRevision(mid, body.get("expected"), int(body["current"]))
            if code == "tombstoned":
                raise TombstonedMemory(mid)
            if code == "not_found":
                raise MemoryNotFound(mid)
            if code == "evidence_refused":
                raise EvidenceRefused(int(body.get("index", 0)), str(body.get("source_key", "")),
                                      str(body.get("reason", "")))  # fmt: skip
            raise StoreError(f"memory API answered {resp.status_code} ({code or 'no error code'})")
        if resp.status_code == 202:  # queued for the owner, not performed
            body = resp.json()
            raise ConfirmationRequired(str(body.get("action", "")), str(body.get("proposal_id", "")))
        return resp.json()

    def search(self, query: str, limit: int = 10) -> list[SearchHit]:
        data = self._call("POST", "/v1/search", json={"query": query, "limit": limit})
        return [SearchHit(**h) for h in data["hits"]]

    def related(self, conversation_keys: list[str], titles: list[str]) -> list[MemoryIndexEntry]:
        data = self._call("POST", "/v1/related", json={"conversation_keys": conversation_keys, "titles": titles})
        return [MemoryIndexEntry(**e) for e in data["items"]]

    def propose(self, run_id: str, batch_id: str, draft_id: str, payload: dict) -> str:
        data = self._call("POST", "/v1/proposals", json={
            "run_id": run_id, "batch_id": batch_id, "draft_id": draft_id, "payload": payload})  # fmt: skip
        return str(data["proposal_id"])

    def commit(self, request: CommitRequest) -> CommitResult:
        data = self._call(
            "POST", "/v1/commits", content=request.model_dump_json(),
            headers={"Content-Type": "application/json", "Idempotency-Key": request.idempotency_key},
        )  # fmt: skip
        return CommitResult(**data)

    def request_action(self, request: ActionRequest) -> str:
        """Queue a request for the owner (``ConfirmationRequired`` carries its id)."""
        try:
            self._call("POST", "/v1/requests", content=request.model_dump_json(),
                       headers={"Content-Type": "application/json"})  # fmt: skip
        except ConfirmationRequired as queued:
            return queued.proposal_id
        raise StoreError("memory API did not queue the request")

    def get(self, memory_id: str) -> MemoryView:
        return MemoryView(**self._call("GET", f"/v1/memories/{memory_id}"))
