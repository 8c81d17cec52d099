"""The service of the MCP tools: the read service (``search.service.ReadService``: search,
recall, load_context, related, get) and the few writes an AI client may make.

    add_marker                          topic markers (store.markers): written through the
                                        store's guard, counted against the client's budget
    propose / commit                    the memory API, for MCP clients: create and append
                                        (standing approval); a correction, merge, delete or
                                        publish only goes into the owner's queue
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from functools import cached_property
from typing import TYPE_CHECKING, Any, Self

from core.client_writes import after_commit, client_write
from core.errors import ConfigError, ConfirmationRequired
from core.models import CONFIRMED_ACTIONS, STANDING_ACTIONS
from core.settings import Settings
from providers.embeddings import Embedder
from search.query import TZ_ENV, parse_bound, parse_now
from search.service import ReadService, Recall, attention_words
from store.db import Database

if TYPE_CHECKING:  # the write side (budgets) is imported when first used: ADR 0027
    from core.models import ActionRequest, CommitRequest, CommitResult
    from core.ports import MemoryAPI

MCP_WRITE_REASONS = STANDING_ACTIONS  # the owner's standing approval covers these only

__all__ = ["MemoryService", "Recall", "TZ_ENV", "attention_words", "parse_bound", "parse_now"]


class MemoryService(ReadService):
    def __init__(
        self,
        db: Database,
        *,
        embedder: Embedder | None = None,
        tz: str | None = None,
        redactor: Callable[[str], str] | None = None,
        writer: MemoryAPI | None = None,
        budget: tuple[int, float] = (300, 600.0),
    ) -> None:
        super().__init__(db, embedder=embedder, tz=tz, redactor=redactor)
        self._writer = writer
        self._budget = budget

    @cached_property
    def writer(self) -> MemoryAPI:
        """AI clients write through the memory API, against their own budget ("client:mcp"):
        over HTTP when PMEM_MEMORY_URL names the service, else the store in process."""
        if self._writer is not None:
            return self._writer
        from state.budget import BudgetedMemoryAPI, SlidingWindowLimiter
        from store.budget import PgWindow

        limit, window = self._budget
        return BudgetedMemoryAPI(
            self.records,
            SlidingWindowLimiter(
                max_wait=5.0, backend=PgWindow(self.db, "client:mcp", limit, window)
            ),
        )

    @classmethod
    def open(
        cls,
        settings: Settings,
        *,
        embedder: str | None = None,
        vectors: bool = True,
        loaded: Embedder | None = None,
        pooled: bool = True,
        **extra: Any,
    ) -> Self:
        """``ReadService.open``, with the writer: the memory API over HTTP when
        ``settings.memory_url`` names it, and the budget of ``settings``."""
        writer: MemoryAPI | None = None
        if settings.memory_url:
            from memory_api.client import HttpMemoryAPI

            writer = HttpMemoryAPI(settings.memory_url, client_name="mcp")
        return super().open(
            settings,
            embedder=embedder,
            vectors=vectors,
            loaded=loaded,
            pooled=pooled,
            writer=writer,
            budget=settings.budget,
            **extra,
        )

    def add_marker(
        self, text: str, *, session: str | None = None, client: str | None = "mcp"
    ) -> Any:
        """Record a topic marker through the store's guard (``store.markers``), counted against
        the client's budget like its other writes. Returns ``store.markers.Added``."""
        from store.markers import Added, Marker, MarkerStore

        remote = getattr(self.writer, "add_marker", None)
        if remote is not None:  # PMEM_MEMORY_URL: through the memory API, like the commits
            data = remote(text, session)
            m = data["marker"]
            at = datetime.fromisoformat(m["at"])
            return Added(
                Marker(m["id"], at, m["text"], m["session"], m["client"], tuple(m["redacted"]), at),
                created=bool(data["created"]),
            )
        limiter = getattr(self.writer, "limiter", None)  # the in-process writer's budget window
        if limiter is not None:
            limiter.acquire(getattr(self.writer, "run_id", ""))
        return MarkerStore(self.db).add(text, session=session, client=client or "mcp")

    # ---------------------------------------------------------------- writes (AI clients)

    def propose(self, request: ActionRequest) -> str:
        """Put a proposed memory, or a request for a confirmed action, into the owner's queue
        (``pmem proposals``); nothing is performed. Returns the request's id."""
        return self.writer.request_action(request)  # type: ignore[attr-defined]

    def commit(self, request: CommitRequest) -> CommitResult:
        """Create or append. A correction, merge, delete or publish is queued for the owner
        instead (``ConfirmationRequired`` carries the request's id)."""
        if request.reason in CONFIRMED_ACTIONS:
            from core.models import ActionRequest

            fields = request.model_dump(
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
            proposal_id = self.propose(
                ActionRequest(
                    action=request.reason,  # type: ignore[arg-type]
                    memory_id=request.memory_id,
                    expected_revision=request.expected_revision,
                    record=fields,
                    evidence=request.evidence,
                    stated_facts=request.stated_facts,
                    client=request.client,
                )
            )
            raise ConfirmationRequired(request.reason, proposal_id)
        if request.reason not in MCP_WRITE_REASONS:
            raise ConfigError(
                f"an AI client may only create or append (reason {request.reason!r} refused)",
                hint="corrections, merges, deletes and publishing go to the owner's queue",
            )
        view = self.writer.get(request.memory_id) if request.memory_id else None
        request, correction = client_write(
            request,
            view.canonical_summary if view else "",
            view.index_summary if view else "",
        )
        result = self.writer.commit(request)
        queued = after_commit(correction, result.revision)
        if queued is not None and not result.replayed:
            self.propose(queued)  # what the memory says is the owner's to change
        return result
