"""A run's batches as claims with a lease: the units any worker can take (issue 18, ADR 0024).

The run's planner lists its batches (``enqueue``); a worker takes the oldest open ones nobody
holds (``claim``: ``FOR UPDATE SKIP LOCKED``, so two workers asking at once never get the same
batch), keeps its lease alive while it drafts and commits them (``renew``), and records what it
did (``done``: the batch's counts). A lease that runs out (the worker was killed, its machine went
to sleep) makes the batch claimable again: another worker takes it over. The in-process run is
one worker on the same claims. Times are the database's clock, so the machines' clocks never
matter. Only ids, states and counts are stored.
"""

from __future__ import annotations

import os
import socket
import uuid
from dataclasses import dataclass
from typing import Any

from psycopg.types.json import Jsonb

from state.batch import CLAIM_SKIPS, Stage, check, from_claim
from store.db import Database


def worker_name() -> str:
    """This process as a claim holder: host, pid and a random part (a pid is reused)."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"


def gone(worker: str) -> bool:
    """A claim holder known to be dead: a process of this machine that no longer exists (one
    on another machine is known only by its lease running out)."""
    host, _, rest = worker.partition(":")
    pid = rest.partition(":")[0]
    if host != socket.gethostname() or not pid.isdigit():
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except OSError:  # it exists (another user's)
        return False
    return False


@dataclass(frozen=True)
class ClaimCounts:
    open: int = 0  # not yet done (claimable, or held)
    held: int = 0  # of those, under a live lease
    drafted: int = 0  # drafted (by any worker), done or not
    done: int = 0
    failed: int = 0
    next_free: float | None = None  # seconds until the first live lease runs out

    @property
    def total(self) -> int:
        return self.open + self.done + self.failed


class ClaimStore:
    def __init__(self, db: Database) -> None:
        self.db = db

    def enqueue(self, run_id: str, batch_ids: list[str]) -> None:
        """The run's batches to do now, in this order. A batch already listed is opened again
        (a resumed run); one held under a live lease keeps its holder. Rows of batches no longer
        to do (committed by an earlier invocation) are dropped, so the run's totals are this
        invocation's work."""
        with self.db.connection() as conn, conn.transaction():
            conn.execute(
                "DELETE FROM batch_claims WHERE run_id = %s AND NOT (batch_id = ANY(%s))",
                (run_id, batch_ids),
            )
            with conn.cursor() as cur:
                cur.executemany(
                    """INSERT INTO batch_claims (run_id, batch_id, position) VALUES (%s, %s, %s)
                       ON CONFLICT (run_id, batch_id) DO UPDATE SET position = EXCLUDED.position,
                           state = 'open', drafted = false, outcome = NULL, updated_at = now()""",
                    [(run_id, b, i) for i, b in enumerate(batch_ids)],
                )

    def claim(self, run_id: str, worker: str, lease_seconds: float, limit: int = 1) -> list[str]:
        """Take up to ``limit`` open batches of the run that no live lease holds, oldest first."""
        with self.db.connection() as conn, conn.transaction():
            rows = conn.execute(
                """WITH picked AS (
                       SELECT run_id, batch_id FROM batch_claims
                       WHERE run_id = %s AND state = 'open'
                         AND (lease_expires_at IS NULL OR lease_expires_at <= clock_timestamp())
                       ORDER BY position LIMIT %s FOR UPDATE SKIP LOCKED)
                   UPDATE batch_claims c SET claimed_by = %s, claims = c.claims + 1, updated_at = now(),
                          lease_expires_at = clock_timestamp() + make_interval(secs => %s)
                   FROM picked WHERE c.run_id = picked.run_id AND c.batch_id = picked.batch_id
                   RETURNING c.batch_id, c.position""",
                (run_id, limit, worker, lease_seconds),
            ).fetchall()
        return [r[0] for r in sorted(rows, key=lambda r: r[1])]

    def renew(
        self, run_id: str, batch_ids: list[str], worker: str, lease_seconds: float
    ) -> list[str]:
        """Extend this worker's leases; returns the batches it still holds (a lease that ran out
        and was taken over is lost)."""
        if not batch_ids:
            return []
        with self.db.connection() as conn, conn.transaction():
            rows = conn.execute(
                """UPDATE batch_claims SET lease_expires_at = clock_timestamp() + make_interval(secs => %s)
                   WHERE run_id = %s AND batch_id = ANY(%s) AND claimed_by = %s AND state = 'open'
                   RETURNING batch_id""",
                (lease_seconds, run_id, batch_ids, worker),
            ).fetchall()
        return [r[0] for r in rows]

    def mark_drafted(self, run_id: str, batch_id: str, worker: str | None = None) -> bool:
        """The batch is drafted (a step of the batch-state table, state/batch.py: a claim done
        or failed cannot be drafted again within this listing). With ``worker``: only while it
        holds the claim (False when another worker took it over)."""
        with self.db.connection() as conn, conn.transaction():
            row = conn.execute(
                """SELECT state, drafted, claimed_by FROM batch_claims
                   WHERE run_id = %s AND batch_id = %s FOR UPDATE""",
                (run_id, batch_id),
            ).fetchone()
            if row is None or (worker is not None and row[2] != worker):
                return False
            check(
                "the claims", batch_id, from_claim(row[0], row[1]), Stage.DRAFTED, skips=CLAIM_SKIPS
            )
            conn.execute(
                "UPDATE batch_claims SET drafted = true, updated_at = now() WHERE run_id = %s AND batch_id = %s",
                (run_id, batch_id),
            )
        return True

    def done(
        self,
        run_id: str,
        batch_id: str,
        worker: str,
        outcome: dict[str, Any],
        *,
        failed: bool = False,
    ) -> bool:
        """Record the batch as done (or failed) with its counts; False when this worker no longer
        held it (its lease ran out and another worker took it over: that one's counts stand).
        Its own claim already done or failed moves only as the batch-state table allows
        (``IllegalTransition``: a failed batch is never counted done, nor a done one failed)."""
        with self.db.connection() as conn, conn.transaction():
            had = conn.execute(
                """SELECT state, drafted FROM batch_claims
                   WHERE run_id = %s AND batch_id = %s AND claimed_by = %s FOR UPDATE""",
                (run_id, batch_id, worker),
            ).fetchone()
            if had is not None:
                new = Stage.FAILED if failed else Stage.COMMITTED
                check("the claims", batch_id, from_claim(had[0], had[1]), new, skips=CLAIM_SKIPS)
            row = conn.execute(
                """UPDATE batch_claims SET state = %s, outcome = %s, drafted = drafted OR %s,
                       lease_expires_at = NULL, updated_at = now()
                   WHERE run_id = %s AND batch_id = %s AND state = 'open' AND claimed_by = %s
                   RETURNING batch_id""",
                (
                    "failed" if failed else "done",
                    Jsonb(outcome),
                    not failed,
                    run_id,
                    batch_id,
                    worker,
                ),
            ).fetchone()
        return row is not None

    def release(self, run_id: str, batch_ids: list[str], worker: str) -> None:
        """Give batches back undone (a stop, an error): claimable again at once."""
        if not batch_ids:
            return
        with self.db.connection() as conn, conn.transaction():
            conn.execute(
                """UPDATE batch_claims SET claimed_by = NULL, lease_expires_at = NULL, updated_at = now()
                   WHERE run_id = %s AND batch_id = ANY(%s) AND claimed_by = %s AND state = 'open'""",
                (run_id, batch_ids, worker),
            )

    def counts(self, run_id: str) -> ClaimCounts:
        with self.db.connection() as conn:
            row = conn.execute(
                """SELECT count(*) FILTER (WHERE state = 'open'),
                          count(*) FILTER (WHERE state = 'open' AND lease_expires_at > clock_timestamp()),
                          count(*) FILTER (WHERE drafted),
                          count(*) FILTER (WHERE state = 'done'),
                          count(*) FILTER (WHERE state = 'failed'),
                          extract(epoch FROM min(lease_expires_at - clock_timestamp())
                                  FILTER (WHERE state = 'open' AND lease_expires_at > clock_timestamp()))
                   FROM batch_claims WHERE run_id = %s""",
                (run_id,),
            ).fetchone()
        assert row is not None
        return ClaimCounts(
            int(row[0]),
            int(row[1]),
            int(row[2]),
            int(row[3]),
            int(row[4]),
            None if row[5] is None else float(row[5]),
        )

    def live_holders(self, run_id: str) -> list[str]:
        """The workers holding open batches of the run under a live lease."""
        with self.db.connection() as conn:
            rows = conn.execute(
                """SELECT DISTINCT claimed_by FROM batch_claims
                   WHERE run_id = %s AND state = 'open' AND lease_expires_at > clock_timestamp()""",
                (run_id,),
            ).fetchall()
        return [str(r[0]) for r in rows if r[0]]

    def expire(self, run_id: str, worker: str) -> int:
        """End a dead worker's leases at once (it is known to be gone: a process of this machine
        that no longer exists), so its batches need not wait for the lease to run out."""
        with self.db.connection() as conn, conn.transaction():
            cur = conn.execute(
                """UPDATE batch_claims SET lease_expires_at = clock_timestamp(), updated_at = now()
                   WHERE run_id = %s AND claimed_by = %s AND state = 'open'""",
                (run_id, worker),
            )
        return cur.rowcount

    def outcomes(self, run_id: str) -> list[dict[str, Any]]:
        """The counts of every batch of the run that is done or failed, by whichever worker."""
        with self.db.connection() as conn:
            rows = conn.execute(
                "SELECT outcome FROM batch_claims WHERE run_id = %s AND state <> 'open' ORDER BY position",
                (run_id,),
            ).fetchall()
        return [r[0] for r in rows if r[0] is not None]

    def holders(self, run_id: str) -> dict[str, int]:
        """How many batches of the run each worker has done (``claimed_by`` of the done rows)."""
        with self.db.connection() as conn:
            rows = conn.execute(
                """SELECT claimed_by, count(*) FROM batch_claims
                   WHERE run_id = %s AND state <> 'open' GROUP BY claimed_by""",
                (run_id,),
            ).fetchall()
        return {str(r[0]): int(r[1]) for r in rows}
