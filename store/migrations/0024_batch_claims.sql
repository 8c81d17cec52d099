-- Issue 18 (docs/adr/0024-scale-out.md): a run's batches as units any worker can take. A worker
-- claims the oldest open batches of a run (FOR UPDATE SKIP LOCKED) with a lease that it renews
-- while it drafts and commits; a lease that runs out (a worker killed, a machine asleep) lets
-- another worker take the batch over. ``outcome`` holds the batch's counts (ids and numbers
-- only), summed into the run's summary over every worker.

CREATE TABLE batch_claims (
    run_id           text NOT NULL REFERENCES backfill_runs(run_id) ON DELETE CASCADE,
    batch_id         text NOT NULL REFERENCES batches(batch_id) ON DELETE CASCADE,
    position         integer NOT NULL,
    state            text NOT NULL DEFAULT 'open' CHECK (state IN ('open', 'done', 'failed')),
    claimed_by       text,
    lease_expires_at timestamptz,
    claims           integer NOT NULL DEFAULT 0,
    drafted          boolean NOT NULL DEFAULT false,
    outcome          jsonb,
    updated_at       timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (run_id, batch_id)
);
CREATE INDEX batch_claims_open ON batch_claims (run_id, position) WHERE state = 'open';

-- a run submitted to a work pool (`pmem backfill --pool NAME`): the pool's name, and the worker
-- that finishes it (the first to find every batch done; NULL again when the run is resumed)
ALTER TABLE backfill_runs ADD COLUMN pool text;
ALTER TABLE backfill_runs ADD COLUMN finished_by text;
