"""The MCP server over stdio (official ``mcp`` SDK, ``MCPServer``), started by ``pmem serve``.

Tools (results are plain MCP text content: no structured output is declared or sent, since a
client rejected undeclared structured content in the seed):

    load_context     the memory index: one short line per memory, newest first (start here)
    search_memory    hybrid search (query, limit, kind, since, until)
    get_memory       one memory's summary; evidence and revisions on request
    recall           what was said in the raw conversations, time first ("先週の火曜の夜に…")
    propose_memory   put a proposal into the owner's queue: a memory to create or append, or a
                     correction, merge, delete or publish (only the owner performs those, with
                     `pmem proposals accept ID`); nothing is committed
    commit_memory    create, or append to a memory with expectedRevision (stale → an error
                     naming the current revision); evidence must be verbatim excerpts of ledger
                     messages, the client's own statements go in stated_facts
    memory_history   the revisions of one memory

The database is opened on the first tool call, so listing the tools never waits for it.
Errors are tool errors (``isError``) carrying our message and hint, never private text;
anything unexpected reports only its type.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from datetime import datetime
from typing import Any, TypeVar

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import BaseModel, Field

from core.errors import PmemError, StaleRevision
from core.hashing import tagged_hash
from core.models import ActionRequest, CommitRequest, EvidenceIn, MemoryView
from core.settings import Settings, get_settings
from mcp_server.service import MemoryService, parse_bound
from store.search import RankedHit

log = logging.getLogger("pmem.mcp")
T = TypeVar("T")

INSTRUCTIONS = (
    "personal-memory: the owner's long-term memory, built from their AI conversations (often in "
    "Japanese). Start with load_context for the index, then get_memory(id) for a record. Use "
    "search_memory for topics, proper nouns and phrases; use recall for what was said at a time "
    "('先週の火曜の夜に何を決めた？', 'last summer laptop'). Writes: propose_memory to suggest, "
    "commit_memory to create or append (pass expectedRevision from get_memory). Evidence must be "
    "verbatim excerpts of the owner's conversations (source_key = message key); put your own "
    "statements in stated_facts. Corrections, merges, deletes and publishing are the owner's: "
    "propose_memory with that action queues them for confirmation."
)


class EvidenceArg(BaseModel):
    source_key: str = Field(description="the ledger message key the excerpt comes from")
    text: str = Field(description="a verbatim excerpt of that message")


class _Lazy:
    """The service, opened on first use (thread-safe: sync tools run in worker threads)."""

    def __init__(self, factory: Callable[[], MemoryService]) -> None:
        self._factory = factory
        self._service: MemoryService | None = None
        self._lock = threading.Lock()

    def get(self) -> MemoryService:
        with self._lock:
            if self._service is None:
                self._service = self._factory()
            return self._service

    def close(self) -> None:
        with self._lock:
            if self._service is not None:
                self._service.close()
                self._service = None


def _call(fn: Callable[[], T]) -> T:
    """Our errors become tool errors with their hint; anything else only names its type."""
    try:
        return fn()
    except StaleRevision as err:
        raise ToolError(
            f"stale revision: memory {err.memory_id} is at revision {err.current} "
            f"(you sent expectedRevision {err.expected}). Read it again with get_memory and "
            f"retry with expectedRevision {err.current}."
        ) from None
    except PmemError as err:
        raise ToolError(str(err) + (f" ({err.hint})" if err.hint else "")) from None
    except ToolError:
        raise
    except Exception as err:
        log.warning("tool failed: %s", type(err).__name__)
        raise ToolError(f"internal error ({type(err).__name__})") from None


# ---------------------------------------------------------------- text rendering


def render_hits(query: str, hits: list[RankedHit]) -> str:
    if not hits:
        return f"no memories match {query!r}. Try other words, or recall for raw conversations."
    lines = [f"{len(hits)} memories for {query!r} (best first; get_memory(id) for one):"]
    for h in hits:
        when = f" | {h.occurred_at.date().isoformat()}" if h.occurred_at else ""
        ranks = ", ".join(f"{k} #{v}" for k, v in h.ranks.items())
        lines.append(f"- {h.id} | {h.kind}{when} | {h.title} — {' '.join(h.index_summary.split())} "
                     f"[rev {h.current_revision}; {ranks}]")  # fmt: skip
        if h.sources:
            lines.append(f"  from: {', '.join(h.sources)}")
    return "\n".join(lines)


def render_memory(view: MemoryView, *, evidence: bool, history: bool) -> str:
    lines = [
        f"{view.title}",
        f"id: {view.id} | kind: {view.kind} | revision: {view.current_revision} | status: {view.status}",
    ]
    if view.occurred_at:
        lines.append(f"occurred: {view.occurred_at.isoformat()}")
    if view.aliases:
        lines.append(f"aliases: {', '.join(view.aliases)}")
    if view.tags:
        lines.append(f"tags: {', '.join(view.tags)}")
    lines += ["", view.canonical_summary]
    if view.stated_facts:
        lines += ["", "stated by a client (not evidence):"] + [f"- {f}" for f in view.stated_facts]
    if evidence:
        lines += ["", f"evidence ({len(view.evidence)}):"]
        lines += [f"- [{e['source_key']}] {e['text']}" for e in view.evidence]
    elif view.evidence:
        lines += ["", f"({len(view.evidence)} evidence excerpts: get_memory with include_evidence=true)"]
    if history:
        lines += ["", "revisions:"] + [_revision_line(r) for r in view.revisions]
    return "\n".join(lines)


def _revision_line(r: dict[str, Any]) -> str:
    when = r["created_at"].isoformat() if isinstance(r.get("created_at"), datetime) else r.get("created_at")
    extra = f" (restored from {r['restored_from']})" if r.get("restored_from") else ""
    return f"- revision {r['revision']}: {r['reason']}{extra} | {when} | client {r['client']} | model {r.get('model') or '-'}"


# ---------------------------------------------------------------- the server


def _default_factory() -> MemoryService:
    settings: Settings = get_settings()
    return MemoryService.open(settings)


def build_server(factory: Callable[[], MemoryService] | None = None, *, client: str = "mcp") -> MCPServer:
    """The MCP server with its seven tools. ``factory`` opens the service on the first call
    (default: the settings' database and the configured embedder)."""
    return _build(_Lazy(factory or _default_factory), client)


def _build(lazy: _Lazy, client: str) -> MCPServer:
    server = MCPServer("personal-memory", instructions=INSTRUCTIONS)

    @server.tool(structured_output=False)
    def load_context(limit: int = 100) -> str:
        """The memory index: one short line per memory (id | date | kind | title — summary),
        newest first, bounded in size. Read this first, then get_memory(id)."""
        return _call(lambda: lazy.get().load_context(limit=max(1, min(limit, 500))))

    @server.tool(structured_output=False)
    def search_memory(
        query: str, limit: int = 10, kind: str | None = None,
        since: str | None = None, until: str | None = None,
    ) -> str:  # fmt: skip
        """Search the memories (Japanese-aware lexical + title trigram + multilingual vectors).
        kind filters by memory kind; since / until take a date or a time expression
        (2024-03, 先月, last summer)."""

        def run() -> str:
            svc = lazy.get()
            now = svc.now()
            hits = svc.search(
                query, limit=max(1, min(limit, 50)), kind=kind,
                since=parse_bound(since, "since", now, svc.tz),
                until=parse_bound(until, "until", now, svc.tz),
            )  # fmt: skip
            return render_hits(query, hits)

        return _call(run)

    @server.tool(structured_output=False)
    def get_memory(memory_id: str, include_evidence: bool = False, include_history: bool = False) -> str:
        """One memory: title, kind, current revision (pass it as expectedRevision when
        appending), aliases, tags and its summary; evidence excerpts and revisions on request."""
        return _call(
            lambda: render_memory(
                lazy.get().get(memory_id, history=include_history),
                evidence=include_evidence, history=include_history,
            )  # fmt: skip
        )

    @server.tool(structured_output=False)
    def recall(query: str, now: str | None = None, limit: int = 20) -> str:
        """What was said in the raw conversations. A time expression in the query (昨日,
        先週の火曜の夜, last Tuesday evening, 2024-03) becomes a range that filters first; the
        question's content words (OR-ed, rarer words weigh more) and the local vectors are fused;
        results come back most relevant first, secrets redacted. now (ISO 8601) pins the
        reference time."""

        def run() -> str:
            svc = lazy.get()
            result = svc.recall(query, now=svc.now(now), limit=max(1, min(limit, 100)))
            head = []
            if result.range:
                head.append(f"range: {result.range['start']} – {result.range['end']} "
                            f"(from {result.range['matched']!r}; {result.in_range} messages in range)")  # fmt: skip
            head.append(f"searched for: {result.terms!r}" if result.terms else "listing the range")
            if result.without_vectors:
                head.append(f"{result.without_vectors} messages have no vectors yet (pmem reindex embeds them)")
            if not result.hits:
                return "\n".join(head + ["no messages found."])
            lines = [
                f"- #{h.rank} {h.created_at.isoformat() if h.created_at else '?'} | {h.role} | "
                f"{h.conversation_title or h.conversation_key} | {h.message_key} ({h.match})\n  {h.text}"
                for h in result.hits
            ]
            return "\n".join(head + [f"{len(result.hits)} messages, most relevant first:"] + lines)

        return _call(run)

    @server.tool(structured_output=False)
    def propose_memory(
        title: str = "", kind: str = "", canonical_summary: str = "", index_summary: str = "",
        aliases: list[str] | None = None, tags: list[str] | None = None,
        evidence: list[EvidenceArg] | None = None, memory_id: str | None = None,
        action: str | None = None, expectedRevision: int | None = None,  # noqa: N803
        merge_into: str | None = None, note: str | None = None, stated_facts: list[str] | None = None,
    ) -> str:  # fmt: skip
        """Put a proposal into the owner's queue; nothing is committed. action: create (default
        without memory_id), append (default with memory_id), or one of the owner's confirmed
        actions on memory_id: correction (replace its record with these fields), merge (fold it
        into merge_into), delete, publish; pass expectedRevision from get_memory (default: the
        current one). The owner accepts or rejects it with `pmem proposals`. Returns the id."""
        chosen = action or ("append" if memory_id else "create")
        if chosen not in ("create", "append", "correction", "merge", "delete", "publish"):
            raise ToolError(f"unknown action {chosen!r} (create, append, correction, merge, delete, publish)")
        if chosen == "create" and not (title and canonical_summary):
            raise ToolError("a proposed memory needs at least a title and a canonical_summary")
        fields = {
            "kind": kind, "title": title, "canonical_summary": canonical_summary,
            "index_summary": index_summary, "aliases": aliases or [], "tags": tags or [],
        }  # fmt: skip
        request = ActionRequest(
            action=chosen, memory_id=memory_id, expected_revision=expectedRevision,  # type: ignore[arg-type]
            merge_into=merge_into, record={k: v for k, v in fields.items() if v},
            evidence=[EvidenceIn(source_key=e.source_key, text=e.text) for e in evidence or []],
            stated_facts=stated_facts or [], note=note, client=client,
        )  # fmt: skip
        proposal = _call(lambda: lazy.get().propose(request))
        if chosen in ("create", "append"):
            return f"proposal {proposal} recorded for review; nothing was committed."
        return (f"proposal {proposal} ({chosen} of memory {memory_id}) queued for the owner's "
                "confirmation; nothing was committed.")  # fmt: skip

    @server.tool(structured_output=False)
    def commit_memory(
        title: str, kind: str, canonical_summary: str, index_summary: str,
        memory_id: str | None = None, expectedRevision: int | None = None,  # noqa: N803 - MCP argument name
        aliases: list[str] | None = None, tags: list[str] | None = None,
        evidence: list[EvidenceArg] | None = None, idempotencyKey: str | None = None,  # noqa: N803
        stated_facts: list[str] | None = None,
    ) -> str:  # fmt: skip
        """Create a memory (no memory_id), or append to one (memory_id + expectedRevision = its
        current revision from get_memory; a stale revision is refused with the current one).
        An append never shortens the record. Evidence must be verbatim excerpts of the owner's
        conversation messages (anything else is refused); your own statements go in
        stated_facts. Replaying the same idempotencyKey returns the first result."""
        if memory_id is not None and expectedRevision is None:
            raise ToolError("appending needs expectedRevision (the current revision from get_memory)")
        evidence_in = [EvidenceIn(source_key=e.source_key, text=e.text) for e in evidence or []]
        request = CommitRequest(
            memory_id=memory_id, expected_revision=expectedRevision, kind=kind, title=title,
            canonical_summary=canonical_summary, index_summary=index_summary,
            aliases=aliases or [], tags=tags or [], evidence=evidence_in,
            stated_facts=stated_facts or [], reason="create" if memory_id is None else "append",
            idempotency_key="pending", client=client,
        )  # fmt: skip
        body = request.model_dump(mode="json", exclude={"idempotency_key", "client"})
        key = idempotencyKey or tagged_hash("mcp-commit", body, length=32)
        request = request.model_copy(update={"idempotency_key": key})
        result = _call(lambda: lazy.get().commit(request))
        if result.replayed:
            what = "already committed (replayed)"
        elif result.noop:
            what = "nothing new (materially identical): no new revision"
        elif result.created:
            what = "created"
        else:
            what = "appended"
        redacted = (f"; the secret guard redacted {', '.join(result.redacted_fields)}"
                    if result.redacted_fields else "")  # fmt: skip
        return (f"{what}: memory {result.memory_id} is at revision {result.revision} "
                f"({result.evidence_added} evidence added{redacted}).")  # fmt: skip

    @server.tool(structured_output=False)
    def memory_history(memory_id: str) -> str:
        """Every revision of one memory: number, reason, time, client, model."""

        def run() -> str:
            revs = lazy.get().history(memory_id)
            return "\n".join([f"memory {memory_id}: {len(revs)} revisions"] + [_revision_line(r) for r in revs])

        return _call(run)

    return server


def run_stdio(factory: Callable[[], MemoryService] | None = None, *, client: str = "mcp") -> None:
    """Serve over stdin / stdout until the client closes the pipe."""
    lazy = _Lazy(factory or _default_factory)
    try:
        _build(lazy, client).run("stdio")
    finally:
        lazy.close()


__all__ = ["build_server", "render_hits", "render_memory", "run_stdio"]
