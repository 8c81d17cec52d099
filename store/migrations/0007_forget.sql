-- 0007: erasure (issue 10, point 3): `pmem forget`. See docs/security.md, "Erasure".

-- ------------------------------------------------------------------ the audit
-- One row per change forget made to a protected row (a revision rewritten or removed) and per
-- erasure as a whole: ids, field names and counts, never the text. Insert-only.
CREATE TABLE erasure_audit (
    id           bigserial PRIMARY KEY,
    erasure_id   text NOT NULL,
    action       text NOT NULL CHECK (action IN ('erasure', 'redact-revision', 'erase-revisions')),
    target       text,                 -- secret | memory | conversation (for 'erasure' rows)
    memory_id    text,
    revision     integer,
    fields       text[] NOT NULL DEFAULT '{}',
    counts       jsonb NOT NULL DEFAULT '{}'::jsonb,
    txid         bigint NOT NULL DEFAULT txid_current(),
    at           timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX erasure_audit_txid ON erasure_audit (txid, memory_id);

CREATE FUNCTION pmem_refuse_audit_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'erasure_audit is insert-only (% refused)', TG_OP USING ERRCODE = 'raise_exception';
END $$;
CREATE TRIGGER erasure_audit_immutable BEFORE UPDATE OR DELETE ON erasure_audit
    FOR EACH ROW EXECUTE FUNCTION pmem_refuse_audit_change();
CREATE TRIGGER erasure_audit_no_truncate BEFORE TRUNCATE ON erasure_audit
    FOR EACH STATEMENT EXECUTE FUNCTION pmem_refuse_audit_change();

-- ------------------------------------------------------------------ what the ledger must not take back
-- Keyed HMAC-SHA256 (the key is <data dir>/erasure.key, 0600, never in the database) of what was
-- erased with --from-ledger: a conversation key, a message key, or a secret (lower-cased; its
-- length and whether it starts with an ASCII letter or digit let an import look for it).
CREATE TABLE erased_content (
    hmac        text PRIMARY KEY,
    kind        text NOT NULL CHECK (kind IN ('conversation', 'message', 'secret')),
    length      integer,
    ascii_start boolean,
    erased_at   timestamptz NOT NULL DEFAULT now()
);

-- Conversations forgotten from everything derived while the ledger keeps them: never indexed
-- for recall or drafted again.
CREATE TABLE forgotten_conversations (
    conversation_key text PRIMARY KEY,
    forgotten_at     timestamptz NOT NULL DEFAULT now()
);

CREATE OR REPLACE FUNCTION pmem_queue_message_search() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM forgotten_conversations WHERE conversation_key = NEW.conversation_key) THEN
        RETURN NEW;
    END IF;
    INSERT INTO message_search_pending (message_key) VALUES (NEW.message_key)
        ON CONFLICT DO NOTHING;
    RETURN NEW;
END $$;

-- ------------------------------------------------------------------ revisions: one audited exception
-- A redacted revision says when and which fields; never the text.
ALTER TABLE memory_revisions
    ADD COLUMN redacted_at timestamptz,
    ADD COLUMN redacted_fields text[];

-- memory_revisions stays insert-only, except for a change made inside pmem_redact_revision or
-- pmem_erase_revisions: they set a transaction-local flag and write the audit row first; the
-- trigger lets a row change only when that flag is set and its audit row exists in the same
-- transaction, and a redaction may change nothing but the record, its hash and the redaction
-- columns.
CREATE OR REPLACE FUNCTION pmem_refuse_revision_change() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    flag text := current_setting('pmem.erasure', true);
BEGIN
    IF TG_OP IN ('UPDATE', 'DELETE') AND coalesce(flag, '') <> '' AND EXISTS (
        SELECT 1 FROM erasure_audit a
         WHERE a.txid = txid_current() AND a.erasure_id = flag AND a.memory_id = OLD.memory_id
           AND (a.action = 'erase-revisions' OR a.revision = OLD.revision)
    ) THEN
        IF TG_OP = 'DELETE' THEN
            RETURN OLD;
        END IF;
        IF (NEW.memory_id, NEW.revision, NEW.reason, NEW.restored_from, NEW.run_id, NEW.client,
            NEW.model, NEW.prompt_version, NEW.created_at)
           IS DISTINCT FROM
           (OLD.memory_id, OLD.revision, OLD.reason, OLD.restored_from, OLD.run_id, OLD.client,
            OLD.model, OLD.prompt_version, OLD.created_at) THEN
            RAISE EXCEPTION 'a redaction changes only the record of a revision';
        END IF;
        RETURN NEW;
    END IF;
    RAISE EXCEPTION 'memory_revisions is insert-only (% refused)', TG_OP
        USING ERRCODE = 'raise_exception', HINT = 'append a new revision instead';
END $$;

CREATE FUNCTION pmem_redact_revision(
    p_erasure_id text, p_memory_id text, p_revision integer, p_record jsonb, p_record_hash text,
    p_fields text[]
) RETURNS void LANGUAGE plpgsql SECURITY DEFINER SET search_path FROM CURRENT AS $$
BEGIN
    INSERT INTO erasure_audit (erasure_id, action, memory_id, revision, fields)
        VALUES (p_erasure_id, 'redact-revision', p_memory_id, p_revision, p_fields);
    PERFORM set_config('pmem.erasure', p_erasure_id, true);
    UPDATE memory_revisions
       SET record = p_record, record_hash = p_record_hash, redacted_at = now(),
           redacted_fields = ARRAY(SELECT DISTINCT f FROM unnest(coalesce(redacted_fields, '{}') || p_fields) f ORDER BY 1)
     WHERE memory_id = p_memory_id AND revision = p_revision;
    PERFORM set_config('pmem.erasure', '', true);
END $$;

CREATE FUNCTION pmem_erase_revisions(p_erasure_id text, p_memory_id text) RETURNS integer
LANGUAGE plpgsql SECURITY DEFINER SET search_path FROM CURRENT AS $$
DECLARE
    n integer;
BEGIN
    INSERT INTO erasure_audit (erasure_id, action, memory_id, counts)
        SELECT p_erasure_id, 'erase-revisions', p_memory_id, jsonb_build_object('revisions', count(*))
          FROM memory_revisions WHERE memory_id = p_memory_id;
    PERFORM set_config('pmem.erasure', p_erasure_id, true);
    DELETE FROM memory_revisions WHERE memory_id = p_memory_id;
    GET DIAGNOSTICS n = ROW_COUNT;
    PERFORM set_config('pmem.erasure', '', true);
    RETURN n;
END $$;

REVOKE ALL ON FUNCTION pmem_redact_revision(text, text, integer, jsonb, text, text[]) FROM PUBLIC;
REVOKE ALL ON FUNCTION pmem_erase_revisions(text, text) FROM PUBLIC;
