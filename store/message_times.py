"""The message-time index (migration 0036, ADR 0036): for each indexed message, the ranges its
own time expressions name, resolved against its own timestamp (``search.mentions``).

A search projection: filled by the indexer as it indexes messages (``write_times``), caught up
for messages indexed before it existed or under another resolver or calendar zone
(``sync_times``, run by the read side's index upkeep: ``pmem reindex`` and every recall). No text
is stored, only keys and ranges.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from datetime import datetime, tzinfo
from typing import Any

from psycopg import Connection
from psycopg.types.range import Range

__all__ = ["TIMES_VERSION", "Resolver", "calendar_zone", "sync_times", "write_times"]

# (text, the message's time, the calendar) -> the ranges it names: ``search.mentions``'s
# ``mentioned_times``, passed in by the read side (the store imports nothing above core)
Resolver = Callable[[str, datetime, tzinfo], list[tuple[datetime, datetime]]]

TIMES_VERSION = 1  # the resolver's rules: a change queues every message again
_TZ_ENV = "PMEM_TZ"


def calendar_zone() -> tuple[str, tzinfo]:
    """The calendar a message's "yesterday" is read in: ``PMEM_TZ``, else this machine's offset
    (the person's own clock, as ``--now`` without a zone is read)."""
    from zoneinfo import ZoneInfo

    name = (os.environ.get(_TZ_ENV) or "").strip()
    if name:
        try:
            return name, ZoneInfo(name)
        except (ValueError, KeyError):
            pass  # search.query.check_zone reports a bad PMEM_TZ where it is read for a query
    local = datetime.now().astimezone().tzinfo
    assert local is not None
    return str(local.utcoffset(None) or "UTC"), local


def write_times(
    conn: Connection, rows: Sequence[tuple[str, datetime | None, str]], resolve: Resolver
) -> int:
    """Resolve (``resolve``) and store the mentioned times of ``rows`` (key, sent time, text as
    indexed), replacing what each had. Returns the number of ranges written."""
    if not rows:
        return 0
    _, zone = calendar_zone()
    keys = [k for k, _, _ in rows]
    spans: list[tuple[str, Range[datetime]]] = []
    for key, at, text in rows:
        if at is None:
            continue
        for start, end in resolve(text, at, zone):
            spans.append((key, Range(start, end, "[)")))
    conn.execute("DELETE FROM message_times WHERE message_key = ANY(%s)", (keys,))
    if spans:
        with conn.cursor() as cur:
            cur.executemany(
                """INSERT INTO message_times (message_key, span) VALUES (%s, %s)
                   ON CONFLICT DO NOTHING""",
                spans,
            )
    conn.execute("DELETE FROM message_times_pending WHERE message_key = ANY(%s)", (keys,))
    return len(spans)


def ensure_times_version(conn: Connection) -> bool:
    """Queue every indexed message again when the stored times were resolved by another
    ``TIMES_VERSION`` or in another calendar zone. Returns True when it did."""
    name, _ = calendar_zone()
    row = conn.execute("SELECT version, zone FROM message_times_version LIMIT 1").fetchone()
    if row is not None and row[0] == TIMES_VERSION and row[1] == name:
        return False
    conn.execute("LOCK TABLE message_times_version IN EXCLUSIVE MODE")
    if row is not None:  # not the first time: the old ranges are stale
        conn.execute(
            """INSERT INTO message_times_pending (message_key)
               SELECT message_key FROM message_search ON CONFLICT DO NOTHING"""
        )
    conn.execute("DELETE FROM message_times_version")
    conn.execute(
        "INSERT INTO message_times_version (version, zone) VALUES (%s, %s)", (TIMES_VERSION, name)
    )
    return True


def sync_times(db: Any, resolve: Resolver, batch: int = 2000) -> int:
    """Resolve the messages waiting in ``message_times_pending`` (``db``: a ``store.db``
    database) with ``resolve``. Returns how many were resolved."""
    done = 0
    with db.connection() as conn, conn.transaction():
        ensure_times_version(conn)
    while True:
        with db.connection() as conn, conn.transaction():
            rows = conn.execute(
                """SELECT q.message_key, s.created_at, s.text
                   FROM (SELECT message_key FROM message_times_pending
                         ORDER BY message_key LIMIT %s FOR UPDATE SKIP LOCKED) q
                   LEFT JOIN message_search s ON s.message_key = q.message_key""",
                (batch,),
            ).fetchall()
            if not rows:
                return done
            present = [(k, at, t) for k, at, t in rows if t is not None]
            write_times(conn, present, resolve)
            conn.execute(
                "DELETE FROM message_times_pending WHERE message_key = ANY(%s)",
                ([r[0] for r in rows],),
            )
            done += len(present)
        if len(rows) < batch:
            return done
