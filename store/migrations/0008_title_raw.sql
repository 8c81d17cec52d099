-- 0008: a conversation title PostgreSQL `text` cannot hold (a NUL, a lone surrogate) no longer
-- aborts the import (issue 10, item 9). `title` keeps a storable form (each NUL and lone
-- surrogate replaced with U+FFFD, as in message_search); `title_raw` keeps the exact title as
-- UTF-8 bytes (lone surrogates kept, `surrogatepass`), and is NULL whenever `title` is already
-- exact. Ledger.raw_title() reads the exact title back.
ALTER TABLE source_conversations ADD COLUMN title_raw bytea;
