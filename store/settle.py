"""Tables a load has grown, vacuumed and analyzed before anyone reads them (ADR 0027).

A first import leaves every table without statistics and without a visibility map: the planner
guesses (recall at LoCoMo size asked ~25 ms of server CPU per question instead of ~8, p95 56-64
instead of ~40 ms) and an index-only scan reads the heap, until autovacuum's first ANALYZE lands,
a minute or more later, in the middle of whatever runs then. ``settle`` does that work at the end
of the load instead: ``VACUUM (ANALYZE)`` of each table of the schema that has grown by more than
``GROWTH`` of its rows (plus ``BASE``) since its last analyze or vacuum, or was never analyzed
or never vacuumed, so a small increment into a large store (`pmem watch`) costs one query.

The rows changed are the statistics counters (``pg_stat_user_tables``), not the catalog's sizes:
an index build (the GIN and HNSW indexes made after a first load) sets ``pg_class.reltuples``
and ``relpages`` without analyzing. A backend reports its counters within about a second of its
last transaction, so the last batch of a load may count only from the next load on; a table
never analyzed is settled whatever its counters say.
"""

from __future__ import annotations

import logging

import psycopg
from psycopg import sql

from store.db import Database

_log = logging.getLogger("pmem.store")

GROWTH = 0.1  # as autovacuum's analyze scale factor (autovacuum_analyze_scale_factor)

BASE = 50  # rows, as autovacuum's analyze threshold (autovacuum_analyze_threshold)

_GROWN = """
SELECT s.relname
  FROM pg_stat_user_tables s JOIN pg_class c ON c.oid = s.relid
 WHERE s.schemaname = current_schema()
   AND pg_relation_size(s.relid) > 0
   AND (coalesce(s.last_analyze, s.last_autoanalyze) IS NULL
        OR coalesce(s.last_vacuum, s.last_autovacuum) IS NULL
        OR s.n_mod_since_analyze > %(base)s + %(share)s * greatest(c.reltuples, 0)
        OR s.n_ins_since_vacuum > %(base)s + %(share)s * greatest(c.reltuples, 0))
 ORDER BY s.relname
"""


def grown_tables(conn: psycopg.Connection) -> list[str]:
    """The tables of the schema that ``settle`` would vacuum and analyze now."""
    return [r[0] for r in conn.execute(_GROWN, {"base": BASE, "share": GROWTH})]


def settle(db: Database) -> list[str]:
    """``VACUUM (ANALYZE, SKIP_LOCKED)`` every grown table (``grown_tables``); returns their
    names. A table locked by another vacuum (autovacuum got there first) is skipped; a failure
    is logged by its kind and never raised: the tables are only slower to read until autovacuum
    does the same."""
    done: list[str] = []
    try:
        with psycopg.connect(db.url, autocommit=True) as conn:  # VACUUM runs outside a transaction
            for table in grown_tables(conn):
                conn.execute(
                    sql.SQL("VACUUM (ANALYZE, SKIP_LOCKED) {}").format(sql.Identifier(table))
                )
                done.append(table)
    except psycopg.Error as err:
        _log.warning(
            "vacuum after the load failed (%s); autovacuum will catch up", type(err).__name__
        )
    return done
