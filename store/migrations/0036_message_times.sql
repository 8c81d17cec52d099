-- The times a message speaks about (ADR 0036): its own time expressions ("yesterday", "last
-- year", 先週) resolved against the message's own timestamp by search.mentions. A search
-- projection beside message_search: rebuilt freely, never a revision, never the ledger. Recall
-- treats a message whose mentioned time meets a question's range as a message of that range.
CREATE TABLE message_times (
    message_key text NOT NULL REFERENCES message_search(message_key) ON DELETE CASCADE,
    span        tstzrange NOT NULL CHECK (NOT isempty(span)),
    PRIMARY KEY (message_key, span)
);
CREATE INDEX message_times_span ON message_times USING gist (span);

-- Indexed messages whose mentioned times are not resolved yet: every message indexed before
-- this migration, every message the index writes or rewrites after it (a trigger: the import
-- writes index rows in its own batches, store.ledger.BatchIndex), and all of them again when
-- the resolver or the calendar zone changes (message_times_version).
CREATE TABLE message_times_pending (
    message_key text PRIMARY KEY
);
INSERT INTO message_times_pending (message_key) SELECT message_key FROM message_search;

CREATE FUNCTION pmem_queue_message_times() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO message_times_pending (message_key) VALUES (NEW.message_key)
        ON CONFLICT DO NOTHING;
    RETURN NEW;
END $$;

CREATE TRIGGER message_search_queue_times
    AFTER INSERT OR UPDATE OF text, created_at ON message_search
    FOR EACH ROW EXECUTE FUNCTION pmem_queue_message_times();

CREATE TABLE message_times_version (
    version integer NOT NULL,
    zone    text NOT NULL
);
