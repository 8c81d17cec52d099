"""Topic markers (seed 004's "LLL"): short, timestamped lines the owner writes when the topic
changes ("今日はゼミ発表の準備"). load_context shows the latest ones first, as the current state,
so the thread survives a client's context compaction; recall uses one as an anchor (the span
from a marker to the next one).

The owner's own record, kept like the ledger: byte-exact (``bytea``, lone surrogates and NUL
kept), insert-only (migration 0023's trigger refuses any change but `pmem forget`'s), never
edited by a model. The secret guard runs here, at the store's write boundary, whoever writes
(`pmem mark`, an MCP client's ``add_marker``): a secret the guard finds, or one `pmem forget`
erased, is replaced by its ``[REDACTED:…]`` marker before the row is written, and the kinds
replaced are kept with the row (never the values).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from psycopg import Connection

from core.errors import ConfigError, StoreError
from core.hashing import bytes_text, content_hash, tagged_hash, text_bytes
from core.secrets import redact
from store.db import Database
from store.erased import MARKER, forgotten_values

MAX_CHARS = 500  # a marker is a short line; a longer text belongs in a memory
MAX_SESSION_CHARS = 200
ID_PATTERN = re.compile(r"^mk_[0-9a-f]{12}$")

_COLUMNS = "marker_id, at, body, session, client, redacted, created_at, redacted_at"


@dataclass(frozen=True)
class Marker:
    id: str
    at: datetime
    text: str
    session: str | None
    client: str
    redacted: tuple[str, ...]  # kinds of secret the guard replaced when it was written
    created_at: datetime
    redacted_at: datetime | None = None  # `pmem forget` rewrote it

    def shown_at(self) -> str:
        """The time in the owner's zone (PMEM_TZ), ISO 8601."""
        from core.settings import local_zone

        return self.at.astimezone(local_zone()).isoformat()

    def as_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "at": self.shown_at(),
            "text": self.text,
            "session": self.session,
            "client": self.client,
            "redacted": list(self.redacted),
        }


@dataclass(frozen=True)
class Added:
    marker: Marker
    created: bool  # False: the same text (and session) was already the latest marker


def _marker(row: tuple[Any, ...]) -> Marker:
    mid, at, body, session, client, redacted, created_at, redacted_at = row
    return Marker(
        mid, at, bytes_text(bytes(body)), session, client, tuple(redacted), created_at, redacted_at
    )


def guard_text(conn: Connection, text: str) -> tuple[str, list[str]]:
    """The text as a marker may be stored: every secret the guard finds replaced by its
    ``[REDACTED:<type>]`` marker, then every secret `pmem forget` erased (found by HMAC). Returns
    the text and the kinds replaced."""
    out, findings = redact(text)
    kinds = sorted({f.type for f in findings})
    for value in sorted(forgotten_values(conn, [out]), key=len, reverse=True):
        out = re.sub(re.escape(value), MARKER, out, flags=re.IGNORECASE)
        kinds = sorted({*kinds, "forgotten"})
    return out, kinds


def check_text(text: str) -> None:
    if not text.strip():
        raise ConfigError("a marker needs a text", hint='e.g. pmem mark "今日はゼミ発表の準備"')
    if len(text) > MAX_CHARS:
        raise ConfigError(
            f"a marker is a short line: at most {MAX_CHARS} characters (this one has {len(text)})",
            hint="write what the topic is now in one line; longer notes belong in a memory",
        )


def check_session(session: str | None) -> str | None:
    if session is None:
        return None
    if (
        not session.strip()
        or len(session) > MAX_SESSION_CHARS
        or any(c in session for c in "\n\r\t\x00")
    ):
        raise ConfigError(
            f"a session id is one line of at most {MAX_SESSION_CHARS} characters",
            hint="e.g. --session seminar",
        )
    return session


def latest(conn: Connection, limit: int, *, session: str | None = None) -> tuple[list[Marker], int]:
    """The newest ``limit`` markers (of ``session``, when given), newest first, and how many
    there are in all (one query)."""
    rows = conn.execute(
        f"""SELECT {_COLUMNS}, count(*) OVER () FROM markers
             WHERE %(session)s::text IS NULL OR session = %(session)s
             ORDER BY at DESC, marker_id DESC LIMIT %(limit)s""",
        {"session": session, "limit": limit},
    ).fetchall()
    return [_marker(r[:-1]) for r in rows], (int(rows[0][-1]) if rows else 0)


class MarkerStore:
    def __init__(self, db: Database) -> None:
        self.db = db

    # ------------------------------------------------------------ writing (insert-only)

    def add(
        self,
        text: str,
        *,
        session: str | None = None,
        at: datetime | None = None,
        client: str = "cli",
    ) -> Added:
        """Record a marker: the text guarded, then stored byte-exact. ``at`` (default: now) is
        when the topic changed. The same text (and session) as the latest marker is not written
        twice: its first record comes back with ``created=False``."""
        check_text(text)
        session = check_session(session)
        if at is not None and at.tzinfo is None:
            raise ConfigError("a marker's time needs a zone", hint="e.g. 2026-12-01T09:30+09:00")
        with self.db.connection() as conn, conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(hashtext('pmem-markers'))")
            stored, kinds = guard_text(conn, text)
            if session is not None:
                session, s_kinds = guard_text(conn, session)
                kinds = sorted({*kinds, *s_kinds})
            when = at or conn.execute("SELECT now()").fetchone()[0]  # type: ignore[index]
            digest = content_hash(stored)
            same = conn.execute(
                f"""SELECT {_COLUMNS} FROM markers
                     WHERE session IS NOT DISTINCT FROM %(session)s
                       AND (%(at)s::timestamptz IS NULL OR at = %(at)s)
                     ORDER BY at DESC, marker_id DESC LIMIT 1""",
                {"session": session, "at": at},
            ).fetchone()
            if same is not None and bytes(same[2]) == text_bytes(stored):
                return Added(_marker(same), created=False)
            mid = (
                "mk_"
                + tagged_hash(
                    "marker", [when.astimezone(UTC).isoformat(), digest, session], 12
                ).split(":")[1]
            )
            row = conn.execute(
                f"""INSERT INTO markers (marker_id, at, body, content_hash, session, client, redacted)
                    VALUES (%s, %s, %s, %s, %s, %s, %s)
                    ON CONFLICT (marker_id) DO NOTHING
                    RETURNING {_COLUMNS}""",
                (mid, when, text_bytes(stored), digest, session, client, kinds),
            ).fetchone()
            if row is None:  # the same text at the same time: written already
                return Added(self._get(conn, mid), created=False)
        return Added(_marker(row), created=True)

    # ------------------------------------------------------------ reading

    def latest(self, limit: int, *, session: str | None = None) -> tuple[list[Marker], int]:
        with self.db.connection() as conn:
            return latest(conn, limit, session=session)

    def find(
        self,
        *,
        since: datetime | None = None,
        until: datetime | None = None,
        session: str | None = None,
        limit: int | None = None,
    ) -> list[Marker]:
        """Markers in ``[since, until)``, newest first."""
        with self.db.connection() as conn:
            rows = conn.execute(
                f"""SELECT {_COLUMNS} FROM markers
                     WHERE (%(since)s::timestamptz IS NULL OR at >= %(since)s)
                       AND (%(until)s::timestamptz IS NULL OR at < %(until)s)
                       AND (%(session)s::text IS NULL OR session = %(session)s)
                     ORDER BY at DESC, marker_id DESC LIMIT %(limit)s""",
                {"since": since, "until": until, "session": session, "limit": limit},
            ).fetchall()
        return [_marker(r) for r in rows]

    def get(self, marker_id: str) -> Marker:
        with self.db.connection() as conn:
            return self._get(conn, marker_id)

    @staticmethod
    def _get(conn: Connection, marker_id: str) -> Marker:
        row = conn.execute(
            f"SELECT {_COLUMNS} FROM markers WHERE marker_id = %s", (marker_id,)
        ).fetchone()
        if row is None:
            raise StoreError(
                f"no marker {marker_id}", hint="`pmem marks` lists the markers and their ids"
            )
        return _marker(row)

    def resolve(self, text_or_id: str) -> Marker:
        """A marker named by its id (mk_…), by its whole text (the newest of that text), or by a
        piece of its text (any case) that only one marker holds. Errors name ids, never text."""
        if ID_PATTERN.match(text_or_id):
            return self.get(text_or_id)
        needle = text_or_id.strip()
        if not needle:
            raise ConfigError(
                "--since-marker needs a marker's id or text", hint="`pmem marks` lists them"
            )
        with self.db.connection() as conn:
            exact = conn.execute(
                f"SELECT {_COLUMNS} FROM markers WHERE body = %s ORDER BY at DESC, marker_id DESC LIMIT 1",
                (text_bytes(needle),),
            ).fetchone()
            if exact is not None:
                return _marker(exact)
            # a piece of the text: read in Python (a body may hold NUL or a lone surrogate,
            # which PostgreSQL's text functions refuse); markers are few short lines
            low = needle.lower()
            rows = [
                _marker(r)
                for r in conn.execute(
                    f"SELECT {_COLUMNS} FROM markers ORDER BY at DESC, marker_id DESC"
                )
                if low in bytes_text(bytes(r[2])).lower()
            ]
        if not rows:
            raise StoreError(
                "no marker has that id or text", hint="`pmem marks` lists the markers and their ids"
            )
        if len(rows) > 1:
            ids = ", ".join(m.id for m in rows[:5])
            raise StoreError(
                f"{len(rows)} markers hold that text ({ids}{', …' if len(rows) > 5 else ''})",
                hint="pass the id of the one you mean",
            )
        return rows[0]

    def span(self, marker: Marker) -> tuple[datetime, datetime | None]:
        """From ``marker`` to the next marker (of the same session, when it has one): the next
        one's time, or None when it is the latest."""
        with self.db.connection() as conn:
            row = conn.execute(
                """SELECT min(at) FROM markers
                    WHERE at > %(at)s AND (%(session)s::text IS NULL OR session = %(session)s)""",
                {"at": marker.at, "session": marker.session},
            ).fetchone()
        return marker.at, (row[0] if row else None)


__all__ = [
    "Added",
    "MAX_CHARS",
    "Marker",
    "MarkerStore",
    "check_session",
    "check_text",
    "guard_text",
    "latest",
]
