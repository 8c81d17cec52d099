-- Seed 001's hierarchy: one summary per month of the person's calendar and one global profile.
-- Derived data (the source stays the ledger and the memories); insert-only: every rebuild is a
-- new version and the old ones are kept (the seed's failure: one summary overwritten again and
-- again until the details of earlier months faded).

CREATE TABLE month_summaries (
    month          text NOT NULL CHECK (month ~ '^[0-9]{4}-[0-9]{2}$'),
    version        integer NOT NULL CHECK (version >= 1),
    summary        text NOT NULL,
    sentiment      double precision NOT NULL CHECK (sentiment BETWEEN -1 AND 1),
    keywords       text[] NOT NULL DEFAULT '{}',
    memory_ids     text[] NOT NULL DEFAULT '{}',
    message_keys   text[] NOT NULL DEFAULT '{}',
    inputs_hash    text NOT NULL,
    model          text NOT NULL,
    prompt_version text NOT NULL,
    time_zone      text NOT NULL,
    run_id         text,
    created_at     timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (month, version)
);

CREATE TABLE profile_versions (
    version        integer PRIMARY KEY CHECK (version >= 1),
    profile        text NOT NULL,
    months         text[] NOT NULL DEFAULT '{}',
    memory_ids     text[] NOT NULL DEFAULT '{}',
    inputs_hash    text NOT NULL,
    model          text NOT NULL,
    prompt_version text NOT NULL,
    run_id         text,
    created_at     timestamptz NOT NULL DEFAULT now()
);
