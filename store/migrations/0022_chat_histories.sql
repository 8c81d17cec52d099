-- 0022: chat histories (LINE, Telegram, a person's own JSONL logs; issue 17). Their messages have
-- a fifth channel, `other`: another human speaker's words (third-party data). They are kept in the
-- ledger byte-exact and searchable by recall like the person's and the assistant's, never drafted
-- unless the owner asks (`pmem backfill --include-others`), and erasable by speaker
-- (`pmem forget --speaker NAME`). See docs/adr/0022-chat-histories.md.

ALTER TABLE source_messages DROP CONSTRAINT source_messages_channel_check;
ALTER TABLE source_messages ADD CONSTRAINT source_messages_channel_check
    CHECK (channel IN ('person', 'assistant', 'tool', 'machinery', 'other'));

-- recall indexes other speakers' messages too (the queue function already skips a forgotten
-- conversation)
DROP TRIGGER source_messages_queue_search ON source_messages;
CREATE TRIGGER source_messages_queue_search
    AFTER INSERT ON source_messages
    FOR EACH ROW WHEN (NEW.channel IN ('person', 'assistant', 'other'))
    EXECUTE FUNCTION pmem_queue_message_search();
