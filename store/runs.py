"""Backfill runs and batches: the database half of resume (the other half is result.json).

A batch id is content-derived (members, their content hashes, prompt version, model), so the
same work always maps to the same batch, across runs. A conversation already in a batch with
the same content hash, prompt version and model is never batched again.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from psycopg.rows import dict_row
from psycopg.types.json import Jsonb

from core.hashing import tagged_hash
from core.models import Batch, BatchMember
from state.batch import LEDGER_SKIPS, Stage, check
from store.db import Database

# the ledger's stages a batch can still be drafted or committed from (state/batch.py's table)
PENDING = (Stage.PLANNED.value, Stage.DRAFTED.value, Stage.FAILED.value)


class RunStore:
    def __init__(self, db: Database) -> None:
        self.db = db

    def open_or_create(
        self,
        *,
        source: str,
        export_path: str | None,
        fingerprint: str,
        model: str,
        prompt_version: str,
        dry_run: bool,
        redraft: bool = False,
    ) -> tuple[str, bool]:
        """The run of this identity (source, the export's content or ``pending``, model, prompt
        version, dry run): the same command finds its run again, whatever it ended as (a
        complete run has nothing left to do; a stopped, cost-limited, interrupted or failed one
        resumes). A --redraft run is resumed only while unfinished: once complete, the same
        command starts a new one."""
        with self.db.connection() as conn, conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(hashtext('pmem-runs'))")
            row = conn.execute(
                """SELECT run_id FROM backfill_runs
                   WHERE source = %s AND export_fingerprint = %s AND model = %s
                     AND prompt_version = %s AND dry_run = %s AND redraft = %s
                     AND (NOT redraft OR status <> 'complete')
                   ORDER BY started_at DESC LIMIT 1""",
                (source, fingerprint, model, prompt_version, dry_run, redraft),
            ).fetchone()
            if row is not None:
                conn.execute(
                    "UPDATE backfill_runs SET status = 'open', finished_at = NULL, finished_by = NULL WHERE run_id = %s",
                    (row[0],),
                )
                return row[0], True
            now = datetime.now(UTC)
            run_id = (
                now.strftime("%Y%m%dT%H%M%S")
                + "-"
                + tagged_hash("run", [source, fingerprint, now.isoformat()], length=6).split(":")[1]
            )
            conn.execute(
                """INSERT INTO backfill_runs (run_id, source, export_path, export_fingerprint,
                       model, prompt_version, dry_run, redraft)
                   VALUES (%s, %s, %s, %s, %s, %s, %s, %s)""",
                (run_id, source, export_path, fingerprint, model, prompt_version, dry_run, redraft),
            )
            return run_id, False

    def finish(self, run_id: str, status: str, summary: dict[str, Any] | None) -> None:
        """The run's end state; ``summary`` None keeps the one stored (a re-run that found
        nothing to do does not wipe what the run did)."""
        with self.db.connection() as conn, conn.transaction():
            conn.execute(
                """UPDATE backfill_runs SET status = %s, summary = coalesce(%s, summary),
                       finished_at = CASE WHEN %s IN ('complete', 'failed') THEN now() END
                   WHERE run_id = %s""",
                (status, None if summary is None else Jsonb(summary), status, run_id),
            )

    def set_pool(self, run_id: str, pool: str | None, summary: dict[str, Any]) -> None:
        """A run submitted to a work pool (None: in process): the pool's name, and the summary
        of what the submitter did (import, plan), which the workers' counts are added to."""
        with self.db.connection() as conn, conn.transaction():
            conn.execute(
                "UPDATE backfill_runs SET pool = %s, summary = %s WHERE run_id = %s",
                (pool, Jsonb(summary), run_id),
            )

    def is_open(self, run_id: str) -> bool:
        """Whether the backfill run exists and is open (being drafted and committed now)."""
        with self.db.connection() as conn:
            row = conn.execute(
                "SELECT 1 FROM backfill_runs WHERE run_id = %s AND status = 'open'", (run_id,)
            ).fetchone()
        return row is not None

    def take_finish(self, run_id: str, worker: str) -> bool:
        """The one worker that finishes a pool run (indexes, totals): the first to ask while the
        run is open."""
        with self.db.connection() as conn, conn.transaction():
            row = conn.execute(
                """UPDATE backfill_runs SET finished_by = %s
                   WHERE run_id = %s AND status = 'open' AND finished_by IS NULL RETURNING run_id""",
                (worker, run_id),
            ).fetchone()
        return row is not None

    def add_spent(
        self,
        run_id: str,
        input_tokens: int,
        output_tokens: int,
        cost_usd: float,
        estimate_usd: float = 0.0,
    ) -> tuple[int, int, float]:
        """Count a model request's actual tokens and cost on the run (cumulative across
        resumes), with what it was estimated to cost; returns the run's new totals."""
        with self.db.connection() as conn, conn.transaction():
            row = conn.execute(
                """UPDATE backfill_runs SET spent_input_tokens = spent_input_tokens + %s,
                       spent_output_tokens = spent_output_tokens + %s,
                       spent_cost_usd = spent_cost_usd + %s,
                       spent_estimate_usd = spent_estimate_usd + %s
                   WHERE run_id = %s
                   RETURNING spent_input_tokens, spent_output_tokens, spent_cost_usd""",
                (input_tokens, output_tokens, cost_usd, estimate_usd, run_id),
            ).fetchone()
        assert row is not None, f"no run {run_id}"
        return int(row[0]), int(row[1]), float(row[2])

    def spent(self, run_id: str) -> tuple[int, int, float]:
        """(input tokens, output tokens, cost in USD) the run has spent over all its resumes."""
        with self.db.connection() as conn:
            row = conn.execute(
                """SELECT spent_input_tokens, spent_output_tokens, spent_cost_usd
                   FROM backfill_runs WHERE run_id = %s""",
                (run_id,),
            ).fetchone()
        return (0, 0, 0.0) if row is None else (int(row[0]), int(row[1]), float(row[2]))

    def spent_estimate(self, run_id: str) -> float:
        """What the run's model requests so far were estimated to cost, over all its resumes
        (beside ``spent``'s actual cost: how far the estimate falls short)."""
        with self.db.connection() as conn:
            row = conn.execute(
                "SELECT spent_estimate_usd FROM backfill_runs WHERE run_id = %s", (run_id,)
            ).fetchone()
        return 0.0 if row is None else float(row[0])

    def get_run(self, run_id: str) -> dict[str, Any] | None:
        with self.db.connection() as conn:
            return (
                conn.cursor(row_factory=dict_row)
                .execute("SELECT * FROM backfill_runs WHERE run_id = %s", (run_id,))
                .fetchone()
            )

    def list_runs(self, limit: int = 20) -> list[dict[str, Any]]:
        with self.db.connection() as conn:
            return (
                conn.cursor(row_factory=dict_row)
                .execute("SELECT * FROM backfill_runs ORDER BY started_at DESC LIMIT %s", (limit,))
                .fetchall()
            )

    # ---------------------------------------------------------------- batches

    def batched_keys(
        self, keys_hashes: list[tuple[str, str]], model: str, prompt_version: str
    ) -> set[str]:
        """Conversation keys (at these content hashes) already in a live batch for this model."""
        return set(self.member_status(keys_hashes, model, prompt_version))

    def member_status(
        self, keys_hashes: list[tuple[str, str]], model: str, prompt_version: str
    ) -> dict[str, str]:
        """Per conversation key (at this content hash): the furthest status of a live batch
        holding it for this model (committed, drafted, then planned / failed)."""
        if not keys_hashes:
            return {}
        rank = {"committed": 3, "drafted": 2, "planned": 1, "failed": 1}
        out: dict[str, str] = {}
        with self.db.connection() as conn:
            rows = conn.execute(
                """SELECT m.conversation_key, b.status FROM batch_members m
                   JOIN batches b ON b.batch_id = m.batch_id
                   JOIN unnest(%s::text[], %s::text[]) AS k(key, hash)
                        ON k.key = m.conversation_key AND k.hash = m.content_hash
                   WHERE m.model = %s AND m.prompt_version = %s AND b.status <> 'superseded'""",
                ([k for k, _ in keys_hashes], [h for _, h in keys_hashes], model, prompt_version),
            ).fetchall()
        for key, status in rows:
            if rank.get(status, 0) > rank.get(out.get(key, ""), 0):
                out[key] = status
        return out

    def pending(
        self, source: str, model: str, prompt_version: str, run_id: str | None = None
    ) -> list[dict[str, Any]]:
        """Batches not yet committed, oldest first, with the run that holds their files. A
        --redraft run's batches are its own: only that run (``run_id``) sees them."""
        with self.db.connection() as conn:
            return (
                conn.cursor(row_factory=dict_row)
                .execute(
                    """SELECT b.* FROM batches b JOIN backfill_runs r ON r.run_id = b.run_id
                   WHERE b.source = %s AND b.model = %s AND b.prompt_version = %s
                     AND b.status = ANY(%s) AND (NOT r.redraft OR b.run_id = %s)
                   ORDER BY b.created_at, b.batch_id""",
                    (source, model, prompt_version, list(PENDING), run_id),
                )
                .fetchall()
            )

    def add_batch(self, batch: Batch, source: str, run_id: str) -> None:
        with self.db.connection() as conn, conn.transaction():
            cur = conn.execute(
                """INSERT INTO batches (batch_id, source, model, prompt_version, members, run_id)
                   VALUES (%s, %s, %s, %s, %s, %s) ON CONFLICT (batch_id) DO NOTHING""",
                (
                    batch.batch_id,
                    source,
                    batch.model,
                    batch.prompt_version,
                    Jsonb([m.model_dump() for m in batch.members]),
                    run_id,
                ),
            )
            if cur.rowcount:
                for m in batch.members:
                    conn.execute(
                        """INSERT INTO batch_members (batch_id, conversation_key, content_hash,
                               prompt_version, model) VALUES (%s, %s, %s, %s, %s)""",
                        (
                            batch.batch_id,
                            m.conversation_key,
                            m.content_hash,
                            batch.prompt_version,
                            batch.model,
                        ),
                    )

    def set_status(
        self,
        batch_id: str,
        status: str,
        *,
        checksum: str | None = None,
        error: str | None = None,
        attempt: bool = False,
    ) -> None:
        """Move the batch to ``status``, a step of the batch-state table (state/batch.py; the
        ledger records settled stages only): anything else raises ``IllegalTransition``."""
        with self.db.connection() as conn, conn.transaction():
            row = conn.execute(
                "SELECT status FROM batches WHERE batch_id = %s FOR UPDATE", (batch_id,)
            ).fetchone()
            if row is not None:
                check("the ledger", batch_id, Stage(row[0]), Stage(status), skips=LEDGER_SKIPS)
            conn.execute(
                """UPDATE batches SET status = %s, result_checksum = coalesce(%s, result_checksum),
                       last_error = %s, attempts = attempts + %s, updated_at = now()
                   WHERE batch_id = %s""",
                (status, checksum, error, int(attempt), batch_id),
            )

    def supersede_stale(self, source: str) -> int:
        """Mark pending batches whose members changed since planning as superseded."""
        with self.db.connection() as conn, conn.transaction():
            rows = conn.execute(
                """SELECT DISTINCT b.batch_id FROM batches b
                   JOIN batch_members m ON m.batch_id = b.batch_id
                   JOIN source_conversations c ON c.conversation_key = m.conversation_key
                   WHERE b.source = %s AND b.status = ANY(%s) AND c.content_hash <> m.content_hash""",
                (source, list(PENDING)),
            ).fetchall()
            for (batch_id,) in rows:
                conn.execute(
                    "UPDATE batches SET status = 'superseded', updated_at = now() WHERE batch_id = %s",
                    (batch_id,),
                )
        return len(rows)

    def batch(self, batch_id: str) -> dict[str, Any] | None:
        with self.db.connection() as conn:
            return (
                conn.cursor(row_factory=dict_row)
                .execute("SELECT * FROM batches WHERE batch_id = %s", (batch_id,))
                .fetchone()
            )

    def batches_of_run(self, run_id: str) -> list[dict[str, Any]]:
        """Batches whose files live in this run's folder."""
        with self.db.connection() as conn:
            return (
                conn.cursor(row_factory=dict_row)
                .execute(
                    "SELECT * FROM batches WHERE run_id = %s ORDER BY created_at, batch_id",
                    (run_id,),
                )
                .fetchall()
            )

    def set_decision(self, run_id: str, draft_id: str, decision: str) -> None:
        with self.db.connection() as conn, conn.transaction():
            conn.execute(
                """INSERT INTO draft_decisions (run_id, draft_id, decision) VALUES (%s, %s, %s)
                   ON CONFLICT (run_id, draft_id) DO UPDATE SET decision = EXCLUDED.decision,
                       decided_at = now()""",
                (run_id, draft_id, decision),
            )

    def rejected_drafts(self, run_id: str) -> frozenset[str]:
        with self.db.connection() as conn:
            rows = conn.execute(
                "SELECT draft_id FROM draft_decisions WHERE run_id = %s AND decision = 'reject'",
                (run_id,),
            ).fetchall()
        return frozenset(r[0] for r in rows)

    def stage_counts(self, run_id: str | None = None) -> dict[str, int]:
        with self.db.connection() as conn:
            rows = conn.execute(
                """SELECT status, count(*) FROM batches
                   WHERE %(run)s::text IS NULL OR run_id = %(run)s GROUP BY status""",
                {"run": run_id},
            ).fetchall()
        return dict(rows)


def to_batch(row: dict[str, Any]) -> Batch:
    return Batch(
        batch_id=row["batch_id"],
        members=[BatchMember(**m) for m in row["members"]],
        prompt_version=row["prompt_version"],
        model=row["model"],
    )
