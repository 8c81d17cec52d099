"""How one revision of a memory is written, and the store's guard on it: every write runs in
one transaction: the memory row is locked (``FOR UPDATE``), the expected revision is checked (a
stale one raises :class:`StaleRevision` carrying the current revision, never last-write-wins),
the new revision row is inserted (the table refuses UPDATE/DELETE), the evidence and the search
projection are written, and the idempotency key is recorded with the response, so a replayed
commit returns the first result.

Every record passes the secret guard (``core.secrets``) on its final text, after any merge,
with the secret values found in its evidence's source messages scrubbed too (``guard_record``);
evidence is checked, never redacted (``RevisionWriter._check_evidence``). The operations on
memories built on this (commit, restore, delete, the owner's queue, a backup, the reads) are
``store.records.MemoryStore``'s.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from datetime import datetime
from typing import Any

from psycopg import Connection
from psycopg.rows import dict_row
from psycopg.types.json import Jsonb

from core.errors import (
    EvidenceRefused,
    MemoryNotFound,
    StaleRevision,
    StoreError,
    TombstonedMemory,
)
from core.hashing import (
    bytes_text,
    canonical_json,
    evidence_hash,
    sha256_hex,
    tagged_hash,
)
from core.models import (
    CommitRequest,
    CommitResult,
    EvidenceIn,
)
from core.secrets import contains_secret, find_secrets, redact, redaction_marker, secret_values
from core.sections import derived_index_line, merge_summaries
from core.textsearch import index_tokens, thin_quote
from store.db import Database
from store.erased import forgotten_in_record, forgotten_redactor, forgotten_values

RECORD_FIELDS = (
    "kind",
    "title",
    "canonical_summary",
    "index_summary",
    "aliases",
    "tags",
    "occurred_at",
    "valid_from",
    "stated_facts",
    "inferences",
)
_TEXT_FIELDS = ("title", "canonical_summary", "index_summary")
_LABEL_FIELDS = ("aliases", "tags")  # a label holding a secret (or a piece of one) is dropped
_SENTENCE_FIELDS = ("stated_facts", "inferences")  # sentences are kept, redacted
MIN_PIECE_CHARS = 6  # an alias / tag this long that is part of a known secret value is dropped
CONVERSATION_TEXT = ("person", "assistant")


def conversation_key_of(source_key: str) -> str:
    """`chatgpt:<conversation>:<node>` → `chatgpt:<conversation>`."""
    return source_key.rsplit(":", 1)[0]


def _iso(v: datetime | None) -> str | None:
    return v.isoformat() if v is not None else None


def _record_from_request(req: CommitRequest) -> dict[str, Any]:
    return {
        "kind": req.kind,
        "title": req.title,
        "canonical_summary": req.canonical_summary,
        "index_summary": req.index_summary,
        "aliases": list(dict.fromkeys(req.aliases)),
        "tags": list(dict.fromkeys(req.tags)),
        "occurred_at": _iso(req.occurred_at),
        "valid_from": _iso(req.valid_from),
        "stated_facts": list(dict.fromkeys(req.stated_facts)),
        "inferences": list(dict.fromkeys(req.inferences)),
    }


def _record_from_row(row: dict[str, Any]) -> dict[str, Any]:
    return {
        "kind": row["kind"],
        "title": row["title"],
        "canonical_summary": row["canonical_summary"],
        "index_summary": row["index_summary"],
        "aliases": list(row["aliases"]),
        "tags": list(row["tags"]),
        "occurred_at": _iso(row["occurred_at"]),
        "valid_from": _iso(row["valid_from"]),
        "stated_facts": list(row.get("stated_facts") or []),
        "inferences": list(row.get("inferences") or []),
    }


def _complete(record: dict[str, Any]) -> dict[str, Any]:
    """A record of any age with every field (revisions written before stated facts existed)."""
    return {
        **record,
        "stated_facts": list(record.get("stated_facts") or []),
        "inferences": list(record.get("inferences") or []),
    }


def guard_record(
    record: dict[str, Any], known: Iterable[str] = ()
) -> tuple[dict[str, Any], list[str]]:
    """The record with every secret redacted, and the names of the fields that changed.

    The guard runs on the final text of each field. ``known`` are secret values found in the
    source messages: they are scrubbed wherever they occur (any case: tags are lower-cased), and
    an alias or tag that is a piece of one (a key that lost its prefix, an AWS secret cut at
    ``/``) is dropped, as is a label that held a secret at all."""
    record = _complete(record)
    values = set(known) | secret_values(record[n] for n in _TEXT_FIELDS)
    values |= secret_values(v for n in (*_LABEL_FIELDS, *_SENTENCE_FIELDS) for v in record[n])
    ordered = sorted(values, key=len, reverse=True)
    lowered = [v.lower() for v in ordered]
    marker = redaction_marker("secret")

    # a value that reads as a word ("password") is replaced as a whole word only: the title
    # "Home lab passwords" keeps its word, a random value is replaced wherever it stands
    patterns = [
        re.compile(
            re.escape(v)
            if any(not c.isalpha() for c in v)
            else r"(?<![A-Za-z0-9])" + re.escape(v) + r"(?![A-Za-z0-9])",
            re.IGNORECASE,
        )
        for v in ordered
    ]

    def scrub(text: str) -> str:
        text = redact(text)[0]
        for p in patterns:
            text = p.sub(marker, text)
        return text

    def piece(label: str) -> bool:
        low = label.strip().lower()
        return len(low) >= MIN_PIECE_CHARS and any(low in v for v in lowered)

    out = dict(record)
    changed: list[str] = []
    for name in _TEXT_FIELDS:
        out[name] = scrub(record[name])
    for name in _LABEL_FIELDS:
        out[name] = [v for v in record[name] if scrub(v) == v and not piece(v)]
    for name in _SENTENCE_FIELDS:
        out[name] = [scrub(v) for v in record[name]]
    changed = [n for n in (*_TEXT_FIELDS, *_LABEL_FIELDS, *_SENTENCE_FIELDS) if out[n] != record[n]]
    return out, changed


def _guard_sentence(text: str, known: Iterable[str]) -> str:
    return guard_record({**_EMPTY_RECORD, "stated_facts": [text]}, known)[0]["stated_facts"][0]


def guard_payload(value: Any) -> Any:
    """Every string in a JSON value redacted (proposal payloads)."""
    if isinstance(value, str):
        return redact(value)[0]
    if isinstance(value, list):
        return [guard_payload(v) for v in value]
    if isinstance(value, dict):
        return {k: guard_payload(v) for k, v in value.items()}
    return value


def _overlaps_secret(excerpt: str, source: str) -> bool:
    findings = find_secrets(source)
    start = source.find(excerpt)
    while findings and start >= 0:
        end = start + len(excerpt)
        if any(f.start < end and start < f.end for f in findings):
            return True
        start = source.find(excerpt, start + 1)
    return False


def merge_append(
    current: dict[str, Any], new: dict[str, Any], *, supersede: bool = False
) -> dict[str, Any]:
    """An append never loses what the record said: the summary is merged section by section
    (``core.sections``: one section per heading, updated in place; with ``supersede`` a new
    decision becomes the current one and the old one moves, with its reasons, to the history),
    aliases and tags are a union."""
    merged = dict(current)
    cur, add = current["canonical_summary"], new["canonical_summary"]
    if add and add not in cur:
        since = (current.get("valid_from") or current.get("occurred_at") or "")[:10] or None
        merged["canonical_summary"] = (
            add
            if cur in add and not supersede
            else merge_summaries(cur, add, supersede=supersede, since=since)
        )
    if new["index_summary"]:
        merged["index_summary"] = new["index_summary"]
    merged["aliases"] = list(dict.fromkeys([*current["aliases"], *new["aliases"]]))
    merged["tags"] = list(dict.fromkeys([*current["tags"], *new["tags"]]))
    for name in ("stated_facts", "inferences"):
        merged[name] = list(dict.fromkeys([*current.get(name, []), *new.get(name, [])]))
    times = [t for t in (current["occurred_at"], new["occurred_at"]) if t]
    merged["occurred_at"] = min(times) if times else None
    valid = [t for t in (current["valid_from"], new["valid_from"]) if t]
    merged["valid_from"] = max(valid) if valid else None
    return merged


def _request_hash(req: CommitRequest) -> str:
    body = req.model_dump(mode="json", exclude={"idempotency_key", "run_id", "proposal_id"})
    for name in ("stated_facts", "inferences"):  # keys recorded before these existed still replay
        if not body[name]:
            body.pop(name)
    return sha256_hex(canonical_json(body))


#: secret values per (conversation key, content hash): the guard's scan of a conversation is
#: reused by every commit resting on it (values only, in this process's memory)
_SECRET_CACHE: dict[tuple[str, str], frozenset[str]] = {}


def remember_secret_values(conversation_key: str, content_hash: str, values: Iterable[str]) -> None:
    """Secret values a caller in this process already found in a conversation's drafted text
    (the backfill's draft step): the store's guard reuses them instead of scanning it again.
    Only the drafted messages reach a drafter, so a record made from them can only carry
    pieces of these."""
    if len(_SECRET_CACHE) > 4096:
        _SECRET_CACHE.clear()
    _SECRET_CACHE[(conversation_key, content_hash)] = frozenset(values)


_EMPTY_RECORD: dict[str, Any] = {
    "kind": "",
    "title": "",
    "canonical_summary": "",
    "index_summary": "",
    "aliases": [],
    "tags": [],
    "occurred_at": None,
    "valid_from": None,
    "stated_facts": [],
    "inferences": [],
}


class RevisionWriter:
    """The transaction of one write (lock, revision, evidence, projection, idempotency) and the
    guard it runs; ``MemoryStore`` builds its operations on it.

    ``ledger_evidence`` (default on): every evidence excerpt must be verbatim in a person or
    assistant message of the source ledger, found by its message key. Only tests that commit
    made-up evidence turn it off; the secret checks on evidence hold either way."""

    def __init__(self, db: Database, *, ledger_evidence: bool = True) -> None:
        self.db = db
        self.ledger_evidence = ledger_evidence

    def _replay(self, conn: Connection, key: str, request_hash: str) -> CommitResult | None:
        conn.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", (key,))
        row = conn.execute(
            "SELECT response FROM idempotency_keys WHERE key = %s", (key,)
        ).fetchone()
        if row is None:
            return None
        stored = dict(row[0])
        if stored.pop("request_hash", request_hash) != request_hash:
            raise StoreError(f"idempotency key {key} was used before for a different request")
        return CommitResult(**stored, replayed=True)

    def _remember(
        self, conn: Connection, key: str, op: str, result: CommitResult, request_hash: str
    ) -> None:
        body = result.model_dump(mode="json", exclude={"replayed"}) | {"request_hash": request_hash}
        conn.execute(
            "INSERT INTO idempotency_keys (key, operation, memory_id, response) VALUES (%s, %s, %s, %s)",
            (key, op, result.memory_id, Jsonb(body)),
        )

    def _lock(
        self,
        conn: Connection,
        memory_id: str,
        expected: int | None,
        *,
        allow_deleted: bool = False,
        check: bool = True,
    ) -> dict[str, Any]:
        row = (
            conn.cursor(row_factory=dict_row)
            .execute("SELECT * FROM memories WHERE id = %s FOR UPDATE", (memory_id,))
            .fetchone()
        )
        if row is None:
            tomb = conn.execute(
                "SELECT 1 FROM tombstones WHERE memory_id = %s", (memory_id,)
            ).fetchone()
            if tomb:
                raise TombstonedMemory(memory_id)
            raise MemoryNotFound(memory_id)
        if row["status"] == "deleted" and not allow_deleted:
            raise TombstonedMemory(memory_id)
        if check and expected != row["current_revision"]:
            raise StaleRevision(memory_id, expected, row["current_revision"])
        return row

    def _existing(self, conn: Connection, memory_id: str) -> dict[str, Any]:
        """An active memory's row (no lock): MemoryNotFound / TombstonedMemory otherwise."""
        row = (
            conn.cursor(row_factory=dict_row)
            .execute("SELECT * FROM memories WHERE id = %s", (memory_id,))
            .fetchone()
        )
        if row is None:
            raise MemoryNotFound(memory_id)
        if row["status"] == "deleted":
            raise TombstonedMemory(memory_id)
        return row

    def _create(self, conn: Connection, req: CommitRequest) -> CommitResult:
        known = self._check_evidence(conn, req.evidence)
        source_keys = sorted({e.source_key for e in req.evidence})
        if source_keys:
            # tombstones hold: no create may rest on any message of a deleted memory's source
            # conversations (grown or not), nor on one of its evidence messages
            tomb = conn.execute(
                """SELECT memory_id FROM tombstones
                   WHERE source_keys && %s::text[] OR conversation_keys && %s::text[]
                   ORDER BY deleted_at LIMIT 1""",
                (source_keys, self._conversations_of(conn, source_keys)),
            ).fetchone()
            if tomb is not None:
                raise TombstonedMemory(tomb[0])
        memory_id = "mem_" + tagged_hash("memory", req.idempotency_key, length=20).split(":")[1]
        record = _record_from_request(req)
        if not record["index_summary"].strip():  # a client's create: derived from the content
            record["index_summary"] = derived_index_line(req.title, req.canonical_summary)
        known |= forgotten_in_record(conn, record)  # `pmem forget` erased them
        record, redacted = guard_record(record, known)
        conn.execute(
            """INSERT INTO memories (id, kind, title, canonical_summary, index_summary, aliases,
                   tags, occurred_at, valid_from, stated_facts, inferences, current_revision)
               VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, 1)""",
            (
                memory_id,
                record["kind"],
                record["title"],
                record["canonical_summary"],
                record["index_summary"],
                record["aliases"],
                record["tags"],
                req.occurred_at,
                req.valid_from,
                record["stated_facts"],
                record["inferences"],
            ),
        )
        self._write_revision(
            conn,
            memory_id,
            1,
            record,
            reason=req.reason,
            restored_from=None,
            run_id=req.run_id,
            client=req.client,
            model=req.model,
            prompt_version=req.prompt_version,
        )
        added = self._add_evidence(conn, memory_id, req, 1)
        self._project(conn, memory_id, record)
        return CommitResult(
            memory_id=memory_id,
            revision=1,
            created=True,
            evidence_added=added,
            redacted_fields=redacted,
        )

    def _append(self, conn: Connection, req: CommitRequest) -> CommitResult:
        assert req.memory_id is not None
        row = self._lock(conn, req.memory_id, req.expected_revision)
        known = self._check_evidence(conn, req.evidence)
        known |= self._known_secrets(conn, self._evidence_keys(conn, req.memory_id))
        current = _record_from_row(row)
        new = _record_from_request(req)
        if req.reason in ("correction", "restore"):
            record = new
        else:  # a decision drafted from another conversation supersedes the current one
            have = {conversation_key_of(k) for k in self._evidence_keys(conn, req.memory_id)}
            incoming = {conversation_key_of(e.source_key) for e in req.evidence}
            record = merge_append(current, new, supersede=bool(incoming) and not incoming & have)
        known |= forgotten_in_record(conn, record)  # secrets `pmem forget` erased
        record, redacted = guard_record(record, known)  # the final text, after the merge
        fresh = self._new_evidence(conn, req)
        rev = row["current_revision"]
        if record == current and not fresh:
            return CommitResult(memory_id=req.memory_id, revision=rev, noop=True)
        self._write_revision(
            conn,
            req.memory_id,
            rev + 1,
            record,
            reason=req.reason,
            restored_from=None,
            run_id=req.run_id,
            client=req.client,
            model=req.model,
            prompt_version=req.prompt_version,
        )
        self._update_memory(conn, req.memory_id, record, rev + 1)
        added = self._add_evidence(conn, req.memory_id, req, rev + 1)
        return CommitResult(
            memory_id=req.memory_id,
            revision=rev + 1,
            evidence_added=added,
            redacted_fields=redacted,
        )

    def _check_evidence(
        self, conn: Connection, evidence: list[EvidenceIn], *, missing_ok: bool = False
    ) -> set[str]:
        """Refuse (``EvidenceRefused``) an excerpt that holds a secret or overlaps one in its
        source message, and, with ``ledger_evidence``, one that is not verbatim in a person or
        assistant message of the ledger (``missing_ok``: a message the ledger does not have is
        let through, for a backup brought into a store without its ledger). Returns the secret
        values found in those source conversations, for the record's guard."""
        if not evidence:
            return set()
        sources = self._sources(conn, sorted({e.source_key for e in evidence}))
        for i, e in enumerate(evidence):
            if not e.text.strip():
                raise EvidenceRefused(i, e.source_key, "empty")
            if thin_quote(e.text):  # a letter or a particle is verbatim anywhere
                raise EvidenceRefused(i, e.source_key, "too-short")
            if contains_secret(e.text):
                raise EvidenceRefused(i, e.source_key, "secret")
            src = sources.get(e.source_key)
            if src is None:
                if self.ledger_evidence and not missing_ok:
                    raise EvidenceRefused(i, e.source_key, "unknown-message")
                continue
            channel, body = src
            if self.ledger_evidence and channel not in CONVERSATION_TEXT:
                raise EvidenceRefused(i, e.source_key, "not-conversation-text")
            if self.ledger_evidence and e.text not in body:
                raise EvidenceRefused(i, e.source_key, "not-verbatim")
            if _overlaps_secret(e.text, body):
                raise EvidenceRefused(i, e.source_key, "secret")
        return self._known_secrets(conn, list(sources))

    def _sources(self, conn: Connection, keys: list[str]) -> dict[str, tuple[str, str]]:
        rows = conn.execute(
            "SELECT message_key, channel, body FROM source_messages WHERE message_key = ANY(%s)",
            (keys,),
        ).fetchall()
        forgotten = forgotten_redactor(conn)  # a secret `pmem forget` erased is no evidence
        return {
            k: (channel, forgotten(t) if forgotten else t)
            for k, channel, body in rows
            for t in (bytes_text(bytes(body)),)
        }

    def _known_secrets(self, conn: Connection, keys: list[str]) -> set[str]:
        """Secret values in the conversations these ledger messages belong to (to scrub them,
        and pieces of them, from a record). Cached per conversation version in this process."""
        if not keys:
            return set()
        convs = conn.execute(
            """SELECT c.conversation_key, c.content_hash FROM source_conversations c
               WHERE c.conversation_key IN (
                   SELECT conversation_key FROM source_messages WHERE message_key = ANY(%s))""",
            (keys,),
        ).fetchall()
        values: set[str] = set()
        for key, chash in convs:
            cached = _SECRET_CACHE.get((key, chash))
            if cached is None:
                bodies = conn.execute(
                    """SELECT body, channel FROM source_messages WHERE conversation_key = %s
                       ORDER BY position, message_key""",
                    (key,),
                ).fetchall()
                texts = [bytes_text(bytes(b)) for b, _ in bodies]
                speakers = [c for _, c in bodies]  # a key's tail in the person's next message
                # and every secret `pmem forget` erased that the ledger still holds (store.forget)
                cached = frozenset(secret_values(texts, speakers) | forgotten_values(conn, texts))
                if len(_SECRET_CACHE) > 4096:
                    _SECRET_CACHE.clear()
                _SECRET_CACHE[(key, chash)] = cached
            values |= cached
        return values

    def _evidence_keys(self, conn: Connection, memory_id: str) -> list[str]:
        return [
            r[0]
            for r in conn.execute(
                "SELECT DISTINCT source_key FROM evidence WHERE memory_id = %s ORDER BY 1",
                (memory_id,),
            )
        ]

    def _conversations_of(self, conn: Connection, keys: list[str]) -> list[str]:
        """The conversations these message keys belong to: from the ledger, else from the key."""
        found: dict[str, str] = dict(
            conn.execute(
                "SELECT message_key, conversation_key FROM source_messages WHERE message_key = ANY(%s)",
                (keys,),
            ).fetchall()
        )
        return sorted({found.get(k) or conversation_key_of(k) for k in keys})

    def _new_evidence(self, conn: Connection, req: CommitRequest) -> list[tuple[str, str]]:
        wanted = {(e.source_key, evidence_hash(e.text)) for e in req.evidence}
        if not wanted:
            return []
        have = set(
            conn.execute(
                "SELECT source_key, text_hash FROM evidence WHERE memory_id = %s", (req.memory_id,)
            ).fetchall()
        )
        return sorted(wanted - have)

    def _add_evidence(self, conn: Connection, memory_id: str, req: CommitRequest, rev: int) -> int:
        added = 0
        for e in req.evidence:
            cur = conn.execute(
                """INSERT INTO evidence (memory_id, source_key, text, text_hash, language, revision_added)
                   VALUES (%s, %s, %s, %s, %s, %s)
                   ON CONFLICT (memory_id, source_key, text_hash) DO NOTHING""",
                (memory_id, e.source_key, e.text, evidence_hash(e.text), e.language, rev),
            )
            added += cur.rowcount
        return added

    def _write_revision(
        self,
        conn: Connection,
        memory_id: str,
        revision: int,
        record: dict[str, Any],
        *,
        reason: str,
        restored_from: int | None,
        run_id: str | None,
        client: str,
        model: str | None,
        prompt_version: str | None,
    ) -> None:
        conn.execute(
            """INSERT INTO memory_revisions (memory_id, revision, record, record_hash, reason,
                   restored_from, run_id, client, model, prompt_version)
               VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s)""",
            (
                memory_id,
                revision,
                Jsonb(record),
                tagged_hash("rec", record),
                reason,
                restored_from,
                run_id,
                client,
                model,
                prompt_version,
            ),
        )

    def _update_memory(
        self, conn: Connection, memory_id: str, record: dict[str, Any], rev: int
    ) -> None:
        conn.execute(
            """UPDATE memories SET kind = %s, title = %s, canonical_summary = %s,
                   index_summary = %s, aliases = %s, tags = %s, occurred_at = %s, valid_from = %s,
                   stated_facts = %s, inferences = %s, current_revision = %s, updated_at = now()
               WHERE id = %s""",
            (
                record["kind"],
                record["title"],
                record["canonical_summary"],
                record["index_summary"],
                record["aliases"],
                record["tags"],
                record["occurred_at"],
                record["valid_from"],
                record.get("stated_facts", []),
                record.get("inferences", []),
                rev,
                memory_id,
            ),
        )
        self._project(conn, memory_id, record)

    def _project(self, conn: Connection, memory_id: str, record: dict[str, Any]) -> None:
        """Derived search row: never a revision, rebuilt on every write."""
        head = " ".join([record["title"], *record["aliases"]])
        body = " ".join([record["index_summary"], *record["tags"], record["canonical_summary"]])
        conn.execute(
            """INSERT INTO search_projections (memory_id, index_text, tokens, head)
               VALUES (%(id)s, %(text)s,
                       setweight(array_to_tsvector(%(head)s::text[]), 'A')
                       || setweight(array_to_tsvector(%(body)s::text[]), 'B'),
                       %(head_text)s)
               ON CONFLICT (memory_id) DO UPDATE
               SET index_text = EXCLUDED.index_text, tokens = EXCLUDED.tokens,
                   head = EXCLUDED.head, updated_at = now()""",
            {
                "id": memory_id,
                "text": head + "\n" + body,
                "head_text": head,
                "head": index_tokens(head),
                "body": index_tokens(body),
            },
        )

    def _history(self, conn: Connection, memory_id: str) -> list[dict[str, Any]]:
        rows = (
            conn.cursor(row_factory=dict_row)
            .execute(
                """SELECT revision, reason, restored_from, run_id, client, model, prompt_version,
                      record, record_hash, created_at
               FROM memory_revisions WHERE memory_id = %s ORDER BY revision""",
                (memory_id,),
            )
            .fetchall()
        )
        return [dict(r) for r in rows]
