-- 0044: OAuth to the letter and the internet-facing limits (issue 29, items 4 and 5). See
-- docs/security.md, "The remote server".
-- A used authorization code is kept (hash only) until it expires, with the family its tokens
-- belong to: a second exchange of the code revokes that family (RFC 6749 §4.1.2).
ALTER TABLE oauth_codes
    ADD COLUMN used_at   timestamptz,
    ADD COLUMN family_id text;

-- A rotated refresh token keeps its successor pair (access + refresh) sealed with a key derived
-- from the rotated token itself (which only the client holds; the table has its SHA-256 only),
-- so a replay inside the grace window is answered with the same successor, never a new chain.
ALTER TABLE auth_tokens
    ADD COLUMN successor_sealed bytea;

-- The consent throttle counts wrong passphrases per source address and per client.
ALTER TABLE consent_failures
    ADD COLUMN address   text,
    ADD COLUMN client_id text;
CREATE INDEX consent_failures_address ON consent_failures (address, at);
CREATE INDEX consent_failures_client ON consent_failures (client_id, at);

-- Step-up: a call beyond the grant marks the family's live refresh token; its next refresh
-- (within minutes) is refused without revoking anything, so a client that refreshes before it
-- re-authorizes (the TypeScript SDK) goes to the consent page instead of looping on a 403.
ALTER TABLE auth_tokens
    ADD COLUMN step_up_at timestamptz;
