"""The secret guard's findings for whole conversations, computed once (migration 0029,
docs/adr/0029-guard-cache.md).

Recall shows raw messages, so everything it returns passes the guard on the way out: a hit and
its conversation's title are redacted with the conversation's own words as context (a value
stated as a password in one message is a secret in the title and in every other message too:
``core.secrets.find_secrets_in_messages``). Scanning the conversations of every hit was most of
a recall's time at a million messages. The scan depends only on the guard and the texts, so
its result is stored under a hash of the guard's version, the title and the words
(``guard_key``): a read that finds its key applies the stored spans, one that does not scans as
before. Nothing but offsets and kinds is stored.

``GuardCache.fill`` is a later stage of the import, beside the Japanese normal forms: the
default import, the backfill, the re-import and `pmem reindex` run it; `pmem import --no-embed`
leaves it, and recall then scans at query time.
"""

from __future__ import annotations

import hashlib
import struct
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from psycopg.types.json import Jsonb

from core.secrets import Finding, find_secrets_in_messages, guard_version, redaction_marker
from store.db import Database

#: the channels whose messages are a conversation's words: every channel recall indexes and
#: shows (the person, the assistant, another human of a chat history), so each of its hits is
#: redacted with its whole conversation as context from the stored scan
WORD_CHANNELS = ("person", "assistant", "other")

Findings = dict[int, list[Finding]]  # 0: the title; i: the i-th word


def conversation_words(messages: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """The messages of an active path (``Ledger.active_messages_of``) that are its words."""
    return [m for m in messages if m["channel"] in WORD_CHANNELS]


def scan_version() -> str:
    """What a stored scan was made by (the ``guard_version`` column): the guard's version and
    the channels scanned. A scan stored by another guard, or before the partner's messages of a
    chat history were among the words, counts as missing (``GuardCache.pending``)."""
    return f"{guard_version()} {'+'.join(WORD_CHANNELS)}"


def guard_key(title: str, words: Sequence[str]) -> str:
    """The key of one scan: the guard's version, the title and the words, each length-prefixed."""
    digest = hashlib.sha256(guard_version().encode())
    for text in (title, *words):
        raw = text.encode("utf-8", "surrogatepass")
        digest.update(struct.pack("<Q", len(raw)))
        digest.update(raw)
    return digest.hexdigest()


def scan(title: str, words: Sequence[str], speakers: Sequence[object] | None = None) -> Findings:
    """What the guard finds in the title and the words scanned as one conversation
    (``speakers``: each word's channel, so a key's tail in the person's next message is found
    across the assistant's turn between; without them turns are taken to alternate)."""
    found = find_secrets_in_messages(
        [title, *words], None if speakers is None else ["title", *speakers]
    )
    return {i: fs for i, fs in enumerate(found) if fs}


def _encode(findings: Findings) -> dict[str, list[list[Any]]]:
    # a kind is stored as the marker that replaces it ("[REDACTED:age-secret-key]"), the form
    # every other store and the leak scans know, never as a bare name that reads like a key
    return {
        str(i): [[f.start, f.end, redaction_marker(f.type)] for f in fs]
        for i, fs in findings.items()
    }


def _decode(raw: dict[str, list[list[Any]]]) -> Findings:
    return {
        int(i): [
            Finding(type=marker.removeprefix("[REDACTED:").removesuffix("]"), start=start, end=end)
            for start, end, marker in fs
        ]
        for i, fs in raw.items()
    }


class GuardCache:
    def __init__(self, db: Database) -> None:
        self.db = db

    def lookup(self, keys: Sequence[str]) -> dict[str, Findings]:
        """The stored findings of those ``keys`` that were scanned (one query)."""
        if not keys:
            return {}
        with self.db.connection() as conn:
            rows = conn.execute(
                "SELECT DISTINCT ON (guard_key) guard_key, findings FROM conversation_guard"
                " WHERE guard_key = ANY(%s)",
                (list(keys),),
            ).fetchall()
        return {key: _decode(raw) for key, raw in rows}

    def pending(self) -> int:
        """Conversations whose current content has no stored scan under this guard."""
        with self.db.connection() as conn:
            row = conn.execute(
                _PENDING.format(columns="count(*)", tail=""), (scan_version(),)
            ).fetchone()
        return int(row[0]) if row else 0

    def fill(self, *, batch: int = 200, progress: Callable[[int], None] | None = None) -> int:
        """Scan every conversation whose current content has no stored scan under this guard;
        store the findings (and drop that conversation's older scans). Resumable: each batch
        is one transaction. Returns the number of conversations scanned."""
        from store.ledger import Ledger

        version = scan_version()
        ledger = Ledger(self.db)
        done = 0
        while True:
            with self.db.connection() as conn:
                todo = conn.execute(
                    _PENDING.format(
                        columns="c.conversation_key, c.title, c.content_hash",
                        tail="ORDER BY c.conversation_key LIMIT %s",
                    ),
                    (version, batch),
                ).fetchall()
            if not todo:
                return done
            around = ledger.active_messages_of([key for key, _, _ in todo])
            rows = []
            for key, title, content_hash in todo:
                said = conversation_words(around.get(key, []))
                words = [m["text"] for m in said]
                title = title or ""
                findings = scan(title, words, [m["channel"] for m in said])
                rows.append(
                    (key, guard_key(title, words), content_hash, version, Jsonb(_encode(findings)))
                )
            with self.db.connection() as conn, conn.transaction():
                with conn.cursor() as cur:
                    cur.executemany(
                        """INSERT INTO conversation_guard
                               (conversation_key, guard_key, content_hash, guard_version, findings)
                           VALUES (%s, %s, %s, %s, %s)
                           ON CONFLICT (conversation_key, guard_key) DO UPDATE
                           SET content_hash = EXCLUDED.content_hash,
                               guard_version = EXCLUDED.guard_version""",
                        rows,
                    )
                conn.execute(
                    """DELETE FROM conversation_guard g USING unnest(%s::text[], %s::text[]) AS n(k, gk)
                       WHERE g.conversation_key = n.k AND g.guard_key <> n.gk""",
                    ([r[0] for r in rows], [r[1] for r in rows]),
                )
            done += len(rows)
            if progress is not None:
                progress(len(rows))


_PENDING = """SELECT {columns} FROM source_conversations c
    WHERE NOT EXISTS (SELECT 1 FROM conversation_guard g
                      WHERE g.conversation_key = c.conversation_key
                        AND g.content_hash = c.content_hash AND g.guard_version = %s)
    {tail}"""


__all__ = ["GuardCache", "conversation_words", "guard_key", "scan", "scan_version"]
