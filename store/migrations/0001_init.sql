-- 0001: the source ledger, the revisioned memory store, runs and idempotency.
CREATE EXTENSION IF NOT EXISTS vector;
CREATE EXTENSION IF NOT EXISTS pg_trgm;

-- ------------------------------------------------------------------ source ledger
CREATE TABLE import_runs (
    import_id      text PRIMARY KEY,
    source         text NOT NULL,
    file           text NOT NULL,
    started_at     timestamptz NOT NULL DEFAULT now(),
    finished_at    timestamptz,
    stats          jsonb NOT NULL DEFAULT '{}'::jsonb
);

CREATE TABLE source_conversations (
    conversation_key text PRIMARY KEY,              -- chatgpt:<conversation_id>
    source           text NOT NULL,
    external_id      text NOT NULL,
    title            text,
    created_at       timestamptz,
    updated_at       timestamptz,
    content_hash     text NOT NULL,                 -- over every stored message
    message_count    integer NOT NULL,
    drafting_chars   integer NOT NULL,              -- chars of the active person/assistant text
    provenance       jsonb NOT NULL,                -- {file, position, member}
    unknown_types    jsonb NOT NULL DEFAULT '{}'::jsonb,
    first_import_id  text NOT NULL REFERENCES import_runs(import_id),
    last_import_id   text NOT NULL REFERENCES import_runs(import_id),
    first_seen_at    timestamptz NOT NULL DEFAULT now(),
    changed_at       timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE source_messages (
    message_key      text PRIMARY KEY,              -- chatgpt:<conversation_id>:<node_id>
    conversation_key text NOT NULL REFERENCES source_conversations(conversation_key),
    node_id          text NOT NULL,
    parent_id        text,
    role             text NOT NULL,
    channel          text NOT NULL CHECK (channel IN ('person', 'assistant', 'tool', 'machinery')),
    content_type     text NOT NULL,
    raw_type         text,
    -- byte-exact UTF-8 (lone surrogates kept): PostgreSQL text refuses NUL and surrogates
    body             bytea NOT NULL,
    content_hash     text NOT NULL,
    created_at       timestamptz,
    position         integer NOT NULL,
    on_active_path   boolean NOT NULL,
    branch_index     integer NOT NULL DEFAULT 0,
    import_id        text NOT NULL REFERENCES import_runs(import_id),
    imported_at      timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX source_messages_conversation ON source_messages (conversation_key, position);

CREATE TABLE quarantine (
    source     text NOT NULL,
    file       text NOT NULL,
    position   integer NOT NULL,
    reason     text NOT NULL,
    import_id  text NOT NULL REFERENCES import_runs(import_id),
    seen_at    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (source, file, position, reason)
);

CREATE TABLE prefilter_decisions (
    conversation_key text NOT NULL REFERENCES source_conversations(conversation_key),
    content_hash     text NOT NULL,
    rule_version     text NOT NULL,
    keep             boolean NOT NULL,
    reason           text NOT NULL,
    decided_at       timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (conversation_key, content_hash, rule_version)
);

CREATE TABLE prefilter_overrides (
    conversation_key text PRIMARY KEY,
    keep             boolean NOT NULL,
    set_at           timestamptz NOT NULL DEFAULT now()
);

-- ------------------------------------------------------------------ memories
CREATE TABLE memories (
    id                text PRIMARY KEY,
    kind              text NOT NULL,
    title             text NOT NULL,
    canonical_summary text NOT NULL,
    index_summary     text NOT NULL,
    aliases           text[] NOT NULL DEFAULT '{}',
    tags              text[] NOT NULL DEFAULT '{}',
    occurred_at       timestamptz,
    valid_from        timestamptz,
    visibility        text NOT NULL DEFAULT 'private',
    status            text NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'deleted')),
    current_revision  integer NOT NULL,
    created_at        timestamptz NOT NULL DEFAULT now(),
    updated_at        timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE memory_revisions (
    memory_id      text NOT NULL REFERENCES memories(id),
    revision       integer NOT NULL CHECK (revision >= 1),
    record         jsonb NOT NULL,        -- the full record at this revision
    record_hash    text NOT NULL,
    reason         text NOT NULL,         -- create, append, correction, merge, restore, delete
    restored_from  integer,
    run_id         text,
    client         text NOT NULL,
    model          text,
    prompt_version text,
    created_at     timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (memory_id, revision)
);

CREATE FUNCTION pmem_refuse_revision_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'memory_revisions is insert-only (% refused)', TG_OP
        USING ERRCODE = 'raise_exception', HINT = 'append a new revision instead';
END $$;

CREATE TRIGGER memory_revisions_immutable
    BEFORE UPDATE OR DELETE ON memory_revisions
    FOR EACH ROW EXECUTE FUNCTION pmem_refuse_revision_change();
CREATE TRIGGER memory_revisions_no_truncate
    BEFORE TRUNCATE ON memory_revisions
    FOR EACH STATEMENT EXECUTE FUNCTION pmem_refuse_revision_change();

CREATE TABLE evidence (
    id             bigserial PRIMARY KEY,
    memory_id      text NOT NULL REFERENCES memories(id),
    source_key     text NOT NULL,          -- the ledger message key
    text           text NOT NULL,          -- verbatim excerpt of the source message
    text_hash      text NOT NULL,          -- hash of NFKC + collapsed white space
    language       text,
    revision_added integer NOT NULL,
    created_at     timestamptz NOT NULL DEFAULT now(),
    UNIQUE (memory_id, source_key, text_hash)
);

CREATE TABLE search_projections (
    memory_id   text PRIMARY KEY REFERENCES memories(id),
    index_text  text NOT NULL,
    tokens      tsvector NOT NULL,
    updated_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX search_projections_tokens ON search_projections USING gin (tokens);

CREATE TABLE tombstones (
    memory_id    text PRIMARY KEY,
    source_keys  text[] NOT NULL,           -- evidence source keys of the deleted lineage
    conversation_keys text[] NOT NULL DEFAULT '{}',
    last_revision integer NOT NULL,
    reason       text,
    deleted_at   timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE idempotency_keys (
    key          text PRIMARY KEY,
    operation    text NOT NULL,
    memory_id    text,
    response     jsonb NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE proposals (
    proposal_id text PRIMARY KEY,
    run_id      text NOT NULL,
    batch_id    text NOT NULL,
    draft_id    text NOT NULL,
    payload     jsonb NOT NULL,
    status      text NOT NULL DEFAULT 'proposed',
    created_at  timestamptz NOT NULL DEFAULT now()
);

-- ------------------------------------------------------------------ runs and batches
CREATE TABLE backfill_runs (
    run_id         text PRIMARY KEY,
    source         text NOT NULL,
    export_path    text,
    export_fingerprint text NOT NULL,
    model          text NOT NULL,
    prompt_version text NOT NULL,
    dry_run        boolean NOT NULL,
    status         text NOT NULL DEFAULT 'open' CHECK (status IN ('open', 'stopped', 'complete', 'failed')),
    started_at     timestamptz NOT NULL DEFAULT now(),
    finished_at    timestamptz,
    summary        jsonb
);
CREATE INDEX backfill_runs_open ON backfill_runs (source, export_fingerprint, status);

CREATE TABLE batches (
    batch_id       text PRIMARY KEY,          -- content-derived
    source         text NOT NULL,
    model          text NOT NULL,
    prompt_version text NOT NULL,
    members        jsonb NOT NULL,
    status         text NOT NULL DEFAULT 'planned'
                   CHECK (status IN ('planned', 'drafted', 'committed', 'failed', 'superseded')),
    run_id         text NOT NULL REFERENCES backfill_runs(run_id),   -- the run holding result.json
    result_checksum text,
    attempts       integer NOT NULL DEFAULT 0,
    last_error     text,
    created_at     timestamptz NOT NULL DEFAULT now(),
    updated_at     timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE batch_members (
    batch_id         text NOT NULL REFERENCES batches(batch_id),
    conversation_key text NOT NULL,
    content_hash     text NOT NULL,
    prompt_version   text NOT NULL,
    model            text NOT NULL,
    PRIMARY KEY (batch_id, conversation_key)
);
CREATE INDEX batch_members_lookup ON batch_members (conversation_key, content_hash, prompt_version, model);
