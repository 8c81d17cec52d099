"""The source ledger: every imported message, byte-exact, under a stable key.

Re-importing the same export writes nothing (a conversation whose content hash is unchanged is
skipped before any write). A conversation that grew gets its new messages added and is marked
changed; messages already stored are never rewritten (their branch position may move).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any

import psycopg
from psycopg import Connection
from psycopg.rows import dict_row
from psycopg.types.json import Jsonb

from core.hashing import bytes_text, tagged_hash
from core.models import Channel, Conversation, Message, PrefilterDecision, Provenance
from store.db import Database
from store.erased import ErasedIndex, load_key
from store.ledger_rows import (
    _INSERT_DECISION,
    _INSERT_QUARANTINE,
    BatchIndex,
    Digest,
    UpsertOutcome,
    _copy_index,
    _copy_new,
    _decision_row,
    _forgotten_any,
    _queue_streamed,
    _storable_json,
    _upsert_locked,
    digest,
    storable,
)

#: per conversation of a batch: outcome, new messages, kept, reason (kept and reason None: a
#: new conversation whose decision the index worker makes behind the commit, ``BatchIndex``)
BatchResult = tuple[UpsertOutcome, int, bool | None, str | None]


class Ledger:
    def __init__(self, db: Database, erasure_key: bytes | None = None) -> None:
        self.db = db
        #: the HMAC key of `pmem forget --from-ledger` (read from the data dir when None and
        #: something was erased); what was erased never comes back with a re-import
        self.erasure_key = erasure_key
        self._erased: ErasedIndex | None = None
        self._erased_loaded = False

    def _erasures(self, conn: Connection) -> ErasedIndex | None:
        if not self._erased_loaded:
            self._erased = ErasedIndex.load(conn, self._key)
            self._erased_loaded = True
        return self._erased

    def _key(self) -> bytes | None:
        if self.erasure_key is None:
            from core.settings import get_settings

            self.erasure_key = load_key(get_settings().data_dir, create=False)
        return self.erasure_key

    def start_import(self, source: str, file: str) -> str:
        self._erased_loaded = False  # a forget since the last import counts
        import_id = tagged_hash("import", [source, file, datetime.now(UTC).isoformat()], length=20)
        with self.db.connection() as conn, conn.transaction():
            conn.execute(
                "INSERT INTO import_runs (import_id, source, file) VALUES (%s, %s, %s)",
                (import_id, source, storable(file)),
            )
        return import_id

    def finish_import(self, import_id: str, stats: dict) -> None:
        with self.db.connection() as conn, conn.transaction():
            conn.execute(
                "UPDATE import_runs SET finished_at = now(), stats = %s WHERE import_id = %s",
                (Jsonb(_storable_json(stats)), import_id),
            )

    def finished_import_of(self, source: str, fingerprint: dict[str, Any]) -> dict | None:
        """The stats of the last import of a file with this fingerprint (bytes and reader
        version) that finished with nothing quarantined and no input error, or None."""
        with self.db.connection() as conn:
            row = conn.execute(
                """SELECT stats FROM import_runs
                   WHERE source = %s AND finished_at IS NOT NULL
                     AND stats -> 'file_fingerprint' = %s
                     AND COALESCE((stats ->> 'errors_total')::int, 1) = 0
                     AND stats ->> 'input_error' IS NULL
                   ORDER BY finished_at DESC LIMIT 1""",
                (source, Jsonb(fingerprint)),
            ).fetchone()
        return row[0] if row else None

    def upsert(
        self, conv: Conversation, import_id: str, decision: PrefilterDecision | None = None
    ) -> tuple[UpsertOutcome, int]:
        """Store a conversation (and its prefilter decision, in the same transaction); returns the
        outcome and the number of new messages. What `pmem forget --from-ledger` erased stays
        erased: an erased conversation is skipped (reported unchanged), an erased message keeps
        its redacted body, and an erased secret is redacted in new messages and the title."""
        with self.db.connection() as conn, conn.transaction():
            erased = self._erasures(conn)
            if erased is not None:
                redacted = erased.apply(conn, conv)
                if redacted is None:
                    return "unchanged", 0
                if redacted is not conv:
                    conv = redacted
                    if decision is not None:
                        decision = decision.model_copy(update={"content_hash": conv.content_hash})
            row = conn.execute(
                "SELECT content_hash FROM source_conversations WHERE conversation_key = %s FOR UPDATE",
                (storable(conv.key),),
            ).fetchone()
            return _upsert_locked(conn, conv, import_id, decision, None if row is None else row[0])

    def defer_token_index(self) -> bool:
        """Before a bulk load into an empty message index: drop the GIN index on its tokens, so
        that ``build_token_index`` builds it once after the load (about 3x less server CPU than
        keeping it up row by row, ADR 0044). True when the index is left to be built; on a store
        with index rows (or one another writer holds) it stays, and is built when a run killed
        before building it left it missing."""
        with self.db.connection() as conn:  # without a lock first: a store with rows is usual
            row = conn.execute("SELECT EXISTS (SELECT 1 FROM message_search)").fetchone()
        if row is None or row[0]:
            self.build_token_index()
            return False
        try:
            with self.db.connection() as conn, conn.transaction():
                conn.execute("SET LOCAL lock_timeout = '2s'")
                conn.execute("LOCK TABLE message_search IN ACCESS EXCLUSIVE MODE")
                row = conn.execute("SELECT EXISTS (SELECT 1 FROM message_search)").fetchone()
                if row is None or row[0]:
                    deferred = False
                else:
                    conn.execute("DROP INDEX IF EXISTS message_search_tokens")
                    deferred = True
        except psycopg.errors.LockNotAvailable:
            deferred = False
        if not deferred:
            self.build_token_index()
        return deferred

    def build_token_index(self) -> None:
        """The message index's GIN index on tokens (migration 0003's), unless it exists: one
        sorted build in memory instead of a merge per pending list."""
        with self.db.connection() as conn, conn.transaction():
            row = conn.execute("SELECT to_regclass('message_search_tokens')").fetchone()
            if row is not None and row[0] is not None:
                return  # there (the usual case): no lock on the table is taken
            conn.execute("SET LOCAL maintenance_work_mem = '256MB'")
            conn.execute(
                "CREATE INDEX IF NOT EXISTS message_search_tokens ON message_search USING gin (tokens)"
            )

    def write_batch(
        self,
        convs: list[Conversation],
        import_id: str,
        decide: Callable[[Conversation], PrefilterDecision],
        rule_version: str,
        quarantined: Sequence[tuple[str, str, int, str]] = (),
        digests: list[Digest] | None = None,
        index: BatchIndex | None = None,
    ) -> list[BatchResult]:
        """Store many conversations in one transaction: whole conversations or none (what resume
        relies on), with one look-up of the stored content hashes and prefilter decisions for the
        whole batch, the new conversations and their messages by COPY, the changed ones message by
        message. ``decide`` (the prefilter) runs only for a conversation whose decision for
        ``rule_version`` is not stored yet. ``quarantined`` rows (source, file, position, reason)
        go in the same transaction. ``digests`` (from :func:`digest`, one per conversation) saves
        hashing the texts again. ``index`` (the import's): the message index rows of the new
        conversations, stored in the same transaction (``BatchIndex``). Returns per
        conversation: outcome, new messages, kept, reason.
        """
        if index is not None:  # filled by this transaction (a retry below queues by trigger)
            index.queued, index.undecided = [], []
        try:
            with self.db.connection() as conn, conn.transaction():
                # whole batches or none either way; a power cut may lose the last committed batch,
                # which a re-run imports again (the import's resume): commits need not wait on fsync
                conn.execute("SET LOCAL synchronous_commit = off")
                indexed: list[int] = []
                done = self._write_batch(
                    conn,
                    convs,
                    import_id,
                    decide,
                    rule_version,
                    quarantined,
                    digests,
                    (index, indexed) if index is not None else None,
                )
            if index is not None:
                index.written += sum(indexed)
            return done
        except (psycopg.errors.UniqueViolation, psycopg.errors.ForeignKeyViolation):
            # another import wrote one of these keys meanwhile: the slow path, one at a time
            if index is not None:  # that transaction's queue rolled back: the trigger queues
                index.queued, index.undecided = [], []
            out: list[BatchResult] = []
            for conv in convs:
                d = decide(conv)
                outcome, new = self.upsert(conv, import_id, d)
                out.append((outcome, new, d.keep, d.reason))
            for q in quarantined:
                self.quarantine(*q, import_id)
            return out

    def stored_state(
        self, convs: list[Conversation], rule_version: str
    ) -> dict[str, tuple[str, bool | None]]:
        """Stored content hash and decision (of ``rule_version``) per conversation key, read
        without a lock: a hint for preparing a batch (``write_batch`` checks again, locked)."""
        keys = [storable(c.key) for c in convs]
        with self.db.connection() as conn:
            rows = conn.execute(
                """SELECT c.conversation_key, c.content_hash, d.keep
                   FROM source_conversations c
                   LEFT JOIN prefilter_decisions d ON d.conversation_key = c.conversation_key
                        AND d.content_hash = c.content_hash AND d.rule_version = %s
                   WHERE c.conversation_key = ANY(%b)""",
                (rule_version, keys),
            ).fetchall()
        return {key: (chash, keep) for key, chash, keep in rows}

    def _write_batch(
        self,
        conn: Connection,
        convs: list[Conversation],
        import_id: str,
        decide: Callable[[Conversation], PrefilterDecision],
        rule_version: str,
        quarantined: Sequence[tuple[str, str, int, str]],
        digests: list[Digest] | None = None,
        index: tuple[BatchIndex, list[int]] | None = None,
    ) -> list[BatchResult]:
        erased = self._erasures(conn)
        gone: set[int] = set()  # positions of conversations `pmem forget --from-ledger` erased
        if erased is not None:  # what was erased stays erased (see upsert)
            kept_convs: list[Conversation] = []
            for i, conv in enumerate(convs):
                redacted = erased.apply(conn, conv)
                if redacted is None:
                    gone.add(i)
                else:
                    kept_convs.append(redacted)
            if gone:
                inner = self._write_batch_plain(
                    conn, kept_convs, import_id, decide, rule_version, quarantined
                )
                it = iter(inner)
                return [
                    ("unchanged", 0, False, "drop:erased") if i in gone else next(it)
                    for i in range(len(convs))
                ]
            convs = kept_convs
            digests = None  # redaction may have changed texts: hash them again
            index = None  # the tokens were computed from the texts before redaction: the queue
        return self._write_batch_plain(
            conn, convs, import_id, decide, rule_version, quarantined, digests, index
        )

    def _write_batch_plain(
        self,
        conn: Connection,
        convs: list[Conversation],
        import_id: str,
        decide: Callable[[Conversation], PrefilterDecision],
        rule_version: str,
        quarantined: Sequence[tuple[str, str, int, str]],
        digests: list[Digest] | None = None,
        index: tuple[BatchIndex, list[int]] | None = None,
    ) -> list[BatchResult]:
        keys = [storable(c.key) for c in convs]
        stored = {
            key: (chash, keep, reason)
            for key, chash, keep, reason in conn.execute(
                """SELECT c.conversation_key, c.content_hash, d.keep, d.reason
                   FROM source_conversations c
                   LEFT JOIN prefilter_decisions d ON d.conversation_key = c.conversation_key
                        AND d.content_hash = c.content_hash AND d.rule_version = %s
                   WHERE c.conversation_key = ANY(%b)
                   FOR UPDATE OF c""",
                (rule_version, keys),
            )
        }
        out: list[BatchResult] = []
        new_convs: list[tuple[Conversation, Digest]] = []
        decisions: list[PrefilterDecision] = []
        # new conversations streamed to the index workers are decided there (BatchIndex)
        inline = (
            index is not None and any(k not in stored for k in keys) and not _forgotten_any(conn)
        )
        defer = inline and index is not None and index[0].streamed and index[0].defer_decisions
        undecided: set[int] = set()
        for i, (conv, key) in enumerate(zip(convs, keys, strict=True)):
            dig = digests[i] if digests is not None else digest(conv)
            chash = dig[0]
            have = stored.get(key)
            if have is not None and have[0] == chash:
                if have[1] is not None:  # unchanged and decided: nothing to write
                    out.append(("unchanged", 0, have[1], have[2]))
                    continue
                d = decide(conv)
                decisions.append(d)
                out.append(("unchanged", 0, d.keep, d.reason))
                continue
            if have is None and defer:
                undecided.add(len(new_convs))
                new_convs.append((conv, dig))
                out.append(("new", len(conv.messages), None, None))
                continue
            d = decide(conv)
            if have is None:
                new_convs.append((conv, dig))
                out.append(("new", len(conv.messages), d.keep, d.reason))
            else:
                outcome, new = _upsert_locked(conn, conv, import_id, None, have[0], dig)
                out.append((outcome, new, d.keep, d.reason))
            decisions.append(d)
        if new_convs:
            if inline:  # the trigger does not queue what this transaction indexes itself
                conn.execute("SELECT set_config('pmem.inline_index', 'on', true)")
            drafted = _copy_new(conn, new_convs, import_id)
            if inline and index is not None:
                conn.execute("SELECT set_config('pmem.inline_index', 'off', true)")
                if index[0].streamed:  # the rows are written behind the ledger's commit
                    _queue_streamed(conn, new_convs, index[0], undecided, drafted)
                else:
                    index[1].append(_copy_index(conn, [c for c, _ in new_convs], index[0]))
        with conn.cursor() as cur:
            if decisions:
                cur.executemany(_INSERT_DECISION, [_decision_row(d) for d in decisions])
            if quarantined:
                cur.executemany(
                    _INSERT_QUARANTINE,
                    [(q[0], storable(q[1]), q[2], storable(q[3]), import_id) for q in quarantined],
                )
        return out

    def quarantine(
        self, source: str, file: str, position: int, reason: str, import_id: str
    ) -> None:
        with self.db.connection() as conn, conn.transaction():
            conn.execute(
                _INSERT_QUARANTINE, (source, storable(file), position, storable(reason), import_id)
            )

    # ---------------------------------------------------------------- prefilter

    def overrides(self) -> dict[str, bool]:
        with self.db.connection() as conn:
            return dict(
                conn.execute("SELECT conversation_key, keep FROM prefilter_overrides").fetchall()
            )

    def set_override(self, conversation_key: str, keep: bool) -> None:
        with self.db.connection() as conn, conn.transaction():
            conn.execute(
                """INSERT INTO prefilter_overrides (conversation_key, keep) VALUES (%s, %s)
                   ON CONFLICT (conversation_key) DO UPDATE SET keep = EXCLUDED.keep, set_at = now()""",
                (conversation_key, keep),
            )

    def kept_conversations(self, source: str, rule_version: str) -> list[dict]:
        """Current conversations of a source that the prefilter kept: key, hash, chars (and
        title and dates, for the owner's exclusion rules)."""
        with self.db.connection() as conn:
            return (
                conn.cursor(row_factory=dict_row)
                .execute(
                    f"""SELECT c.conversation_key, c.content_hash, c.drafting_chars, c.title,
                          c.created_at, c.updated_at
                   FROM source_conversations c {DECISION_JOINS}
                   WHERE c.source = %(source)s AND d.rule_version = %(rule)s
                     AND coalesce(o.keep, d.keep) AND {NOT_FORGOTTEN}
                   ORDER BY c.created_at NULLS LAST, c.conversation_key""",
                    {"rule": rule_version, "source": source},
                )
                .fetchall()
            )

    def record_decisions(self, decisions: Sequence[PrefilterDecision]) -> None:
        """Store prefilter decisions made outside a batch's transaction (the import's, when the
        index worker that was to store them failed); a decision already stored stays."""
        if not decisions:
            return
        with self.db.connection() as conn, conn.transaction(), conn.cursor() as cur:
            cur.executemany(_INSERT_DECISION, [_decision_row(d) for d in decisions])

    def decisions(self, source: str) -> list[dict]:
        with self.db.connection() as conn:
            return (
                conn.cursor(row_factory=dict_row)
                .execute(
                    """SELECT d.conversation_key, d.keep, d.reason FROM prefilter_decisions d
                   JOIN source_conversations c ON c.conversation_key = d.conversation_key
                        AND c.content_hash = d.content_hash
                   WHERE c.source = %s ORDER BY d.conversation_key""",
                    (source,),
                )
                .fetchall()
            )

    # ---------------------------------------------------------------- reading back

    def list_conversations(self, rule_version: str, source: str | None = None) -> list[dict]:
        """Every conversation of the ledger (of one source) with the prefilter's current word on
        it: ``kept`` is the person's override when there is one, else the decision of
        ``rule_version`` (or the newest decision) for the current content; None when undecided."""
        with self.db.connection() as conn:
            rows = (
                conn.cursor(row_factory=dict_row)
                .execute(
                    _LIST_SQL + " WHERE (%(source)s::text IS NULL OR c.source = %(source)s)"
                    " ORDER BY c.created_at NULLS LAST, c.conversation_key",
                    {"rule": rule_version, "source": source},
                )
                .fetchall()
            )
        return [_exact_title(r) for r in rows]

    def conversation_row(self, conversation_key: str, rule_version: str) -> dict | None:
        """One conversation as ``list_conversations`` shows it, plus its provenance; None if absent."""
        with self.db.connection() as conn:
            row = (
                conn.cursor(row_factory=dict_row)
                .execute(
                    _LIST_SQL + " WHERE c.conversation_key = %(key)s",
                    {"rule": rule_version, "key": conversation_key},
                )
                .fetchone()
            )
        return None if row is None else _exact_title(row)

    def active_messages(self, conversation_key: str) -> list[dict]:
        """The active-path messages of a conversation in order: key, role, channel, created_at
        and the exact text (lone surrogates kept)."""
        with self.db.connection() as conn:
            rows = conn.execute(
                """SELECT message_key, role, channel, content_type, created_at, body
                   FROM source_messages WHERE conversation_key = %s AND on_active_path
                   ORDER BY position, message_key""",
                (conversation_key,),
            ).fetchall()
        return [
            {
                "key": k,
                "role": role,
                "channel": ch,
                "content_type": ct,
                "created_at": at,
                "text": bytes_text(bytes(body)),
            }
            for k, role, ch, ct, at, body in rows
        ]

    def active_messages_of(self, conversation_keys: list[str]) -> dict[str, list[dict]]:
        """``active_messages`` of several conversations in one query (a conversation with no
        active message is absent)."""
        with self.db.connection() as conn:
            rows = conn.execute(
                """SELECT conversation_key, message_key, role, channel, content_type, created_at, body
                   FROM source_messages WHERE conversation_key = ANY(%s) AND on_active_path
                   ORDER BY conversation_key, position, message_key""",
                (list(conversation_keys),),
            ).fetchall()
        out: dict[str, list[dict]] = {}
        for conv, k, role, ch, ct, at, body in rows:
            out.setdefault(conv, []).append(
                {
                    "key": k,
                    "role": role,
                    "channel": ch,
                    "content_type": ct,
                    "created_at": at,
                    "text": bytes_text(bytes(body)),
                }
            )
        return out

    def quarantined(self, source: str | None = None) -> list[dict]:
        """What the imports set aside, oldest first: file (``zip!member`` for a zip member),
        record position, machine-readable reason."""
        with self.db.connection() as conn:
            return (
                conn.cursor(row_factory=dict_row)
                .execute(
                    """SELECT source, file, position, reason, import_id, seen_at FROM quarantine
                   WHERE (%(source)s::text IS NULL OR source = %(source)s)
                   ORDER BY seen_at, source, file, position, reason""",
                    {"source": source},
                )
                .fetchall()
            )

    def has_conversation(self, conversation_key: str) -> bool:
        with self.db.connection() as conn:
            row = conn.execute(
                "SELECT 1 FROM source_conversations WHERE conversation_key = %s",
                (conversation_key,),
            ).fetchone()
        return row is not None

    def load(self, conversation_key: str, *, raw: bool = False) -> Conversation:
        """A conversation as drafting sees it: byte-exact, except that a secret `pmem forget`
        erased from everything derived (the ledger keeps it) is redacted, so no later draft,
        drafter request or run file gets it back; ``raw`` gives the stored bytes."""
        with self.db.connection() as conn:
            erased = None if raw else ErasedIndex.load(conn, self._key, secrets_only=True)
            cur = conn.cursor(row_factory=dict_row)
            c = cur.execute(
                "SELECT * FROM source_conversations WHERE conversation_key = %s",
                (conversation_key,),
            ).fetchone()
            if c is None:
                raise KeyError(conversation_key)
            rows = cur.execute(
                """SELECT * FROM source_messages WHERE conversation_key = %s
                   ORDER BY on_active_path DESC, position, message_key""",
                (conversation_key,),
            ).fetchall()
        messages = [
            Message(
                key=r["message_key"],
                node_id=r["node_id"],
                parent_id=r["parent_id"],
                role=r["role"],
                channel=Channel(r["channel"]),
                content_type=r["content_type"],
                raw_type=r["raw_type"],
                text=bytes_text(bytes(r["body"])),
                created_at=r["created_at"],
                position=r["position"],
                on_active_path=r["on_active_path"],
                branch_index=r["branch_index"],
            )
            for r in rows
        ]
        title = c["title"]
        if erased is not None:
            messages = [
                m.model_copy(update={"text": erased.redact_text(m.text, derived=True)})
                for m in messages
            ]
            title = erased.redact_text(title, derived=True) if title else title
        return Conversation(
            key=c["conversation_key"],
            source=c["source"],
            external_id=c["external_id"],
            title=title,
            created_at=c["created_at"],
            updated_at=c["updated_at"],
            messages=messages,
            provenance=Provenance(**c["provenance"]),
            unknown_types=c["unknown_types"],
        )

    def raw_title(self, conversation_key: str) -> str | None:
        """The conversation's title exactly as the export had it (NUL and lone surrogates
        included); ``load`` gives the storable form that the drafter and the memories use."""
        with self.db.connection() as conn:
            row = conn.execute(
                "SELECT title, title_raw FROM source_conversations WHERE conversation_key = %s",
                (conversation_key,),
            ).fetchone()
        if row is None:
            raise KeyError(conversation_key)
        return bytes_text(bytes(row[1])) if row[1] is not None else row[0]

    def counts(self) -> dict[str, int]:
        with self.db.connection() as conn:
            row = conn.execute(
                "SELECT (SELECT count(*) FROM source_conversations), (SELECT count(*) FROM source_messages)"
            ).fetchone()
        assert row is not None
        return {"conversations": row[0], "messages": row[1]}


# The prefilter's say on each conversation ``c``: the owner's override ``o``, else the newest
# decision ``d`` on its current content (the rule version ``%(rule)s`` first when the query
# passes one; ``None`` prefers none). Shared by the ledger's lists, the drafting plan and the
# monthly summaries, so "kept" means one thing everywhere.
DECISION_JOINS = """
  LEFT JOIN prefilter_overrides o ON o.conversation_key = c.conversation_key
  LEFT JOIN LATERAL (
      SELECT keep, reason, rule_version FROM prefilter_decisions d
       WHERE d.conversation_key = c.conversation_key AND d.content_hash = c.content_hash
       ORDER BY (d.rule_version = %(rule)s) IS TRUE DESC, d.decided_at DESC LIMIT 1) d ON true"""

# ... and the conversation ``c`` was not erased by `pmem forget`.
NOT_FORGOTTEN = """NOT EXISTS (SELECT 1 FROM forgotten_conversations f
                     WHERE f.conversation_key = c.conversation_key)"""

_LIST_SQL = (
    """SELECT c.conversation_key AS key, c.source, c.external_id, c.title, c.title_raw, c.created_at,
       c.updated_at, c.message_count, c.provenance, c.unknown_types, o.keep AS override,
       coalesce(o.keep, d.keep) AS kept,
       CASE WHEN o.keep IS NULL THEN d.reason
            WHEN o.keep THEN 'keep:override' ELSE 'drop:override' END AS prefilter_reason
  FROM source_conversations c"""
    + DECISION_JOINS
)


def _exact_title(row: dict) -> dict:
    """The title as the export had it (``title_raw`` holds it when it has a NUL or a lone
    surrogate)."""
    raw = row.pop("title_raw", None)
    if raw is not None:
        row["title"] = bytes_text(bytes(raw))
    return row
