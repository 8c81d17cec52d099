-- 0017: where a message went. Recall names, for every hit, the memories drafted from its
-- conversation, and `pmem show <message or conversation key>` lists the memories citing it:
-- both look evidence up by the message it quotes.
CREATE INDEX IF NOT EXISTS evidence_source_key ON evidence (source_key);
