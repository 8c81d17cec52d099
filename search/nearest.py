"""The store's nearest active memory to a text under the local embedder (the append gate's
retrieval, flows.append_gate): every active memory's vector, brought up to date first."""

from __future__ import annotations

import math
from typing import Any

from psycopg import sql


def nearest_memory(db: Any, embedder: Any, text: str) -> tuple[str, float] | None:
    """The store's nearest active memory to ``text`` under ``embedder`` and its cosine: the
    memory vectors brought up to date first (the derived index, as ``pmem reindex`` would)."""
    if embedder is None or not text.strip():
        return None
    from store.index import IndexUpkeep

    IndexUpkeep(db)._embed_memories(embedder, 64)
    vector = embedder.embed([text])[0]
    norm = math.sqrt(sum(x * x for x in vector)) or 1.0
    literal = "[" + ",".join(f"{x / norm:.6f}" for x in vector) + "]"
    query = sql.SQL(
        """SELECT e.memory_id, 1 - (e.embedding <=> %(q)s::halfvec({dim})) AS sim
           FROM memory_embeddings e JOIN memories m ON m.id = e.memory_id
           WHERE m.status = 'active' AND e.model = %(model)s AND e.dim = %(dim)s
           ORDER BY e.embedding <=> %(q)s::halfvec({dim}), e.memory_id LIMIT 1"""
    ).format(dim=sql.Literal(embedder.dim))
    with db.connection() as conn:
        row = conn.execute(
            query, {"q": literal, "model": embedder.model, "dim": embedder.dim}
        ).fetchone()
    return (row[0], float(row[1])) if row else None
