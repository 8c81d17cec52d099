"""Erasing in place, for `pmem forget`: the text columns a secret is rewritten in (every
registered text column, ``store.derived``), the memories that change because of it (a new
revision, reason ``redaction``, through ``pmem_redact_revision``), the raw-message index, the
topic markers and the ledger itself, and the vectors of what changed. ``store.forget.Forgetter``
decides what to erase and builds on this.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from psycopg import Connection, sql
from psycopg.rows import dict_row
from psycopg.types.json import Jsonb

from core.hashing import bytes_text, content_hash, evidence_hash, tagged_hash, text_bytes
from core.textsearch import index_tokens_long
from store.db import Database
from store.derived import REGISTRY, SCHEMA_COLUMNS_SQL, TABLE_STORES
from store.erased import (
    MARKER,
    Scrubber,
    keyed_hash,
)
from store.index import MAX_TOKEN_CHARS
from store.records import MemoryStore


@dataclass
class Erasure:
    """What one forget did (ids and counts only), and what the file scrub must do."""

    erasure_id: str
    target: str
    from_ledger: bool
    counts: dict[str, int] = field(default_factory=dict)
    tables: set[str] = field(default_factory=set)
    memories_erased: list[str] = field(default_factory=list)
    memories_redacted: list[str] = field(default_factory=list)
    conversations: list[str] = field(default_factory=list)
    hash_map: dict[str, str] = field(default_factory=dict)  # old conversation hash -> new
    batches: list[str] = field(default_factory=list)  # batches whose files hold the conversation
    messages: list[str] = field(default_factory=list)  # message keys of an erased speaker

    def add(self, name: str, n: int = 1) -> None:
        if n:
            self.counts[name] = self.counts.get(name, 0) + n


class Redactor:
    """The database, the erasure key and the schema's text columns, and the in-place rewrites
    of an erasure."""

    def __init__(self, db: Database, key: bytes) -> None:
        self.db = db
        self.key = key
        self._columns: dict[str, dict[str, str]] | None = None

    # ------------------------------------------------------------ schema

    def columns(self, conn: Connection) -> dict[str, dict[str, str]]:
        """table -> column -> data type, for the registered columns that exist."""
        if self._columns is None:
            live: dict[str, dict[str, str]] = {}
            for table, column, data_type, udt in conn.execute(SCHEMA_COLUMNS_SQL):
                live.setdefault(table, {})[column] = (
                    udt if data_type in ("ARRAY", "USER-DEFINED") else data_type
                )
            self._columns = {
                s.table: {c: live[s.table][c] for c in (*s.scanned,) if c in live.get(s.table, {})}
                for s in TABLE_STORES
                if s.table in live
            }
        return self._columns

    @staticmethod
    def _candidate(column: str, dtype: str) -> sql.Composable:
        col = sql.Identifier(column)
        if dtype == "bytea":
            return sql.SQL(
                "EXISTS (SELECT 1 FROM unnest(%(bytes)s::bytea[]) b WHERE position(b IN {}) > 0)"
            ).format(col)
        if dtype in ("text", "character varying", "character"):
            return sql.SQL("lower({}) LIKE ANY(%(pats)s)").format(col)
        return sql.SQL("lower({}::text) LIKE ANY(%(pats)s)").format(col)

    def _params(self, scrub: Scrubber) -> dict[str, Any]:
        return {"pats": scrub.patterns(), "bytes": scrub.byte_forms()}

    def _remember(
        self,
        conn: Connection,
        kind: str,
        value: str,
        *,
        length: int | None = None,
        ascii_start: bool | None = None,
    ) -> None:
        conn.execute(
            """INSERT INTO erased_content (hmac, kind, length, ascii_start) VALUES (%s, %s, %s, %s)
               ON CONFLICT (hmac) DO NOTHING""",
            (keyed_hash(self.key, value), kind, length, ascii_start),
        )

    def _rewrite_column(
        self,
        conn: Connection,
        table: str,
        col: str,
        dtype: str,
        scrub: Scrubber,
        er: Erasure,
        params: dict[str, Any],
    ) -> int:
        store = REGISTRY[table]
        q = sql.SQL("SELECT ctid::text, {c} FROM {t} WHERE {cond} FOR UPDATE").format(
            c=sql.Identifier(col), t=sql.Identifier(table), cond=self._candidate(col, dtype)
        )
        n = 0
        for ctid, value in conn.execute(q, params).fetchall():
            new = scrub.value(value)
            if new == value:
                continue
            sets = [sql.SQL("{} = %s").format(sql.Identifier(col))]
            args: list[Any] = [Jsonb(new) if dtype in ("jsonb", "json") else new]
            for ts, source in store.indexes.items():
                if source == col and isinstance(new, str):
                    sets.append(
                        sql.SQL("{} = array_to_tsvector(%s::text[])").format(sql.Identifier(ts))
                    )
                    args.append(_tokens(new))
            conn.execute(
                sql.SQL("UPDATE {} SET {} WHERE ctid = %s::tid").format(
                    sql.Identifier(table), sql.SQL(", ").join(sets)
                ),
                [*args, ctid],
            )
            n += 1
        if n:
            er.add(f"rows:{table}", n)
            er.tables.add(table)
        return n

    def _redact_memories(
        self, conn: Connection, scrub: Scrubber, er: Erasure, params: dict[str, Any]
    ) -> None:
        cols = self.columns(conn)
        mem_cols = [c for c in REGISTRY["memories"].text if c in cols.get("memories", {})]
        conds = [self._candidate(c, cols["memories"][c]) for c in mem_cols]
        ids = {
            r[0]
            for r in conn.execute(
                sql.SQL("SELECT id FROM memories WHERE {}").format(sql.SQL(" OR ").join(conds)),
                params,
            )
        }
        ids |= {
            r[0]
            for r in conn.execute(
                "SELECT DISTINCT memory_id FROM memory_revisions WHERE lower(record::text) LIKE ANY(%(pats)s)",
                params,
            )
        }
        ids |= {
            r[0]
            for r in conn.execute(
                "SELECT DISTINCT memory_id FROM evidence WHERE lower(text) LIKE ANY(%(pats)s)",
                params,
            )
        }
        projector = MemoryStore(self.db)
        for mid in sorted(ids):
            row = (
                conn.cursor(row_factory=dict_row)
                .execute("SELECT * FROM memories WHERE id = %s FOR UPDATE", (mid,))
                .fetchone()
            )
            if row is None:
                continue
            fields: set[str] = set()
            updates = {c: scrub.value(row[c]) for c in mem_cols}
            changed_cols = [c for c in mem_cols if updates[c] != row[c]]
            fields |= set(changed_cols)
            revs = 0
            for rev, record in conn.execute(
                "SELECT revision, record FROM memory_revisions WHERE memory_id = %s ORDER BY revision",
                (mid,),
            ).fetchall():
                new = scrub.value(record)
                if new == record:
                    continue
                names = sorted(k for k in set(record) | set(new) if record.get(k) != new.get(k))
                conn.execute(
                    "SELECT pmem_redact_revision(%s, %s, %s, %s, %s, %s)",
                    (er.erasure_id, mid, rev, Jsonb(new), tagged_hash("rec", new), names),
                )
                fields |= set(names)
                revs += 1
            ev = 0
            for eid, source_key, text in conn.execute(
                "SELECT id, source_key, text FROM evidence WHERE memory_id = %s ORDER BY id", (mid,)
            ).fetchall():
                new_text = scrub.text(text)
                if new_text == text:
                    continue
                h = evidence_hash(new_text)
                dup = conn.execute(
                    "SELECT 1 FROM evidence WHERE memory_id = %s AND source_key = %s AND text_hash = %s AND id <> %s",
                    (mid, source_key, h, eid),
                ).fetchone()
                if dup:
                    conn.execute("DELETE FROM evidence WHERE id = %s", (eid,))
                else:
                    conn.execute(
                        "UPDATE evidence SET text = %s, text_hash = %s WHERE id = %s",
                        (new_text, h, eid),
                    )
                ev += 1
            if ev:
                fields.add("evidence")
            if not fields:
                continue
            new_rev = row["current_revision"] + 1
            current = conn.execute(
                "SELECT record FROM memory_revisions WHERE memory_id = %s AND revision = %s",
                (mid, row["current_revision"]),
            ).fetchone()
            record = current[0] if current else {}
            conn.execute(
                """INSERT INTO memory_revisions (memory_id, revision, record, record_hash, reason,
                       client, redacted_at, redacted_fields)
                   VALUES (%s, %s, %s, %s, 'redaction', 'pmem-forget', now(), %s)""",
                (mid, new_rev, Jsonb(record), tagged_hash("rec", record), sorted(fields)),
            )
            sets = sql.SQL(", ").join(
                sql.SQL("{} = %s").format(sql.Identifier(c)) for c in mem_cols
            )
            conn.execute(
                sql.SQL(
                    "UPDATE memories SET {}, current_revision = %s, updated_at = now() WHERE id = %s"
                ).format(sets),
                [*(updates[c] for c in mem_cols), new_rev, mid],
            )
            if conn.execute(
                "SELECT 1 FROM search_projections WHERE memory_id = %s", (mid,)
            ).fetchone():
                projector._project(conn, mid, {**row, **updates})
            er.tables |= self._drop_vectors(conn, "memory_id", [mid])
            er.memories_redacted.append(mid)
            er.add("memories_redacted")
            er.add("revisions_redacted", revs)
            er.add("evidence_redacted", ev)
        if er.memories_redacted:
            er.tables |= {
                "memories",
                "memory_revisions",
                "evidence",
                "search_projections",
                "memory_embeddings",
            }

    def _redact_message_index(
        self, conn: Connection, scrub: Scrubber, er: Erasure, params: dict[str, Any]
    ) -> None:
        rows = conn.execute(
            "SELECT message_key, text FROM message_search WHERE lower(text) LIKE ANY(%(pats)s) FOR UPDATE",
            params,
        ).fetchall()
        n = 0
        for key, text in rows:
            new = scrub.text(text)
            if new != text:
                self._reindex_message(conn, key, new)
                n += 1
        if n:
            er.add("message_index_rows", n)
            er.tables |= {"message_search", *_vector_tables("message_key")}

    def _redact_markers(self, conn: Connection, scrub: Scrubber, er: Erasure) -> None:
        """Topic markers (insert-only): the text and session rewritten through the one audited
        exception, ``pmem_redact_marker``. Markers are few short lines: all are read."""
        if "markers" not in self.columns(conn):
            return
        n = 0
        for marker_id, body, session in conn.execute(
            "SELECT marker_id, body, session FROM markers ORDER BY marker_id FOR UPDATE"
        ).fetchall():
            text = bytes_text(bytes(body))
            new_text, new_session = (
                scrub.text(text),
                scrub.text(session) if session is not None else None,
            )
            if new_text == text and new_session == session:
                continue
            conn.execute(
                "SELECT pmem_redact_marker(%s, %s, %s, %s, %s)",
                (
                    er.erasure_id,
                    marker_id,
                    text_bytes(new_text),
                    content_hash(new_text),
                    new_session,
                ),
            )
            n += 1
        if n:
            er.add("markers_redacted", n)
            er.tables.add("markers")

    def _reindex_message(self, conn: Connection, key: str, text: str) -> None:
        conn.execute(
            "UPDATE message_search SET text = %s, tokens = array_to_tsvector(%s::text[]) WHERE message_key = %s",
            (text, _tokens(text), key),
        )
        self._drop_vectors(conn, "message_key", [key])

    def _drop_vectors(self, conn: Connection, key_column: str, keys: list[str]) -> set[str]:
        """Delete the embeddings of these rows from every registered vector table keyed by
        ``key_column`` (``pmem reindex`` embeds what is left again)."""
        tables = set()
        for store in TABLE_STORES:
            if store.vectors and key_column in store.ids and store.table in self.columns(conn):
                conn.execute(
                    sql.SQL("DELETE FROM {} WHERE {} = ANY(%s)").format(
                        sql.Identifier(store.table), sql.Identifier(key_column)
                    ),
                    (keys,),
                )
                tables.add(store.table)
        return tables

    def _redact_ledger(
        self, conn: Connection, scrub: Scrubber, er: Erasure, params: dict[str, Any]
    ) -> None:
        rows = conn.execute(
            """SELECT message_key, conversation_key, body FROM source_messages
               WHERE EXISTS (SELECT 1 FROM unnest(%(bytes)s::bytea[]) b WHERE position(b IN body) > 0)
               FOR UPDATE""",
            params,
        ).fetchall()
        changed: dict[str, list[str]] = {}
        for key, conv, body in rows:
            text = bytes_text(bytes(body))
            new = scrub.text(text)
            if new == text:
                continue
            self._set_body(conn, key, new)
            changed.setdefault(conv, []).append(key)
        er.add("ledger_messages", sum(len(v) for v in changed.values()))
        for conv in sorted(changed):  # titles: the generic rewrite (a title is not in the hash)
            self._rehash_conversation(conn, conv, er)
        er.tables |= {"source_messages", "source_conversations"}

    def _erase_messages(self, conn: Connection, keys: list[str], er: Erasure) -> None:
        """--memory --from-ledger: the cited messages keep their place in the tree, not their text."""
        convs: set[str] = set()
        for key, conv in conn.execute(
            "SELECT message_key, conversation_key FROM source_messages WHERE message_key = ANY(%s) FOR UPDATE",
            (keys,),
        ).fetchall():
            self._set_body(conn, key, MARKER)
            if conn.execute(
                "SELECT 1 FROM message_search WHERE message_key = %s", (key,)
            ).fetchone():
                self._reindex_message(conn, key, MARKER)
            convs.add(conv)
        er.add("ledger_messages", len(keys))
        for conv in sorted(convs):
            self._rehash_conversation(conn, conv, er)
        er.tables |= {
            "source_messages",
            "source_conversations",
            "message_search",
            *_vector_tables("message_key"),
        }

    def _set_body(self, conn: Connection, key: str, text: str) -> None:
        conn.execute(
            "UPDATE source_messages SET body = %s, content_hash = %s WHERE message_key = %s",
            (text_bytes(text), content_hash(text), key),
        )
        self._remember(conn, "message", key)

    def _rehash_conversation(self, conn: Connection, conv: str, er: Erasure) -> None:
        """The conversation's hash over its redacted messages (as ``Conversation.content_hash``),
        carried into the prefilter decisions and batch membership so nothing is re-drafted."""
        rows = conn.execute(
            "SELECT message_key, body, on_active_path FROM source_messages WHERE conversation_key = %s",
            (conv,),
        ).fetchall()
        new = tagged_hash(
            "conv", sorted((k, content_hash(bytes_text(bytes(b))), a) for k, b, a in rows)
        )
        old_row = conn.execute(
            "SELECT content_hash FROM source_conversations WHERE conversation_key = %s FOR UPDATE",
            (conv,),
        ).fetchone()
        if old_row is None or old_row[0] == new:
            return
        old = old_row[0]
        er.hash_map[old] = new
        conn.execute(
            "UPDATE source_conversations SET content_hash = %s WHERE conversation_key = %s",
            (new, conv),
        )
        conn.execute(
            "UPDATE prefilter_decisions SET content_hash = %s WHERE conversation_key = %s AND content_hash = %s",
            (new, conv, old),
        )
        conn.execute(
            "UPDATE batch_members SET content_hash = %s WHERE conversation_key = %s AND content_hash = %s",
            (new, conv, old),
        )
        for batch_id, members in conn.execute(
            "SELECT batch_id, members FROM batches WHERE members::text LIKE %s FOR UPDATE",
            ("%" + old + "%",),
        ).fetchall():
            fixed = [
                {**m, "content_hash": new} if m.get("content_hash") == old else m for m in members
            ]
            conn.execute(
                "UPDATE batches SET members = %s WHERE batch_id = %s", (Jsonb(fixed), batch_id)
            )
        er.conversations.append(conv)
        er.tables |= {"prefilter_decisions", "batch_members", "batches"}


def _vector_tables(key_column: str) -> set[str]:
    return {s.table for s in TABLE_STORES if s.vectors and key_column in s.ids}


def _tokens(text: str) -> list[str]:
    """A message's tokens, as store.index indexes them."""
    return [t for t in index_tokens_long(text) if len(t) <= MAX_TOKEN_CHARS]
