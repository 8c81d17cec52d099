"""The remote server's OAuth state in PostgreSQL: clients, authorization codes, refresh-token
rotation with reuse detection, the owner's passphrase and the consent page's failure record.

Tokens live in the one token store (``store/tokens.py``, table ``auth_tokens``): an access token
is kind ``access`` (15 minutes), a refresh token kind ``refresh``. Every token from one consent
shares a ``family_id``. A refresh token is exchanged once: the exchange marks it ``rotated_at``,
issues the next generation and keeps that successor pair sealed (AES-GCM) under a key derived
from the exchanged token, which only its holder has. Presenting it again is a replay: within a
grace window, while the successor is still unused, the replay is answered with *the same*
successor (clients refresh in parallel, or retry a refresh whose answer they lost; no second
chain is minted); any other replay, and any replay once the successor was used, revokes the
whole family. A code is single use: its second exchange revokes the family the first one made
(RFC 6749 §4.1.2). Codes, tokens and client secrets are stored only as SHA-256; the passphrase as
an Argon2id hash. Nothing here logs.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import re
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError, VerifyMismatchError
from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
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
STEP_UP_SECONDS = 600  # how long a step-up challenge keeps the family's refresh refused
MIN_PASSPHRASE = 12  # characters; the consent throttle assumes a passphrase this long at least
_SLUG = re.compile(r"[^A-Za-z0-9]+")
#: Argon2id with argon2-cffi's default parameters (RFC 9106, low-memory profile); tests swap in
#: the cheapest profile, since each hash costs ~0.1 s (seconds on a loaded machine)
PASSWORD_HASHER = PasswordHasher()


def sha256(value: str) -> bytes:
    return hashlib.sha256(value.encode("utf-8")).digest()


class InvalidGrant(Exception):
    """A code or refresh token that is unknown, used, expired, revoked or not the client's."""


class CodeReuse(InvalidGrant):
    """A used authorization code presented again: the tokens it produced are revoked."""

    def __init__(self, revoked: int) -> None:
        super().__init__("authorization code reused")
        self.revoked = revoked


@dataclass(frozen=True)
class Exchanged:
    """What /token answers: the pair, its scopes and the access token's remaining seconds."""

    access: str
    refresh: str | None
    scopes: tuple[str, ...]
    expires_in: int


def _seal_key(token: str) -> bytes:
    # domain-separated from the stored SHA-256 of the token, which must not unseal
    return hashlib.sha256(b"pmem successor\x00" + token.encode("utf-8")).digest()


def seal(token: str, value: dict[str, Any]) -> bytes:
    nonce = secrets.token_bytes(12)
    return nonce + AESGCM(_seal_key(token)).encrypt(nonce, json.dumps(value).encode(), None)


def unseal(token: str, sealed: bytes) -> dict[str, Any] | None:
    try:
        plain = AESGCM(_seal_key(token)).decrypt(sealed[:12], sealed[12:], None)
    except (InvalidTag, ValueError):
        return None
    value = json.loads(plain)
    return value if isinstance(value, dict) else None


class StepUpPending(InvalidGrant):
    """The family was told a call needs a wider grant: refresh refused, nothing revoked."""

    def __init__(self) -> None:
        super().__init__("a call needed a scope beyond this grant: authorize again")


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
        """The code's row, used or not (``used_at``)."""
        with self.db.connection() as conn, conn.cursor(row_factory=dict_row) as cur:
            cur.execute("SELECT * FROM oauth_codes WHERE code_hash = %s", (sha256(code),))
            return cur.fetchone()

    def revoke_reused_code(self, code: str) -> int | None:
        """A used code presented again: revoke the family its first exchange made; the number of
        tokens revoked, or None when the code was never used (or is unknown)."""
        with self.db.connection() as conn:
            row = conn.execute(
                "SELECT family_id FROM oauth_codes WHERE code_hash = %s AND used_at IS NOT NULL",
                (sha256(code),),
            ).fetchone()
            if row is None:
                return None
            n = 0
            if row[0] is not None:
                n = conn.execute(
                    "UPDATE auth_tokens SET revoked_at = now() WHERE family_id = %s AND revoked_at IS NULL",
                    (row[0],),
                ).rowcount
            conn.commit()
        return n

    def redeem_code(self, code: str, client: Client) -> Exchanged:
        """Exchange a code (single use, unexpired, the client's) for the first pair of a new
        family, in one transaction; a code used before revokes that family (``CodeReuse``)."""
        with self.db.connection() as conn, conn.cursor(row_factory=dict_row) as cur:
            cur.execute(
                "SELECT *, expires_at > now() AS live FROM oauth_codes WHERE code_hash = %s FOR UPDATE",
                (sha256(code),),
            )
            row = cur.fetchone()
            if row is not None and row["used_at"] is not None:
                n = 0
                if row["family_id"] is not None:
                    n = cur.execute(
                        "UPDATE auth_tokens SET revoked_at = now() WHERE family_id = %s AND revoked_at IS NULL",
                        (row["family_id"],),
                    ).rowcount
                conn.commit()
                raise CodeReuse(n)
            if row is None or not row["live"] or row["client_id"] != client.client_id:
                conn.rollback()
                raise InvalidGrant("authorization code unknown, used or expired")
            family = "fam_" + secrets.token_hex(8)
            access, refresh = self.issue(
                client, row["scopes"], row["resource"], family_id=family, conn=conn
            )
            cur.execute(
                "UPDATE oauth_codes SET used_at = now(), family_id = %s WHERE code_hash = %s",
                (family, row["code_hash"]),
            )
            conn.commit()
        return Exchanged(
            access.token,
            refresh.token if refresh else None,
            tuple(row["scopes"]),
            access_seconds(),
        )

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
        default_resource: str | None = None,
    ) -> Exchanged:
        """Exchange a refresh token for a new access token and the next refresh token.
        ``default_resource``: the audience for a grant made before tokens carried one (a
        first-party client's stay unbound: they are the owner's).

        A live token is marked rotated and its successor pair kept sealed under a key derived
        from it. Presented again within ``grace_seconds`` of its rotation while that successor
        is unused, it is answered with the same successor (idempotent). Any other replay, or one
        after the successor was used, revokes the family (``RefreshReuse``)."""
        with self.db.connection() as conn, conn.cursor(row_factory=dict_row) as cur:
            cur.execute(
                """SELECT token_id, client_id, family_id, scopes, resource, generation, rotated_at,
                          revoked_at, successor_sealed, expires_at < now() AS expired,
                          extract(epoch FROM now() - rotated_at) AS since_rotation,
                          step_up_at > now() - make_interval(secs => %s) AS step_up
                   FROM auth_tokens WHERE token_hash = %s AND kind = 'refresh' FOR UPDATE""",
                (STEP_UP_SECONDS, sha256(token)),
            )
            row = cur.fetchone()
            if row is None or row["client_id"] != client.client_id:
                conn.rollback()
                raise InvalidGrant("refresh token unknown")
            if row["revoked_at"] is not None or row["expired"]:
                conn.rollback()
                raise InvalidGrant("refresh token revoked or expired")
            if row["step_up"] and row["rotated_at"] is None:
                conn.rollback()
                raise StepUpPending
            family = row["family_id"]
            if row["rotated_at"] is not None:
                again = self._replay(cur, row, token, grace_seconds)
                if again is None:
                    n = cur.execute(
                        "UPDATE auth_tokens SET revoked_at = now() WHERE family_id = %s AND revoked_at IS NULL",
                        (family,),
                    ).rowcount
                    conn.commit()
                    raise RefreshReuse(family, n)
                conn.commit()
                return again
            granted = list(row["scopes"])
            wanted = [s for s in (scopes or granted) if s in granted]
            if not wanted:
                conn.rollback()
                raise InvalidGrant("no granted scope requested")
            access, refresh = self.issue(
                client,
                wanted,
                row["resource"]
                if row["resource"] is not None or client.first_party
                else default_resource,
                family_id=family,
                generation=row["generation"] + 1,
                conn=conn,
                refresh_scopes=granted,
            )
            assert refresh is not None and access.info.expires_at is not None
            sealed = seal(
                token,
                {
                    "access": access.token,
                    "refresh": refresh.token,
                    "scopes": list(access.info.scopes),
                    "access_expires": access.info.expires_at.timestamp(),
                    "successor": refresh.info.token_id,
                },
            )
            cur.execute(
                """UPDATE auth_tokens SET rotated_at = now(), last_used_at = now(),
                          successor_sealed = %s WHERE token_id = %s""",
                (sealed, row["token_id"]),
            )
            # the earlier generations' sealed successors are of no use any more
            cur.execute(
                """UPDATE auth_tokens SET successor_sealed = NULL
                   WHERE family_id = %s AND generation < %s AND successor_sealed IS NOT NULL""",
                (family, row["generation"]),
            )
            conn.commit()
        return Exchanged(access.token, refresh.token, tuple(access.info.scopes), access_seconds())

    @staticmethod
    def _replay(
        cur: Any, row: dict[str, Any], token: str, grace_seconds: float
    ) -> Exchanged | None:
        """The same successor for a replay inside the grace window while it is unused; None
        when the replay must revoke the family."""
        if float(row["since_rotation"]) > grace_seconds or row["successor_sealed"] is None:
            return None
        kept = unseal(token, bytes(row["successor_sealed"]))
        if kept is None:
            return None
        cur.execute(
            """SELECT rotated_at IS NULL AND revoked_at IS NULL AS unused FROM auth_tokens
               WHERE token_id = %s AND family_id = %s""",
            (kept["successor"], row["family_id"]),
        )
        succ = cur.fetchone()
        if succ is None or not succ["unused"]:
            return None
        left = int(float(kept["access_expires"]) - datetime.now(UTC).timestamp())
        if left <= 0:
            return None
        return Exchanged(kept["access"], kept["refresh"], tuple(kept["scopes"]), left)

    def token_client(self, token: str) -> str | None:
        """The client id a token (access or refresh, live or not) was issued to."""
        with self.db.connection() as conn:
            row = conn.execute(
                "SELECT client_id FROM auth_tokens WHERE token_hash = %s", (sha256(token),)
            ).fetchone()
        return row[0] if row else None

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

    def set_owner_password(self, password: str, *, rehash: bool = False) -> None:
        """Store the passphrase's Argon2id hash. ``rehash``: the stored one again, under the
        library's current parameters (one set before the minimum grew is kept, not refused)."""
        if not rehash and len(password) < MIN_PASSPHRASE:
            raise ConfigError(
                f"the owner passphrase needs at least {MIN_PASSPHRASE} characters "
                "(a few words are easier to type than symbols)"
            )
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
            self.set_owner_password(password, rehash=True)
        return True

    # ---------------------------------------------------------------- consent throttle

    def attempt(
        self,
        *,
        address: str,
        client_id: str,
        now: float,
        window_seconds: float,
        policy: Callable[[Attempts], float],
    ) -> tuple[float, int | None]:
        """One passphrase check asked for: under a lock, the wrong passphrases in the window per
        address, per client and in all go to ``policy``; when it answers a wait, that wait and
        None; otherwise (0.0, id of a failure recorded in advance). The caller clears it when the
        passphrase was right (``clear_attempt``), so a parallel burst sees every check it makes."""
        at = datetime.fromtimestamp(now, UTC)
        since = at - timedelta(seconds=window_seconds)
        with self.db.connection() as conn, conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(hashtextextended('consent-throttle', 7))")
            row = conn.execute(
                """SELECT count(*) FILTER (WHERE address = %(a)s),
                          extract(epoch FROM %(at)s - max(at) FILTER (WHERE address = %(a)s)),
                          count(*) FILTER (WHERE client_id = %(c)s),
                          extract(epoch FROM %(at)s - max(at) FILTER (WHERE client_id = %(c)s)),
                          count(*), extract(epoch FROM %(at)s - max(at)),
                          EXISTS (SELECT 1 FROM auth_tokens WHERE client_id = %(c)s)
                   FROM consent_failures WHERE at > %(since)s AND at <= %(at)s""",
                {"a": address, "c": client_id, "at": at, "since": since},
            ).fetchone()
            assert row is not None

            def last(v: Any) -> float | None:
                return float(v) if v is not None else None

            seen = Attempts(
                (int(row[0]), last(row[1])),
                (int(row[2]), last(row[3])),
                (int(row[4]), last(row[5])),
                bool(row[6]),
            )
            wait = policy(seen)
            if wait > 0:
                return wait, None
            got = conn.execute(
                "INSERT INTO consent_failures (at, address, client_id) VALUES (%s, %s, %s) RETURNING id",
                (at, address, client_id),
            ).fetchone()
            conn.execute("DELETE FROM consent_failures WHERE at < %s", (at - timedelta(days=2),))
        assert got is not None
        return 0.0, int(got[0])

    def clear_attempt(self, attempt_id: int) -> None:
        """The passphrase was right: the failure recorded in advance goes."""
        with self.db.connection() as conn:
            conn.execute("DELETE FROM consent_failures WHERE id = %s", (attempt_id,))
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


@dataclass(frozen=True)
class Attempts:
    """Wrong passphrases in the throttle's window, as (count, seconds since the last one): from
    this source address, for this client (from any address), and in all; and whether the client
    is known (the owner approved it before: it holds or held tokens)."""

    address: tuple[int, float | None]
    client: tuple[int, float | None]
    everyone: tuple[int, float | None]
    known_client: bool
