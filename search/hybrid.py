"""Hybrid search over the memories: three candidate lists, each ranked in SQL by
``row_number()``, fused by weighted Reciprocal Rank Fusion (``score = Σ weight / (k + rank)``,
``rank.fuse``: ``search.fusion.rrf``, the one fusion of the read side), with every list's rank
returned for ``--explain``.

    lexical  CJK bigrams + words (core.textsearch) in a tsvector, GIN; ranked by the share of
             the query's tokens a memory holds, then ts_rank. Proper nouns and the person's own
             phrases: weighted highest.
    trigram  pg_trgm word similarity against titles and aliases: nearest neighbours from a GiST
             index, for one-word queries of 3-24 characters, only when the lexical list came up
             short (partial words, typos).
    vector   cosine distance over halfvec embeddings of one model and dimension, through that
             model's HNSW index (a partial expression index, ``ensure_vector_index``).

The lists come from one statement on one connection (a one-shot command), or from two at once
on two of a pool's connections (a service): the vector list (the query's embedding, then the
HNSW walk) beside the lexical and trigram lists (ADR 0027).
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from datetime import datetime
from typing import Any, Literal

from psycopg import Connection, sql
from psycopg.rows import dict_row

from search.bridge import bridge_terms
from search.common import (
    CROSS_LINGUAL_FLOOR,
    DEFAULT_FUSION,
    KANA,
    LEXICAL_CANDIDATES,
    TRIGRAM_MAX_CHARS,
    TRIGRAM_MIN_CHARS,
    TRIGRAM_MIN_SIMILARITY,
    VECTOR_MIN_SIMILARITY,
    RankedHit,
    _norm,
    doc_frequencies,
    writes_japanese,
)
from search.fusion import SearchConfig
from search.rank import fuse, idf
from search.recall import MIN_SIMILARITY_IN_RANGE, plain_query
from search.understand import Query
from store.index import MAX_TOKEN_CHARS, QueryEmbedder, SearchBase, _vector_literal

MIN_COVERAGE = 0.3  # share of the query's idf mass a memory must hold (several terms)
RANGE_FLOOR = 0.5  # inside a time range the range is evidence too: the coverage floor is halved
# (not the vector floor: in a range of few memories, unrelated ones pass a halved cosine floor)
# A memory happened in a time range when its ``occurred_at`` (else when it was recorded) falls in
# it, or when a message its evidence quotes was written in it: a decision revised later (the
# correction joins the memory it corrects, which keeps its first ``occurred_at``) happened then too.
# Both halves read an index (migration 0031's on the memory's time, message_search_created).
RANGE_IDS = sql.SQL(
    """SELECT m.id FROM memories m
       WHERE coalesce(m.occurred_at, m.created_at) >= coalesce(%(since)s::timestamptz, '-infinity')
         AND coalesce(m.occurred_at, m.created_at) < coalesce(%(until)s::timestamptz, 'infinity')
         AND m.status = 'active' AND (%(kind)s::text IS NULL OR m.kind = %(kind)s)
       UNION
       SELECT m.id FROM message_search s JOIN evidence ev ON ev.source_key = s.message_key
       JOIN memories m ON m.id = ev.memory_id
       WHERE s.created_at >= coalesce(%(since)s::timestamptz, '-infinity')
         AND s.created_at < coalesce(%(until)s::timestamptz, 'infinity')
         AND m.status = 'active' AND (%(kind)s::text IS NULL OR m.kind = %(kind)s)"""
)  # the active memories (of the kind asked for) that happened in the range
EXACT_RANGE = 20_000  # a range of at most this many memories: their vectors are compared exactly
QUOTED_RANGE = (
    1000  # ... and at most this many: the vectors of the messages their evidence quotes too
)
EVIDENCE_PER_HIT = 5
QUOTE_CHARS = 300


def _clip(text: str, n: int) -> str:
    return text if len(text) <= n else text[: n - 1] + "…"


class HybridSearch(SearchBase):
    def search(
        self,
        query: str | Query,
        *,
        limit: int = 10,
        kind: str | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        config: SearchConfig | None = None,
        embedder: QueryEmbedder | None | Literal["default"] = "default",
        min_similarity: float = VECTOR_MIN_SIMILARITY,
    ) -> list[RankedHit]:
        """Lexical + trigram + vector candidates fused by weighted RRF, in one statement.

        ``since`` (inclusive) and ``until`` (exclusive) filter on when the memory happened
        (``occurred_at``, else when it was recorded).
        """
        q: Query = plain_query(query) if isinstance(query, str) else query
        emb = self.embedder if embedder == "default" else embedder
        with self.db.connection() as conn, conn.transaction():
            search = functools.partial(
                self._search,
                conn,
                q,
                limit=limit,
                kind=kind,
                since=since,
                until=until,
                config=config,
                emb=emb,
                min_similarity=min_similarity,
            )
            # the other script's words only when the question's own find nothing (ADR 0045)
            hits = search() or search(bridge=True)
            return self._with_provenance(conn, hits)

    def list_memories(
        self,
        *,
        since: datetime | None,
        until: datetime | None,
        kind: str | None = None,
        limit: int = 10,
        decisions_first: bool = False,
    ) -> list[RankedHit]:
        """The memories that happened in ``[since, until)`` (a query that is only a time, or a
        time and "what did I decide"): decisions first when asked, then by when they happened."""
        with self.db.connection() as conn, conn.transaction():
            rows = (
                conn.cursor(row_factory=dict_row)
                .execute(
                    sql.SQL("""SELECT m.id, m.title, m.kind, m.index_summary, m.current_revision, m.occurred_at,
                          0.0::float8 AS score
                   FROM memories m
                   WHERE m.status = 'active' AND (%(kind)s::text IS NULL OR m.kind = %(kind)s)
                     AND (%(since)s::timestamptz IS NULL AND %(until)s::timestamptz IS NULL
                          OR m.id IN ({in_range}))
                   ORDER BY (%(decisions)s AND m.kind = 'decision') DESC,
                            coalesce(m.occurred_at, m.created_at), m.id
                   LIMIT %(limit)s""").format(in_range=RANGE_IDS),
                    {
                        "kind": kind,
                        "since": since,
                        "until": until,
                        "limit": limit,
                        "decisions": decisions_first,
                    },
                )
                .fetchall()
            )
            return self._with_provenance(conn, [RankedHit(**r) for r in rows])

    @staticmethod
    def _with_provenance(conn: Connection, hits: list[RankedHit]) -> list[RankedHit]:
        """Each hit with its rank, the conversations it rests on (``sources``) and its evidence
        (message key, conversation key, quote)."""
        if not hits:
            return hits
        rows = conn.execute(
            """SELECT memory_id, source_key, text FROM evidence WHERE memory_id = ANY(%s)
               ORDER BY memory_id, revision_added, id""",
            ([h.id for h in hits],),
        ).fetchall()
        ev: dict[str, list[dict[str, str]]] = {}
        for mid, key, text in rows:
            items = ev.setdefault(mid, [])
            if len(items) < EVIDENCE_PER_HIT:
                items.append(
                    {
                        "message_key": key,
                        "conversation_key": key.rsplit(":", 1)[0],
                        "quote": _clip(text, QUOTE_CHARS),
                    }
                )
        srcs = {
            mid: list(dict.fromkeys(r[1].rsplit(":", 1)[0] for r in rows if r[0] == mid))
            for mid in ev
        }
        return [
            h.model_copy(
                update={
                    "rank": n,
                    "lists": h.ranks,
                    "sources": srcs.get(h.id, []),
                    "evidence": ev.get(h.id, []),
                }
            )
            for n, h in enumerate(hits, start=1)
        ]

    def _search(
        self,
        conn: Connection,
        q: Query,
        *,
        limit: int,
        kind: str | None,
        since: datetime | None,
        until: datetime | None,
        config: SearchConfig | None,
        emb: QueryEmbedder | None,
        min_similarity: float,
        bridge: bool = False,
    ) -> list[RankedHit]:
        cfg = config or DEFAULT_FUSION
        ranged = since is not None or until is not None
        lists = dict(cfg.lists())
        terms = [t for t in q.terms if all(len(x) <= MAX_TOKEN_CHARS for x in t.lexemes)]
        extra = bridge_terms(conn, "search_projections", emb, terms) if bridge else []
        if bridge and not extra:
            return []  # no words of the other script: the first pass stands
        query = q.vector_text
        phrase = _norm(query)
        params: dict[str, Any] = {
            "kind": kind,
            "since": since,
            "until": until,
            "limit": limit,
            "min_sim": min_similarity,
        }
        filters: sql.Composable = sql.SQL(
            "m.status = 'active' AND (%(kind)s::text IS NULL OR m.kind = %(kind)s)"
        )
        in_range = 0
        if ranged:  # the range's memories once (a materialised set), read by every list
            filters = sql.SQL("{} AND m.id IN (SELECT id FROM in_range)").format(filters)
            row = conn.execute(
                sql.SQL("SELECT count(*) FROM ({}) r").format(RANGE_IDS), params
            ).fetchone()
            in_range = int(row[0]) if row else 0
            if not in_range:
                return []
        vector: sql.Composable | None = None
        if "vector" in lists and emb is not None and phrase:
            params |= {
                "vec_limit": lists["vector"].limit,
                "quoted_min_sim": MIN_SIMILARITY_IN_RANGE,
                "kana": KANA,
                "asked_ja": writes_japanese(query),
                "cross": CROSS_LINGUAL_FLOOR,
            }
            expr = sql.SQL("e.embedding::halfvec({dim}) <=> %(qv)s::halfvec({dim})").format(
                dim=sql.Literal(emb.dim)
            )
            exact = ranged and in_range <= EXACT_RANGE
            if ranged and in_range <= QUOTED_RANGE:
                vector = _quoted_vector(expr, emb.model, emb.dim)
            else:
                vector = sql.SQL(
                    """SELECT x.id, row_number() OVER (ORDER BY dist, x.id) AS rank, 1 - dist AS similarity
                       FROM (SELECT e.memory_id AS id, {expr} AS dist
                             FROM {source}
                             WHERE e.model = {model} AND e.dim = {dim} AND {filters}
                             ORDER BY {order}
                             LIMIT %(vec_limit)s) x
                       JOIN memories lm ON lm.id = x.id
                       -- a memory in the other language than the query: the cross-lingual floor
                       WHERE 1 - dist >= %(min_sim)s * CASE
                           WHEN (coalesce(lm.title, '') || coalesce(lm.index_summary, '')) ~ %(kana)s
                                = %(asked_ja)s THEN 1.0 ELSE %(cross)s END"""
                ).format(
                    expr=expr,
                    model=sql.Literal(emb.model),
                    dim=sql.Literal(emb.dim),
                    # a small range: its vectors compared exactly (+ 0: not the HNSW index's order,
                    # which would walk the graph past every memory outside the range); the range's
                    # set holds only active memories of the kind asked for
                    source=sql.SQL("in_range r JOIN memory_embeddings e ON e.memory_id = r.id")
                    if exact
                    else sql.SQL("memory_embeddings e JOIN memories m ON m.id = e.memory_id"),
                    filters=sql.SQL("true") if exact else filters,
                    order=sql.SQL("({}) + 0").format(expr) if exact else expr,
                )

        def with_query_vector(c: Connection, base: dict[str, Any]) -> dict[str, Any] | None:
            """``base`` and the query's vector, or None when no memory has a vector of this
            embedder (then the query is not embedded)."""
            assert emb is not None
            if not self._has_vectors("memory_embeddings", emb, c):
                return None
            self._tune_vector_scan(c)
            return base | {"qv": _vector_literal(emb.embed([query])[0])}

        def vector_alone(c: Connection, base: dict[str, Any]) -> list[tuple[Any, ...]]:
            assert vector is not None
            p = with_query_vector(c, base)
            return (
                []
                if p is None
                else c.execute(_candidates(ranged, {"vector": vector}), p).fetchall()
            )

        pending: Future[list[tuple[Any, ...]]] | None = None
        if vector is not None and self.db.has_spare():
            # the vector list on a second connection, at once: the query's embedding and the
            # HNSW walk run while the lexical list is ranked (a search takes the slower one);
            # if the lexical list fails, the vector list ends on its own and is not read
            pending = _workers().submit(
                self._on_own_connection, functools.partial(vector_alone, base=dict(params))
            )
        ctes: dict[str, sql.Composable] = {}

        if "lexical" in lists and terms:
            asked = len(terms)
            # the terms' words of the other script, from the store's own vocabulary (ADR 0045)
            terms = [*terms, *extra]
            tsqs = [t.tsquery() for t in terms]
            n_docs, dfs = doc_frequencies(conn, "search_projections", tsqs)
            weights = [idf(n_docs, df) * t.weight for t, df in zip(terms, dfs, strict=True)]
            params |= {
                "tsq": " | ".join(f"({x})" for x in tsqs),
                "tsq_all": " & ".join(f"({x})" for x in tsqs),
                "tsqs": tsqs,
                "ws": weights,
                "wsum": sum(x for x, t in zip(weights, terms, strict=True) if not t.bridge) or 1.0,
                "min_cov": (MIN_COVERAGE * RANGE_FLOOR if ranged else MIN_COVERAGE)
                if asked > 1
                else 1.0,
                "lex_limit": lists["lexical"].limit,
                "cap": LEXICAL_CANDIDATES,
            }
            # Candidates in two capped tiers (every term somewhere; any term), so that a very
            # common word cannot make the ranking read half the table; then the share of the
            # query's idf mass a memory holds (terms OR-ed: rarer terms weigh more, more terms
            # covered rank higher, none is required), then ts_rank.
            tier = sql.SQL(
                """(SELECT p.memory_id, p.tokens FROM search_projections p
                    JOIN memories m ON m.id = p.memory_id
                    WHERE p.tokens @@ {q}::tsquery AND {filters} LIMIT %(cap)s)"""
            )
            tiers = sql.SQL(" UNION ALL ").join(
                tier.format(q=sql.Placeholder(name), filters=filters) for name in ("tsq_all", "tsq")
            )
            ctes["lexical"] = sql.SQL(
                """SELECT id, row_number() OVER (ORDER BY cov DESC, tr DESC, id) AS rank,
                          NULL::float8 AS similarity
                   FROM (SELECT c.memory_id AS id, c.cov, ts_rank(c.tokens, %(tsq)s::tsquery) AS tr
                         FROM (SELECT t.memory_id, t.tokens,
                                      (SELECT coalesce(sum(q.w), 0) FROM unnest(%(tsqs)s::tsquery[], %(ws)s::float8[]) q(t, w)
                                       WHERE t.tokens @@ q.t) / %(wsum)s AS cov
                               -- a memory in both tiers once, told apart by its id alone (not by
                               -- comparing tsvectors); OFFSET 0: each share computed once
                               FROM (SELECT DISTINCT ON (u.memory_id) u.memory_id, u.tokens
                                     FROM ({tiers}) u ORDER BY u.memory_id) t OFFSET 0) c
                         WHERE c.cov >= %(min_cov)s
                         ORDER BY c.cov DESC, tr DESC, c.memory_id
                         LIMIT %(lex_limit)s) x"""
            ).format(tiers=tiers)

        if (
            "trigram" in lists
            and TRIGRAM_MIN_CHARS <= len(phrase) <= TRIGRAM_MAX_CHARS
            and " " not in phrase
        ):
            params |= {
                "tq": phrase,
                "trgm_limit": lists["trigram"].limit,
                "trgm_max_dist": 1.0 - TRIGRAM_MIN_SIMILARITY,
            }
            # nearest neighbours by word-similarity distance, straight from the GiST index, only
            # when the lexical list found fewer candidates than the result needs
            ctes["trigram"] = sql.SQL(
                """SELECT id, row_number() OVER (ORDER BY dist, id) AS rank, NULL::float8 AS similarity
                   FROM (SELECT p.memory_id AS id, %(tq)s <<-> p.head AS dist
                         FROM search_projections p
                         JOIN memories m ON m.id = p.memory_id
                         WHERE {filters} AND {gate}
                         ORDER BY %(tq)s <<-> p.head
                         LIMIT %(trgm_limit)s) x
                   WHERE dist <= %(trgm_max_dist)s"""
            ).format(
                filters=filters,
                # partial words and typos: needed when the lexical list is short; a one-time
                # filter, so the KNN scan does not run at all otherwise
                gate=sql.SQL("(SELECT count(*) FROM lexical) < %(limit)s")
                if "lexical" in ctes
                else sql.SQL("true"),
            )

        rows: list[tuple[Any, ...]] = []
        if (
            pending is None
            and vector is not None
            and (with_vector := with_query_vector(conn, params)) is not None
        ):
            ctes["vector"], params = vector, with_vector
        if ctes:
            rows = conn.execute(_candidates(ranged, ctes), params).fetchall()
        if pending is not None:
            rows += pending.result()
        if not rows:
            return []
        return self._fused(conn, rows, {name: lists[name].weight for name in lists}, cfg.k, limit)

    def _on_own_connection(
        self, work: Callable[[Connection], list[tuple[Any, ...]]]
    ) -> list[tuple[Any, ...]]:
        with self.db.connection() as conn, conn.transaction():
            return work(conn)

    @staticmethod
    def _fused(
        conn: Connection, rows: list[tuple[Any, ...]], weights: dict[str, float], k: int, limit: int
    ) -> list[RankedHit]:
        """Weighted RRF of the candidate lists (``rank.fuse``, best first), the best ``limit``
        read with their memories' fields."""
        lists: dict[str, list[str]] = {}
        similarity: dict[str, float] = {}
        for mid, name, _rank, sim in sorted(rows, key=lambda r: (r[1], r[2])):
            lists.setdefault(name, []).append(mid)
            if sim is not None:
                similarity[mid] = max(sim, similarity.get(mid, sim))
        top = fuse(lists, weights, k)[:limit]
        if not top:
            return []
        found = {
            r["id"]: r
            for r in conn.cursor(row_factory=dict_row).execute(
                """SELECT id, title, kind, index_summary, current_revision, occurred_at
                   FROM memories WHERE id = ANY(%s)""",
                ([f.key for f in top],),
            )
        }
        return [
            RankedHit(
                **found[f.key],
                score=f.score,
                lexical_rank=f.ranks.get("lexical"),
                trigram_rank=f.ranks.get("trigram"),
                vector_rank=f.ranks.get("vector"),
                vector_similarity=similarity.get(f.key),
            )
            for f in top
            if f.key in found  # (a memory removed between two statements is gone)
        ]


_executor: ThreadPoolExecutor | None = (
    None  # the threads that ask the vector lists (made on first use)
)
_executor_lock = threading.Lock()


def _workers() -> ThreadPoolExecutor:
    global _executor
    with _executor_lock:
        if _executor is None:
            _executor = ThreadPoolExecutor(max_workers=4, thread_name_prefix="pmem-search")
        return _executor


def _quoted_vector(expr: sql.Composable, model: str, dim: int) -> sql.Composed:
    """The vector list of a small range: a memory is as near as its own vector or the nearest
    message its evidence quotes, and is kept when its own cosine reaches the vector floor or a
    quoted message's reaches recall's floor inside a range (the range is evidence too). A
    memory's summary in one language is often far from a question in the other (cosine ~0.1
    for "Hina's after-school care" and 学童 公設か民間か) where the person's own messages are
    nearer; the range keeps the read small."""
    quoted = sql.SQL("me.embedding::halfvec({dim}) <=> %(qv)s::halfvec({dim})").format(
        dim=sql.Literal(dim)
    )
    return sql.SQL(
        """SELECT id, row_number() OVER (ORDER BY dist, id) AS rank, 1 - dist AS similarity
           FROM (SELECT r.id, least(o.dist, q.dist) AS dist
                 FROM in_range r
                 LEFT JOIN LATERAL (SELECT ({expr}) + 0 AS dist FROM memory_embeddings e
                                    WHERE e.memory_id = r.id AND e.model = {model} AND e.dim = {dim}) o ON true
                 LEFT JOIN LATERAL (SELECT min(({quoted}) + 0) AS dist FROM evidence ev
                                    JOIN message_embeddings me ON me.message_key = ev.source_key
                                    WHERE ev.memory_id = r.id AND me.model = {model} AND me.dim = {dim}) q ON true
                 WHERE 1 - o.dist >= %(min_sim)s OR 1 - q.dist >= %(quoted_min_sim)s
                 ORDER BY 2, 1
                 LIMIT %(vec_limit)s) x"""
    ).format(expr=expr, quoted=quoted, model=sql.Literal(model), dim=sql.Literal(dim))


def _candidates(ranged: bool, ctes: dict[str, sql.Composable]) -> sql.Composed:
    """One statement returning ``(id, list, rank, similarity)`` of the given candidate lists
    (the trigram list reads the lexical one), after the range's memories when ``ranged``."""
    return sql.SQL("WITH {range} {ctes} {union}").format(
        range=sql.SQL("in_range AS MATERIALIZED ({}),").format(RANGE_IDS)
        if ranged
        else sql.SQL(""),
        ctes=sql.SQL(", ").join(
            sql.SQL("{} AS ({})").format(sql.Identifier(n), c) for n, c in ctes.items()
        ),
        union=sql.SQL(" UNION ALL ").join(
            sql.SQL("SELECT id, {}::text AS list, rank, similarity FROM {}").format(
                sql.Literal(n), sql.Identifier(n)
            )
            for n in ctes
        ),
    )
