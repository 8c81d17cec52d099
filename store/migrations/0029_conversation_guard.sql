-- 0029: the secret guard's findings for whole conversations, computed once (issue 9, item 7;
-- docs/adr/0029-guard-cache.md). Recall redacts a hit and its conversation's title with the
-- conversation's own words as context (core.secrets.find_secrets_in_messages over the title and
-- the active person/assistant messages); the later stage of the import (store.guard_cache.
-- GuardCache.fill: the default import, the backfill, `pmem reindex`) stores what that scan
-- found, keyed by a hash of the guard's version, the title and the words, so a read that finds
-- its key uses the stored spans and one that does not scans as before. Only offsets and kinds
-- are stored, never text.
CREATE TABLE conversation_guard (
    conversation_key text NOT NULL REFERENCES source_conversations(conversation_key) ON DELETE CASCADE,
    guard_key        text NOT NULL,       -- sha256 of the guard's version, the title and the words
    content_hash     text NOT NULL,       -- source_conversations.content_hash when it was scanned
    guard_version    text NOT NULL,
    findings         jsonb NOT NULL,      -- {"<i>": [[start, end, kind], ...]}: 0 the title, i the i-th word
    PRIMARY KEY (conversation_key, guard_key)
);
CREATE INDEX conversation_guard_key ON conversation_guard (guard_key);
