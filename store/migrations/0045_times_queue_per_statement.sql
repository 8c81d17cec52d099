-- The times queue (0036) filled once per statement, not once per row (issue 31, ADR 0044): the
-- import's workers COPY tens of thousands of index rows at a time, and the row trigger ran a
-- PL/pgSQL function with its own INSERT ... ON CONFLICT for each (~2.9 s of the server's CPU per
-- 100 MB export, against ~0.3 s for one set-based insert from the statement's new rows). The
-- same rows are queued: every row an INSERT (or COPY) writes; an UPDATE of text or created_at
-- keeps the row trigger (PostgreSQL allows no transition table on a trigger with a column list).
DROP TRIGGER message_search_queue_times ON message_search;

CREATE FUNCTION pmem_queue_message_times_inserted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO message_times_pending (message_key)
        SELECT message_key FROM inserted_rows ON CONFLICT DO NOTHING;
    RETURN NULL;
END $$;

CREATE TRIGGER message_search_queue_times_inserted
    AFTER INSERT ON message_search
    REFERENCING NEW TABLE AS inserted_rows
    FOR EACH STATEMENT EXECUTE FUNCTION pmem_queue_message_times_inserted();

CREATE TRIGGER message_search_queue_times
    AFTER UPDATE OF text, created_at ON message_search
    FOR EACH ROW EXECUTE FUNCTION pmem_queue_message_times();
