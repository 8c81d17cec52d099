-- 0012: the backfill run contract (issue 13 item 5, issue 11 item 3).
-- A run ends `cost_limit` (--max-cost reached: raise it and run the same command again) or
-- `interrupted` (Ctrl-C) besides open / stopped / complete / failed. What a run has spent is
-- counted on the run itself, so --max-cost holds across resumes: the actual input and output
-- tokens the model reported and their cost at the price the run used. A --redraft run drafts
-- chosen conversations again in batches of its own (never reused by another run).
ALTER TABLE backfill_runs DROP CONSTRAINT IF EXISTS backfill_runs_status_check;
ALTER TABLE backfill_runs ADD CONSTRAINT backfill_runs_status_check
    CHECK (status IN ('open', 'stopped', 'complete', 'failed', 'cost_limit', 'interrupted'));
ALTER TABLE backfill_runs
    ADD COLUMN redraft boolean NOT NULL DEFAULT false,
    ADD COLUMN spent_input_tokens bigint NOT NULL DEFAULT 0,
    ADD COLUMN spent_output_tokens bigint NOT NULL DEFAULT 0,
    ADD COLUMN spent_cost_usd double precision NOT NULL DEFAULT 0;
