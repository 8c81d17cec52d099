-- 0002: the shared request budget window, and review decisions on drafts.

-- One row per memory-API request inside the current window of a bucket. Workers in any
-- process share a bucket (the client side: "client:<name>"; the server side: "server:<client>").
CREATE TABLE budget_events (
    id      bigserial PRIMARY KEY,
    bucket  text NOT NULL,
    at      timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE INDEX budget_events_bucket_at ON budget_events (bucket, at);

-- Review of a dry run: drafts the user rejected are not applied.
CREATE TABLE draft_decisions (
    run_id     text NOT NULL,
    draft_id   text NOT NULL,
    decision   text NOT NULL CHECK (decision IN ('accept', 'reject')),
    decided_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (run_id, draft_id)
);
