-- 0003: hybrid search and recall (issue 6). Everything here is derived and rebuildable:
-- no revision, no ledger data. See docs/adr/0005-hybrid-search.md.

-- ------------------------------------------------------------------ memories: trigram
-- Titles and aliases, for pg_trgm (partial titles, aliases, typos; 3+ characters). Written by
-- MemoryStore._project beside index_text and tokens. A GiST index, not GIN: the trigram list is
-- a nearest-neighbour scan ordered by word-similarity distance (`q <<-> head`), which only GiST
-- can serve; GIN has to recheck every row sharing a trigram (200 ms for a common word in 100k
-- memories, against 1-20 ms here). See docs/adr/0005-hybrid-search.md.
ALTER TABLE search_projections ADD COLUMN head text NOT NULL DEFAULT '';
UPDATE search_projections p
   SET head = concat_ws(' ', m.title, nullif(array_to_string(m.aliases, ' '), ''))
  FROM memories m
 WHERE m.id = p.memory_id;
CREATE INDEX search_projections_head_trgm ON search_projections
    USING gist (head gist_trgm_ops (siglen = 256));  -- longer signatures: far fewer pages per KNN scan

-- ------------------------------------------------------------------ memories: vectors
-- One row per memory and embedding model; the model and its dimension are recorded on every
-- row. `text_hash` is the md5 of the text that was embedded: a changed record re-embeds.
-- The HNSW index is one partial expression index per (model, dim), created by code after
-- bulk loads (store.search.SearchStore.ensure_vector_index).
CREATE TABLE memory_embeddings (
    memory_id  text NOT NULL REFERENCES search_projections(memory_id) ON DELETE CASCADE,
    model      text NOT NULL,
    dim        integer NOT NULL CHECK (dim BETWEEN 1 AND 4000),
    embedding  halfvec NOT NULL CHECK (vector_dims(embedding) = dim),
    text_hash  text NOT NULL,
    updated_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (memory_id, model)
);
CREATE INDEX memory_embeddings_model ON memory_embeddings (model, dim);

-- ------------------------------------------------------------------ raw messages: recall
-- The person's and the assistant's messages as searchable text. source_messages.body stays
-- byte-exact (bytea); here NUL and lone surrogates are replaced with U+FFFD. Tokens are the
-- same CJK unigram + bigram / word tokens as the memory projection (core.textsearch).
CREATE TABLE message_search (
    message_key      text PRIMARY KEY REFERENCES source_messages(message_key) ON DELETE CASCADE,
    conversation_key text NOT NULL,
    role             text NOT NULL,
    created_at       timestamptz,
    text             text NOT NULL,
    tokens           tsvector NOT NULL
);
CREATE INDEX message_search_created ON message_search (created_at);
CREATE INDEX message_search_tokens ON message_search USING gin (tokens);

-- Messages not yet in message_search. A trigger queues every new person / assistant message,
-- so catching up is cheap to detect (store.search.SearchStore.sync_messages).
CREATE TABLE message_search_pending (
    message_key text PRIMARY KEY
);

CREATE FUNCTION pmem_queue_message_search() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO message_search_pending (message_key) VALUES (NEW.message_key)
        ON CONFLICT DO NOTHING;
    RETURN NEW;
END $$;

CREATE TRIGGER source_messages_queue_search
    AFTER INSERT ON source_messages
    FOR EACH ROW WHEN (NEW.channel IN ('person', 'assistant'))
    EXECUTE FUNCTION pmem_queue_message_search();

INSERT INTO message_search_pending (message_key)
SELECT message_key FROM source_messages WHERE channel IN ('person', 'assistant');

-- Message vectors, for recall's fallback. Only a local embedder writes here: raw message text
-- never goes to a remote embedding provider.
CREATE TABLE message_embeddings (
    message_key text NOT NULL REFERENCES message_search(message_key) ON DELETE CASCADE,
    model       text NOT NULL,
    dim         integer NOT NULL CHECK (dim BETWEEN 1 AND 4000),
    embedding   halfvec NOT NULL CHECK (vector_dims(embedding) = dim),
    updated_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (message_key, model)
);
CREATE INDEX message_embeddings_model ON message_embeddings (model, dim);
