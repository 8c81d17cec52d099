-- 0006: one queue for proposals and confirmed actions (issue 10, point 6), stated facts beside
-- evidence (point 6), and the tombstone lookup by conversation (point 5).
-- See docs/security.md, "Drafts, tombstones and confirmed actions".

-- ------------------------------------------------------------------ the owner's queue
-- `proposals` held only the backfill's bookkeeping rows (a draft about to be committed under
-- standing approval). It now also holds what AI clients and the HTTP API ask for: a proposed
-- memory (create / append) and the confirmed actions (correction, merge, delete, publish) that
-- only the owner may perform, with `pmem proposals accept|reject ID`.
ALTER TABLE proposals
    ALTER COLUMN run_id DROP NOT NULL,
    ALTER COLUMN batch_id DROP NOT NULL,
    ALTER COLUMN draft_id DROP NOT NULL;
ALTER TABLE proposals
    ADD COLUMN action text NOT NULL DEFAULT 'draft'
        CHECK (action IN ('draft', 'create', 'append', 'correction', 'merge', 'delete', 'publish')),
    ADD COLUMN memory_id text,
    ADD COLUMN expected_revision integer,
    ADD COLUMN client text,
    ADD COLUMN decided_at timestamptz,
    ADD COLUMN decided_by text,
    ADD COLUMN result jsonb;
-- proposed: a backfill draft's bookkeeping row; committed: that draft was committed;
-- pending: waiting for the owner; accepted / rejected: the owner's decision
ALTER TABLE proposals
    ADD CONSTRAINT proposals_status_known
        CHECK (status IN ('proposed', 'committed', 'pending', 'accepted', 'rejected'));
CREATE INDEX proposals_queue ON proposals (status, created_at);

-- ------------------------------------------------------------------ stated facts
-- What a client states in its own words (MCP, HTTP API) is kept apart from evidence, which is
-- always a verbatim excerpt of a ledger message.
ALTER TABLE memories ADD COLUMN stated_facts text[] NOT NULL DEFAULT '{}';

-- ------------------------------------------------------------------ tombstones
-- A create resting on any message of a deleted memory's source conversations is refused.
CREATE INDEX tombstones_conversations ON tombstones USING gin (conversation_keys);
