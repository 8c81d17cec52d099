-- 0018: the remote server's OAuth 2.1 authorization server (issue 14). See docs/remote.md and
-- docs/security.md, "The remote server".
-- Tokens stay in `auth_tokens` (0005), one store shared with `pmem api`: an OAuth access token is
-- kind 'access' (15 minutes), a refresh token kind 'refresh' (rotated on every use; a family is
-- every token descended from one consent). Only SHA-256 of any token or code is kept.
ALTER TABLE auth_tokens
    ADD COLUMN resource   text,                              -- RFC 8707: the resource it is for
    ADD COLUMN generation integer NOT NULL DEFAULT 0,        -- refresh: rotations since consent
    ADD COLUMN rotated_at timestamptz;                       -- refresh: when it was exchanged

-- A registered client (Dynamic Client Registration, or `pmem auth token --client NAME`).
-- `name` is what revisions record and what its budget is keyed by.
CREATE TABLE oauth_clients (
    client_id   text PRIMARY KEY,
    name        text NOT NULL UNIQUE CHECK (name ~ '^[A-Za-z0-9][A-Za-z0-9._:@-]{0,63}$'),
    client_name text,                                        -- as the client registered it
    metadata    jsonb NOT NULL,                              -- registered metadata, never the secret
    secret_hash bytea,                                       -- sha256 of its client_secret
    first_party boolean NOT NULL DEFAULT false,              -- made by the owner at the terminal
    created_at  timestamptz NOT NULL DEFAULT now(),
    revoked_at  timestamptz
);

-- Authorization codes: single use, minutes long, bound to the PKCE challenge and redirect URI.
CREATE TABLE oauth_codes (
    code_hash         bytea PRIMARY KEY,
    client_id         text NOT NULL REFERENCES oauth_clients (client_id) ON DELETE CASCADE,
    scopes            text[] NOT NULL,
    code_challenge    text NOT NULL,
    redirect_uri      text NOT NULL,
    redirect_explicit boolean NOT NULL,
    resource          text,
    expires_at        timestamptz NOT NULL,
    created_at        timestamptz NOT NULL DEFAULT now()
);

-- The owner's passphrase for the consent page (Argon2id, `pmem owner set-password`).
CREATE TABLE owner_credentials (
    id            boolean PRIMARY KEY DEFAULT true CHECK (id),
    password_hash text NOT NULL,
    updated_at    timestamptz NOT NULL DEFAULT now()
);

-- Wrong passphrases on the consent page: the time only, never the attempt.
CREATE TABLE consent_failures (
    id bigserial PRIMARY KEY,
    at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX consent_failures_at ON consent_failures (at);
