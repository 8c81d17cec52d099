-- The import stores the index rows of new conversations in the ledger's own transaction
-- (store.ledger._copy_index) and queues only the messages it did not index. The per-row trigger
-- queued every message only for that same transaction to take it off the queue again (a third
-- of the server's work on a first import, issue 12): it is skipped while the transaction has set
-- `pmem.inline_index` (set_config(..., true): that transaction only). Every other write keeps it.
DROP TRIGGER source_messages_queue_search ON source_messages;
CREATE TRIGGER source_messages_queue_search
    AFTER INSERT ON source_messages
    FOR EACH ROW WHEN (NEW.channel IN ('person', 'assistant', 'other')
                       AND current_setting('pmem.inline_index', true) IS DISTINCT FROM 'on')
    EXECUTE FUNCTION pmem_queue_message_search();
