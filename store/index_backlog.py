"""How far the derived message indexes lag behind the ledger: counts only, no text.

The import, the backfill and the re-import ask this before they load an embedder (a model load
costs seconds; nothing pending means it is never loaded) and to size their progress bar.
"""

from __future__ import annotations

from pydantic import BaseModel

from store.db import Database


class Backlog(BaseModel):
    unindexed_messages: int  # queued for the message search table (the ledger's trigger fills it)
    messages: int  # rows of the message search table
    messages_with_vectors: int  # of those, with a vector of the asked model
    messages_without_forms: int = 0  # indexed without their Japanese normalised forms yet

    @property
    def messages_without_vectors(self) -> int:
        return max(0, self.messages - self.messages_with_vectors)


def backlog(db: Database, model: str | None = None) -> Backlog:
    """Counts of what ``SearchStore.sync_messages``, ``SearchStore.sync_forms`` (the later stage
    adding the Japanese normalised forms) and ``SearchStore.embed_pending`` would still do for
    ``model`` (by name only: an embedder's dimension may be unknown until it loads).
    Index-only counts: a vector row always belongs to an indexed message (its foreign key
    cascades), so the difference is the number of messages without a vector."""
    with db.connection() as conn:
        row = conn.execute(
            """SELECT (SELECT count(*) FROM message_search_pending),
                      (SELECT count(*) FROM message_search),
                      (SELECT count(*) FROM message_embeddings WHERE model = %s),
                      (SELECT count(*) FROM message_forms_pending)""",
            (model,),
        ).fetchone()
    assert row is not None
    return Backlog(
        unindexed_messages=row[0],
        messages=row[1],
        messages_with_vectors=row[2],
        messages_without_forms=row[3],
    )
