"""The revisioned memory store: create, append, restore, delete, history, search.

Every write runs in one transaction: the memory row is locked (``FOR UPDATE``), the expected
revision is checked (a stale one raises :class:`StaleRevision` carrying the current revision,
never last-write-wins), the new revision row is inserted (the table refuses UPDATE/DELETE), the
evidence and the search projection are written, and the idempotency key is recorded with the
response, so a replayed commit returns the first result.

The store is also the last guard of what it keeps, whatever wrote it (a drafter, MCP, the HTTP
API, a restore): every record passes the secret guard (``core.secrets``) on its final text,
after any merge, with the secret values found in its evidence's source messages scrubbed too;
an alias or tag that is a piece of such a value is dropped. Evidence is never redacted (a
redacted quote is no longer verbatim): an excerpt holding or overlapping a secret is refused,
and with ``ledger_evidence`` (the default) every excerpt must be verbatim in a person or
assistant message of the ledger. A create resting on any message of a deleted memory's source
conversations is refused (tombstones hold, also when the conversation grew). Correction, merge,
delete and publish requested by a client go into the owner's queue (``queue``) and are
performed only by ``decide`` (``pmem proposals accept``).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Iterable
from datetime import datetime
from typing import Any

from psycopg import Connection
from psycopg.rows import dict_row
from psycopg.types.json import Jsonb
from pydantic import ValidationError

from core.errors import (
    ConfigError,
    EvidenceRefused,
    MemoryNotFound,
    ProposalNotFound,
    StaleRevision,
    StoreError,
    TombstonedMemory,
)
from core.faults import fault_point
from core.hashing import (
    bytes_text,
    canonical_json,
    evidence_hash,
    sha256_hex,
    tagged_hash,
)
from core.models import (
    ActionRequest,
    CommitRequest,
    CommitResult,
    EvidenceIn,
    MemoryIndexEntry,
    MemoryView,
    SearchHit,
)
from core.secrets import contains_secret, find_secrets, redact, redaction_marker, secret_values
from core.sections import merge_summaries
from core.textsearch import analyze, index_tokens
from store.concepts import ConceptStore
from store.db import Database
from store.forget import forgotten_in_record, forgotten_redactor, forgotten_values

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
RELATED_BY_NAMES = 5  # memories offered to a batch because they name what its conversations name
RELATED_SCAN_CHARS = 4000
RELATED_NAMES_MAX = 60  # the names a batch's conversations use most
# words too common to tie two conversations together
_COMMON_NAMES = frozenset(
    [
        "the",
        "and",
        "for",
        "you",
        "that",
        "this",
        "with",
        "have",
        "what",
        "can",
        "not",
        "but",
        "are",
        "was",
        "just",
        "like",
        "about",
        "http",
        "https",
        "www",
        "自分",
        "今日",
        "今回",
        "こと",
        "もの",
        "感じ",
        "時間",
        "予定",
        "理由",
        "候補",
        "最初",
        "一番",
        "今年",
        "去年",
        "来年",
        "毎日",
        "毎月",
        "正直",
    ]
)


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

    def scrub(text: str) -> str:
        text = redact(text)[0]
        for v in ordered:
            text = re.sub(re.escape(v), marker, text, flags=re.IGNORECASE)
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


def _as_request(action: str, memory_id: str | None, fields: dict[str, Any]) -> CommitRequest:
    """The commit a queued create / append / correction becomes (StoreError when it cannot)."""
    try:
        return CommitRequest(
            memory_id=None if action == "create" else memory_id,
            kind=fields["kind"] or "note",
            title=fields["title"] or "(untitled)",
            canonical_summary=fields["canonical_summary"],
            index_summary=fields["index_summary"],
            aliases=fields["aliases"],
            tags=fields["tags"],
            occurred_at=fields["occurred_at"],
            valid_from=fields["valid_from"],
            stated_facts=fields["stated_facts"],
            inferences=fields.get("inferences") or [],
            reason=action,
            idempotency_key="pending",
        )
    except ValidationError as err:
        names = sorted({str(e["loc"][0]) for e in err.errors() if e.get("loc")})
        raise StoreError(f"a {action} request has invalid fields {names}") from None


def _queue_view(row: dict[str, Any]) -> dict[str, Any]:
    """A queue row as the CLI shows it (``--json``)."""
    keys = (
        "proposal_id",
        "action",
        "status",
        "memory_id",
        "expected_revision",
        "client",
        "run_id",
        "batch_id",
        "draft_id",
        "payload",
        "result",
        "created_at",
        "decided_at",
        "decided_by",
    )
    return {k: (_iso(row.get(k)) if k.endswith("_at") else row.get(k)) for k in keys}


class MemoryStore:
    """All memory reads and writes. The only code that touches the memory tables.

    ``ledger_evidence`` (default on): every evidence excerpt must be verbatim in a person or
    assistant message of the source ledger, found by its message key. Only tests that commit
    made-up evidence turn it off; the secret checks on evidence hold either way."""

    #: the read port behind ``search`` (the memory API's search): ``(query, limit) -> hits``,
    #: plugged in by the read side that owns the searching (``search.service``); the store only
    #: writes and indexes. None: this store was opened without one.
    reader: Callable[[str, int], list[SearchHit]] | None = None

    def __init__(self, db: Database, *, ledger_evidence: bool = True) -> None:
        self.db = db
        self.ledger_evidence = ledger_evidence

    # ---------------------------------------------------------------- writes

    def commit(self, req: CommitRequest) -> CommitResult:
        with self.db.connection() as conn, conn.transaction():
            result = self._commit_in(conn, req)
            fault_point("store:commit-before-tx-end")
            return result

    def _commit_in(self, conn: Connection, req: CommitRequest) -> CommitResult:
        replay = self._replay(conn, req.idempotency_key, _request_hash(req))
        if replay is not None:
            return replay
        result = self._create(conn, req) if req.memory_id is None else self._append(conn, req)
        self._remember(conn, req.idempotency_key, "commit", result, _request_hash(req))
        if req.proposal_id is not None:
            conn.execute(
                "UPDATE proposals SET status = 'committed' WHERE proposal_id = %s AND status = 'proposed'",
                (req.proposal_id,),
            )
        return result

    def restore(
        self,
        memory_id: str,
        revision: int,
        *,
        expected_revision: int,
        idempotency_key: str,
        client: str = "pmem-cli",
    ) -> CommitResult:
        """Make an old revision current again, as a new revision (history is never rewritten).

        The owner's command: it also brings a deleted memory back (its tombstone goes, so
        drafts from its conversations may touch it again). The old record passes the secret
        guard again: a revision written before the guard knew a format comes back redacted."""
        with self.db.connection() as conn, conn.transaction():
            rhash = sha256_hex(canonical_json(["restore", memory_id, revision, expected_revision]))
            replay = self._replay(conn, idempotency_key, rhash)
            if replay is not None:
                return replay
            row = self._lock(conn, memory_id, expected_revision, allow_deleted=True)
            old = conn.execute(
                "SELECT record FROM memory_revisions WHERE memory_id = %s AND revision = %s",
                (memory_id, revision),
            ).fetchone()
            if old is None:
                raise StoreError(f"memory {memory_id} has no revision {revision}")
            known = self._known_secrets(conn, self._evidence_keys(conn, memory_id))
            record, redacted = guard_record(old[0], known)
            new_rev = row["current_revision"] + 1
            self._write_revision(
                conn,
                memory_id,
                new_rev,
                record,
                reason="restore",
                restored_from=revision,
                run_id=None,
                client=client,
                model=None,
                prompt_version=None,
            )
            if row["status"] == "deleted":
                conn.execute("DELETE FROM tombstones WHERE memory_id = %s", (memory_id,))
                conn.execute("UPDATE memories SET status = 'active' WHERE id = %s", (memory_id,))
            self._update_memory(conn, memory_id, record, new_rev)
            result = CommitResult(memory_id=memory_id, revision=new_rev, redacted_fields=redacted)
            self._remember(conn, idempotency_key, "restore", result, rhash)
            return result

    def delete(self, memory_id: str, *, expected_revision: int, reason: str | None = None) -> None:
        """Mark deleted and leave a tombstone; revisions stay. No later draft resting on any
        message of its source conversations can re-create it (only the owner's restore)."""
        with self.db.connection() as conn, conn.transaction():
            self._delete(conn, memory_id, expected_revision, reason)

    def _delete(self, conn: Connection, memory_id: str, expected: int, reason: str | None) -> None:
        row = self._lock(conn, memory_id, expected)
        keys = self._evidence_keys(conn, memory_id)
        conn.execute(
            """INSERT INTO tombstones (memory_id, source_keys, conversation_keys, last_revision, reason)
               VALUES (%s, %s, %s, %s, %s)""",
            (memory_id, keys, self._conversations_of(conn, keys), row["current_revision"], reason),
        )
        conn.execute(
            "UPDATE memories SET status = 'deleted', updated_at = now() WHERE id = %s",
            (memory_id,),
        )
        conn.execute("DELETE FROM search_projections WHERE memory_id = %s", (memory_id,))
        conn.execute(
            "DELETE FROM public_memories WHERE memory_id = %s", (memory_id,)
        )  # off /public too
        ConceptStore(self.db).withdraw_in(conn, memory_id)  # its links re-evaluated at once

    def propose(self, run_id: str, batch_id: str, draft_id: str, payload: dict[str, Any]) -> str:
        """The backfill's bookkeeping row for a draft about to be committed under standing
        approval (status ``proposed``, ``committed`` once its commit lands)."""
        proposal_id = tagged_hash("prop", [run_id, batch_id, draft_id], length=24)
        with self.db.connection() as conn, conn.transaction():
            conn.execute(
                """INSERT INTO proposals (proposal_id, run_id, batch_id, draft_id, payload)
                   VALUES (%s, %s, %s, %s, %s) ON CONFLICT (proposal_id) DO NOTHING""",
                (proposal_id, run_id, batch_id, draft_id, Jsonb(guard_payload(payload))),
            )
        return proposal_id

    # ---------------------------------------------------------------- the owner's queue

    def queue(self, req: ActionRequest) -> str:
        """Put a request into the owner's queue (status ``pending``); nothing is performed.

        A proposed memory (create / append) or a confirmed action (correction, merge, delete,
        publish) from an AI client or the HTTP API. Its text passes the secret guard and its
        evidence is checked now, so the owner never reviews a secret or a made-up quote. The
        same request queued twice is one request."""
        with self.db.connection() as conn, conn.transaction():
            if req.action != "create":
                if req.memory_id is None:
                    raise StoreError(f"a {req.action} request needs memory_id")
                current = self._existing(conn, req.memory_id)["current_revision"]
                if req.expected_revision is None:  # the revision the requester could see
                    req = req.model_copy(update={"expected_revision": current})
            if req.action == "merge":
                if req.merge_into is None or req.merge_into == req.memory_id:
                    raise StoreError("a merge request needs merge_into, another memory's id")
                self._existing(conn, req.merge_into)
            unknown = sorted(set(req.record) - set(RECORD_FIELDS))
            if unknown:
                raise StoreError(f"a {req.action} request has unknown record fields {unknown}")
            known = self._check_evidence(conn, req.evidence)
            known |= forgotten_in_record(conn, [req.record, req.stated_facts])  # `pmem forget`
            record, _ = guard_record(
                {**_EMPTY_RECORD, **req.record, "stated_facts": req.stated_facts}, known
            )
            _as_request(req.action, req.memory_id, record)  # the fields must make a valid commit
            body = req.model_dump(mode="json", exclude={"record", "stated_facts", "note"})
            body |= {
                "record": {
                    k: v for k, v in record.items() if k in req.record or k == "stated_facts"
                },
                "note": _guard_sentence(req.note, known) if req.note else None,
            }
            proposal_id = tagged_hash("req", body, length=24)
            conn.execute(
                """INSERT INTO proposals (proposal_id, payload, status, action, memory_id,
                       expected_revision, client)
                   VALUES (%s, %s, 'pending', %s, %s, %s, %s) ON CONFLICT (proposal_id) DO NOTHING""",
                (
                    proposal_id,
                    Jsonb(body),
                    req.action,
                    req.memory_id,
                    req.expected_revision,
                    req.client,
                ),
            )
        return proposal_id

    def request_action(self, request: ActionRequest) -> str:
        """``ActionQueue`` port: the same as ``queue``."""
        return self.queue(request)

    def proposals(self, *, everything: bool = False, limit: int = 200) -> list[dict[str, Any]]:
        """The queue, oldest first: pending requests (or, with ``everything``, every row)."""
        where = "" if everything else "WHERE status = 'pending'"
        with self.db.connection() as conn:
            rows = (
                conn.cursor(row_factory=dict_row)
                .execute(
                    f"""SELECT proposal_id, action, status, memory_id, expected_revision, client,
                           run_id, created_at, decided_at, decided_by
                    FROM proposals {where} ORDER BY created_at, proposal_id LIMIT %s""",  # noqa: S608
                    (limit,),
                )
                .fetchall()
            )
        return [dict(r) for r in rows]

    def proposal(self, proposal_id: str) -> dict[str, Any]:
        with self.db.connection() as conn:
            row = (
                conn.cursor(row_factory=dict_row)
                .execute("SELECT * FROM proposals WHERE proposal_id = %s", (proposal_id,))
                .fetchone()
            )
        if row is None:
            raise ProposalNotFound(proposal_id)
        return dict(row)

    def decide(self, proposal_id: str, *, accept: bool, by: str = "owner") -> dict[str, Any]:
        """The owner's decision on a pending request, in one transaction with the action it
        performs. Deciding again the same way returns the first outcome; the other way is an
        error. A stale or deleted target raises (the request stays pending: reject it, or
        queue a new one against the current revision)."""
        with self.db.connection() as conn, conn.transaction():
            row = (
                conn.cursor(row_factory=dict_row)
                .execute(
                    "SELECT * FROM proposals WHERE proposal_id = %s FOR UPDATE", (proposal_id,)
                )
                .fetchone()
            )
            if row is None:
                raise ProposalNotFound(proposal_id)
            want = "accepted" if accept else "rejected"
            if row["status"] == want:
                return {**_queue_view(row), "already": True}
            if row["action"] == "draft":
                raise StoreError(
                    f"{proposal_id} is a backfill draft, not a request",
                    hint="review and commit a run's drafts with `pmem review RUN` / `pmem apply RUN`",
                )
            if row["status"] != "pending":
                raise StoreError(f"{proposal_id} was already {row['status']}")
            result = self._perform(conn, row, by) if accept else {}
            decided = conn.execute(
                """UPDATE proposals SET status = %s, decided_at = now(), decided_by = %s, result = %s
                   WHERE proposal_id = %s RETURNING decided_at""",
                (want, by, Jsonb(result), proposal_id),
            ).fetchone()
            row.update(
                status=want,
                decided_by=by,
                result=result,
                decided_at=decided[0] if decided else None,
            )
            return {**_queue_view(row), "already": False}

    def _perform(self, conn: Connection, row: dict[str, Any], by: str) -> dict[str, Any]:
        body = row["payload"]
        action, memory_id, expected = row["action"], row["memory_id"], row["expected_revision"]
        client = f"{by}:{row['client'] or 'unknown'}"
        if action in ("create", "append", "correction"):
            # an append or a correction keeps what the request does not name
            base = (
                _EMPTY_RECORD
                if action == "create"
                else _record_from_row(self._existing(conn, memory_id))
            )
            given = {k: v for k, v in body.get("record", {}).items() if v not in (None, "", [])}
            req = _as_request(action, memory_id, {**base, **given}).model_copy(
                update={
                    "expected_revision": expected,
                    "evidence": [EvidenceIn(**e) for e in body.get("evidence", [])],
                    "idempotency_key": f"proposal:{row['proposal_id']}",
                    "client": client,
                }
            )
            return self._commit_in(conn, req).model_dump(mode="json")
        if action == "delete":
            self._delete(conn, memory_id, expected, body.get("note"))
            return {"memory_id": memory_id, "deleted": True}
        if action == "merge":
            return self._merge(conn, memory_id, expected, body["merge_into"], client)
        if action == "publish":
            self._lock(conn, memory_id, expected)
            conn.execute(
                "UPDATE memories SET visibility = 'public', updated_at = now() WHERE id = %s",
                (memory_id,),
            )
            return {"memory_id": memory_id, "visibility": "public"}
        raise StoreError(f"unknown action {action!r} in request {row['proposal_id']}")

    def _merge(
        self, conn: Connection, source_id: str, expected: int | None, into_id: str, client: str
    ) -> dict[str, Any]:
        """``source_id`` folds into ``into_id``: one new revision (reason ``merge``) with the
        union of both records and the source's evidence; the source is deleted (tombstone)."""
        first, second = sorted([source_id, into_id])  # one lock order: no deadlock
        rows = {
            first: self._lock(conn, first, None, check=False),
            second: self._lock(conn, second, None, check=False),
        }
        src, dst = rows[source_id], rows[into_id]
        if expected is not None and src["current_revision"] != expected:
            raise StaleRevision(source_id, expected, src["current_revision"])
        keys = self._evidence_keys(conn, source_id) + self._evidence_keys(conn, into_id)
        merged = merge_append(_record_from_row(dst), _record_from_row(src))
        record, redacted = guard_record(merged, self._known_secrets(conn, keys))
        rev = dst["current_revision"] + 1
        self._write_revision(
            conn,
            into_id,
            rev,
            record,
            reason="merge",
            restored_from=None,
            run_id=None,
            client=client,
            model=None,
            prompt_version=None,
        )
        self._update_memory(conn, into_id, record, rev)
        moved = conn.execute(
            """INSERT INTO evidence (memory_id, source_key, text, text_hash, language, revision_added)
               SELECT %s, source_key, text, text_hash, language, %s FROM evidence WHERE memory_id = %s
               ON CONFLICT (memory_id, source_key, text_hash) DO NOTHING""",
            (into_id, rev, source_id),
        ).rowcount
        self._delete(conn, source_id, src["current_revision"], f"merged into {into_id}")
        return {
            "memory_id": into_id,
            "revision": rev,
            "merged_from": source_id,
            "evidence_added": moved,
            "redacted_fields": redacted,
        }

    # ---------------------------------------------------------------- a backup brought back

    def load_backup(self, rows: Iterable[dict[str, Any]]) -> dict[str, int]:
        """Bring memories from a ``pmem export`` file back, through the same guard as every
        other write: each memory's fields and every revision's record are guarded (a backup made
        before the guard knew a format comes back redacted; ``record_hash`` follows), evidence
        that holds a secret or is not verbatim in a ledger message the store has is left out
        (counted), tombstones come back with their conversations. A memory id the store already
        has is skipped, never overwritten. One transaction: all or nothing."""
        memories: dict[str, dict[str, Any]] = {}
        revisions: dict[str, list[dict[str, Any]]] = {}
        evidence: dict[str, list[dict[str, Any]]] = {}
        tombstones: list[dict[str, Any]] = []
        for row in rows:
            kind = row.get("type")
            if kind == "memory":
                memories[row["id"]] = row
            elif kind == "revision":
                revisions.setdefault(row["memory_id"], []).append(row)
            elif kind == "evidence":
                evidence.setdefault(row["memory_id"], []).append(row)
            elif kind == "tombstone":
                tombstones.append(row)
        counts = dict.fromkeys(
            (
                "memories",
                "skipped_existing",
                "revisions",
                "evidence",
                "evidence_refused",
                "tombstones",
                "redacted_fields",
            ),
            0,
        )
        with self.db.connection() as conn, conn.transaction():
            for memory_id in sorted(memories):
                if conn.execute("SELECT 1 FROM memories WHERE id = %s", (memory_id,)).fetchone():
                    counts["skipped_existing"] += 1
                    continue
                self._load_memory(
                    conn,
                    memories[memory_id],
                    revisions.get(memory_id, []),
                    evidence.get(memory_id, []),
                    counts,
                )
            for t in tombstones:
                keys = list(t.get("source_keys") or [])
                counts["tombstones"] += conn.execute(
                    """INSERT INTO tombstones (memory_id, source_keys, conversation_keys, last_revision, reason)
                       VALUES (%s, %s, %s, %s, %s) ON CONFLICT (memory_id) DO NOTHING""",
                    (
                        t["memory_id"],
                        keys,
                        self._conversations_of(conn, keys),
                        t["last_revision"],
                        _guard_sentence(t["reason"], ()) if t.get("reason") else None,
                    ),
                ).rowcount
        return counts

    def _load_memory(
        self,
        conn: Connection,
        m: dict[str, Any],
        revs: list[dict[str, Any]],
        evs: list[dict[str, Any]],
        counts: dict[str, int],
    ) -> None:
        memory_id = m["id"]
        known = self._known_secrets(conn, sorted({e["source_key"] for e in evs}))
        known |= forgotten_in_record(conn, [m, [r["record"] for r in revs]])  # `pmem forget`
        revs = sorted(revs, key=lambda r: r["revision"])
        last = revs[-1]["record"] if revs else {}
        fields = {k: m.get(k, last.get(k)) for k in RECORD_FIELDS}
        record, redacted = guard_record(
            {**_EMPTY_RECORD, **{k: v for k, v in fields.items() if v is not None}}, known
        )
        counts["redacted_fields"] += len(redacted)
        conn.execute(
            """INSERT INTO memories (id, kind, title, canonical_summary, index_summary, aliases, tags,
                   occurred_at, valid_from, stated_facts, inferences, visibility, status, current_revision)
               VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)""",
            (
                memory_id,
                record["kind"],
                record["title"],
                record["canonical_summary"],
                record["index_summary"],
                record["aliases"],
                record["tags"],
                record["occurred_at"],
                record["valid_from"],
                record["stated_facts"],
                record["inferences"],
                m.get("visibility") or "private",
                m.get("status") or "active",
                m["current_revision"],
            ),
        )
        for r in revs:
            rec, changed = guard_record(r["record"], known)
            conn.execute(
                """INSERT INTO memory_revisions (memory_id, revision, record, record_hash, reason,
                       restored_from, client, model, prompt_version)
                   VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s)""",
                (
                    memory_id,
                    r["revision"],
                    Jsonb(rec),
                    tagged_hash("rec", rec) if changed else r["record_hash"],
                    r["reason"],
                    r.get("restored_from"),
                    r.get("client") or "backup",
                    r.get("model"),
                    r.get("prompt_version"),
                ),
            )
            counts["revisions"] += 1
            counts["redacted_fields"] += len(changed)
        for e in evs:
            item = EvidenceIn(
                source_key=e["source_key"], text=e["text"], language=e.get("language")
            )
            try:
                self._check_evidence(conn, [item], missing_ok=True)
            except EvidenceRefused:
                counts["evidence_refused"] += 1
                continue
            counts["evidence"] += conn.execute(
                """INSERT INTO evidence (memory_id, source_key, text, text_hash, language, revision_added)
                   VALUES (%s, %s, %s, %s, %s, %s) ON CONFLICT (memory_id, source_key, text_hash) DO NOTHING""",
                (
                    memory_id,
                    item.source_key,
                    item.text,
                    evidence_hash(item.text),
                    item.language,
                    e["revision_added"],
                ),
            ).rowcount
        if (m.get("status") or "active") == "active":
            self._project(conn, memory_id, record)
        counts["memories"] += 1

    # ---------------------------------------------------------------- reads

    def get(self, memory_id: str, *, history: bool = False) -> MemoryView:
        with self.db.connection() as conn:
            cur = conn.cursor(row_factory=dict_row)
            row = cur.execute("SELECT * FROM memories WHERE id = %s", (memory_id,)).fetchone()
            if row is None:
                raise MemoryNotFound(memory_id)
            ev = cur.execute(
                """SELECT source_key, text, language, revision_added FROM evidence
                   WHERE memory_id = %s ORDER BY revision_added, id""",
                (memory_id,),
            ).fetchall()
            revs = self._history(conn, memory_id) if history else []
        view = {k: row[k] for k in MemoryView.model_fields if k in row}
        return MemoryView(**view, evidence=ev, revisions=revs)

    def history(self, memory_id: str) -> list[dict[str, Any]]:
        with self.db.connection() as conn:
            if (
                conn.execute("SELECT 1 FROM memories WHERE id = %s", (memory_id,)).fetchone()
                is None
            ):
                raise MemoryNotFound(memory_id)
            return self._history(conn, memory_id)

    def search(self, query: str, limit: int = 10) -> list[SearchHit]:
        """The memory API's search, through the read port ``reader`` (``search.service``)."""
        if self.reader is None:
            raise ConfigError(
                "this memory store has no reader to search with",
                hint="search through search.service.ReadService (pmem search, MCP, /v1/search)",
            )
        return list(self.reader(query, limit))

    def related(self, conversation_keys: list[str], titles: list[str]) -> list[MemoryIndexEntry]:
        """Existing memories a drafter should see: same source conversation, same title, or
        (at most ``RELATED_BY_NAMES`` more) a decision memory whose title, aliases or index line
        name two or more of the things the person names most in these conversations (a later
        conversation that changes an earlier decision must be offered the memory it changes)."""
        with self.db.connection() as conn:
            names = self._names_in(conn, conversation_keys)
            by_names = (
                [
                    r[0]
                    for r in conn.execute(
                        """SELECT m.id FROM memories m JOIN search_projections p ON p.memory_id = m.id,
                          unnest(%(names)s::text[]) AS n(name)
                   WHERE m.status = 'active' AND m.kind = 'decision'
                     AND strpos(lower(p.head || ' ' || m.index_summary), n.name) > 0
                   GROUP BY m.id HAVING count(*) >= 2
                   ORDER BY count(*) DESC, max(m.updated_at) DESC, m.id LIMIT %(limit)s""",
                        {"names": names, "limit": RELATED_BY_NAMES},
                    )
                ]
                if names
                else []
            )
            rows = (
                conn.cursor(row_factory=dict_row)
                .execute(
                    """
                SELECT m.id, m.title, m.index_summary, m.kind, m.current_revision, m.aliases,
                       coalesce(array_agg(DISTINCT e.conv) FILTER (WHERE e.conv IS NOT NULL),
                                '{}') AS source_conversation_keys
                FROM memories m
                LEFT JOIN LATERAL (
                    SELECT regexp_replace(source_key, ':[^:]*$', '') AS conv
                    FROM evidence WHERE memory_id = m.id
                ) e ON true
                WHERE m.status = 'active' AND (m.title = ANY(%(titles)s) OR m.id = ANY(%(ids)s) OR m.id IN (
                    SELECT memory_id FROM evidence
                    WHERE regexp_replace(source_key, ':[^:]*$', '') = ANY(%(convs)s)))
                GROUP BY m.id ORDER BY m.id
                """,
                    {"titles": titles, "convs": conversation_keys, "ids": by_names},
                )
                .fetchall()
            )
        return [MemoryIndexEntry(**r) for r in rows]

    def _names_in(self, conn: Connection, conversation_keys: list[str]) -> list[str]:
        """The names and nouns the person uses in these conversations (lower-cased): Latin
        words of three letters or more, Sudachi's nouns of two characters or more. Read from
        the ledger's person messages (the first ``RELATED_SCAN_CHARS`` of each conversation)."""
        if not conversation_keys:
            return []
        rows = conn.execute(
            """SELECT conversation_key, body FROM source_messages
               WHERE conversation_key = ANY(%s) AND channel = 'person' ORDER BY conversation_key, position""",
            (conversation_keys,),
        ).fetchall()
        texts: dict[str, str] = {}
        for key, body in rows:
            if len(texts.get(key, "")) < RELATED_SCAN_CHARS:
                texts[key] = (
                    texts.get(key, "") + "\n" + bytes_text(bytes(body))[:RELATED_SCAN_CHARS]
                )
        names: Counter[str] = Counter()
        for text in texts.values():
            text = redact(text)[0]
            names.update(w.lower() for w in re.findall(r"[A-Za-z][A-Za-z0-9.+#-]{2,}", text))
            names.update(
                m.surface
                for m in analyze(text)
                if m.pos[0] == "名詞"
                and m.pos[1] in ("普通名詞", "固有名詞")
                and len(m.surface) >= 2
                and m.pos[2:3] not in (("副詞可能",), ("助数詞可能",))
            )
        return [n for n, _ in names.most_common() if n not in _COMMON_NAMES][:RELATED_NAMES_MAX]

    def counts(self) -> dict[str, int]:
        with self.db.connection() as conn:
            row = conn.execute(
                """SELECT (SELECT count(*) FROM memories WHERE status = 'active'),
                          (SELECT count(*) FROM memory_revisions),
                          (SELECT count(*) FROM evidence),
                          (SELECT count(*) FROM tombstones)"""
            ).fetchone()
        assert row is not None
        return dict(zip(("memories", "revisions", "evidence", "tombstones"), row, strict=True))

    # ---------------------------------------------------------------- internals

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
        known |= forgotten_in_record(conn, _record_from_request(req))  # `pmem forget` erased them
        record, redacted = guard_record(_record_from_request(req), known)
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
                    "SELECT body FROM source_messages WHERE conversation_key = %s", (key,)
                ).fetchall()
                texts = [bytes_text(bytes(b)) for (b,) in bodies]
                # and every secret `pmem forget` erased that the ledger still holds (store.forget)
                cached = frozenset(secret_values(texts) | forgotten_values(conn, texts))
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
