"""The remote server's OAuth state in PostgreSQL: clients, authorization codes, refresh-token
rotation with reuse detection, the owner's passphrase and the consent page's failure record.

Tokens live in the one token store (``store/tokens.py``, table ``auth_tokens``): an access token
is kind ``access`` (15 minutes), a refresh token kind ``refresh``. Every token from one consent
shares a ``family_id``. A refresh token is exchanged once: the exchange marks it ``rotated_at``
and issues the next generation. Presenting it again is a replay: the immediately previous
generation is accepted within a grace window (clients refresh in parallel, or retry a refresh
whose answer they lost), and any other replay revokes the whole family. Codes, tokens and client
secrets are stored only as SHA-256; the passphrase as an Argon2id hash. Nothing here logs.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import re
import secrets
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError, VerifyMismatchError
from psycopg.rows import dict_row
from psycopg.types.json import Jsonb

from core.errors import ConfigError
from store.db import Database
from store.tokens import IssuedToken, TokenStore, check_scopes

ACCESS_SECONDS = 900  # 15 minutes (expires_in <= 900)
#: `PMEM_ACCESS_TOKEN_SECONDS` may only shorten the lifetime (for tests of refresh): 5 to 900 s
ACCESS_SECONDS_MIN = 5


def access_seconds() -> int:
    """The access tokens' lifetime: ``ACCESS_SECONDS`` unless `PMEM_ACCESS_TOKEN_SECONDS` asks
    for less (never more, never under ``ACCESS_SECONDS_MIN``; a value that is not a whole
    number is refused)."""
    raw = os.environ.get("PMEM_ACCESS_TOKEN_SECONDS", "").strip()
    if not raw:
        return ACCESS_SECONDS
    if not raw.isdigit():
        from core.errors import ConfigError

        raise ConfigError(
            f"PMEM_ACCESS_TOKEN_SECONDS must be a whole number of seconds, not {raw!r}"
        )
    return max(ACCESS_SECONDS_MIN, min(ACCESS_SECONDS, int(raw)))


REFRESH_UNUSED_DAYS = 365  # a refresh token lapses after a year unused
CODE_SECONDS = 300
_SLUG = re.compile(r"[^A-Za-z0-9]+")
#: Argon2id with argon2-cffi's default parameters (RFC 9106, low-memory profile); tests swap in
#: the cheapest profile, since each hash costs ~0.1 s (seconds on a loaded machine)
PASSWORD_HASHER = PasswordHasher()


def sha256(value: str) -> bytes:
    return hashlib.sha256(value.encode("utf-8")).digest()


class InvalidGrant(Exception):
    """A code or refresh token that is unknown, used, expired, revoked or not the client's."""


class RefreshReuse(InvalidGrant):
    """An old refresh token replayed outside the grace window: its family is revoked."""

    def __init__(self, family_id: str, revoked: int) -> None:
        super().__init__("refresh token reused")
        self.family_id = family_id
        self.revoked = revoked


@dataclass(frozen=True)
class Client:
    client_id: str
    name: str  # recorded on revisions, keys the budget
    client_name: str | None
    metadata: dict[str, Any]
    secret_hash: bytes | None
    first_party: bool
    created_at: datetime
    revoked_at: datetime | None

    def secret_matches(self, secret: str | None) -> bool:
        if self.secret_hash is None or not secret:
            return False
        return hmac.compare_digest(self.secret_hash, sha256(secret))

    def as_json(self) -> dict[str, Any]:
        return {
            "client_id": self.client_id,
            "name": self.name,
            "client_name": self.client_name,
            "redirect_uris": self.metadata.get("redirect_uris") or [],
            "first_party": self.first_party,
            "created_at": self.created_at,
            "revoked_at": self.revoked_at,
        }


def _client(row: dict[str, Any]) -> Client:
    return Client(
        row["client_id"],
        row["name"],
        row["client_name"],
        row["metadata"],
        bytes(row["secret_hash"]) if row["secret_hash"] is not None else None,
        row["first_party"],
        row["created_at"],
        row["revoked_at"],
    )


def client_label(client_name: str | None, client_id: str) -> str:
    """The name a registered client's revisions and budget carry: ``claude-ai:1a2b3c4d``."""
    slug = _SLUG.sub("-", (client_name or "").strip()).strip("-").lower()[:24] or "client"
    return f"{slug}:{client_id.replace('-', '')[:8]}"


class OAuthStore:
    def __init__(self, db: Database) -> None:
        self.db = db
        self.tokens = TokenStore(db)

    # ---------------------------------------------------------------- clients

    def register_client(
        self,
        client_id: str,
        metadata: dict[str, Any],
        *,
        secret: str | None = None,
        name: str | None = None,
        first_party: bool = False,
    ) -> Client:
        client_name = metadata.get("client_name")
        label = name or client_label(client_name, client_id)
        meta = {k: v for k, v in metadata.items() if k not in ("client_secret",)}
        with self.db.connection() as conn, conn.cursor(row_factory=dict_row) as cur:
            cur.execute(
                """INSERT INTO oauth_clients (client_id, name, client_name, metadata, secret_hash, first_party)
                   VALUES (%s, %s, %s, %s, %s, %s) RETURNING *""",
                (
                    client_id,
                    label,
                    client_name,
                    Jsonb(meta),
                    sha256(secret) if secret else None,
                    first_party,
                ),
            )
            row = cur.fetchone()
            conn.commit()
        assert row is not None
        return _client(row)

    def get_client(self, client_id: str) -> Client | None:
        with self.db.connection() as conn, conn.cursor(row_factory=dict_row) as cur:
            cur.execute("SELECT * FROM oauth_clients WHERE client_id = %s", (client_id,))
            row = cur.fetchone()
        return _client(row) if row else None

    def clients(self, *, include_revoked: bool = False) -> list[Client]:
        with self.db.connection() as conn, conn.cursor(row_factory=dict_row) as cur:
            cur.execute(
                "SELECT * FROM oauth_clients WHERE %s OR revoked_at IS NULL ORDER BY created_at, client_id",
                (include_revoked,),
            )
            return [_client(r) for r in cur.fetchall()]

    def revoke_client(self, client_id_or_name: str) -> tuple[list[str], int]:
        """Revoke a client (by id or name) and every token it holds: (client ids, tokens revoked)."""
        with self.db.connection() as conn:
            ids = [
                r[0]
                for r in conn.execute(
                    """UPDATE oauth_clients SET revoked_at = now()
                   WHERE revoked_at IS NULL AND (client_id = %s OR name = %s) RETURNING client_id""",
                    (client_id_or_name, client_id_or_name),
                ).fetchall()
            ]
            n = 0
            if ids:
                n = conn.execute(
                    "UPDATE auth_tokens SET revoked_at = now() WHERE revoked_at IS NULL AND client_id = ANY(%s)",
                    (ids,),
                ).rowcount
            conn.commit()
        return ids, n

    # ---------------------------------------------------------------- authorization codes

    def save_code(
        self,
        client_id: str,
        scopes: list[str],
        code_challenge: str,
        redirect_uri: str,
        redirect_explicit: bool,
        resource: str | None,
    ) -> tuple[str, float]:
        """A new single-use code (shown once): (code, expires_at as a Unix time)."""
        code = secrets.token_urlsafe(32)
        expires = datetime.now(UTC) + timedelta(seconds=CODE_SECONDS)
        with self.db.connection() as conn:
            conn.execute(
                """INSERT INTO oauth_codes (code_hash, client_id, scopes, code_challenge, redirect_uri,
                                            redirect_explicit, resource, expires_at)
                   VALUES (%s, %s, %s, %s, %s, %s, %s, %s)""",
                (
                    sha256(code),
                    client_id,
                    list(check_scopes(scopes)),
                    code_challenge,
                    redirect_uri,
                    redirect_explicit,
                    resource,
                    expires,
                ),
            )
            conn.execute("DELETE FROM oauth_codes WHERE expires_at < now() - interval '1 day'")
            conn.commit()
        return code, expires.timestamp()

    def load_code(self, code: str) -> dict[str, Any] | None:
        with self.db.connection() as conn, conn.cursor(row_factory=dict_row) as cur:
            cur.execute("SELECT * FROM oauth_codes WHERE code_hash = %s", (sha256(code),))
            return cur.fetchone()

    def take_code(self, code: str, client_id: str) -> dict[str, Any]:
        """Consume a code (single use, unexpired, the client's); InvalidGrant otherwise."""
        with self.db.connection() as conn, conn.cursor(row_factory=dict_row) as cur:
            cur.execute(
                "DELETE FROM oauth_codes WHERE code_hash = %s RETURNING *, expires_at > now() AS live",
                (sha256(code),),
            )
            row = cur.fetchone()
            conn.commit()
        if row is None or not row["live"] or row["client_id"] != client_id:
            raise InvalidGrant("authorization code unknown, used or expired")
        return row

    # ---------------------------------------------------------------- tokens

    def issue(
        self,
        client: Client,
        scopes: list[str] | tuple[str, ...],
        resource: str | None,
        *,
        refresh: bool = True,
        family_id: str | None = None,
        generation: int = 0,
        conn: Any = None,
        refresh_scopes: list[str] | tuple[str, ...] | None = None,
    ) -> tuple[IssuedToken, IssuedToken | None]:
        """An access token (15 minutes) and, with ``refresh``, the next refresh token of the
        family (a new family when ``family_id`` is None)."""
        family = family_id or "fam_" + secrets.token_hex(8)
        now = datetime.now(UTC)
        own = conn is None
        ctx = self.db.connection() if own else None
        c = ctx.__enter__() if ctx is not None else conn
        try:
            access = self.tokens.create(
                client.name,
                tuple(scopes),
                kind="access",
                expires_at=now + timedelta(seconds=access_seconds()),
                client_id=client.client_id,
                family_id=family,
                resource=resource,
                conn=c,
            )
            ref = None
            if refresh:
                ref = self.tokens.create(
                    client.name,
                    tuple(refresh_scopes or scopes),
                    kind="refresh",
                    expires_at=now + timedelta(days=REFRESH_UNUSED_DAYS),
                    client_id=client.client_id,
                    family_id=family,
                    resource=resource,
                    generation=generation,
                    conn=c,
                )
            if own:
                c.commit()
        finally:
            if ctx is not None:
                ctx.__exit__(None, None, None)
        return access, ref

    def load_refresh(self, token: str) -> dict[str, Any] | None:
        """The refresh token's row (also when rotated; None when unknown)."""
        with self.db.connection() as conn, conn.cursor(row_factory=dict_row) as cur:
            cur.execute(
                """SELECT token_id, name, client_id, family_id, scopes, resource, generation, rotated_at,
                          revoked_at, expires_at, expires_at < now() AS expired
                   FROM auth_tokens WHERE token_hash = %s AND kind = 'refresh'""",
                (sha256(token),),
            )
            return cur.fetchone()

    def rotate(
        self,
        token: str,
        client: Client,
        scopes: list[str] | None,
        *,
        grace_seconds: float,
    ) -> tuple[IssuedToken, IssuedToken]:
        """Exchange a refresh token for a new access token and the next refresh token.

        A live token is marked rotated. The immediately previous generation within
        ``grace_seconds`` of its rotation gets a fresh pair too (parallel refreshes, a lost
        answer). Any other replay revokes the family (``RefreshReuse``)."""
        with self.db.connection() as conn, conn.cursor(row_factory=dict_row) as cur:
            cur.execute(
                """SELECT token_id, client_id, family_id, scopes, resource, generation, rotated_at,
                          revoked_at, expires_at < now() AS expired,
                          extract(epoch FROM now() - rotated_at) AS since_rotation
                   FROM auth_tokens WHERE token_hash = %s AND kind = 'refresh' FOR UPDATE""",
                (sha256(token),),
            )
            row = cur.fetchone()
            if row is None or row["client_id"] != client.client_id:
                conn.rollback()
                raise InvalidGrant("refresh token unknown")
            if row["revoked_at"] is not None or row["expired"]:
                conn.rollback()
                raise InvalidGrant("refresh token revoked or expired")
            granted = list(row["scopes"])
            wanted = [s for s in (scopes or granted) if s in granted]
            if not wanted:
                conn.rollback()
                raise InvalidGrant("no granted scope requested")
            family = row["family_id"]
            if row["rotated_at"] is None:
                cur.execute(
                    "UPDATE auth_tokens SET rotated_at = now(), last_used_at = now() WHERE token_id = %s",
                    (row["token_id"],),
                )
            else:
                cur.execute(
                    "SELECT max(generation) AS g FROM auth_tokens WHERE family_id = %s AND kind = 'refresh'",
                    (family,),
                )
                latest = cur.fetchone()["g"]  # type: ignore[index]
                in_grace = float(row["since_rotation"]) <= grace_seconds
                if not (in_grace and row["generation"] == latest - 1):
                    n = cur.execute(
                        "UPDATE auth_tokens SET revoked_at = now() WHERE family_id = %s AND revoked_at IS NULL",
                        (family,),
                    ).rowcount
                    conn.commit()
                    raise RefreshReuse(family, n)
            access, refresh = self.issue(
                client,
                wanted,
                row["resource"],
                family_id=family,
                generation=row["generation"] + 1,
                conn=conn,
                refresh_scopes=granted,
            )
            conn.commit()
        assert refresh is not None
        return access, refresh

    def revoke_token(self, token: str) -> int:
        """Revoke a token and its whole family (RFC 7009); the number of tokens revoked."""
        with self.db.connection() as conn:
            row = conn.execute(
                "SELECT token_id, family_id FROM auth_tokens WHERE token_hash = %s",
                (sha256(token),),
            ).fetchone()
            if row is None:
                return 0
            n = conn.execute(
                """UPDATE auth_tokens SET revoked_at = now()
                   WHERE revoked_at IS NULL AND (token_id = %s OR (family_id IS NOT NULL AND family_id = %s))""",
                (row[0], row[1]),
            ).rowcount
            conn.commit()
        return n

    # ---------------------------------------------------------------- the owner's passphrase

    def set_owner_password(self, password: str) -> None:
        if len(password) < 8:
            raise ConfigError("the owner passphrase needs at least 8 characters")
        digest = PASSWORD_HASHER.hash(password)  # Argon2id
        with self.db.connection() as conn:
            conn.execute(
                """INSERT INTO owner_credentials (id, password_hash) VALUES (true, %s)
                   ON CONFLICT (id) DO UPDATE SET password_hash = EXCLUDED.password_hash, updated_at = now()""",
                (digest,),
            )
            conn.commit()

    def has_owner_password(self) -> bool:
        with self.db.connection() as conn:
            return conn.execute("SELECT 1 FROM owner_credentials").fetchone() is not None

    def check_owner_password(self, password: str) -> bool:
        with self.db.connection() as conn:
            row = conn.execute("SELECT password_hash FROM owner_credentials").fetchone()
        if row is None or not password:
            return False
        hasher = PASSWORD_HASHER
        try:
            hasher.verify(row[0], password)
        except (VerifyMismatchError, VerificationError, InvalidHashError):
            return False
        if hasher.check_needs_rehash(row[0]):
            self.set_owner_password(password)
        return True

    # ---------------------------------------------------------------- consent throttle

    def record_failure(self) -> None:
        with self.db.connection() as conn:
            conn.execute("INSERT INTO consent_failures DEFAULT VALUES")
            conn.execute("DELETE FROM consent_failures WHERE at < now() - interval '1 day'")
            conn.commit()

    def failures(self, window_seconds: float) -> tuple[int, float | None]:
        """Wrong passphrases in the last ``window_seconds``: (count, seconds since the last)."""
        with self.db.connection() as conn:
            row = conn.execute(
                """SELECT count(*), extract(epoch FROM now() - max(at)) FROM consent_failures
                   WHERE at > now() - make_interval(secs => %s)""",
                (window_seconds,),
            ).fetchone()
        assert row is not None
        return int(row[0]), (float(row[1]) if row[1] is not None else None)
