"""Time-first recall over the raw messages: the range filters, then exact / lexical ranking
picks, and the hits come back in time order; message vectors (local embedders only) are a
fallback used only when too few hits were found, and the result says so."""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any, Literal

from psycopg import sql
from psycopg.rows import dict_row

from core.textsearch import query_tokens, tsquery_literal
from store.search.common import (
    MAX_TOKEN_CHARS,
    RECALL_UNSCOPED_CANDIDATES,
    VECTOR_MIN_SIMILARITY,
    QueryEmbedder,
    RecallHit,
    RecallResult,
    _coverage_floor,
    _norm,
    _vector_literal,
)
from store.search.upkeep import IndexUpkeep

_LATIN_SUFFIX = re.compile(r"(?:ing|ed|es|s|e)$")


def _recall_term(token: str) -> str:
    """One query token as a tsquery term. A Latin word of 5+ letters matches by its stem as a
    prefix (decide → 'decid':* finds decided, deciding), since recall reads raw prose; CJK
    bigrams and short words match exactly."""
    literal = tsquery_literal([token])
    if len(token) >= 5 and token.isascii() and token.isalpha():
        stem = _LATIN_SUFFIX.sub("", token)
        if len(stem) >= 4:
            return tsquery_literal([stem]) + ":*"
    return literal


class Recall(IndexUpkeep):
    def recall(
        self,
        text: str,
        start: datetime | None = None,
        end: datetime | None = None,
        *,
        limit: int = 20,
        min_hits: int = 3,
        embedder: QueryEmbedder | None | Literal["default"] = "default",
        min_similarity: float = VECTOR_MIN_SIMILARITY,
    ) -> RecallResult:
        """Raw person / assistant messages: the range ``[start, end)`` filters first, then exact
        and lexical matches of ``text`` rank; hits come back in time order. With fewer than
        ``min_hits`` hits and a local embedder whose message vectors exist, a vector search in
        the same range adds candidates (``vector_fallback``). An empty ``text`` lists the range.
        """
        self.sync_messages()
        emb = self.embedder if embedder == "default" else embedder
        tokens = [t for t in query_tokens(text) if len(t) <= MAX_TOKEN_CHARS]
        phrase = _norm(text)
        params: dict[str, Any] = {"start": start, "end": end, "limit": limit}
        in_range = sql.SQL(
            "(%(start)s::timestamptz IS NULL OR s.created_at >= %(start)s)"
            " AND (%(end)s::timestamptz IS NULL OR s.created_at < %(end)s)"
        )
        base = sql.SQL(
            """SELECT s.message_key, s.conversation_key, c.title AS conversation_title, s.role,
                      s.created_at, s.text, {match} AS match, {score} AS score
               FROM {source} s
               LEFT JOIN source_conversations c ON c.conversation_key = s.conversation_key
               {lateral}
               WHERE {in_range} {cond}
               ORDER BY {order}
               LIMIT %(limit)s"""
        )
        with self.db.connection() as conn, conn.transaction():
            cur = conn.cursor(row_factory=dict_row)
            count = None
            if start is not None or end is not None:
                counted = cur.execute(
                    sql.SQL("SELECT count(*) AS n FROM message_search s WHERE {r}").format(r=in_range),
                    params,
                ).fetchone()
                count = int(counted["n"]) if counted else 0
            if tokens:
                terms = [_recall_term(t) for t in tokens]
                params |= {
                    "tsq": " | ".join(terms), "tsq_all": " & ".join(terms), "terms": terms,
                    "ntoks": len(tokens), "min_cov": _coverage_floor(len(tokens)),
                    "phrase": phrase, "cap": RECALL_UNSCOPED_CANDIDATES,
                }  # fmt: skip
                # without a range, only messages holding every term, and a bounded number of
                # them: a common word must not make recall rank the whole ledger
                source = (
                    sql.SQL("message_search")
                    if count is not None
                    else sql.SQL(
                        "(SELECT * FROM message_search WHERE tokens @@ %(tsq_all)s::tsquery LIMIT %(cap)s)"
                    )
                )
                exact = sql.SQL("strpos(lower(normalize(s.text, NFKC)), %(phrase)s) > 0")
                statement = base.format(
                    source=source,
                    match=sql.SQL("CASE WHEN {e} THEN 'exact' ELSE 'lexical' END").format(e=exact),
                    score=sql.SQL("x.cov + ts_rank(s.tokens, %(tsq)s::tsquery) / 10"),
                    lateral=sql.SQL(
                        """CROSS JOIN LATERAL (
                               SELECT count(*) FILTER (WHERE s.tokens @@ t)::float8 / %(ntoks)s AS cov
                               FROM unnest(%(terms)s::tsquery[]) t) x"""
                    ),
                    in_range=in_range,
                    cond=sql.SQL("AND s.tokens @@ %(tsq)s::tsquery AND x.cov >= %(min_cov)s"),
                    order=sql.SQL("{e} DESC, x.cov DESC, ts_rank(s.tokens, %(tsq)s::tsquery) DESC, s.created_at, s.message_key").format(e=exact),
                )
            else:
                statement = base.format(
                    source=sql.SQL("message_search"),
                    match=sql.Literal("range"), score=sql.Literal(0.0), lateral=sql.SQL(""),
                    in_range=in_range, cond=sql.SQL(""),
                    order=sql.SQL("s.created_at, s.message_key"),
                )  # fmt: skip
            rows = cur.execute(statement, params).fetchall() if (tokens or count is not None) else []
            used_vector = False
            if (
                tokens and len(rows) < min_hits and emb is not None and emb.local
                and self._has_vectors("message_embeddings", emb, conn)
            ):  # fmt: skip
                used_vector = True
                self._tune_vector_scan(conn)
                rows += self._recall_vectors(cur, emb, text, params, in_range, rows, limit, min_similarity)
        hits = sorted(
            (RecallHit(**r) for r in rows),
            key=lambda h: (h.created_at is None, h.created_at or datetime.min, h.message_key),
        )
        return RecallResult(
            hits=hits, start=start, end=end, terms=text, vector_fallback=used_vector, in_range=count
        )

    def _recall_vectors(
        self, cur: Any, emb: QueryEmbedder, text: str, params: dict[str, Any],
        in_range: sql.Composable, have: list[dict[str, Any]], limit: int, min_similarity: float,
    ) -> list[dict[str, Any]]:  # fmt: skip
        seen = [r["message_key"] for r in have]
        expr = sql.SQL("e.embedding::halfvec({dim}) <=> %(qv)s::halfvec({dim})").format(
            dim=sql.Literal(emb.dim)
        )
        statement = sql.SQL(
            """SELECT * FROM (
                   SELECT s.message_key, s.conversation_key, c.title AS conversation_title, s.role,
                          s.created_at, s.text, 'vector' AS match, 1 - ({expr}) AS score
                   FROM message_embeddings e
                   JOIN message_search s ON s.message_key = e.message_key
                   LEFT JOIN source_conversations c ON c.conversation_key = s.conversation_key
                   WHERE e.model = {model} AND e.dim = {dim} AND {in_range}
                         AND NOT (s.message_key = ANY(%(seen)s))
                   ORDER BY {expr}
                   LIMIT %(vlimit)s) v
               WHERE score >= %(min_sim)s"""
        ).format(expr=expr, model=sql.Literal(emb.model), dim=sql.Literal(emb.dim), in_range=in_range)
        vparams = params | {
            "qv": _vector_literal(emb.embed([text])[0]), "seen": seen,
            "vlimit": max(0, limit - len(have)), "min_sim": min_similarity,
        }  # fmt: skip
        return list(cur.execute(statement, vparams).fetchall())
