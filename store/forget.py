"""`pmem forget`: erase a secret string, a memory or a whole conversation from every store that
holds text (the list is ``store.derived``), irreversibly.

- ``forget_secret``: every occurrence (any case; also an alias or tag that is a long piece of
  it) becomes ``[REDACTED:forgotten]`` in memories, every revision (through the one audited
  exception to the insert-only rule, ``pmem_redact_revision``), evidence, search projections,
  the raw-message index, proposals, idempotency responses and every other registered text
  column; vectors of what changed are dropped. A memory that changed gets a new revision
  (reason ``redaction``) that records when and which fields, never the text.
- ``forget_memory``: the memory, its revisions (``pmem_erase_revisions``), evidence,
  projection, vectors and proposals are deleted; a tombstone (ids only) keeps any later draft
  from re-creating it.
- ``forget_conversation``: every memory resting on it is erased as above, its messages leave
  the raw-message index and it is never drafted or indexed again.
- ``forget_speaker``: another speaker of a chat history (channel ``other``, or their stickers and
  photos: ``machinery`` under their name) by name, compared after NFKC and case folding as the
  importers compare ``PMEM_ME``: their messages leave the raw-message index and its vectors,
  every memory citing one of them is erased, and summaries citing them go. With
  ``from_ledger`` (what `pmem forget --speaker` always asks: another person's words are not the
  owner's record to keep) their messages keep their place but not their text or name, and the
  speaker is remembered (a keyed HMAC of ``speaker:<name>``, kind ``message``) so that their
  messages in a later import arrive erased too.

With ``from_ledger`` the ledger is erased too, and what was erased is remembered as a keyed
HMAC (the key is ``<data dir>/erasure.key``, 0600, never in the database) so that importing the
same export again cannot bring it back (``ErasedIndex``, used by ``store.ledger``).

Files under ``runs/`` are scrubbed by ``state.files.scrub_run_files`` (the CLI runs both). After
the erasure the touched tables are rewritten with ``VACUUM FULL`` and a ``CHECKPOINT`` is taken
(see docs/security.md, "Erasure").
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterable
from typing import Any

import psycopg
from psycopg import Connection, sql
from psycopg.types.json import Jsonb

from core.errors import ConfigError, MemoryNotFound, StoreError
from core.hashing import bytes_text, text_bytes
from store import revisions
from store.concepts import ConceptStore
from store.db import Database
from store.derived import REGISTRY
from store.erased import (
    _NOT_SPEAKERS,
    _SPEAKER_CHANNELS,
    _SPECIAL,
    DERIVED_DOMAIN,
    MARKER,
    SPEAKER_DOMAIN,
    Scrubber,
    _like_escape,
    keyed_hash,
    redact_names,
    speaker_name,
)
from store.redaction import Erasure, Redactor, _vector_tables

# ---------------------------------------------------------------- the erasure


class Forgetter(Redactor):
    # ------------------------------------------------------------ looking

    def scan(self, needle: str, *, ledger: bool = True) -> dict[str, int]:
        """Rows holding ``needle`` (any case), per ``table.column``, over every registered column."""
        scrub = Scrubber(needle)
        params = {
            "pats": [
                "%" + _like_escape(needle.lower()) + "%",
                "%" + _like_escape(json.dumps(needle.lower(), ensure_ascii=False)[1:-1]) + "%",
            ],
            "bytes": scrub.byte_forms(),
        }
        out: dict[str, int] = {}
        with self.db.connection() as conn:
            for table, cols in self.columns(conn).items():
                if not ledger and REGISTRY[table].layer == "ledger":
                    continue
                for col, dtype in cols.items():
                    q = sql.SQL("SELECT count(*) FROM {} WHERE {}").format(
                        sql.Identifier(table), self._candidate(col, dtype)
                    )
                    n = conn.execute(q, params).fetchone()[0]  # type: ignore[index]
                    if n:
                        out[f"{table}.{col}"] = n
        return out

    def memory_plan(self, memory_id: str) -> dict[str, Any]:
        with self.db.connection() as conn:
            row = conn.execute("SELECT status FROM memories WHERE id = %s", (memory_id,)).fetchone()
            if row is None:
                if self._was_erased(conn, memory_id):
                    return {"memory_id": memory_id, "already_erased": True}
                raise MemoryNotFound(memory_id)
            n_rev, n_ev, n_conv = conn.execute(
                """SELECT (SELECT count(*) FROM memory_revisions WHERE memory_id = %(id)s),
                          (SELECT count(*) FROM evidence WHERE memory_id = %(id)s),
                          (SELECT count(DISTINCT regexp_replace(source_key, ':[^:]*$', ''))
                             FROM evidence WHERE memory_id = %(id)s)""",
                {"id": memory_id},
            ).fetchone()  # type: ignore[misc]
        return {
            "memory_id": memory_id,
            "status": row[0],
            "revisions": n_rev,
            "evidence": n_ev,
            "source_conversations": n_conv,
            "already_erased": False,
        }

    def conversation_plan(self, conversation_key: str) -> dict[str, Any]:
        with self.db.connection() as conn:
            n_msg = conn.execute(
                "SELECT count(*) FROM source_messages WHERE conversation_key = %s",
                (conversation_key,),
            ).fetchone()[0]  # type: ignore[index]
            mems = self._memories_of(conn, conversation_key)
            forgotten = conn.execute(
                "SELECT 1 FROM forgotten_conversations WHERE conversation_key = %s",
                (conversation_key,),
            ).fetchone() is not None or self._erased_hmac(conn, conversation_key)
        if not n_msg and not mems and not forgotten:
            raise StoreError(
                f"no conversation {conversation_key} in the ledger or the memories",
                hint="`pmem ledger list` shows the conversation keys",
            )
        return {
            "conversation_key": conversation_key,
            "messages": n_msg,
            "memories": mems,
            "already_forgotten": bool(forgotten),
        }

    # ------------------------------------------------------------ erasing

    def forget_secret(self, secret: str, *, from_ledger: bool = False) -> Erasure:
        scrub = Scrubber(secret)
        er = self._new("secret", from_ledger)
        params = self._params(scrub)
        with self.db.connection() as conn, conn.transaction():
            cols = self.columns(conn)
            if from_ledger:
                self._redact_ledger(conn, scrub, er, params)
            self._redact_memories(conn, scrub, er, params)
            self._redact_message_index(conn, scrub, er, params)
            self._redact_markers(
                conn, scrub, er
            )  # shown to every client: with or without --from-ledger
            for table, tcols in cols.items():
                store = REGISTRY[table]
                if table in _SPECIAL or (store.layer == "ledger" and not from_ledger):
                    continue
                for col in store.text:
                    if col in tcols:
                        self._rewrite_column(conn, table, col, tcols[col], scrub, er, params)
            # remembered by HMAC: the store's guard keeps it out of any later record drafted
            # from the ledger (store.records); from the ledger, the import redacts it as well
            self._remember(
                conn,
                "secret",
                ("" if from_ledger else DERIVED_DOMAIN) + secret.lower(),
                length=len(secret),
                ascii_start=secret[0].isascii() and secret[0].isalnum(),
            )
            self._audit(conn, er)
        revisions._SECRET_CACHE.clear()  # this process's guard sees the forgotten secret at once
        return er

    def forget_memory(self, memory_id: str, *, from_ledger: bool = False) -> Erasure:
        er = self._new("memory", from_ledger)
        with self.db.connection() as conn, conn.transaction():
            if (
                conn.execute(
                    "SELECT 1 FROM memories WHERE id = %s FOR UPDATE", (memory_id,)
                ).fetchone()
                is None
            ):
                if not self._was_erased(conn, memory_id):
                    raise MemoryNotFound(memory_id)
            else:
                keys = [
                    r[0]
                    for r in conn.execute(
                        "SELECT DISTINCT source_key FROM evidence WHERE memory_id = %s ORDER BY 1",
                        (memory_id,),
                    )
                ]
                self._erase_memory(conn, memory_id, er)
                if from_ledger and keys:
                    self._erase_messages(conn, keys, er)
            er.memories_erased = [memory_id]
            self._audit(conn, er)
        return er

    def forget_conversation(self, conversation_key: str, *, from_ledger: bool = False) -> Erasure:
        er = self._new("conversation", from_ledger)
        er.conversations = [conversation_key]
        with self.db.connection() as conn, conn.transaction():
            for mid in self._memories_of(conn, conversation_key):
                self._erase_memory(conn, mid, er)
            keys = [
                r[0]
                for r in conn.execute(
                    "SELECT message_key FROM source_messages WHERE conversation_key = %s",
                    (conversation_key,),
                )
            ]
            self._drop_summaries(conn, er, message_keys=keys)
            er.add(
                "message_index_rows",
                conn.execute(
                    "DELETE FROM message_search WHERE conversation_key = %s", (conversation_key,)
                ).rowcount,
            )
            conn.execute("DELETE FROM message_search_pending WHERE message_key = ANY(%s)", (keys,))
            er.tables |= {
                "message_search",
                "message_search_pending",
                *_vector_tables("message_key"),
            }
            like = "%" + _like_escape(conversation_key.lower()) + "%"
            n = (
                conn.execute(
                    "DELETE FROM proposals WHERE lower(payload::text) LIKE %s OR lower(coalesce(result::text, '')) LIKE %s",
                    (like, like),
                ).rowcount
                if "result" in self.columns(conn).get("proposals", {})
                else conn.execute(
                    "DELETE FROM proposals WHERE lower(payload::text) LIKE %s", (like,)
                ).rowcount
            )
            er.add("proposals", n)
            er.tables.add("proposals")
            er.batches = [
                r[0]
                for r in conn.execute(
                    "SELECT DISTINCT batch_id FROM batch_members WHERE conversation_key = %s ORDER BY 1",
                    (conversation_key,),
                )
            ]
            er.add(
                "batches_superseded",
                conn.execute(
                    """UPDATE batches SET status = 'superseded', updated_at = now()
                   WHERE batch_id = ANY(%s) AND status IN ('planned', 'drafted', 'failed')""",
                    (er.batches,),
                ).rowcount,
            )
            if from_ledger:
                er.tables |= self._drop_vectors(conn, "message_key", keys)
                er.add(
                    "ledger_messages",
                    conn.execute(
                        "DELETE FROM source_messages WHERE conversation_key = %s",
                        (conversation_key,),
                    ).rowcount,
                )
                for table in (
                    "prefilter_decisions",
                    "prefilter_overrides",
                    "forgotten_conversations",
                    "source_conversations",
                ):
                    conn.execute(
                        sql.SQL("DELETE FROM {} WHERE conversation_key = %s").format(
                            sql.Identifier(table)
                        ),
                        (conversation_key,),
                    )
                er.tables |= {"source_messages", "source_conversations", "prefilter_decisions"}
                self._remember(conn, "conversation", conversation_key)
            else:
                conn.execute(
                    "INSERT INTO forgotten_conversations (conversation_key) VALUES (%s) ON CONFLICT DO NOTHING",
                    (conversation_key,),
                )
            self._audit(conn, er)
        return er

    def speaker_roles(self, conn: Connection, name: str) -> list[str]:
        """The stored roles (as written in the exports) that name this speaker."""
        wanted = speaker_name(name)
        rows = conn.execute(
            "SELECT DISTINCT role FROM source_messages WHERE channel = ANY(%s)",
            (list(_SPEAKER_CHANNELS),),
        ).fetchall()
        return sorted(r for (r,) in rows if r not in _NOT_SPEAKERS and speaker_name(r) == wanted)

    def speaker_plan(self, name: str) -> dict[str, Any]:
        """How many messages and conversations hold this speaker's words (ids and counts)."""
        if not speaker_name(name) or speaker_name(name) in _NOT_SPEAKERS:
            raise ConfigError(
                f"{name!r} is not a speaker's name",
                hint="give the name as `pmem ledger show` lists it",
            )
        with self.db.connection() as conn:
            roles = self.speaker_roles(conn, name)
            row = conn.execute(
                """SELECT count(*), count(DISTINCT conversation_key) FROM source_messages
                   WHERE channel = ANY(%s) AND role = ANY(%s)""",
                (list(_SPEAKER_CHANNELS), roles),
            ).fetchone()
            forgotten = self._erased_hmac(conn, SPEAKER_DOMAIN + speaker_name(name))
        n_msg, n_conv = row or (0, 0)
        if not n_msg and not forgotten:
            raise StoreError(
                "no other speaker by that name in the ledger",
                hint="`pmem ledger show KEY` lists each message's speaker (its role)",
            )
        return {"messages": n_msg, "conversations": n_conv, "already_forgotten": forgotten}

    def forget_speaker(self, name: str, *, from_ledger: bool = False) -> Erasure:
        """Erase another speaker's messages (see the module docstring)."""
        er = self._new("speaker", from_ledger)
        with self.db.connection() as conn, conn.transaction():
            roles = self.speaker_roles(conn, name)
            rows = conn.execute(
                """SELECT message_key, conversation_key FROM source_messages
                   WHERE channel = ANY(%s) AND role = ANY(%s) ORDER BY message_key FOR UPDATE""",
                (list(_SPEAKER_CHANNELS), roles),
            ).fetchall()
            keys = [k for k, _ in rows]
            er.messages = keys
            cited = [
                r[0]
                for r in conn.execute(
                    "SELECT DISTINCT memory_id FROM evidence WHERE source_key = ANY(%s) ORDER BY 1",
                    (keys,),
                )
            ]
            for mid in cited:
                self._erase_memory(conn, mid, er)
            er.memories_erased = cited
            self._drop_summaries(conn, er, message_keys=keys)
            er.add(
                "message_index_rows",
                conn.execute(
                    "DELETE FROM message_search WHERE message_key = ANY(%s)", (keys,)
                ).rowcount,
            )
            conn.execute("DELETE FROM message_search_pending WHERE message_key = ANY(%s)", (keys,))
            er.tables |= {
                "message_search",
                "message_search_pending",
                *_vector_tables("message_key"),
            }
            if from_ledger:
                for key in keys:
                    self._set_body(conn, key, MARKER)
                conn.execute(
                    "UPDATE source_messages SET role = %s WHERE message_key = ANY(%s)",
                    (MARKER, keys),
                )
                er.add("ledger_messages", len(keys))
                for conv in sorted({c for _, c in rows}):
                    self._rehash_conversation(conn, conv, er)
                er.add("ledger_titles", _erase_name_in_titles(conn, name))
                er.tables |= {"source_messages", "source_conversations"}
                self._remember(conn, "message", SPEAKER_DOMAIN + speaker_name(name))
            self._audit(conn, er)
        return er

    def set_result_checksums(self, checksums: dict[str, str]) -> None:
        """After the file scrub rewrote result.json files: batch id -> new checksum."""
        if not checksums:
            return
        with self.db.connection() as conn, conn.transaction():
            for batch_folder, checksum in checksums.items():
                conn.execute(
                    """UPDATE batches SET result_checksum = %s
                       WHERE replace(batch_id, ':', '-') = %s AND result_checksum IS NOT NULL""",
                    (checksum, batch_folder),
                )

    def batches_of(self, conversation_keys: Iterable[str]) -> list[str]:
        with self.db.connection() as conn:
            return [
                r[0]
                for r in conn.execute(
                    "SELECT DISTINCT batch_id FROM batch_members WHERE conversation_key = ANY(%s) ORDER BY 1",
                    (list(conversation_keys),),
                )
            ]

    # ------------------------------------------------------------ vacuum

    def vacuum(self, tables: Iterable[str], *, lock_timeout: float = 60.0) -> dict[str, Any]:
        """VACUUM FULL every touched table (a new file for the table, its TOAST and its indexes:
        no live page keeps a dead tuple's bytes), then CHECKPOINT. A table another session keeps
        locked past ``lock_timeout`` seconds is listed in ``skipped``."""
        done: list[str] = []
        skipped: list[str] = []
        out: dict[str, Any] = {
            "mode": "full",
            "tables": done,
            "skipped": skipped,
            "checkpoint": False,
        }
        with psycopg.connect(self.db.url, autocommit=True) as conn:
            # another session holding a table would make VACUUM FULL wait for ever
            conn.execute(
                sql.SQL("SET lock_timeout = {}").format(
                    sql.Literal(f"{int(lock_timeout * 1000)}ms")
                )
            )
            live = {
                r[0]
                for r in conn.execute(
                    "SELECT tablename FROM pg_tables WHERE schemaname = current_schema()"
                )
            }
            out["other_snapshots"] = conn.execute(
                """SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()
                   AND pid <> pg_backend_pid() AND backend_xmin IS NOT NULL"""
            ).fetchone()[0]  # type: ignore[index]
            for table in sorted(set(tables) & live):
                try:
                    conn.execute(sql.SQL("VACUUM (FULL, ANALYZE) {}").format(sql.Identifier(table)))
                    done.append(table)
                except psycopg.errors.LockNotAvailable:
                    skipped.append(table)
            # ANALYZE (above) wrote the tables' statistics anew from the clean rows; the old
            # pg_statistic rows (most common values: the forgotten text itself) stay as dead
            # tuples in pg_statistic's own pages until it is rewritten too
            try:
                conn.execute("VACUUM FULL pg_statistic")
                out["statistics"] = "rebuilt"
            except (psycopg.errors.InsufficientPrivilege, psycopg.errors.LockNotAvailable):
                out["statistics"] = "not rewritten"
            try:
                conn.execute("CHECKPOINT")
                out["checkpoint"] = True
            except psycopg.errors.InsufficientPrivilege:
                out["checkpoint"] = False
        # what no SQL reaches: the write-ahead log holds the erased rows until PostgreSQL
        # recycles its segments (after the checkpoint, as new writes fill them)
        out["on_disk"] = ["pg_wal: segments written before the checkpoint, until recycled"]
        if out["statistics"] != "rebuilt":
            out["on_disk"].append("pg_statistic: dead rows of the old statistics")
        return out

    # ------------------------------------------------------------ internals

    def _new(self, target: str, from_ledger: bool) -> Erasure:
        return Erasure(
            erasure_id="erasure-" + uuid.uuid4().hex[:16], target=target, from_ledger=from_ledger
        )

    def _audit(self, conn: Connection, er: Erasure) -> None:
        conn.execute(
            """INSERT INTO erasure_audit (erasure_id, action, target, counts)
               VALUES (%s, 'erasure', %s, %s)""",
            (er.erasure_id, er.target, Jsonb({**er.counts, "from_ledger": er.from_ledger})),
        )

    def _erased_hmac(self, conn: Connection, value: str) -> bool:
        return (
            conn.execute(
                "SELECT 1 FROM erased_content WHERE hmac = %s", (keyed_hash(self.key, value),)
            ).fetchone()
            is not None
        )

    @staticmethod
    def _was_erased(conn: Connection, memory_id: str) -> bool:
        return (
            conn.execute(
                "SELECT 1 FROM tombstones WHERE memory_id = %s AND reason = 'erased'", (memory_id,)
            ).fetchone()
            is not None
        )

    @staticmethod
    def _memories_of(conn: Connection, conversation_key: str) -> list[str]:
        return [
            r[0]
            for r in conn.execute(
                """SELECT DISTINCT e.memory_id FROM evidence e JOIN memories m ON m.id = e.memory_id
               WHERE regexp_replace(e.source_key, ':[^:]*$', '') = %s ORDER BY 1""",
                (conversation_key,),
            )
        ]

    def _erase_memory(self, conn: Connection, memory_id: str, er: Erasure) -> None:
        row = conn.execute(
            "SELECT current_revision FROM memories WHERE id = %s FOR UPDATE", (memory_id,)
        ).fetchone()
        if row is None:
            return
        keys = [
            r[0]
            for r in conn.execute(
                "SELECT DISTINCT source_key FROM evidence WHERE memory_id = %s ORDER BY 1",
                (memory_id,),
            )
        ]
        convs = sorted({k.rsplit(":", 1)[0] for k in keys})
        conn.execute(
            """INSERT INTO tombstones (memory_id, source_keys, conversation_keys, last_revision, reason)
               VALUES (%s, %s, %s, %s, 'erased')
               ON CONFLICT (memory_id) DO UPDATE SET reason = 'erased',
                   source_keys = ARRAY(SELECT DISTINCT unnest(tombstones.source_keys || EXCLUDED.source_keys)),
                   conversation_keys = ARRAY(SELECT DISTINCT unnest(tombstones.conversation_keys
                                                                  || EXCLUDED.conversation_keys))""",
            (memory_id, keys, convs, row[0]),
        )
        er.tables |= self._drop_vectors(conn, "memory_id", [memory_id])
        conn.execute("DELETE FROM search_projections WHERE memory_id = %s", (memory_id,))
        er.add(
            "evidence_erased",
            conn.execute("DELETE FROM evidence WHERE memory_id = %s", (memory_id,)).rowcount,
        )
        er.add(
            "revisions_erased",
            conn.execute(
                "SELECT pmem_erase_revisions(%s, %s)", (er.erasure_id, memory_id)
            ).fetchone()[0],  # type: ignore[index]
        )
        pcols = self.columns(conn).get("proposals", {})
        like = "%" + _like_escape(memory_id.lower()) + "%"
        cond = "lower(payload::text) LIKE %(like)s"
        if "memory_id" in pcols:
            cond += " OR memory_id = %(id)s"
        if "result" in pcols:
            cond += " OR lower(coalesce(result::text, '')) LIKE %(like)s"
        er.add(
            "proposals",
            conn.execute(
                f"DELETE FROM proposals WHERE {cond}",
                {"like": like, "id": memory_id},  # noqa: S608 - fixed fragments
            ).rowcount,
        )
        self._drop_summaries(conn, er, memory_ids=[memory_id])
        self._drop_concepts(conn, er, memory_id)
        if "public_memories" in self.columns(conn):  # its published title and summary go too
            er.add(
                "public_memories",
                conn.execute(
                    "DELETE FROM public_memories WHERE memory_id = %s", (memory_id,)
                ).rowcount,
            )
            er.tables.add("public_memories")
        conn.execute("DELETE FROM memories WHERE id = %s", (memory_id,))
        er.memories_erased.append(memory_id)
        er.add("memories_erased")
        er.tables |= {
            "memories",
            "memory_revisions",
            "evidence",
            "search_projections",
            "memory_embeddings",
            "proposals",
            "tombstones",
        }

    def _drop_summaries(
        self,
        conn: Connection,
        er: Erasure,
        *,
        memory_ids: list[str] | None = None,
        message_keys: list[str] | None = None,
    ) -> None:
        """Monthly summaries are derived: every version citing an erased memory or message goes,
        and with them the profile versions built on those months (`pmem summarize` redoes them
        from what is left)."""
        if "month_summaries" not in self.columns(conn):
            return
        months = [
            r[0]
            for r in conn.execute(
                """DELETE FROM month_summaries WHERE memory_ids && %s::text[] OR message_keys && %s::text[]
               RETURNING month""",
                (memory_ids or [], message_keys or []),
            )
        ]
        n = conn.execute(
            "DELETE FROM profile_versions WHERE memory_ids && %s::text[] OR months && %s::text[]",
            (memory_ids or [], months),
        ).rowcount
        if months or n:
            er.add("summaries_erased", len(months) + n)
            er.tables |= {"month_summaries", "profile_versions"}

    def _drop_concepts(self, conn: Connection, er: Erasure, memory_id: str) -> None:
        """Concept memory is derived: the experience goes, its links are recomputed from the
        remaining supporters (removed when none is left), concepts no experience shows any more
        go, and the weight log forgets the memory (store/concepts.py)."""
        if "experiences" not in self.columns(conn):
            return
        n = ConceptStore(self.db).erase(conn, memory_id)
        if any(n.values()):
            er.add("concept_links_recomputed", n["links_withdrawn"])
            er.add("experiences_erased", n["experiences_withdrawn"])
            er.tables |= {
                "concept_names",
                "concept_embeddings",
                "experiences",
                "experience_links",
                "concept_relations",
                "concept_link_updates",
            }


def remaining_of_memory(db: Database, memory_id: str) -> dict[str, int]:
    """Rows that still name an erased memory, outside its tombstone (ids only)."""
    out: dict[str, int] = {}
    with db.connection() as conn:
        for table in (
            "memories",
            "memory_revisions",
            "evidence",
            "search_projections",
            "memory_embeddings",
        ):
            col = "id" if table == "memories" else "memory_id"
            n = conn.execute(
                sql.SQL("SELECT count(*) FROM {} WHERE {} = %s").format(
                    sql.Identifier(table), sql.Identifier(col)
                ),
                (memory_id,),
            ).fetchone()[0]  # type: ignore[index]
            if n:
                out[table] = n
    return out


def remaining_of_conversation(
    db: Database, conversation_key: str, *, ledger: bool
) -> dict[str, int]:
    out: dict[str, int] = {}
    queries = {
        "message_search": "SELECT count(*) FROM message_search WHERE conversation_key = %s",
        "evidence": "SELECT count(*) FROM evidence WHERE regexp_replace(source_key, ':[^:]*$', '') = %s",
    }
    if ledger:
        queries["source_messages"] = (
            "SELECT count(*) FROM source_messages WHERE conversation_key = %s"
        )
        queries["source_conversations"] = (
            "SELECT count(*) FROM source_conversations WHERE conversation_key = %s"
        )
    with db.connection() as conn:
        for name, q in queries.items():
            n = conn.execute(q, (conversation_key,)).fetchone()[0]  # type: ignore[index]
            if n:
                out[name] = n
    return out


def _named_in(name: str) -> Callable[[str], bool]:
    wanted = speaker_name(name)
    return lambda words: speaker_name(words) == wanted


def _erase_name_in_titles(conn: Connection, name: str) -> int:
    """A speaker's name in the conversations' titles (a one-to-one chat is titled by its
    partner: LINE, Telegram) becomes the marker, as whole words (``redact_names``); the title's
    exact bytes (``title_raw``) follow. Returns the titles changed. A later import of the same
    export redacts it again (``ErasedIndex.redact_speakers``)."""
    named = _named_in(name)
    changed = 0
    for key, title, raw in conn.execute(
        "SELECT conversation_key, title, title_raw FROM source_conversations "
        "WHERE title IS NOT NULL ORDER BY conversation_key FOR UPDATE"
    ).fetchall():
        new = redact_names(title, named)
        exact = bytes_text(bytes(raw)) if raw is not None else None
        new_raw = redact_names(exact, named) if exact is not None else None
        if new == title and new_raw == exact:
            continue
        conn.execute(
            "UPDATE source_conversations SET title = %s, title_raw = %s WHERE conversation_key = %s",
            (new, text_bytes(new_raw) if new_raw is not None else None, key),
        )
        changed += 1
    return changed


def remaining_of_speaker(
    db: Database, keys: list[str], *, ledger: bool, name: str | None = None
) -> dict[str, int]:
    """Rows that still hold an erased speaker's messages (by key; ids and counts only), and, with
    ``name``, the titles that still name them."""
    out: dict[str, int] = {}
    queries: dict[str, tuple[str, tuple[Any, ...]]] = {
        "message_search": (
            "SELECT count(*) FROM message_search WHERE message_key = ANY(%s)",
            (keys,),
        ),
        "evidence": ("SELECT count(*) FROM evidence WHERE source_key = ANY(%s)", (keys,)),
    }
    if ledger:
        queries["source_messages"] = (
            "SELECT count(*) FROM source_messages WHERE message_key = ANY(%s) AND (body <> %s OR role <> %s)",
            (keys, text_bytes(MARKER), MARKER),
        )
    with db.connection() as conn:
        for table, (q, params) in queries.items():
            n = conn.execute(q, params).fetchone()[0]  # type: ignore[index]
            if n:
                out[table] = n
        if ledger and name is not None:
            named = _named_in(name)
            titles = sum(
                redact_names(t, named) != t
                for (t,) in conn.execute(
                    "SELECT title FROM source_conversations WHERE title IS NOT NULL"
                )
            )
            if titles:
                out["source_conversations.title"] = titles
    return out
