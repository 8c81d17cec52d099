"""Hybrid search over the memories in ONE SQL statement (after pgvector-python's
``examples/hybrid_search/rrf.py``): three candidate CTEs, each ranked by ``row_number()``, fused
by weighted Reciprocal Rank Fusion in SQL (``score = Σ weight / (k + rank)``), with every list's
rank returned for ``--explain``. The pure reference of that fusion is ``search.fusion.rrf``; the
tests hold the two together.

    lexical  CJK bigrams + words (core.textsearch) in a tsvector, GIN; ranked by the share of
             the query's tokens a memory holds, then ts_rank. Proper nouns and the person's own
             phrases: weighted highest.
    trigram  pg_trgm word similarity against titles and aliases: nearest neighbours from a GiST
             index, for one-word queries of 3-24 characters, only when the lexical list came up
             short (partial words, typos).
    vector   cosine distance over halfvec embeddings of one model and dimension, through that
             model's HNSW index (a partial expression index, ``ensure_vector_index``).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from psycopg import Connection, sql
from psycopg.rows import dict_row

from store.search.common import (
    DEFAULT_FUSION,
    LEXICAL_CANDIDATES,
    MAX_TOKEN_CHARS,
    TRIGRAM_MAX_CHARS,
    TRIGRAM_MIN_CHARS,
    TRIGRAM_MIN_SIMILARITY,
    VECTOR_MIN_SIMILARITY,
    FusionConfig,
    QueryEmbedder,
    QueryLike,
    RankedHit,
    SearchBase,
    _norm,
    _vector_literal,
    doc_frequencies,
)
from store.search.rank import idf
from store.search.recall import plain_query

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
EVIDENCE_PER_HIT = 5
QUOTE_CHARS = 300


def _clip(text: str, n: int) -> str:
    return text if len(text) <= n else text[: n - 1] + "…"


class HybridSearch(SearchBase):
    def search(
        self,
        query: str | QueryLike,
        *,
        limit: int = 10,
        kind: str | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        config: FusionConfig | None = None,
        embedder: QueryEmbedder | None | Literal["default"] = "default",
        min_similarity: float = VECTOR_MIN_SIMILARITY,
    ) -> list[RankedHit]:
        """Lexical + trigram + vector candidates fused by weighted RRF, in one statement.

        ``since`` (inclusive) and ``until`` (exclusive) filter on when the memory happened
        (``occurred_at``, else when it was recorded).
        """
        q: QueryLike = plain_query(query) if isinstance(query, str) else query
        with self.db.connection() as conn, conn.transaction():  # one connection, one round trip more at most
            hits = self._search(
                conn, q, limit=limit, kind=kind, since=since, until=until, config=config,
                emb=self.embedder if embedder == "default" else embedder, min_similarity=min_similarity,
            )  # fmt: skip
            return self._with_provenance(conn, hits)

    def list_memories(
        self, *, since: datetime | None, until: datetime | None, kind: str | None = None,
        limit: int = 10, decisions_first: bool = False,
    ) -> list[RankedHit]:  # fmt: skip
        """The memories that happened in ``[since, until)`` (a query that is only a time, or a
        time and "what did I decide"): decisions first when asked, then by when they happened."""
        with self.db.connection() as conn, conn.transaction():
            rows = conn.cursor(row_factory=dict_row).execute(
                sql.SQL("""SELECT m.id, m.title, m.kind, m.index_summary, m.current_revision, m.occurred_at,
                          0.0::float8 AS score
                   FROM memories m
                   WHERE m.status = 'active' AND (%(kind)s::text IS NULL OR m.kind = %(kind)s)
                     AND (%(since)s::timestamptz IS NULL AND %(until)s::timestamptz IS NULL
                          OR m.id IN ({in_range}))
                   ORDER BY (%(decisions)s AND m.kind = 'decision') DESC,
                            coalesce(m.occurred_at, m.created_at), m.id
                   LIMIT %(limit)s""").format(in_range=RANGE_IDS),
                {"kind": kind, "since": since, "until": until, "limit": limit, "decisions": decisions_first},
            ).fetchall()
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
                items.append({"message_key": key, "conversation_key": key.rsplit(":", 1)[0],
                              "quote": _clip(text, QUOTE_CHARS)})  # fmt: skip
        srcs = {mid: list(dict.fromkeys(r[1].rsplit(":", 1)[0] for r in rows if r[0] == mid)) for mid in ev}
        return [
            h.model_copy(update={"rank": n, "lists": h.ranks, "sources": srcs.get(h.id, []),
                                 "evidence": ev.get(h.id, [])})  # fmt: skip
            for n, h in enumerate(hits, start=1)
        ]

    def _search(
        self, conn: Connection, q: QueryLike, *, limit: int, kind: str | None, since: datetime | None,
        until: datetime | None, config: FusionConfig | None, emb: QueryEmbedder | None,
        min_similarity: float,
    ) -> list[RankedHit]:  # fmt: skip
        cfg = config or DEFAULT_FUSION
        ranged = since is not None or until is not None
        lists = dict(cfg.lists())
        terms = [t for t in q.terms if all(len(x) <= MAX_TOKEN_CHARS for x in t.lexemes)]
        query = q.vector_text
        phrase = _norm(query)
        params: dict[str, Any] = {
            "kind": kind, "since": since, "until": until, "limit": limit, "k": cfg.k,
            "min_sim": min_similarity,
        }  # fmt: skip
        for name in ("lexical", "trigram", "vector"):
            params[f"w_{name}"] = lists[name].weight if name in lists else 0.0
        filters: sql.Composable = sql.SQL("m.status = 'active' AND (%(kind)s::text IS NULL OR m.kind = %(kind)s)")
        in_range = 0
        if ranged:  # the range's memories once (a materialised set), read by every list
            filters = sql.SQL("{} AND m.id IN (SELECT id FROM in_range)").format(filters)
            row = conn.execute(sql.SQL("SELECT count(*) FROM ({}) r").format(RANGE_IDS), params).fetchone()
            in_range = int(row[0]) if row else 0
            if not in_range:
                return []
        ctes: dict[str, sql.Composable] = {}

        if "lexical" in lists and terms:
            tsqs = [t.tsquery() for t in terms]
            n_docs, dfs = doc_frequencies(conn, "search_projections", tsqs)
            weights = [idf(n_docs, df) * t.weight for t, df in zip(terms, dfs, strict=True)]
            params |= {
                "tsq": " | ".join(f"({x})" for x in tsqs), "tsq_all": " & ".join(f"({x})" for x in tsqs),
                "tsqs": tsqs, "ws": weights, "wsum": sum(weights) or 1.0,
                "min_cov": (MIN_COVERAGE * RANGE_FLOOR if ranged else MIN_COVERAGE) if len(terms) > 1 else 1.0,
                "lex_limit": lists["lexical"].limit, "cap": LEXICAL_CANDIDATES,
            }  # fmt: skip
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

        if "trigram" in lists and TRIGRAM_MIN_CHARS <= len(phrase) <= TRIGRAM_MAX_CHARS and " " not in phrase:
            params |= {
                "tq": phrase, "trgm_limit": lists["trigram"].limit,
                "trgm_max_dist": 1.0 - TRIGRAM_MIN_SIMILARITY,
            }  # fmt: skip
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
                gate=sql.SQL("(SELECT count(*) FROM lexical) < %(limit)s") if "lexical" in ctes else sql.SQL("true"),
            )

        if "vector" in lists and emb is not None and phrase and self._has_vectors("memory_embeddings", emb, conn):
            params |= {
                "qv": _vector_literal(emb.embed([query])[0]), "vec_limit": lists["vector"].limit,
            }  # fmt: skip
            expr = sql.SQL("e.embedding::halfvec({dim}) <=> %(qv)s::halfvec({dim})").format(
                dim=sql.Literal(emb.dim)
            )
            exact = ranged and in_range <= EXACT_RANGE
            ctes["vector"] = sql.SQL(
                """SELECT id, row_number() OVER (ORDER BY dist, id) AS rank, 1 - dist AS similarity
                   FROM (SELECT e.memory_id AS id, {expr} AS dist
                         FROM {source}
                         WHERE e.model = {model} AND e.dim = {dim} AND {filters}
                         ORDER BY {order}
                         LIMIT %(vec_limit)s) x
                   WHERE 1 - dist >= %(min_sim)s"""
            ).format(
                expr=expr, model=sql.Literal(emb.model), dim=sql.Literal(emb.dim),
                # a small range: its vectors compared exactly (+ 0: not the HNSW index's order,
                # which would walk the graph past every memory outside the range); the range's
                # set holds only active memories of the kind asked for
                source=sql.SQL("in_range r JOIN memory_embeddings e ON e.memory_id = r.id") if exact
                else sql.SQL("memory_embeddings e JOIN memories m ON m.id = e.memory_id"),
                filters=sql.SQL("true") if exact else filters,
                order=sql.SQL("({}) + 0").format(expr) if exact else expr,
            )  # fmt: skip

        if not ctes:
            return []
        empty = sql.SQL("SELECT NULL::text AS id, NULL::bigint AS rank, NULL::float8 AS similarity WHERE false")
        statement = sql.SQL(
            """WITH {range} lexical AS ({lexical}), trigram AS ({trigram}), vector AS ({vector}),
            ranked AS (
                SELECT id, 'lexical' AS list, rank, similarity FROM lexical
                UNION ALL SELECT id, 'trigram', rank, similarity FROM trigram
                UNION ALL SELECT id, 'vector', rank, similarity FROM vector
            ),
            fused AS (
                SELECT id,
                       sum((CASE list WHEN 'lexical' THEN %(w_lexical)s
                                      WHEN 'trigram' THEN %(w_trigram)s
                                      ELSE %(w_vector)s END)::numeric / (%(k)s + rank)) AS score,
                       count(*) AS n_lists,
                       min(rank) FILTER (WHERE list = 'lexical') AS lexical_rank,
                       min(rank) FILTER (WHERE list = 'trigram') AS trigram_rank,
                       min(rank) FILTER (WHERE list = 'vector') AS vector_rank,
                       max(similarity) AS vector_similarity
                FROM ranked GROUP BY id
            )
            SELECT m.id, m.title, m.kind, m.index_summary, m.current_revision, m.occurred_at,
                   f.score::float8 AS score, f.lexical_rank, f.trigram_rank, f.vector_rank,
                   f.vector_similarity
            FROM fused f JOIN memories m ON m.id = f.id
            ORDER BY f.score DESC, f.n_lists DESC, m.id
            LIMIT %(limit)s"""
        ).format(
            range=sql.SQL("in_range AS MATERIALIZED ({}),").format(RANGE_IDS) if ranged else sql.SQL(""),
            **{name: ctes.get(name, empty) for name in ("lexical", "trigram", "vector")},
        )
        if "vector" in ctes:
            self._tune_vector_scan(conn)
        rows = conn.cursor(row_factory=dict_row).execute(statement, params).fetchall()
        return [RankedHit(**r) for r in rows]
