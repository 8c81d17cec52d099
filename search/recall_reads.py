"""Recall's reads: the SQL that finds and describes the candidate messages.

``search.recall`` ranks; this module asks the database, each read a statement over the
message index (``message_search``), its vectors and the ledger's rows: the range's size, the
lexical pool (every message of a small range, the range read and tested, or each term's GIN
matches), the nearest by vector, each candidate's features, the titles, the hits' texts and
branches, a range listed in time order. ``_IN_RANGE`` is the one range test they share.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from psycopg import Connection, sql
from psycopg.rows import dict_row

from core.textsearch import INDEX_VERSION
from search.common import KANA, RecallHit
from search.provenance import memories_drafted, where_it_went
from store.index import CONVERSATION_INDEX, IndexUpkeep, QueryEmbedder
from store.message_times import TIMES_VERSION, calendar_zone

# a message stating a decision, a reason or what is still open (PostgreSQL regex, both languages);
# 「AにするかBにするか」「でいくか」 weigh options (deliberation), they decide nothing
DECISION_STATEMENT = (
    r"(にする(?!か)|ことにし|に決め|で決め|でいく(?!か)|にした|決め手|理由は|まだ決めて|まだわから|残ってる課題"
    r"|[Ii]'ll (go|use|ask|take|try|keep|do|buy|stay|pick)|[Ii] decided|[Ii]'m going with|going with"
    r"|[Ii] picked|[Ii] chose|[Ii] went with|because|the reason)"
)


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
    japanese: bool = False  # written in Japanese (kana): the floors are chosen by language
    candidate: bool = True  # False: read for its conversation's context only (outside the range)
    position: int | None = None  # its place in its conversation (neighbours are one apart)


class RecallReads(IndexUpkeep):
    """The reads behind ``Recall`` (one connection, in its transaction)."""

    def _index_current(self) -> bool:
        """Whether the message index and the times messages speak of are current, in one
        statement: the index's token scheme and its conversation index (``ensure_index_version``),
        no message waiting for the index (``sync_messages``), the times resolved by this
        ``TIMES_VERSION`` in this calendar (``ensure_times_version``) and none waiting
        (``sync_times``). Recall then skips their upkeep, which would find nothing to do."""
        with self.db.connection() as conn:
            row = conn.execute(
                """SELECT coalesce((SELECT max(version) FROM search_index_version) = %(iv)s, false)
                          AND to_regclass(%(ci)s) IS NOT NULL
                          AND NOT EXISTS (SELECT 1 FROM message_search_pending)
                          AND coalesce((SELECT version = %(tv)s AND zone = %(zone)s
                                        FROM message_times_version LIMIT 1), false)
                          AND NOT EXISTS (SELECT 1 FROM message_times_pending)""",
                {
                    "iv": INDEX_VERSION,
                    "ci": CONVERSATION_INDEX,
                    "tv": TIMES_VERSION,
                    "zone": calendar_zone()[0],
                },
            ).fetchone()
        return bool(row and row[0])

    @staticmethod
    def _state(
        conn: Connection, start: datetime | None, end: datetime | None, emb: QueryEmbedder | None
    ) -> tuple[int | None, bool, int | None]:
        """In one statement: the messages in the range (None without one), whether the
        embedder has message vectors and how many messages (in the range, if any) have none
        (False and None without a local embedder). With one it also tunes this transaction's
        HNSW scans (``_tune_vector_scan``: only ``_nearest`` walks the index)."""
        ranged = start is not None or end is not None
        tune: sql.Composable
        has: sql.Composable
        missing: sql.Composable
        count = (
            sql.SQL("(SELECT count(*) FROM message_search s WHERE {r})").format(r=_IN_RANGE)
            if ranged
            else sql.SQL("NULL::bigint")
        )
        if emb is None:
            tune = has = missing = sql.SQL("NULL")
        else:
            tune = sql.SQL(
                "set_config('hnsw.ef_search', '100', true), "
                "set_config('hnsw.iterative_scan', 'relaxed_order', true)"
            )
            has = sql.SQL(
                "EXISTS (SELECT 1 FROM message_embeddings WHERE model = %(model)s AND dim = %(dim)s)"
            )
            missing = (  # the whole index: two index-only counts (a vector row always belongs
                # to an indexed message: its foreign key cascades)
                sql.SQL(
                    """greatest(0, (SELECT count(*) FROM message_search)
                          - (SELECT count(*) FROM message_embeddings
                             WHERE model = %(model)s AND dim = %(dim)s))"""
                )
                if not ranged
                else sql.SQL(
                    """(SELECT count(*) FROM message_search s WHERE {r} AND NOT EXISTS (
                           SELECT 1 FROM message_embeddings e WHERE e.message_key = s.message_key
                             AND e.model = %(model)s AND e.dim = %(dim)s))"""
                ).format(r=_IN_RANGE)
            )
        row = conn.execute(
            sql.SQL("SELECT {count}, {has}, {missing}, {tune}").format(
                count=count, has=has, missing=missing, tune=tune
            ),
            {
                "start": start,
                "end": end,
                "model": emb.model if emb else None,
                "dim": emb.dim if emb else None,
            },
        ).fetchone()
        assert row is not None
        return (
            int(row[0]) if row[0] is not None else None,
            bool(row[1]),
            int(row[2]) if row[2] is not None else None,
        )

    @staticmethod
    def _lexical_pool(
        conn: Connection, params: dict[str, Any], *, whole_range: bool, range_first: bool
    ) -> list[_Row]:
        """The candidates by their terms, with the cheap features only (no text, no vectors):
        every message of a small range; else the ``LEXICAL_POOL`` messages holding the most of
        the query's idf mass, found by reading the range and testing each message (a range
        smaller than the terms' matches) or through the terms' GIN index, ``TERM_CANDIDATES``
        per term (no range, or a range wider than what the terms match)."""
        source: sql.Composable
        where: sql.Composable
        # the idf mass a message holds, summed in the terms' order (``q``: the terms, weighted)
        score = sql.SQL("coalesce((SELECT sum(q.w) FROM q WHERE s.tokens @@ q.t), 0)")
        terms = sql.SQL(
            """WITH q AS (SELECT q.t AS t, q.w AS w, q.i::int AS i
                          FROM unnest(%(tsqs)s::tsquery[], %(ws)s::float8[]) WITH ORDINALITY q(t, w, i))"""
        )
        if whole_range:
            source, where = sql.SQL("message_search s"), _IN_RANGE
            if params["tsq_any"] is None:  # no terms: the range's messages, for their lengths
                statement = sql.SQL(
                    """SELECT s.message_key, s.conversation_key, s.role, s.created_at,
                              length(s.tokens), '{{}}'::int[], 0.0 FROM {source} WHERE {where}"""
                ).format(source=source, where=where)
            else:
                statement = sql.SQL(
                    """{terms}
                       SELECT s.message_key, s.conversation_key, s.role, s.created_at,
                              length(s.tokens), m.matched, m.score
                       FROM {source}
                       CROSS JOIN LATERAL (
                           SELECT coalesce(array_agg(q.i - 1 ORDER BY q.i), '{{}}') AS matched,
                                  coalesce(sum(q.w), 0) AS score
                           FROM q WHERE s.tokens @@ q.t) m
                       WHERE {where}"""
                ).format(terms=terms, source=source, where=where)
        elif params["tsq_any"] is None:
            return []
        elif range_first:  # OFFSET 0 keeps the planner on the range (the time index)
            pool = sql.SQL(
                """SELECT s.message_key, s.conversation_key, s.role, s.created_at, s.tokens,
                          length(s.tokens) AS n, {score} AS score
                   FROM (SELECT s.message_key, s.conversation_key, s.role, s.created_at, s.tokens
                         FROM message_search s WHERE {r} OFFSET 0) s
                   WHERE s.tokens @@ %(tsq_any)s::tsquery
                   ORDER BY score DESC, s.message_key LIMIT %(pool)s"""
            ).format(score=score, r=_IN_RANGE)
            tokens, join = sql.SQL("p.tokens"), sql.SQL("")
        else:  # each term's first ``cap`` matches through the GIN index, scored as they are read
            # (narrow rows to de-duplicate); only the pool's messages are read again, for the
            # terms each holds
            pool = sql.SQL(
                """SELECT c.* FROM (
                       SELECT DISTINCT ON (c.message_key) c.*
                       FROM unnest(%(tsqs)s::tsquery[]) u(t) CROSS JOIN LATERAL (
                           SELECT s.message_key, s.conversation_key, s.role, s.created_at,
                                  length(s.tokens) AS n, {score} AS score
                           FROM message_search s WHERE s.tokens @@ u.t AND {r} LIMIT %(cap)s) c
                       ORDER BY c.message_key) c
                   ORDER BY c.score DESC, c.message_key LIMIT %(pool)s"""
            ).format(score=score, r=_IN_RANGE)
            tokens = sql.SQL("x.tokens")
            join = sql.SQL("JOIN message_search x ON x.message_key = p.message_key")
        if not whole_range:  # the pool, best first, with the terms each message holds
            statement = sql.SQL(
                """{terms}
                   SELECT p.message_key, p.conversation_key, p.role, p.created_at, p.n,
                          array(SELECT q.i - 1 FROM q WHERE {tokens} @@ q.t ORDER BY q.i), p.score
                   FROM ({pool}) p {join}
                   ORDER BY p.score DESC, p.message_key"""
            ).format(terms=terms, tokens=tokens, pool=pool, join=join)
        return [
            _Row(k, c, role, at, int(n), list(m), None)
            for k, c, role, at, n, m, _score in conn.execute(statement, params).fetchall()
        ]

    @staticmethod
    def _nearest(
        conn: Connection, params: dict[str, Any], emb: QueryEmbedder, *, exact: bool
    ) -> set[str]:
        """The ``VECTOR_CANDIDATES`` messages nearest to the query (a message's best passage
        counts): in a small range by an exact scan of its vectors, else through the model's HNSW
        index (iterative scan under the range filter)."""
        dist = _dist(emb)
        order = sql.SQL("({}) + 0").format(dist) if exact else dist  # + 0: not the index's order
        nearest = sql.SQL(
            """(SELECT e.message_key FROM {t} e
                JOIN message_search s ON s.message_key = e.message_key
                WHERE e.model = {m} AND e.dim = {d} AND {r}
                ORDER BY {order} LIMIT %(vk)s)"""
        )
        each = [  # one statement: the messages' vectors and their passages' (each its own scan)
            nearest.format(
                t=sql.Identifier(table),
                m=sql.Literal(emb.model),
                d=sql.Literal(emb.dim),
                r=_IN_RANGE,
                order=order,
            )
            for table in ("message_embeddings", "message_passage_embeddings")
        ]
        rows = conn.execute(sql.SQL(" UNION ALL ").join(each), params).fetchall()
        return {r[0] for r in rows}

    @staticmethod
    def _features(
        conn: Connection,
        where: sql.Composable,
        params: dict[str, Any],
        emb: QueryEmbedder | None,
        known: dict[str, _Row] | None = None,
    ) -> list[_Row]:
        """Each message's features: its length and the terms it holds (taken from ``known``
        when the lexical pool read them already: ``where`` must then be ``s.message_key =
        ANY(%(keys)s)``), its similarity to the query, whether it states a decision (a person's
        message only)."""
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
        known = known or {}
        if known:  # their terms and lengths are read already: only the rest is
            keys = list(params.get("keys") or [])
            fresh = [k for k in keys if k not in known]
            rows = (
                RecallReads._features(conn, where, params | {"keys": fresh}, emb) if fresh else []
            )
            terms = sql.SQL("NULL::int, NULL::int[]")
            params = params | {"keys": [k for k in keys if k in known]}
        else:
            rows = []
            terms = sql.SQL(
                "length(s.tokens), array(SELECT q.i - 1 FROM q WHERE s.tokens @@ q.t ORDER BY q.i)"
            )
        statement = sql.SQL(
            """WITH q AS (SELECT q.t AS t, q.i::int AS i
                          FROM unnest(%(tsqs)s::tsquery[]) WITH ORDINALITY q(t, i))
               SELECT s.message_key, s.conversation_key, s.role, s.created_at, {terms}, {sim},
                      s.role = 'user' AND s.text ~ {decision}, s.text ~ {kana},
                      (SELECT m.position FROM source_messages m WHERE m.message_key = s.message_key)
               FROM message_search s WHERE {where}"""
        ).format(
            terms=terms,
            sim=sim,
            where=where,
            decision=sql.Literal(DECISION_STATEMENT),
            kana=sql.Literal(KANA),
        )
        out = rows
        for k, c, role, at, n, m, v, d, ja, pos in conn.execute(statement, params).fetchall():
            had = known.get(k)
            out.append(
                _Row(
                    k,
                    c,
                    role,
                    at,
                    had.length if had else int(n),
                    had.matched if had else list(m),
                    float(v) if v is not None else None,
                    bool(d),
                    bool(ja),
                    position=pos,
                )
            )
        return out

    @staticmethod
    def _titles(conn: Connection, convs: list[str]) -> dict[str, str | None]:
        rows = conn.execute(
            "SELECT conversation_key, title FROM source_conversations WHERE conversation_key = ANY(%s)",
            (convs,),
        ).fetchall()
        return {k: t for k, t in rows}

    @staticmethod
    def _texts(conn: Connection, keys: list[str]) -> dict[str, dict[str, Any]]:
        rows = (
            conn.cursor(row_factory=dict_row)
            .execute(
                """SELECT s.message_key, s.conversation_key, c.title AS conversation_title, s.role,
                      s.created_at, s.text, m.on_active_path
               FROM message_search s
               JOIN source_messages m ON m.message_key = s.message_key
               LEFT JOIN source_conversations c ON c.conversation_key = s.conversation_key
               WHERE s.message_key = ANY(%s)""",
                (keys,),
            )
            .fetchall()
        )
        out = {r["message_key"]: r for r in rows}
        went = memories_drafted(conn, list({r["conversation_key"] for r in rows}))
        for r in rows:
            r.update(where_it_went(went.get(r["conversation_key"], []), r["message_key"]))
        return out

    @classmethod
    def _list_range(
        cls,
        conn: Connection,
        start: datetime | None,
        end: datetime | None,
        limit: int,
        include_branches: bool = False,
    ) -> list[RecallHit]:
        keys = [
            r[0]
            for r in conn.execute(
                sql.SQL(
                    """SELECT s.message_key FROM message_search s
                   JOIN source_messages m ON m.message_key = s.message_key
                   WHERE {r} AND (%(branches)s OR m.on_active_path)
                   ORDER BY s.created_at, s.message_key LIMIT %(limit)s"""
                ).format(r=_IN_RANGE),
                {"start": start, "end": end, "limit": limit, "branches": include_branches},
            ).fetchall()
        ]
        texts = cls._texts(conn, keys)
        return [RecallHit(**texts[k], match="range", rank=n) for n, k in enumerate(keys, start=1)]


# sent in the range, or speaking of a time that meets it (message_times, ADR 0036). The message's
# own time is tested on the row and the spoken-of keys are read once as an array (an InitPlan):
# a ``message_key IN (range UNION times)`` was planned as a hashed filter over every row of the
# index (168 ms for a day's 586 messages at 1M messages, 0.9 ms so: bench/search_bench.py)
_IN_RANGE = sql.SQL(
    "((%(start)s::timestamptz IS NULL AND %(end)s::timestamptz IS NULL)"
    " OR ((%(start)s::timestamptz IS NULL OR s.created_at >= %(start)s)"
    " AND (%(end)s::timestamptz IS NULL OR s.created_at < %(end)s))"
    " OR s.message_key = ANY(ARRAY(SELECT t.message_key FROM message_times t"
    " WHERE t.span && tstzrange(%(start)s, %(end)s)"
    " AND upper(t.span) - lower(t.span) <= %(end)s::timestamptz - %(start)s::timestamptz)))"
)


def _dist(emb: QueryEmbedder | None) -> sql.Composable:
    assert emb is not None
    return sql.SQL("e.embedding::halfvec({d}) <=> %(qv)s::halfvec({d})").format(
        d=sql.Literal(emb.dim)
    )
