-- 0026: the Japanese normalised forms of the message index as a later stage of the import
-- (issue 12, item 1; issue 9, item 3; docs/adr/0026-import-pace.md). The import's pass indexes
-- the bigrams, words and stems of each message and queues here every message holding Japanese;
-- store.search.upkeep.IndexUpkeep.sync_forms (the default import after its summary, the backfill,
-- `pmem reindex`) adds SudachiPy's normalised forms to its tokens and removes the row in the same
-- transaction. No foreign key: the stage skips a key whose message left the index.
CREATE TABLE message_forms_pending (
    message_key text PRIMARY KEY
);
