"""The token store: bearer tokens for `pmem api` and the remote server's OAuth tokens.

A token is ``pmem_`` + 43 url-safe characters (256 random bits), shown once when created; the
table keeps only its SHA-256 (a slow hash buys nothing for random 256-bit secrets). A token
carries the client's name (recorded on every revision it writes, the key of its budget) and its
scopes; ``verify`` answers the token's identity, or None when it is unknown, revoked or expired.
"""

from __future__ import annotations

import builtins
import hashlib
import re
import secrets
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from psycopg.rows import dict_row

from core.errors import ConfigError
from store.db import Database

PREFIX = "pmem_"
SCOPES = ("memory.read", "memory.propose", "memory.write", "memory.delete", "memory.publish")
# what a backfill (or another committer) needs: search and related (read), its drafts queued
# for review (POST /v1/proposals: propose), its commits (write); docs/remote.md names them
DEFAULT_SCOPES = ("memory.read", "memory.propose", "memory.write")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:@-]{0,63}$")


def token_hash(token: str) -> bytes:
    return hashlib.sha256(token.encode("utf-8")).digest()


@dataclass(frozen=True)
class TokenInfo:
    token_id: str
    name: str
    kind: str
    scopes: tuple[str, ...]
    created_at: datetime
    expires_at: datetime | None
    last_used_at: datetime | None
    revoked_at: datetime | None
    client_id: str | None = None  # an OAuth client (kinds 'access' and 'refresh')
    family_id: str | None = None  # a refresh-token family: every token from one consent
    resource: str | None = None  # RFC 8707: the resource an OAuth token is for

    def as_json(self) -> dict[str, object]:
        return {
            "token_id": self.token_id,
            "name": self.name,
            "kind": self.kind,
            "scopes": list(self.scopes),
            "created_at": self.created_at,
            "expires_at": self.expires_at,
            "last_used_at": self.last_used_at,
            "revoked_at": self.revoked_at,
            "client_id": self.client_id,
            "family_id": self.family_id,
            "resource": self.resource,
        }


@dataclass(frozen=True)
class IssuedToken:
    info: TokenInfo
    token: str  # the secret: shown once, never stored


def check_scopes(scopes: list[str] | tuple[str, ...]) -> tuple[str, ...]:
    unknown = [s for s in scopes if s not in SCOPES]
    if unknown:
        raise ConfigError(f"unknown scope(s) {', '.join(unknown)}; known: {', '.join(SCOPES)}")
    return tuple(dict.fromkeys(scopes))


def _info(row: dict) -> TokenInfo:
    return TokenInfo(
        row["token_id"],
        row["name"],
        row["kind"],
        tuple(row["scopes"]),
        row["created_at"],
        row["expires_at"],
        row["last_used_at"],
        row["revoked_at"],
        row.get("client_id"),
        row.get("family_id"),
        row.get("resource"),
    )


_COLS = (
    "token_id, name, kind, scopes, created_at, expires_at, last_used_at, revoked_at, client_id, "
    "family_id, resource"
)


class TokenStore:
    def __init__(self, db: Database) -> None:
        self.db = db

    def create(
        self,
        name: str,
        scopes: tuple[str, ...] | list[str] = DEFAULT_SCOPES,
        *,
        kind: str = "api",
        expires_at: datetime | None = None,
        client_id: str | None = None,
        family_id: str | None = None,
        resource: str | None = None,
        generation: int = 0,
        conn: Any = None,
    ) -> IssuedToken:
        """A new token (shown once). ``conn``: write in the caller's transaction (not committed
        here)."""
        if not _NAME.match(name):
            raise ConfigError(
                f"token name {name!r} is not allowed: 1-64 letters, digits or . _ : @ -, "
                "starting with a letter or digit"
            )
        scopes = check_scopes(scopes)
        token = PREFIX + secrets.token_urlsafe(32)
        token_id = "tok_" + secrets.token_hex(6)
        insert = f"""INSERT INTO auth_tokens (token_id, name, kind, token_hash, scopes, expires_at,
                                              client_id, family_id, resource, generation)
                     VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s) RETURNING {_COLS}"""
        values = (
            token_id,
            name,
            kind,
            token_hash(token),
            list(scopes),
            expires_at,
            client_id,
            family_id,
            resource,
            generation,
        )
        if conn is not None:
            with conn.cursor(row_factory=dict_row) as cur:
                cur.execute(insert, values)
                row = cur.fetchone()
        else:
            with self.db.connection() as own, own.cursor(row_factory=dict_row) as cur:
                cur.execute(insert, values)
                row = cur.fetchone()
                own.commit()
        assert row is not None
        return IssuedToken(_info(row), token)

    def verify(self, token: str, *, kind: str | tuple[str, ...] | None = "api") -> TokenInfo | None:
        """The live token's identity; None for an unknown, revoked or expired one. ``kind``: one
        kind, several (``("api", "access")``) or any (None)."""
        kinds = [kind] if isinstance(kind, str) else (list(kind) if kind is not None else None)
        if not token.startswith(PREFIX) or len(token) > 200:
            return None
        with self.db.connection() as conn, conn.cursor(row_factory=dict_row) as cur:
            cur.execute(
                f"""SELECT {_COLS}, last_used_at IS NULL OR last_used_at < now() - interval '1 minute' AS stale
                    FROM auth_tokens
                    WHERE token_hash = %s AND revoked_at IS NULL
                      AND (expires_at IS NULL OR expires_at > now())
                      AND (%s::text[] IS NULL OR kind = ANY(%s::text[]))""",
                (token_hash(token), kinds, kinds),
            )
            row = cur.fetchone()
            if row is not None and row["stale"]:  # last use, to the minute: not a write per request
                cur.execute(
                    "UPDATE auth_tokens SET last_used_at = now() WHERE token_id = %s",
                    (row["token_id"],),
                )
            conn.commit()
        return _info(row) if row else None

    def list(
        self, *, include_revoked: bool = False, kinds: tuple[str, ...] | None = None
    ) -> list[TokenInfo]:
        with self.db.connection() as conn, conn.cursor(row_factory=dict_row) as cur:
            cur.execute(
                f"SELECT {_COLS} FROM auth_tokens WHERE (%s OR revoked_at IS NULL)"
                " AND (%s::text[] IS NULL OR kind = ANY(%s::text[]))"
                " ORDER BY created_at, token_id",
                (include_revoked, list(kinds) if kinds else None, list(kinds) if kinds else None),
            )
            return [_info(r) for r in cur.fetchall()]

    def mark_step_up(self, family_id: str) -> None:
        """A call with a token of this family needed a scope beyond its grant: its live refresh
        token's next exchange is refused (``store.oauth.OAuthStore.rotate``), so the client
        authorizes again instead of refreshing the same grant."""
        with self.db.connection() as conn:
            conn.execute(
                """UPDATE auth_tokens SET step_up_at = now() WHERE family_id = %s AND kind = 'refresh'
                   AND rotated_at IS NULL AND revoked_at IS NULL""",
                (family_id,),
            )
            conn.commit()

    def revoke(self, token_id_or_name: str) -> builtins.list[str]:
        """Revoke a token by its id, or every live token of a client name; the ids revoked."""
        with self.db.connection() as conn:
            rows = conn.execute(
                """UPDATE auth_tokens SET revoked_at = now()
                   WHERE revoked_at IS NULL AND (token_id = %s OR name = %s) RETURNING token_id""",
                (token_id_or_name, token_id_or_name),
            ).fetchall()
            conn.commit()
        return [r[0] for r in rows]
