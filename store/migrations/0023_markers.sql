-- 0023: topic markers (issue 17, item 2; seed 004's "LLL"): short lines the owner writes when the
-- topic changes ("今日はゼミ発表の準備"), shown first in load_context as the current state and
-- used as recall anchors (`pmem recall Q --since-marker`). See docs/adr/0023-markers.md.
--
-- The owner's own record, kept byte-exact like the ledger (bytea: PostgreSQL text refuses NUL
-- and lone surrogates), after the secret guard at the store's write boundary. Insert-only: no
-- model, client or command edits a marker; the one exception is `pmem forget --secret`, through
-- pmem_redact_marker (a transaction-local flag the trigger checks).

CREATE TABLE markers (
    marker_id     text PRIMARY KEY CHECK (marker_id ~ '^mk_[0-9a-f]{12}$'),
    at            timestamptz NOT NULL,          -- when the topic changed (default: when written)
    body          bytea NOT NULL,                -- the text as written (after the guard), UTF-8
    content_hash  text NOT NULL,                 -- sha256 of body
    session       text,                          -- optional session id the marker belongs to
    client        text NOT NULL,                 -- who wrote it: cli, or the MCP client's name
    redacted      text[] NOT NULL DEFAULT '{}',  -- kinds of secret the guard replaced (never values)
    created_at    timestamptz NOT NULL DEFAULT now(),
    redacted_at   timestamptz                    -- set when `pmem forget` rewrote it
);
CREATE INDEX markers_at ON markers (at DESC, marker_id);

CREATE FUNCTION pmem_refuse_marker_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP IN ('UPDATE', 'DELETE') AND coalesce(current_setting('pmem.erasure', true), '') <> '' THEN
        IF TG_OP = 'DELETE' THEN
            RETURN OLD;
        END IF;
        IF (NEW.marker_id, NEW.at, NEW.client, NEW.created_at)
           IS DISTINCT FROM (OLD.marker_id, OLD.at, OLD.client, OLD.created_at) THEN
            RAISE EXCEPTION 'a redaction changes only the text of a marker';
        END IF;
        RETURN NEW;
    END IF;
    RAISE EXCEPTION 'markers are insert-only (% refused)', TG_OP
        USING ERRCODE = 'raise_exception', HINT = 'write a new marker instead';
END $$;
CREATE TRIGGER markers_immutable BEFORE UPDATE OR DELETE ON markers
    FOR EACH ROW EXECUTE FUNCTION pmem_refuse_marker_change();
CREATE TRIGGER markers_no_truncate BEFORE TRUNCATE ON markers
    FOR EACH STATEMENT EXECUTE FUNCTION pmem_refuse_marker_change();

-- `pmem forget --secret`: the marker's text (and session) rewritten under the erasure's id; the
-- erasure's own audit row (erasure_audit, action 'erasure') counts the markers it changed.
CREATE FUNCTION pmem_redact_marker(
    p_erasure_id text, p_marker_id text, p_body bytea, p_content_hash text, p_session text
) RETURNS void LANGUAGE plpgsql SECURITY DEFINER SET search_path FROM CURRENT AS $$
BEGIN
    PERFORM set_config('pmem.erasure', p_erasure_id, true);
    UPDATE markers SET body = p_body, content_hash = p_content_hash, session = p_session, redacted_at = now()
     WHERE marker_id = p_marker_id;
    PERFORM set_config('pmem.erasure', '', true);
END $$;
REVOKE ALL ON FUNCTION pmem_redact_marker(text, text, bytea, text, text) FROM PUBLIC;
