"""The HTTP service in front of the memory store.

Writes under the owner's standing approval (create, append) are performed; a correction, merge,
delete or publish is never performed here: it is queued for the owner (``202`` with the
request's id; ``pmem proposals accept ID``). Evidence must be a verbatim excerpt of a ledger
message (the store checks it: ``422 evidence_refused``); a client's own statement goes in
``stated_facts``."""

from __future__ import annotations

import math
import threading
from collections.abc import Callable
from typing import Any

from fastapi import FastAPI, Header, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field

from core.client_writes import after_commit, client_write
from core.errors import (
    ConfigError,
    EvidenceRefused,
    MemoryNotFound,
    StaleRevision,
    StoreError,
    TombstonedMemory,
)
from core.models import CONFIRMED_ACTIONS, STANDING_ACTIONS, ActionRequest, CommitRequest
from memory_api.auth import AuthMiddleware, allowed_hosts
from memory_api.limits import Limits, StrictJson
from search.service import ReadService
from store.budget import PgWindow
from store.db import Database
from store.markers import MarkerStore
from store.records import MemoryStore
from store.runs import RunStore
from store.tokens import TokenStore

DEFAULT_CLIENT = "anonymous"


class SearchBody(BaseModel):
    query: str
    limit: int = Field(default=10, ge=1, le=100)


class RelatedBody(BaseModel):
    conversation_keys: list[str] = Field(default_factory=list)
    titles: list[str] = Field(default_factory=list)


class MarkerBody(BaseModel):
    text: str
    session: str | None = None


class ProposalBody(BaseModel):
    run_id: str
    batch_id: str
    draft_id: str
    payload: dict[str, Any] = Field(default_factory=dict)


def _record_of(body: CommitRequest) -> dict[str, Any]:
    return body.model_dump(
        mode="json",
        include={
            "kind",
            "title",
            "canonical_summary",
            "index_summary",
            "aliases",
            "tags",
            "occurred_at",
            "valid_from",
        },
    )


def _a_runs_draft(db: Database, request: Request, body: CommitRequest) -> bool:
    """A commit of the owner's own backfill over HTTP (``PMEM_MEMORY_URL``), which keeps its
    drafter's index line and merges its summary like the in-process commit: made with a token
    the owner created at the terminal (``pmem api token``, kind ``api``; never an OAuth access
    token) and naming a backfill run that is open now. Any other commit is a client's
    (core/client_writes.py)."""
    token = getattr(request.state, "token", None)
    if body.run_id is None or getattr(token, "kind", None) != "api":
        return False
    return RunStore(db).is_open(body.run_id)


def queued(action: str, proposal_id: str) -> JSONResponse:
    return JSONResponse(
        {
            "status": "pending",
            "action": action,
            "proposal_id": proposal_id,
            "message": f"queued for the owner's confirmation (pmem proposals accept {proposal_id})",
        },
        status_code=202,
    )


def create_app(
    db: Database,
    *,
    budget: tuple[int, float] = (300, 600.0),
    public_url: str | None = None,
    token_kinds: tuple[str, ...] = ("api",),
    audience: Callable[[str | None], bool] | None = None,
    limits: bool = True,
) -> FastAPI:
    """The API behind its auth middleware (memory_api/auth.py): Host check, bearer token, scope;
    ``X-Pmem-Client`` as the routes see it is the token's name, never the caller's choice.
    ``token_kinds``: `pmem api` takes its own tokens; the remote server (`pmem serve --http`)
    also OAuth access tokens, those issued for the memory API only (``audience``). ``limits``:
    the request limits of memory_api/limits.py (the remote server puts them in front of all)."""
    store = MemoryStore(db)
    # /v1/search reads as `pmem search` and MCP's search do: the query understood (a time
    # expression filters on when the memory happened), texts through the secret guard
    reader = ReadService(db)
    store.reader = lambda query, limit: list(reader.search(query, limit=limit))
    searching = threading.Lock()
    limit, window = budget
    app = FastAPI(
        title="personal-memory API", version="1", docs_url=None, redoc_url=None, openapi_url=None
    )
    app.add_middleware(StrictJson)  # innermost: after the token check
    app.add_middleware(
        AuthMiddleware,
        tokens=TokenStore(db),
        hosts=allowed_hosts(public_url),
        kinds=token_kinds,
        audience=audience,
    )
    if limits:  # outermost: before the token is even looked at
        app.add_middleware(Limits)
    windows: dict[str, PgWindow] = {}

    def admit(client: str) -> JSONResponse | None:
        w = windows.get(client)
        if w is None:
            w = windows[client] = PgWindow(db, f"server:{client}", limit, window)
        wait = w.try_acquire()
        if wait <= 0:
            return None
        return JSONResponse(
            {"error": "rate_limited", "retry_after": wait},
            status_code=429,
            headers={"Retry-After": str(max(1, math.ceil(wait)))},
        )

    @app.exception_handler(StoreError)
    async def store_error(_request: Request, err: StoreError) -> JSONResponse:
        if isinstance(err, StaleRevision):
            return JSONResponse(
                {
                    "error": "stale_revision",
                    "memory_id": err.memory_id,
                    "expected": err.expected,
                    "current": err.current,
                },
                status_code=409,
            )
        if isinstance(err, TombstonedMemory):
            return JSONResponse(
                {"error": "tombstoned", "memory_id": err.memory_id}, status_code=410
            )
        if isinstance(err, MemoryNotFound):
            return JSONResponse({"error": "not_found", "memory_id": err.memory_id}, status_code=404)
        if isinstance(err, EvidenceRefused):
            return JSONResponse(
                {
                    "error": "evidence_refused",
                    "index": err.index,
                    "source_key": err.source_key,
                    "reason": err.reason,
                    "message": str(err),
                },
                status_code=422,
            )
        return JSONResponse({"error": "store_error", "message": str(err)}, status_code=422)

    @app.get("/v1/health")
    def health() -> dict[str, str]:
        return {"status": "ok"}

    @app.post("/v1/search", response_model=None)
    def search(body: SearchBody, x_pmem_client: str = Header(DEFAULT_CLIENT)) -> Any:
        refused = admit(x_pmem_client)
        if refused:
            return refused
        # answerable / confidence beside the hits (search.confidence); one reader per app, so
        # the hits and their assessment are read under one lock
        with searching:
            hits = [h.model_dump(mode="json") for h in store.search(body.query, body.limit)]
            answer = dict(reader.last_answer)
        return {"hits": hits, **answer}

    @app.post("/v1/related", response_model=None)
    def related(body: RelatedBody, x_pmem_client: str = Header(DEFAULT_CLIENT)) -> Any:
        return admit(x_pmem_client) or {
            "items": [
                e.model_dump(mode="json")
                for e in store.related(body.conversation_keys, body.titles)
            ]
        }

    @app.post("/v1/proposals", response_model=None)
    def propose(body: ProposalBody, x_pmem_client: str = Header(DEFAULT_CLIENT)) -> Any:
        return admit(x_pmem_client) or {
            "proposal_id": store.propose(body.run_id, body.batch_id, body.draft_id, body.payload)
        }

    @app.post("/v1/commits", response_model=None)
    def commit(
        body: CommitRequest,
        request: Request,
        x_pmem_client: str = Header(DEFAULT_CLIENT),
        idempotency_key: str | None = Header(None),
    ) -> Any:
        if idempotency_key is not None and idempotency_key != body.idempotency_key:
            return JSONResponse({"error": "idempotency_key_mismatch"}, status_code=422)
        body = body.model_copy(update={"client": x_pmem_client})  # the token's name (auth.py)
        if body.reason in CONFIRMED_ACTIONS:  # the owner's to confirm: queued, not performed
            return admit(x_pmem_client) or queued(
                body.reason,
                store.queue(
                    ActionRequest.model_validate(
                        {
                            "action": body.reason,
                            "memory_id": body.memory_id,
                            "expected_revision": body.expected_revision,
                            "record": _record_of(body),
                            "evidence": body.evidence,
                            "stated_facts": body.stated_facts,
                            "client": x_pmem_client,
                        }
                    )
                ),
            )
        if body.reason not in STANDING_ACTIONS:
            return JSONResponse(
                {
                    "error": "reason_refused",
                    "reason": body.reason,
                    "message": "the API creates and appends; corrections, merges, deletes and "
                    "publishing are queued for the owner (POST /v1/requests)",
                },
                status_code=422,
            )
        refused = admit(x_pmem_client)
        if refused is not None:
            return refused
        if _a_runs_draft(db, request, body):  # the owner's backfill: its drafter's record
            return store.commit(body).model_dump(mode="json")
        view = store.get(body.memory_id) if body.memory_id else None
        try:
            body, correction = client_write(
                body,
                view.canonical_summary if view else "",
                view.index_summary if view else "",
            )
        except ConfigError as err:
            return JSONResponse(
                {"error": "evidence_required", "message": str(err)}, status_code=422
            )
        result = store.commit(body)
        asked = after_commit(correction, result.revision)
        if asked is not None and not result.replayed:
            store.queue(asked)  # what the memory says is the owner's to change
        return result.model_dump(mode="json")

    @app.post("/v1/requests", response_model=None)
    def request(body: ActionRequest, x_pmem_client: str = Header(DEFAULT_CLIENT)) -> Any:
        """Queue a proposed memory or a confirmed action for the owner; nothing is performed."""
        body = body.model_copy(update={"client": x_pmem_client})
        return admit(x_pmem_client) or queued(body.action, store.queue(body))

    @app.post("/v1/markers", response_model=None)
    def add_marker(body: MarkerBody, x_pmem_client: str = Header(DEFAULT_CLIENT)) -> Any:
        """Record a topic marker (store.markers: guarded, insert-only) in the client's name."""
        limited = admit(x_pmem_client)
        if limited is not None:
            return limited
        try:
            added = MarkerStore(db).add(body.text, session=body.session, client=x_pmem_client)
        except ConfigError as err:  # an empty or too long text: the message names sizes only
            return JSONResponse({"error": "invalid_marker", "message": str(err)}, status_code=422)
        return {"marker": added.marker.as_json(), "created": added.created}

    @app.get("/v1/markers", response_model=None)
    def markers(
        limit: int = 20, session: str | None = None, x_pmem_client: str = Header(DEFAULT_CLIENT)
    ) -> Any:
        found = MarkerStore(db).find(session=session, limit=max(1, min(limit, 500)))
        return admit(x_pmem_client) or {"markers": [m.as_json() for m in found]}

    @app.get("/v1/memories/{memory_id}", response_model=None)
    def get(
        memory_id: str, history: bool = False, x_pmem_client: str = Header(DEFAULT_CLIENT)
    ) -> Any:
        refused = admit(x_pmem_client)
        if refused is not None:
            return refused
        view = store.get(memory_id, history=history)
        if view.status != "active":  # a deleted memory is not read by id (the owner: pmem show)
            raise MemoryNotFound(memory_id)
        return view.model_dump(mode="json")

    return app
