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
-- this migration, and all of them again when the resolver or the calendar zone changes
-- (message_times_version). The indexer resolves new messages as it indexes them.
CREATE TABLE message_times_pending (
    message_key text PRIMARY KEY
);
INSERT INTO message_times_pending (message_key) SELECT message_key FROM message_search;

CREATE TABLE message_times_version (
    version integer NOT NULL,
    zone    text NOT NULL
);
