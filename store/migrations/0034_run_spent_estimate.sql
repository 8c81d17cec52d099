-- 0034: what the run's model requests were estimated to cost, beside what they cost
-- (spent_cost_usd, 0012), over every resume (ADR 0032, issue 28). --max-cost admits a batch
-- only when what was spent plus the batch's estimate stays within the cap; the estimate is the
-- dry run's, scaled by how far the run's requests so far cost more than theirs were estimated
-- (spent_cost_usd / spent_estimate_usd, never below 1), so a model that bills more than the
-- estimate foresees is caught before the next batch, in this invocation and after a resume.
ALTER TABLE backfill_runs
    ADD COLUMN spent_estimate_usd double precision NOT NULL DEFAULT 0;
