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
from core.secrets import redact
from core.textsearch import analyze
from store.concepts import ConceptStore
from store.erased import forgotten_in_record
from store.matter import cited_texts
from store.revisions import (
    _EMPTY_RECORD,
    RECORD_FIELDS,
    RevisionWriter,
    _guard_sentence,
    _iso,
    _record_from_row,
    _request_hash,
    guard_payload,
    guard_record,
    merge_append,
)

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


class MemoryStore(RevisionWriter):
    """All memory reads and writes. The only code that touches the memory tables (how one
    revision is written, and its guard: ``store.revisions``)."""

    #: the read port behind ``search`` (the memory API's search): ``(query, limit) -> hits``,
    #: plugged in by the read side that owns the searching (``search.service``); the store only
    #: writes and indexes. None: this store was opened without one.
    reader: Callable[[str, int], list[SearchHit]] | None = None

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
                SELECT m.id, m.title, m.index_summary, m.kind, m.current_revision, m.aliases, m.occurred_at,
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
            cited = cited_texts(conn, [r["id"] for r in rows])
        return [MemoryIndexEntry(**r, matter=cited.get(r["id"], ("", ""))[1]) for r in rows]

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
