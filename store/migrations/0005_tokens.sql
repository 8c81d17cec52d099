-- 0005: one token store (issue 10, point 8; reused by the remote OAuth server, issue 14).
-- A token is opaque and random (256 bits); only its SHA-256 is kept, so a copy of the database
-- does not give access. `name` is the client's name: the API records it on every revision the
-- token writes and keys the client's budget by it (a caller cannot choose another).
-- See docs/security.md, "The local boundary".
CREATE TABLE auth_tokens (
    token_id     text PRIMARY KEY,                  -- 'tok_…', shown to the owner; not a secret
    name         text NOT NULL CHECK (name ~ '^[A-Za-z0-9][A-Za-z0-9._:@-]{0,63}$'),
    kind         text NOT NULL DEFAULT 'api' CHECK (kind IN ('api', 'access', 'refresh')),
    token_hash   bytea NOT NULL UNIQUE,             -- sha256 of the token
    scopes       text[] NOT NULL,
    client_id    text,                              -- an OAuth client (issue 14)
    family_id    text,                              -- a refresh-token family (issue 14)
    created_at   timestamptz NOT NULL DEFAULT now(),
    expires_at   timestamptz,
    last_used_at timestamptz,
    revoked_at   timestamptz
);
CREATE INDEX auth_tokens_name ON auth_tokens (name) WHERE revoked_at IS NULL;
CREATE INDEX auth_tokens_family ON auth_tokens (family_id) WHERE family_id IS NOT NULL;
