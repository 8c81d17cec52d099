-- Issue 27, item 4: every line of a month summary (and of the profile) carries what it is drawn
-- from: a JSON array, one element per line, {"memory_ids": [...], "message_keys": [...]}; the
-- store checks that every cited memory and message exists (docs/adr/0020-summaries.md).
ALTER TABLE month_summaries ADD COLUMN citations jsonb NOT NULL DEFAULT '[]';
ALTER TABLE profile_versions ADD COLUMN citations jsonb NOT NULL DEFAULT '[]';
