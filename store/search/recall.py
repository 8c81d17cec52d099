"""Recall over the raw messages: time first, then relevance.

The query arrives understood (``search.understand.Query`` fits ``QueryLike``: content terms,
focus, vector text); a plain string is split into tokens as a fallback. Then:

1. **Range first.** With a time range, the range filters every list. A range that holds at most
   ``RANGE_ALL`` messages makes all of them candidates; otherwise (and without a range) the
   candidates are the messages holding any term (at most ``TERM_CANDIDATES`` per term, so a
   common word cannot make recall read the whole ledger) and the ``VECTOR_CANDIDATES`` nearest
   messages by the embedder's vectors.
2. **Conversations as context.** The best conversations among the candidates (by their best
   lexical and vector match) bring in all their messages: a decision is often worded without the
   question's words ("FlexiSpot E7にする") in a conversation that holds them.
3. **Lists, fused.** ``lexical``: BM25 over the terms (idf from the whole message index, tf 0/1,
   length-normalised), plus a share for terms in the conversation's title and elsewhere in the
   conversation; ``vector``: cosine similarity of the message to the query; ``context``: the
   conversation's best similarity plus a part of the message's own. Weighted RRF with lexical
   above vector; the lexical list's weight scales with how much of the query its best message
   covers (a question in another language than its answer has few lexical matches, and those
   are noise). The person's messages weigh more when the question is about what the person
   said or decided, the assistant's when it is about what they were told.
4. **Floor.** A candidate is returned only when it holds a share of the query's terms, is
   similar enough to the query, or lies in a conversation that is: no padding ("OK", "Done.")
   for a question with nothing relevant.

Hits come back in relevance order with their rank and the lists they came from; the caller
shows a time-scoped answer in time order.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from psycopg import Connection, sql
from psycopg.rows import dict_row

from core.textsearch import query_tokens, tsquery_literal
from store.search import rank as rk
from store.search.common import (
    MAX_TOKEN_CHARS,
    QueryEmbedder,
    QueryLike,
    RecallHit,
    RecallResult,
    TermLike,
    _norm,
    _vector_literal,
    doc_frequencies,
)
from store.search.upkeep import IndexUpkeep

RANGE_ALL = 5000  # a range with at most this many messages: every one is a candidate
TERM_CANDIDATES = 2000  # per term, when not every message of the range is a candidate
VECTOR_CANDIDATES = 100  # nearest messages by vector
CONTEXT_CONVERSATIONS = 12  # conversations whose messages join the candidates
CONTEXT_MESSAGES = 80  # at most this many messages of each (the first ones: a long session is cut)
LIST_LIMIT = 50  # each list contributes at most this many ranks
WEIGHTS = {"lexical": 1.0, "vector": 0.5, "context": 0.5}  # lexical above vector
RRF_K = 60
FOCUS_BOOST = 1.4  # the asked-about side's messages (the person's or the assistant's)
TITLE_SHARE = 0.3  # a term in the conversation's title, not in the message
CONVERSATION_SHARE = 0.3  # the idf of the terms found anywhere in the conversation
OWN_SHARE = 0.3  # the message's own similarity inside the context score
MIN_COVERAGE = 0.3  # floor: share of the query's idf mass a message (with its title) holds
MIN_SIMILARITY = 0.3  # floor: cosine of the message, or of its conversation's best message
DECISION_BOOST = 1.5  # a message that states a decision, its reasons or open points, when asked
# a message stating a decision, a reason or what is still open (PostgreSQL regex, both languages)
DECISION_STATEMENT = (
    r"(にする|ことにし|ことにする|に決め|で決め|でいく|にした|決め手|理由は|まだ決めて|まだわから|残ってる課題"
    r"|[Ii]'ll (go|use|ask|take|try|keep|do|buy|stay|pick)|[Ii] decided|[Ii]'m going with|going with"
    r"|[Ii] picked|[Ii] chose|[Ii] went with|because|the reason)"
)
MIN_SIMILARITY_IN_RANGE = 0.15  # inside a time range the range itself is evidence


@dataclass(frozen=True)
class _PlainTerm:
    text: str
    lexemes: tuple[str, ...]
    prefix: tuple[bool, ...]
    weight: float = 1.0

    def tsquery(self) -> str:
        return tsquery_literal(list(self.lexemes))


@dataclass(frozen=True)
class _PlainQuery:
    """A query given as a string: its tokens are its terms."""

    terms: tuple[_PlainTerm, ...]
    focus: str | None
    vector_text: str


def plain_query(text: str) -> _PlainQuery:
    toks = [t for t in query_tokens(text) if len(t) <= MAX_TOKEN_CHARS]
    return _PlainQuery(tuple(_PlainTerm(t, (t,), (False,)) for t in toks), None, " ".join(text.split()))


@dataclass
class _Row:
    key: str
    conv: str
    role: str
    created_at: datetime | None
    length: int
    matched: list[int]
    sim: float | None
    decision: bool = False
    candidate: bool = True  # False: read for its conversation's context only (outside the range)


class Recall(IndexUpkeep):
    def recall(
        self,
        query: str | QueryLike,
        start: datetime | None = None,
        end: datetime | None = None,
        *,
        limit: int = 20,
        embedder: QueryEmbedder | None | Literal["default"] = "default",
        **_: Any,
    ) -> RecallResult:
        """The messages that answer ``query`` within ``[start, end)``, most relevant first (see
        the module's docstring). An empty query lists the range in time order."""
        self.sync_messages()
        q: QueryLike = plain_query(query) if isinstance(query, str) else query
        emb = self.embedder if embedder == "default" else embedder
        terms = [t for t in q.terms if all(len(x) <= MAX_TOKEN_CHARS for x in t.lexemes)]
        with self.db.connection() as conn, conn.transaction():
            ranged = start is not None or end is not None
            count = self._count_range(conn, start, end) if ranged else None
            use_vec = bool(
                emb is not None and emb.local and q.vector_text
                and self._has_vectors("message_embeddings", emb, conn)
            )  # fmt: skip
            missing = self._without_vectors(conn, emb, start, end) if emb is not None and emb.local else None
            if not terms and not (use_vec and q.vector_text and not ranged):
                hits = self._list_range(conn, start, end, limit) if ranged else []
                return RecallResult(
                    hits=hits, start=start, end=end, terms="", in_range=count, without_vectors=missing
                )  # fmt: skip
            qv = _vector_literal(emb.embed([q.vector_text])[0]) if use_vec and emb is not None else None
            if qv is not None:
                self._tune_vector_scan(conn)
            hits = self._rank(conn, q, terms, start, end, count, qv, emb if qv else None, limit)
        return RecallResult(
            hits=hits, start=start, end=end, terms=" ".join(t.text for t in terms),
            vectors=qv is not None, without_vectors=missing, in_range=count,
        )  # fmt: skip

    # ---------------------------------------------------------------- ranking

    def _rank(
        self, conn: Connection, q: QueryLike, terms: Sequence[TermLike], start: datetime | None,
        end: datetime | None, count: int | None, qv: str | None, emb: QueryEmbedder | None, limit: int,
    ) -> list[RecallHit]:  # fmt: skip
        tsqs = [t.tsquery() for t in terms]
        n_docs, dfs = doc_frequencies(conn, "message_search", tsqs)
        w = [rk.idf(n_docs, df) * t.weight for t, df in zip(terms, dfs, strict=True)]
        total = sum(w) or 1.0
        params: dict[str, Any] = {"start": start, "end": end, "tsqs": tsqs, "qv": qv,
                                  "cap": TERM_CANDIDATES, "vk": VECTOR_CANDIDATES}  # fmt: skip
        ranged = start is not None or end is not None
        if ranged and count is not None and count <= RANGE_ALL:
            pool = sql.SQL("SELECT s.message_key FROM message_search s WHERE {r}").format(r=_IN_RANGE)
        else:
            parts = [sql.SQL(
                """SELECT c.message_key FROM unnest(%(tsqs)s::tsquery[]) q(t) CROSS JOIN LATERAL (
                       SELECT s.message_key FROM message_search s
                       WHERE s.tokens @@ q.t AND {r} LIMIT %(cap)s) c"""
            ).format(r=_IN_RANGE)]  # fmt: skip
            if qv is not None and emb is not None:
                for table in ("message_embeddings", "message_passage_embeddings"):
                    parts.append(sql.SQL(
                        """SELECT message_key FROM (
                               SELECT e.message_key FROM {t} e
                               JOIN message_search s ON s.message_key = e.message_key
                               WHERE e.model = {m} AND e.dim = {d} AND {r}
                               ORDER BY {dist} LIMIT %(vk)s) v"""
                    ).format(t=sql.Identifier(table), m=sql.Literal(emb.model), d=sql.Literal(emb.dim),
                             r=_IN_RANGE, dist=_dist(emb)))  # fmt: skip
            pool = sql.SQL(" UNION ").join(parts)
        rows = self._features(conn, sql.SQL("s.message_key IN ({})").format(pool), params, emb)
        if not rows:
            return []
        # conversations as context: the best ones bring in all their messages
        by_conv: dict[str, list[_Row]] = {}
        for r in rows:
            by_conv.setdefault(r.conv, []).append(r)
        lex0 = {c: max(sum(w[i] for i in r.matched) for r in rs) for c, rs in by_conv.items()}
        sim0 = {c: max((r.sim or 0.0) for r in rs) for c, rs in by_conv.items()}
        top = rk.fuse(
            {"lexical": sorted((c for c in lex0 if lex0[c] > 0), key=lambda c: -lex0[c]),
             "vector": sorted(sim0, key=lambda c: -sim0[c]) if qv else []},
            WEIGHTS,
        )[:CONTEXT_CONVERSATIONS]  # fmt: skip
        have = {r.key for r in rows}
        more = self._features(
            conn,
            sql.SQL(
                """s.message_key IN (
                       SELECT x.message_key FROM (
                           SELECT s2.message_key, row_number() OVER (
                                      PARTITION BY s2.conversation_key ORDER BY s2.created_at) AS n
                           FROM message_search s2 WHERE s2.conversation_key = ANY(%(convs)s)) x
                       WHERE x.n <= %(per_conv)s AND NOT (x.message_key = ANY(%(have)s)))"""
            ),
            params | {"convs": [f.key for f in top], "have": list(have), "per_conv": CONTEXT_MESSAGES},
            emb,
        )  # fmt: skip
        for r in more:
            r.candidate = (start is None or (r.created_at is not None and r.created_at >= start)) and (
                end is None or (r.created_at is not None and r.created_at < end)
            )
            rows.append(r)
            by_conv.setdefault(r.conv, []).append(r)
        titles = self._titles(conn, list(by_conv))
        title_terms = {c: set(rk.matched_terms(terms, titles.get(c) or "")) for c in by_conv}
        conv_terms = {c: set().union(*(set(r.matched) for r in rs)) | title_terms[c] for c, rs in by_conv.items()}
        conv_sim = {c: max((r.sim or 0.0) for r in rs) for c, rs in by_conv.items()}
        cands = [r for r in rows if r.candidate]
        avg_len = sum(r.length for r in cands) / len(cands) if cands else 1.0
        lex: dict[str, float] = {}
        cov: dict[str, float] = {}
        for r in cands:
            own = set(r.matched)
            in_title = title_terms[r.conv] - own
            lex[r.key] = (
                rk.bm25((w[i] for i in own), r.length, avg_len)
                + TITLE_SHARE * sum(w[i] for i in in_title)
                + CONVERSATION_SHARE * sum(w[i] for i in conv_terms[r.conv])
            )
            cov[r.key] = sum(w[i] for i in own | in_title) / total
        lexical = sorted((k for k in lex if cov[k] > 0), key=lambda k: (-lex[k], k))[:LIST_LIMIT]
        best_cov = max((cov[k] for k in lexical), default=0.0)
        lists: dict[str, list[str]] = {"lexical": lexical}
        sim = {r.key: r.sim for r in cands if r.sim is not None}
        if qv is not None:
            lists["vector"] = sorted(sim, key=lambda k: (-sim[k], k))[:LIST_LIMIT]
            ctx = {r.key: conv_sim[r.conv] + OWN_SHARE * (r.sim or 0.0) for r in cands}
            lists["context"] = sorted(ctx, key=lambda k: (-ctx[k], k))[:LIST_LIMIT]
        weights = dict(WEIGHTS, lexical=WEIGHTS["lexical"] * best_cov)
        fused = rk.fuse(lists, weights, RRF_K)
        role = {r.key: r.role for r in cands}
        conv_of = {r.key: r.conv for r in cands}
        side = {"person": "user", "assistant": "assistant"}.get(q.focus or "")
        decided = {r.key for r in cands if r.decision} if getattr(q, "asks_decision", False) and side != "assistant" else set()
        floor = MIN_SIMILARITY_IN_RANGE if start is not None or end is not None else MIN_SIMILARITY
        kept = []
        for f in fused:
            own_sim = sim.get(f.key, 0.0)
            relevant = (
                cov[f.key] >= MIN_COVERAGE
                or own_sim >= floor
                or (conv_sim[conv_of[f.key]] >= MIN_SIMILARITY and "context" in f.ranks and own_sim >= floor / 2)
            )
            if not relevant:
                continue
            if side and role[f.key] == side:
                f.score *= FOCUS_BOOST
            if f.key in decided:
                f.score *= DECISION_BOOST
            kept.append(f)
        kept.sort(key=lambda f: (-f.score, -len(f.ranks), f.key))
        kept = kept[:limit]
        texts = self._texts(conn, [f.key for f in kept])
        phrase = _norm(" ".join(t.text for t in terms))
        out = []
        for n, f in enumerate(kept, start=1):
            t = texts[f.key]
            best = max(f.ranks, key=lambda name: weights.get(name, 0.0) / (RRF_K + f.ranks[name]))
            match: Any = "exact" if phrase and phrase in _norm(t["text"]) else best
            out.append(RecallHit(
                conversation_key=t["conversation_key"], conversation_title=t["conversation_title"],
                message_key=f.key, role=t["role"], created_at=t["created_at"], text=t["text"],
                match=match, score=round(f.score, 6), rank=n, lists=f.ranks,
                similarity=round(sim[f.key], 4) if f.key in sim else None,
            ))  # fmt: skip
        return out

    # ---------------------------------------------------------------- reads

    @staticmethod
    def _count_range(conn: Connection, start: datetime | None, end: datetime | None) -> int:
        row = conn.execute(
            sql.SQL("SELECT count(*) FROM message_search s WHERE {r}").format(r=_IN_RANGE),
            {"start": start, "end": end},
        ).fetchone()
        return int(row[0]) if row else 0

    @staticmethod
    def _features(
        conn: Connection, where: sql.Composable, params: dict[str, Any], emb: QueryEmbedder | None
    ) -> list[_Row]:
        sim = (
            sql.SQL(
                """(SELECT max(1 - ({dist})) FROM (
                        SELECT e.embedding FROM message_embeddings e
                        WHERE e.message_key = s.message_key AND e.model = {m} AND e.dim = {d}
                        UNION ALL
                        SELECT e.embedding FROM message_passage_embeddings e
                        WHERE e.message_key = s.message_key AND e.model = {m} AND e.dim = {d}) e)"""
            ).format(dist=_dist(emb), m=sql.Literal(emb.model), d=sql.Literal(emb.dim))
            if emb is not None and params.get("qv") is not None
            else sql.SQL("NULL::float8")
        )
        statement = sql.SQL(
            """WITH q AS (SELECT q.t AS t, q.i::int AS i
                          FROM unnest(%(tsqs)s::tsquery[]) WITH ORDINALITY q(t, i))
               SELECT s.message_key, s.conversation_key, s.role, s.created_at, length(s.tokens),
                      array(SELECT q.i - 1 FROM q WHERE s.tokens @@ q.t ORDER BY q.i), {sim},
                      s.role = 'user' AND s.text ~ {decision}
               FROM message_search s WHERE {where}"""
        ).format(sim=sim, where=where, decision=sql.Literal(DECISION_STATEMENT))
        return [
            _Row(k, c, role, at, int(n), list(m), float(v) if v is not None else None, bool(d))
            for k, c, role, at, n, m, v, d in conn.execute(statement, params).fetchall()
        ]

    @staticmethod
    def _titles(conn: Connection, convs: list[str]) -> dict[str, str | None]:
        rows = conn.execute(
            "SELECT conversation_key, title FROM source_conversations WHERE conversation_key = ANY(%s)",
            (convs,),
        ).fetchall()
        return {k: t for k, t in rows}

    @staticmethod
    def _texts(conn: Connection, keys: list[str]) -> dict[str, dict[str, Any]]:
        rows = conn.cursor(row_factory=dict_row).execute(
            """SELECT s.message_key, s.conversation_key, c.title AS conversation_title, s.role,
                      s.created_at, s.text
               FROM message_search s
               LEFT JOIN source_conversations c ON c.conversation_key = s.conversation_key
               WHERE s.message_key = ANY(%s)""",
            (keys,),
        ).fetchall()
        return {r["message_key"]: r for r in rows}

    @staticmethod
    def _list_range(conn: Connection, start: datetime | None, end: datetime | None, limit: int) -> list[RecallHit]:
        rows = conn.cursor(row_factory=dict_row).execute(
            sql.SQL(
                """SELECT s.message_key, s.conversation_key, c.title AS conversation_title, s.role,
                          s.created_at, s.text
                   FROM message_search s
                   LEFT JOIN source_conversations c ON c.conversation_key = s.conversation_key
                   WHERE {r} ORDER BY s.created_at, s.message_key LIMIT %(limit)s"""
            ).format(r=_IN_RANGE),
            {"start": start, "end": end, "limit": limit},
        ).fetchall()
        return [RecallHit(**r, match="range", rank=n) for n, r in enumerate(rows, start=1)]

    @staticmethod
    def _without_vectors(
        conn: Connection, emb: QueryEmbedder | None, start: datetime | None, end: datetime | None
    ) -> int:
        """Messages (in the range, if any) that have no vector for the embedder."""
        if emb is None:
            return 0
        row = conn.execute(
            sql.SQL(
                """SELECT count(*) FROM message_search s WHERE {r} AND NOT EXISTS (
                       SELECT 1 FROM message_embeddings e WHERE e.message_key = s.message_key
                         AND e.model = %(model)s AND e.dim = %(dim)s)"""
            ).format(r=_IN_RANGE),
            {"start": start, "end": end, "model": emb.model, "dim": emb.dim},
        ).fetchone()
        return int(row[0]) if row else 0


_IN_RANGE = sql.SQL(
    "(%(start)s::timestamptz IS NULL OR s.created_at >= %(start)s)"
    " AND (%(end)s::timestamptz IS NULL OR s.created_at < %(end)s)"
)


def _dist(emb: QueryEmbedder | None) -> sql.Composable:
    assert emb is not None
    return sql.SQL("e.embedding::halfvec({d}) <=> %(qv)s::halfvec({d})").format(d=sql.Literal(emb.dim))
