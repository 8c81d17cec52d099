"""The request budget window in PostgreSQL, so every worker and every restarted run shares it.

A sliding window: a request is admitted when fewer than ``limit`` requests of the bucket fall
in the last ``window`` seconds (by the database clock). Admission is serialised per bucket with
a transaction-scoped advisory lock.
"""

from __future__ import annotations

from store.db import Database


def client_window(window: float) -> float:
    """The window a client paces itself by: slightly longer than the server's, so that a request
    the client admits at the edge of its window is not still inside the server's (their clocks
    start a few milliseconds apart)."""
    return window + max(0.25, 0.01 * window)


class PgWindow:
    def __init__(self, db: Database, bucket: str, limit: int, window: float) -> None:
        self.db, self.bucket, self.limit, self.window = db, bucket, limit, window

    def try_acquire(self) -> float:
        """Admit one request (returns 0.0), or return the seconds until a slot frees."""
        with self.db.connection() as conn, conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 7))", (self.bucket,))
            conn.execute(
                "DELETE FROM budget_events WHERE bucket = %s AND at <= clock_timestamp() - make_interval(secs => %s)",
                (self.bucket, self.window),
            )
            row = conn.execute(
                """SELECT count(*), extract(epoch FROM (min(at) + make_interval(secs => %s) - clock_timestamp()))
                   FROM budget_events WHERE bucket = %s""",
                (self.window, self.bucket),
            ).fetchone()
            assert row is not None
            count, wait = int(row[0]), row[1]
            if count < self.limit:
                conn.execute("INSERT INTO budget_events (bucket) VALUES (%s)", (self.bucket,))
                return 0.0
            return max(float(wait or 0.0), 0.001)

    def in_window(self) -> int:
        with self.db.connection() as conn:
            row = conn.execute(
                """SELECT count(*) FROM budget_events
                   WHERE bucket = %s AND at > clock_timestamp() - make_interval(secs => %s)""",
                (self.bucket, self.window),
            ).fetchone()
        return int(row[0]) if row else 0


def purge_buckets(db: Database, prefix: str, window: float) -> None:
    """Drop the expired events of every bucket whose name starts with ``prefix`` (buckets made
    per source address are many, and each cleans only itself when used)."""
    with db.connection() as conn:
        conn.execute(
            """DELETE FROM budget_events WHERE bucket >= %s AND bucket < %s
               AND at <= clock_timestamp() - make_interval(secs => %s)""",
            (prefix, prefix + "\uffff", window),
        )
        conn.commit()
