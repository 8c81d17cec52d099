"""The MCP server over stdio (official ``mcp`` SDK, ``MCPServer``), started by ``pmem serve``.

Tools (results are plain MCP text content: no structured output is declared or sent, since a
client rejected undeclared structured content in the seed):

    load_context     what to read first: the owner's latest topic markers (the current state),
                     the profile and latest month, then the memory index (start here)
    current_state    the owner's latest topic markers, newest first
    add_marker       record a topic marker (when the owner says the topic changed)
    search_memory    hybrid search (query, limit, kind, since, until)
    get_memory       one memory's summary; evidence and revisions on request
    recall           what was said in the raw conversations, time first ("先週の火曜の夜に…")
    propose_memory   put a proposal into the owner's queue: a memory to create or append, or a
                     correction, merge, delete or publish (only the owner performs those, with
                     `pmem proposals accept ID`); nothing is committed
    commit_memory    create, or append to a memory with expected_revision (stale → an error
                     naming the current revision); evidence must be verbatim excerpts of ledger
                     messages, the client's own statements go in stated_facts
    memory_history   the revisions of one memory
    related_memories seed 003: from what the owner says now to the experiences it recalls
                     (attention concepts → linked concepts by weight → experiences → evidence)

The database is opened on the first tool call, so listing the tools never waits for it.
Every parameter is described in the schema, fixed values are enums, parameter names are
snake_case (the old camelCase names still accepted), and each tool carries read-only /
destructive / idempotent annotations (docs/adr/0015-mcp-tool-contract.md). Errors are tool
errors (``isError``): one sentence with the fix, never private text, never a pydantic dump;
anything unexpected reports only its type.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from datetime import datetime
from typing import Annotated, Any, Literal, TypeVar

import anyio
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError, UnexpectedToolError
from mcp.server.stdio import stdio_server
from mcp.types import ToolAnnotations
from pydantic import AliasChoices, BaseModel, Field, ValidationError

from core.errors import ConfigError, MemoryNotFound, PmemError, StaleRevision, TombstonedMemory
from core.hashing import tagged_hash
from core.models import ActionRequest, CommitRequest, EvidenceIn
from core.settings import Settings, get_settings
from mcp_server.arguments import _Param, _params_of, _sentence, explain_invalid, explain_unknown
from mcp_server.identity import INSTRUCTIONS, NAME, version
from mcp_server.render import (
    _n,
    _revision_line,
    render_hits,
    render_memory,
    render_recall,
    render_related,
)
from mcp_server.service import MemoryService, parse_bound
from mcp_server.stdio_front import StdioFront

log = logging.getLogger("pmem.mcp")
T = TypeVar("T")

#: the memory kinds the drafter writes (``prompts.case_record.MemoryKind``; a test keeps the
#: two equal): a tool refuses any other value
MemoryKind = Literal["episode", "decision", "project", "preference", "lesson", "profile", "other"]
#: what propose_memory may ask for: a memory to create or append, or an owner's action
ProposalAction = Literal["create", "append", "correction", "merge", "delete", "publish"]


# ---------------------------------------------------------------- parameters (described once)

#: reads never change anything and may be repeated; nothing outside the owner's store is touched
READ_ONLY = ToolAnnotations(
    read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False
)
#: a proposal only queues a request (the same request twice is one request)
QUEUES = ToolAnnotations(
    read_only_hint=False, destructive_hint=False, idempotent_hint=True, open_world_hint=False
)
#: a commit creates or appends (never shortens a record); a replayed call returns the first result
ADDS = ToolAnnotations(
    read_only_hint=False, destructive_hint=False, idempotent_hint=True, open_world_hint=False
)


def _snake(name: str, *old: str) -> AliasChoices:
    """The snake_case name first (the schema shows it), then the older names still accepted."""
    return AliasChoices(name, *old)


MemoryId = Annotated[
    str,
    Field(
        min_length=1,
        description="the memory's id (mem_…), as load_context and search_memory show it",
    ),
]
OptionalMemoryId = Annotated[
    str | None,
    Field(
        description="the memory acted on (mem_…); leave it out to propose a new memory",
    ),
]
Query = Annotated[
    str,
    Field(
        min_length=1,
        description="what to look for, in the owner's words (Japanese or English)",
    ),
]
ExpectedRevision = Annotated[
    int | None,
    Field(
        ge=1,
        validation_alias=_snake("expected_revision", "expectedRevision"),
        description="the memory's current revision as get_memory shows it (expectedRevision is "
        "accepted too); a stale one is refused with the current revision",
    ),
]
Title = Annotated[str, Field(description="a short title, in the language of the conversation")]
CanonicalSummary = Annotated[
    str,
    Field(
        description="the detailed record: what was decided or learned, why, and the specifics",
    ),
]
IndexSummary = Annotated[
    str,
    Field(
        description="ignored: the index line load_context shows is derived by the store from "
        "the memory's content, never taken from a client (kept so older calls still validate)",
    ),
]
Aliases = Annotated[
    list[str] | None,
    Field(
        description="other names the memory may be searched by (e.g. its English or Japanese name)",
    ),
]
Tags = Annotated[list[str] | None, Field(description="short topic tags")]
StatedFacts = Annotated[
    list[str] | None,
    Field(
        description="your own statements (not quotes of the owner's conversations); stored as stated "
        "by a client, never as evidence",
    ),
]


class EvidenceArg(BaseModel):
    source_key: str = Field(
        description="the ledger message key the excerpt comes from (recall shows it)"
    )
    text: str = Field(description="a verbatim excerpt of that message")


Evidence = Annotated[
    list[EvidenceArg] | None,
    Field(
        description="verbatim excerpts of the owner's conversation messages backing the record; "
        "anything not verbatim is refused",
    ),
]


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


# ---------------------------------------------------------------- errors: one sentence with the fix

_FIXES: dict[type[PmemError], str] = {
    MemoryNotFound: "find the id with load_context or search_memory",
    TombstonedMemory: "commit a new memory instead (without memory_id)",
}


def _call(fn: Callable[[], T]) -> T:
    """Our errors become tool errors with their fix; anything else only names its type."""
    try:
        return fn()
    except StaleRevision as err:
        raise ToolError(
            f"memory {err.memory_id} is at revision {err.current}, not {err.expected} (stale "
            f"revision): read it again with get_memory and retry with expected_revision {err.current}."
        ) from None
    except PmemError as err:
        fix = err.hint or next((f for t, f in _FIXES.items() if isinstance(err, t)), None)
        raise ToolError(_sentence(f"{err}; {fix}" if fix else str(err))) from None
    except ToolError:
        raise
    except Exception as err:
        log.warning("tool failed: %s", type(err).__name__)
        raise ToolError(
            f"the memory server failed ({type(err).__name__}); try again, and if it keeps failing "
            "ask the owner to look at the server's log."
        ) from None


def _bound(
    value: str | None, name: Literal["since", "until"], now: datetime, tz: str | None
) -> datetime | None:
    """since / until as a time; a value that is neither a date nor a time expression gets the
    tool's own wording (the service speaks of CLI flags). The value is not repeated: the SDK
    logs tool errors."""
    try:
        return parse_bound(value, name, now, tz)
    except ConfigError:
        raise ToolError(
            f"{name} is not a date or a time expression: use e.g. 2024-03-05, 2024-03, "
            "先月 or last summer, or leave it out."
        ) from None


def _now(svc: MemoryService, value: str | None) -> datetime:
    try:
        return svc.now(value)
    except ConfigError:
        raise ToolError(
            "now must be an ISO 8601 time such as 2025-01-24T12:00:00+09:00, or "
            "left out for the current time."
        ) from None


class PmemMCPServer(MCPServer):
    """``MCPServer`` whose tool errors read as one sentence with the fix: an unknown argument
    names the parameters there are, an invalid one what it must be (no pydantic dump, no link),
    and the SDK's "Error executing tool" prefix is dropped. Validation failures keep the
    ``ValidationError`` as their cause, so the SDK logs only the field names."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.tool_params: dict[str, dict[str, _Param]] = {}

    def pmem_tool(
        self, *, title: str, annotations: ToolAnnotations
    ) -> Callable[[Callable[..., str]], Callable[..., str]]:
        """Register a plain-text tool and remember its parameters for the error messages."""

        def register(fn: Callable[..., str]) -> Callable[..., str]:
            self.tool_params[fn.__name__] = _params_of(fn)
            notes = annotations.model_copy(update={"title": title})
            return self.tool(title=title, annotations=notes, structured_output=False)(fn)

        return register

    async def call_tool(self, name: str, arguments: dict[str, Any], context: Any = None) -> Any:
        params = self.tool_params.get(name)
        for key in arguments if params is not None else ():
            if not any(key in p.names for p in params.values()):  # type: ignore[union-attr]
                raise ToolError(explain_unknown(name, key, params))  # type: ignore[arg-type]
        try:
            return await super().call_tool(name, arguments, context)
        except UnexpectedToolError:
            raise
        except ToolError as err:
            cause = err.__cause__
            if isinstance(cause, ValidationError):
                raise ToolError(explain_invalid(name, cause, params or {})) from cause
            if isinstance(cause, ToolError):  # ours, under the SDK's "Error executing tool" prefix
                raise ToolError(str(cause)) from None
            if cause is None and str(err).startswith("Unknown tool"):
                raise ToolError(
                    _sentence(
                        f"there is no tool {name!r}: the tools are {', '.join(self.tool_params)}"
                    )
                ) from None
            raise


# ---------------------------------------------------------------- the server


def _default_factory() -> MemoryService:
    settings: Settings = get_settings()
    return MemoryService.open(settings)


def build_server(
    factory: Callable[[], MemoryService] | None = None, *, client: str = "mcp", **options: Any
) -> MCPServer:
    """The MCP server with its tools. ``factory`` opens the service on the first call
    (default: the settings' database and the configured embedder); ``options`` go to
    ``MCPServer`` (e.g. ``middleware``, ``auth``) for a transport that needs them."""
    return _build(_Lazy(factory or _default_factory), client, **options)


def _build(lazy: _Lazy, client: str, **options: Any) -> PmemMCPServer:
    server = PmemMCPServer(NAME, instructions=INSTRUCTIONS, version=version(), **options)

    @server.pmem_tool(title="Memory index", annotations=READ_ONLY)
    def load_context(
        limit: Annotated[
            int, Field(description="how many memories to list, newest first (at most 500)")
        ] = 100,
        utterance: Annotated[
            str | None,
            Field(
                description="what the owner just said, if anything: the experiences related to it "
                "(as related_memories finds them) are added at the end",
            ),
        ] = None,
    ) -> str:
        """What to read first, bounded in size: the owner's latest topic markers (the current
        state, newest first), the profile and the latest month, then the memory index: one short
        line per memory (id | date | kind | title — summary), newest first; with utterance, the
        experiences related to what the owner just said come last. Then get_memory(memory_id)."""
        return _call(
            lambda: lazy.get().load_context(limit=max(1, min(limit, 500)), utterance=utterance)
        )

    @server.pmem_tool(title="Search memories", annotations=READ_ONLY)
    def search_memory(
        query: Query,
        limit: Annotated[
            int, Field(description="how many memories to return, best first (at most 50)")
        ] = 10,
        kind: Annotated[MemoryKind | None, Field(description="only memories of this kind")] = None,
        since: Annotated[
            str | None,
            Field(
                description="only memories from this time on: a date (2024-03, 2024-03-15) or a time "
                "expression (先月, last summer)",
            ),
        ] = None,
        until: Annotated[
            str | None,
            Field(
                description="only memories up to this time: a date or a time expression, like since",
            ),
        ] = None,
    ) -> str:
        """Search the memories (Japanese-aware lexical + title trigram + multilingual vectors);
        a time expression in the query filters by when the memory happened. Each hit gives the
        id to pass to get_memory(memory_id)."""

        def run() -> str:
            svc = lazy.get()
            now = svc.now()
            hits = svc.search(
                query,
                limit=max(1, min(limit, 50)),
                kind=kind,
                since=_bound(since, "since", now, svc.tz),
                until=_bound(until, "until", now, svc.tz),
            )
            return render_hits(query, hits, svc.last_answer)

        return _call(run)

    @server.pmem_tool(title="Read a memory", annotations=READ_ONLY)
    def get_memory(
        memory_id: MemoryId,
        include_evidence: Annotated[
            bool, Field(description="also list the verbatim evidence excerpts")
        ] = False,
        include_history: Annotated[bool, Field(description="also list every revision")] = False,
    ) -> str:
        """One memory: title, kind, current revision (pass it as expected_revision to
        commit_memory when appending), aliases, tags and its summary; evidence excerpts and
        revisions on request."""
        return _call(
            lambda: render_memory(
                lazy.get().get(memory_id, history=include_history),
                evidence=include_evidence,
                history=include_history,
            )
        )

    @server.pmem_tool(title="The owner's profile", annotations=READ_ONLY)
    def get_profile() -> str:
        """Who the owner is and how that changed: the global profile built from the monthly
        summaries (seed 001), with the months and memories it rests on."""
        return _call(lambda: lazy.get().profile_text())

    @server.pmem_tool(title="One month's summary", annotations=READ_ONLY)
    def get_month_summary(
        month: Annotated[
            str,
            Field(
                pattern=r"^[0-9]{4}-(0[1-9]|1[0-2])$",
                description="the month, YYYY-MM, in the owner's calendar",
            ),
        ],
    ) -> str:
        """One month's summary: what happened, the mood (sentiment −1 … 1), keywords, and the
        memory ids (for get_memory) and message keys it rests on."""
        return _call(lambda: lazy.get().month_text(month))

    @server.pmem_tool(title="Recall conversations", annotations=READ_ONLY)
    def recall(
        query: Annotated[
            str,
            Field(
                min_length=1,
                description="the question, with a time expression if there is one "
                "(先週の火曜の夜に何を決めた？, last Tuesday evening, 2024-03)",
            ),
        ],
        now: Annotated[
            str | None,
            Field(
                description="the reference time for relative expressions, ISO 8601 "
                "(default: the current time)",
            ),
        ] = None,
        limit: Annotated[int, Field(description="how many messages to return (at most 100)")] = 20,
        include_branches: Annotated[
            bool,
            Field(
                description="also messages on ChatGPT branches that were not taken (edited or "
                "regenerated turns), marked as such",
            ),
        ] = False,
        since_marker: Annotated[
            str | None,
            Field(
                description="only messages from this topic marker to the next one: its id (mk_…) "
                "or its text, as current_state shows it",
            ),
        ] = None,
    ) -> str:
        """What was said in the raw conversations. A time expression in the query (昨日,
        先週の火曜の夜, last Tuesday evening, 2024-03) becomes a range that filters first; the
        question's content words (OR-ed, rarer words weigh more) and the local vectors are fused;
        results come back most relevant first, secrets redacted. Each hit names its message key
        (usable as evidence source_key), its conversation and, where one exists, the memory
        drafted from it (get_memory(memory_id) reads it). Branches not taken are left out unless
        include_branches."""

        def run() -> str:
            svc = lazy.get()
            return render_recall(
                svc.recall(
                    query,
                    now=_now(svc, now),
                    limit=max(1, min(limit, 100)),
                    include_branches=include_branches,
                    since_marker=since_marker,
                )
            )

        return _call(run)

    @server.pmem_tool(title="Current state", annotations=READ_ONLY)
    def current_state(
        limit: Annotated[
            int, Field(description="how many markers to list, newest first (at most 200)")
        ] = 20,
        session: Annotated[
            str | None, Field(description="only the markers of this session id")
        ] = None,
    ) -> str:
        """The owner's topic markers, newest first: short lines written when the topic changed
        (time | marker id | what the topic is now), never edited afterwards. The newest is what
        the owner is on now; recall(query, since_marker) reads what was said since one."""
        return _call(lambda: lazy.get().current_state(max(1, min(limit, 200)), session=session))

    @server.pmem_tool(title="Record a topic marker", annotations=ADDS)
    def add_marker(
        text: Annotated[
            str,
            Field(
                min_length=1,
                description="one short line saying what the topic is now, in the owner's words "
                "(今日はゼミ発表の準備)",
            ),
        ],
        session: Annotated[
            str | None, Field(description="the session id the marker belongs to, if any")
        ] = None,
    ) -> str:
        """Record a topic marker, timestamped now, when the owner says the topic changes. It is
        stored as written (secrets redacted by the guard) and never edited; load_context shows
        the latest ones first. The same text as the latest marker is not recorded twice."""
        added = _call(lambda: lazy.get().add_marker(text, session=session, client=client))
        m = added.marker
        redacted = f"; the secret guard redacted {', '.join(m.redacted)}" if m.redacted else ""
        what = "recorded" if added.created else "already the latest marker (not recorded again)"
        return f"marker {m.id} {what} at {m.shown_at()}{redacted}."

    @server.pmem_tool(title="Related experiences", annotations=READ_ONLY)
    def related_memories(
        text: Annotated[
            str,
            Field(
                min_length=1,
                description="what the owner says now, in their words (Japanese or "
                "English): 最近、気分転換できていない",
            ),
        ],
        limit: Annotated[
            int, Field(description="how many experiences to return, best first (at most 20)")
        ] = 5,
        min_weight: Annotated[
            float | None,
            Field(
                ge=0,
                le=1,
                description="follow only concept links at least this strong (0–1; default 0.3)",
            ),
        ] = None,
        now: Annotated[
            str | None,
            Field(
                description="the reference time for a time expression in the text, ISO 8601 "
                "(default: the current time)",
            ),
        ] = None,
    ) -> str:
        """Past experiences related to what the owner says now (seed 003's concept memory): the
        concepts the text names, the concepts linked to them by learned weight (one or two
        hops), the memories that show them, best first, each with its concept path, why it came
        up (it states the link, mentions the concept, or was reached through links) and the
        message keys of its evidence. get_memory(memory_id) reads one. Secrets redacted."""

        def run() -> str:
            svc = lazy.get()
            return render_related(
                text,
                svc.related(
                    text,
                    now=_now(svc, now),
                    limit=max(1, min(limit, 20)),
                    min_weight=min_weight,
                ),
            )

        return _call(run)

    @server.pmem_tool(title="Propose to the owner", annotations=QUEUES)
    def propose_memory(
        title: Annotated[
            str, Field(description="a short title (needed to propose a new memory)")
        ] = "",
        kind: Annotated[MemoryKind | None, Field(description="the memory's kind")] = None,
        canonical_summary: Annotated[
            str,
            Field(
                description="the detailed record (needed to propose a new memory)",
            ),
        ] = "",
        index_summary: Annotated[str, Field(description="one line for the index")] = "",
        aliases: Aliases = None,
        tags: Tags = None,
        evidence: Evidence = None,
        memory_id: OptionalMemoryId = None,
        action: Annotated[
            ProposalAction | None,
            Field(
                description="create (the default without memory_id), append (the default with "
                "memory_id), or an owner's action on memory_id: correction, merge, delete, publish",
            ),
        ] = None,
        expected_revision: ExpectedRevision = None,
        merge_into: Annotated[
            str | None,
            Field(
                description="for a merge: the memory (mem_…) that absorbs memory_id",
            ),
        ] = None,
        note: Annotated[
            str | None, Field(description="why, in a sentence, shown to the owner")
        ] = None,
        stated_facts: StatedFacts = None,
    ) -> str:
        """Put a proposal into the owner's queue; nothing is committed. action: create (default
        without memory_id), append (default with memory_id), or one of the owner's confirmed
        actions on memory_id: correction (replace its record with these fields), merge (fold it
        into merge_into), delete, publish; pass expected_revision from get_memory (default: the
        current one). The owner accepts or rejects it with `pmem proposals`. Returns the id."""
        chosen = action or ("append" if memory_id else "create")
        if chosen == "create" and not (title and canonical_summary):
            raise ToolError(
                "a proposed memory needs a title and a canonical_summary: call "
                "propose_memory again with both."
            )
        if chosen not in ("create", "append") and not memory_id:
            raise ToolError(f"a {chosen} needs memory_id: pass the id of the memory it acts on.")
        fields = {
            "kind": kind,
            "title": title,
            "canonical_summary": canonical_summary,
            "index_summary": index_summary,
            "aliases": aliases or [],
            "tags": tags or [],
        }
        request = ActionRequest(
            action=chosen,
            memory_id=memory_id,
            expected_revision=expected_revision,
            merge_into=merge_into,
            record={k: v for k, v in fields.items() if v},
            evidence=[EvidenceIn(source_key=e.source_key, text=e.text) for e in evidence or []],
            stated_facts=stated_facts or [],
            note=note,
            client=client,
        )
        proposal = _call(lambda: lazy.get().propose(request))
        if chosen in ("create", "append"):
            return f"proposal {proposal} recorded for review; nothing was committed."
        return (
            f"proposal {proposal} ({chosen} of memory {memory_id}) queued for the owner's "
            "confirmation; nothing was committed."
        )

    @server.pmem_tool(title="Commit a memory", annotations=ADDS)
    def commit_memory(
        title: Title,
        kind: Annotated[MemoryKind, Field(description="the memory's kind")],
        canonical_summary: CanonicalSummary,
        index_summary: IndexSummary = "",
        memory_id: Annotated[
            str | None,
            Field(
                description="the memory to append to (mem_…); leave it out to create a new memory",
            ),
        ] = None,
        expected_revision: ExpectedRevision = None,
        aliases: Aliases = None,
        tags: Tags = None,
        evidence: Evidence = None,
        idempotency_key: Annotated[
            str | None,
            Field(
                validation_alias=_snake("idempotency_key", "idempotencyKey"),
                description="any string naming this write; replaying it returns the first result "
                "(idempotencyKey is accepted too; default: derived from the arguments)",
            ),
        ] = None,
        stated_facts: StatedFacts = None,
    ) -> str:
        """Create a memory (no memory_id), or append to one (memory_id + expected_revision = its
        current revision from get_memory; a stale revision is refused with the current one).
        An append needs evidence: verbatim excerpts of the owner's conversation messages
        (anything else is refused); it adds the evidence, stated facts, aliases and tags, while
        a change to the summary waits in the owner's queue as a correction. The index line is
        derived from the summary by the store. Your own statements go in stated_facts.
        Replaying the same call (or idempotency_key) returns the first result."""
        if memory_id is not None and expected_revision is None:
            raise ToolError(
                "appending needs expected_revision: pass the current revision that "
                "get_memory shows."
            )
        evidence_in = [EvidenceIn(source_key=e.source_key, text=e.text) for e in evidence or []]
        request = CommitRequest(
            memory_id=memory_id,
            expected_revision=expected_revision,
            kind=kind,
            title=title,
            canonical_summary=canonical_summary,
            index_summary=index_summary,
            aliases=aliases or [],
            tags=tags or [],
            evidence=evidence_in,
            stated_facts=stated_facts or [],
            reason="create" if memory_id is None else "append",
            idempotency_key="pending",
            client=client,
        )
        body = request.model_dump(mode="json", exclude={"idempotency_key", "client"})
        key = idempotency_key or tagged_hash("mcp-commit", body, length=32)
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
        redacted = (
            f"; the secret guard redacted {', '.join(result.redacted_fields)}"
            if result.redacted_fields
            else ""
        )
        return (
            f"{what}: memory {result.memory_id} is at revision {result.revision} "
            f"({result.evidence_added} evidence added{redacted})."
        )

    @server.pmem_tool(title="Memory revisions", annotations=READ_ONLY)
    def memory_history(memory_id: MemoryId) -> str:
        """Every revision of one memory: number, reason, time, client, model."""

        def run() -> str:
            revs = lazy.get().history(memory_id)
            return "\n".join(
                [f"memory {memory_id}: {_n(len(revs), 'revision')}"]
                + [_revision_line(r) for r in revs]
            )

        return _call(run)

    return server


def run_stdio(
    factory: Callable[[], MemoryService] | None = None,
    *,
    client: str = "mcp",
    front: StdioFront | None = None,
) -> None:
    """Serve over stdin / stdout until the client closes the pipe. With ``front`` (what
    `pmem serve` starts before this module loads), the wire is the front's: it has answered
    ``initialize`` already and queued every line since (``mcp_server.stdio_front``)."""
    lazy = _Lazy(factory or _default_factory)
    try:
        server = _build(lazy, client)
        if front is None:
            server.run("stdio")
        else:
            anyio.run(_serve_through, server, front)
    finally:
        lazy.close()


async def _serve_through(server: PmemMCPServer, front: StdioFront) -> None:
    """``MCPServer.run_stdio_async`` over the front's queued lines instead of fd 0 and 1."""
    lines = anyio.wrap_file(front.lines())  # type: ignore[arg-type]
    output = anyio.wrap_file(front.output())  # type: ignore[arg-type]
    async with stdio_server(stdin=lines, stdout=output) as (read_stream, write_stream):
        lowlevel = server._lowlevel_server  # what run_stdio_async drives (the SDK's own path)
        await lowlevel.run(read_stream, write_stream, lowlevel.create_initialization_options())


__all__ = [
    "INSTRUCTIONS",
    "PmemMCPServer",
    "build_server",
    "explain_invalid",
    "render_hits",
    "render_memory",
    "render_recall",
    "render_related",
    "run_stdio",
]
