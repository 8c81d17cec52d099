-- Seed 004's incremental re-index (`pmem watch`, `pmem reindex --changed`, the Prefect deployment
-- watch/every-10-minutes): what each watched file looked like at the last pass, so that the next
-- pass re-imports only the files whose size, mtime or content hash changed, and reads a file that
-- only grew (its old bytes hash the same) from where the last pass stopped. Bookkeeping only:
-- paths, sizes, hashes and counts, never message text (the ledger holds that).

CREATE TABLE watched_files (
    path           text PRIMARY KEY,                 -- absolute path (storable form)
    root           text NOT NULL,                    -- the watched PATH it was found under
    source         text,                             -- its importer; NULL: not a format pmem reads
    size           bigint NOT NULL CHECK (size >= 0),
    mtime_ns       bigint NOT NULL,
    content_hash   text NOT NULL,                    -- sha256 of bytes [0, size) at the last pass
    read_to        bigint NOT NULL DEFAULT 0 CHECK (read_to >= 0),  -- bytes imported (whole lines)
    lines_read     bigint NOT NULL DEFAULT 0 CHECK (lines_read >= 0),  -- '\n' in [0, read_to)
    imports        integer NOT NULL DEFAULT 0,       -- passes that imported (part of) it
    first_seen_at  timestamptz NOT NULL DEFAULT now(),
    checked_at     timestamptz NOT NULL DEFAULT now(),
    changed_at     timestamptz NOT NULL DEFAULT now(),
    gone_at        timestamptz                       -- not found at the last pass (the ledger keeps
                                                     -- what it imported)
);
CREATE INDEX watched_files_root ON watched_files (root);

CREATE TABLE watch_passes (
    pass_id     text PRIMARY KEY,
    trigger     text NOT NULL,                       -- watch | reindex | schedule
    started_at  timestamptz NOT NULL DEFAULT now(),
    finished_at timestamptz,
    status      text NOT NULL DEFAULT 'running',     -- running | complete | failed
    stats       jsonb NOT NULL DEFAULT '{}'::jsonb   -- counts only
);
