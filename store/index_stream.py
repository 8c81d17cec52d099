"""The message index rows of an import's new conversations, written behind the ledger by the
import's worker processes (issue 31, ADR 0044): the ledger's batch commits with its messages
queued (``message_search_pending``, one set-based insert), then a worker tokenises their texts
and writes the rows in its own transaction and connection, taking them off the queue. The import's
own process (parsing, hashing, the prefilter, the ledger's COPY) neither computes nor sends the
index rows, and the ledger's commit does not wait for them.

Whole or nothing per batch: a kill before a worker commits leaves the batch's messages queued, and
the index step (``SearchStore.sync_messages``) or the next import finishes them. A worker takes
only the queued rows it can lock (``FOR UPDATE SKIP LOCKED``): a message another indexer has
taken or already indexed is left to it.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Sequence
from datetime import datetime
from typing import Any

import psycopg

from core.textsearch import index_rows_many
from store.index import MAX_TOKEN_CHARS

#: one message to index: key, conversation key, role, created_at, the text as the index shows it
StreamRow = tuple[str, str, str, datetime | None, str]

#: a prefilter decision: conversation key (storable), content hash, rule version, keep, reason
DecisionRow = tuple[str, str, str, bool, str]

#: the workers yield the CPU to the ledger's process and the server (the index trails the ledger)
WORKER_NICE = 10

_COPY_ROWS = """COPY message_search (message_key, conversation_key, role, created_at, text, tokens)
    FROM STDIN"""

_conn: psycopg.Connection[Any] | None = None
_niced = False


def _connection(url: str) -> psycopg.Connection[Any]:
    """This worker process's own connection (kept for the next batch). Its server process is
    niced as the worker is, where the server runs on this machine under a user this one may
    renice (the embedded server): the rows' heap, btree and tsvector work is the index's too, and
    yields the CPU to the ledger's transactions as the tokens do."""
    global _conn
    if _conn is None or _conn.closed or _conn.broken:
        _conn = psycopg.connect(url, autocommit=True)
        _nice_backend(_conn)
    return _conn


def _nice_backend(conn: psycopg.Connection[Any]) -> None:
    """Lower the priority of ``conn``'s server process to ``WORKER_NICE`` (never raise it):
    nothing happens for a server on another machine (its process id is not one here, or not
    a PostgreSQL process) or one this user may not renice."""
    if not conn.info.host.startswith("/"):  # a TCP server: its process is not on this machine
        return
    pid = conn.info.backend_pid
    with contextlib.suppress(OSError):
        with open(f"/proc/{pid}/cmdline", "rb") as f:  # that server's process, not another's
            if not f.read(64).startswith(b"postgres"):
                return
        if os.getpriority(os.PRIO_PROCESS, pid) < WORKER_NICE:
            os.setpriority(os.PRIO_PROCESS, pid, WORKER_NICE)


def nice_worker() -> None:
    """This worker process yields the CPU (once; the first task does it)."""
    global _niced
    if not _niced:
        _niced = True
        with contextlib.suppress(OSError):
            os.nice(WORKER_NICE)


def write_streamed(url: str, rows: list[StreamRow], decisions: Sequence[DecisionRow] = ()) -> int:
    """In a worker process: the index rows of ``rows`` (messages the ledger has committed and
    queued), and ``decisions`` (prefilter decisions of those conversations, made by the
    worker), in one transaction; the number of index rows written."""
    nice_worker()
    tokens = index_rows_many([r[4] for r in rows], MAX_TOKEN_CHARS, forms=False)
    conn = _connection(url)
    with conn.transaction():
        # whole batches or none: a lost commit leaves the rows queued, as a kill does
        conn.execute("SET LOCAL synchronous_commit = off")
        if decisions:  # one set-based insert; a decision already stored stays
            conn.execute(
                """INSERT INTO prefilter_decisions (conversation_key, content_hash, rule_version,
                       keep, reason)
                   SELECT * FROM unnest(%s::text[], %s::text[], %s::text[], %s::bool[], %s::text[])
                   ON CONFLICT DO NOTHING""",
                [list(column) for column in zip(*decisions, strict=True)],
            )
        # the rows another indexer holds are skipped by it, and waited for here: what it has
        # written is no longer queued, so it is not taken (arrays sent binary: ~8x cheaper)
        claimed = {
            k
            for (k,) in conn.execute(
                "DELETE FROM message_search_pending WHERE message_key = ANY(%b) RETURNING message_key",
                ([r[0] for r in rows],),
            )
        }
        if not claimed:
            return 0
        ja: list[str] = []
        with conn.cursor() as cur, cur.copy(_COPY_ROWS) as copy:
            for row, (vector, japanese) in zip(rows, tokens, strict=True):
                if row[0] in claimed:
                    copy.write_row((*row, vector))
                    if japanese:
                        ja.append(row[0])
        if ja:  # the later stage adds their normal forms (ADR 0026)
            conn.execute(
                """INSERT INTO message_forms_pending (message_key)
                   SELECT unnest(%b::text[]) ON CONFLICT DO NOTHING""",
                (ja,),
            )
    return len(claimed)
