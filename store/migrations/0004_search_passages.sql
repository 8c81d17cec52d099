-- 0004: natural questions (issue 9). Derived and rebuildable, like 0003.

-- The token scheme the message index and the memory projections were built with
-- (core.textsearch.INDEX_VERSION). No row, or an older number: store.search.upkeep re-tokenises
-- everything on the next sync_messages (version 2 adds English stems and Japanese normal forms).
CREATE TABLE search_index_version (
    version integer NOT NULL
);

-- A long message is embedded in passages: passage 0 is message_embeddings' row, passages 1..n
-- (core.textsearch.passages) are here; recall takes the best passage's similarity.
CREATE TABLE message_passage_embeddings (
    message_key text NOT NULL REFERENCES message_search(message_key) ON DELETE CASCADE,
    passage     integer NOT NULL CHECK (passage >= 1),
    model       text NOT NULL,
    dim         integer NOT NULL CHECK (dim BETWEEN 1 AND 4000),
    embedding   halfvec NOT NULL CHECK (vector_dims(embedding) = dim),
    updated_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (message_key, model, passage)
);
CREATE INDEX message_passage_embeddings_model ON message_passage_embeddings (model, dim);
