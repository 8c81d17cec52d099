-- Seed 003's concept memory: concepts with reused ids, experiences (= case records, the raw
-- record one step away through their evidence), the concepts each experience shows, the stated
-- relations between concepts with a weight in [0, 1] and the experiences that support them, and
-- an append-only log of every weight change (which experience moved which link from what to
-- what), so that a weight can always be explained and recomputed. Derived data: `pmem concepts
-- rebuild` makes all of it again from the memories (docs/adr/0021-concepts.md).

CREATE TABLE concepts (
    id               text PRIMARY KEY,           -- derived from the normalised name it was created with
    name             text NOT NULL,
    norm             text NOT NULL UNIQUE,       -- NFKC + case-folded name: never two concepts of one name
    aliases          text[] NOT NULL DEFAULT '{}',  -- other names it goes by (as written)
    keys             text[] NOT NULL DEFAULT '{}',  -- lookup keys: NFKC + case-folded name, aliases, reading
    language         text NOT NULL,              -- ja, en, und
    kind             text NOT NULL DEFAULT 'noun',  -- noun, proper, feeling
    first_memory_id  text,                       -- the experience it was created from
    created_at       timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX concepts_keys ON concepts USING gin (keys);

-- a concept name's embedding (the ja <-> en match: 登山 <-> hiking), per embedding model
CREATE TABLE concept_embeddings (
    concept_id  text NOT NULL REFERENCES concepts(id) ON DELETE CASCADE,
    model       text NOT NULL,
    dim         integer NOT NULL,
    embedding   halfvec NOT NULL CHECK (vector_dims(embedding) = dim),
    PRIMARY KEY (concept_id, model)
);

-- one row per case record whose concepts were extracted, at the revision they were read from
CREATE TABLE experiences (
    memory_id       text PRIMARY KEY,
    revision        integer NOT NULL,
    inputs_hash     text NOT NULL,              -- what the extraction read (record + evidence)
    extractor       text NOT NULL,              -- 'offline' or the model
    prompt_version  text NOT NULL,
    run_id          text,
    extracted_at    timestamptz NOT NULL DEFAULT now()
);

-- concept <-> experience, with the evidence message the concept was found in (if any)
CREATE TABLE experience_links (
    memory_id   text NOT NULL REFERENCES experiences(memory_id) ON DELETE CASCADE,
    concept_id  text NOT NULL REFERENCES concepts(id) ON DELETE CASCADE,
    surface     text NOT NULL,                  -- the form the experience used
    reading     text,                           -- its romanised reading (丹沢 -> tanzawa), a lookup key
    source_key  text,                           -- the ledger message key (evidence), NULL = the record
    PRIMARY KEY (memory_id, concept_id)
);
CREATE INDEX experience_links_concept ON experience_links (concept_id);

-- concept -> concept, one row per (source, target, relation, stated); symmetric relations are
-- stored with source_id < target_id
CREATE TABLE concept_links (
    id           text PRIMARY KEY,              -- derived from (source, target, relation, stated)
    source_id    text NOT NULL REFERENCES concepts(id) ON DELETE CASCADE,
    target_id    text NOT NULL REFERENCES concepts(id) ON DELETE CASCADE,
    relation     text NOT NULL,
    stated       boolean NOT NULL,              -- said in the text, or a model's inference
    weight       double precision NOT NULL CHECK (weight >= 0 AND weight <= 1),
    experiences  text[] NOT NULL DEFAULT '{}',  -- the memory ids that support it
    source_keys  text[] NOT NULL DEFAULT '{}',  -- the evidence messages that state it
    CHECK (source_id <> target_id),
    UNIQUE (source_id, target_id, relation, stated)
);
CREATE INDEX concept_links_source ON concept_links (source_id, weight DESC);
CREATE INDEX concept_links_target ON concept_links (target_id, weight DESC);

-- append-only: which experience moved which link from what to what
CREATE TABLE concept_link_updates (
    seq            bigserial PRIMARY KEY,
    link_id        text NOT NULL,
    memory_id      text NOT NULL,
    revision       integer NOT NULL,
    action         text NOT NULL CHECK (action IN ('strengthen', 'withdraw')),
    weight_before  double precision NOT NULL CHECK (weight_before >= 0 AND weight_before <= 1),
    weight_after   double precision NOT NULL CHECK (weight_after >= 0 AND weight_after <= 1),
    run_id         text,
    created_at     timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX concept_link_updates_link ON concept_link_updates (link_id, seq);
CREATE INDEX concept_link_updates_memory ON concept_link_updates (memory_id);

-- rows are never changed (erasure and `pmem concepts rebuild` may delete them)
CREATE FUNCTION pmem_refuse_link_update_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'concept_link_updates is append-only (UPDATE refused)'
        USING ERRCODE = 'raise_exception', HINT = 'append a new row instead';
END $$;

CREATE TRIGGER concept_link_updates_append_only
    BEFORE UPDATE ON concept_link_updates
    FOR EACH ROW EXECUTE FUNCTION pmem_refuse_link_update_change();
