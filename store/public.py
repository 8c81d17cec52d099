"""The public projection: the title and summary the owner chose to publish (``pmem publish``),
in a table of its own, read by ``GET /public`` through a connection made as the role
``pmem_public_reader``, which may read that table and nothing else (migration 0019).

The reader's connection sets the role at connect time (``options=-c role=…``); any query on a
private table through it fails with a permission error (tests/test_remote_public.py).
"""

from __future__ import annotations

from typing import Any

import psycopg
from psycopg.conninfo import conninfo_to_dict, make_conninfo
from psycopg.rows import dict_row

from core.errors import ConfigError, MemoryNotFound
from core.secrets import redact
from store.db import Database

ROLE = "pmem_public_reader"


def _reader_url(url: str) -> str:
    params = conninfo_to_dict(url)
    options = str(params.get("options") or "")
    params["options"] = (options + f" -c role={ROLE}").strip()
    return make_conninfo(**params)  # type: ignore[arg-type]


class PublicReader:
    """Reads only ``public_memories``, as ``pmem_public_reader``."""

    def __init__(self, url: str) -> None:
        self.url = _reader_url(url)

    @classmethod
    def for_database(cls, db: Database) -> PublicReader:
        return cls(db.url)

    def connect(self) -> psycopg.Connection[dict[str, Any]]:
        return psycopg.connect(self.url, autocommit=True, row_factory=dict_row)

    def items(self) -> list[dict[str, Any]]:
        with self.connect() as conn:
            rows = conn.execute(
                "SELECT memory_id, title, summary, published_at FROM public_memories ORDER BY published_at DESC, memory_id"
            ).fetchall()
        return [dict(r, published_at=r["published_at"].isoformat()) for r in rows]  # type: ignore[call-overload]


class PublicStore:
    """The owner's side: what would be published (redacted), publish, unpublish."""

    def __init__(self, db: Database) -> None:
        self.db = db

    def draft(self, memory_id: str) -> dict[str, str]:
        """The memory's title and index summary, through the secret guard: what `pmem publish`
        shows before asking."""
        with self.db.connection() as conn:
            row = conn.execute(
                "SELECT status, title, index_summary, canonical_summary FROM memories WHERE id = %s",
                (memory_id,),
            ).fetchone()
        if row is None:
            raise MemoryNotFound(memory_id)
        if row[0] != "active":
            raise ConfigError(
                f"memory {memory_id} is {row[0]}: only an active memory can be published"
            )
        return {"title": redact(row[1] or "")[0], "summary": redact(row[2] or row[3] or "")[0]}

    def publish(self, memory_id: str, title: str, summary: str) -> dict[str, Any]:
        title, summary = redact(title.strip())[0], redact(summary.strip())[0]
        if not title or not summary:
            raise ConfigError("a published memory needs a title and a summary")
        self.draft(memory_id)  # exists and is active
        with self.db.connection() as conn:
            conn.execute(
                """INSERT INTO public_memories (memory_id, title, summary) VALUES (%s, %s, %s)
                   ON CONFLICT (memory_id) DO UPDATE
                   SET title = EXCLUDED.title, summary = EXCLUDED.summary, published_at = now()""",
                (memory_id, title, summary),
            )
            conn.execute("UPDATE memories SET visibility = 'public' WHERE id = %s", (memory_id,))
            conn.commit()
        return {"memory_id": memory_id, "title": title, "summary": summary}

    def unpublish(self, memory_id: str) -> bool:
        with self.db.connection() as conn:
            n = conn.execute(
                "DELETE FROM public_memories WHERE memory_id = %s", (memory_id,)
            ).rowcount
            conn.execute("UPDATE memories SET visibility = 'private' WHERE id = %s", (memory_id,))
            conn.commit()
        return n > 0
