"""The revisioned memory store: create, append, restore, delete, history, search.

Every write runs in one transaction: the memory row is locked (``FOR UPDATE``), the expected
revision is checked (a stale one raises :class:`StaleRevision` carrying the current revision,
never last-write-wins), the new revision row is inserted (the table refuses UPDATE/DELETE), the
evidence and the search projection are written, and the idempotency key is recorded with the
response, so a replayed commit returns the first result.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from psycopg import Connection
from psycopg.rows import dict_row
from psycopg.types.json import Jsonb

from core.errors import MemoryNotFound, StaleRevision, StoreError, TombstonedMemory
from core.faults import fault_point
from core.hashing import (
    canonical_json,
    evidence_hash,
    normalize_for_identity,
    sha256_hex,
    tagged_hash,
)
from core.models import (
    CommitRequest,
    CommitResult,
    MemoryIndexEntry,
    MemoryView,
    SearchHit,
)
from core.textsearch import index_tokens
from store.db import Database

RECORD_FIELDS = (
    "kind", "title", "canonical_summary", "index_summary", "aliases", "tags",
    "occurred_at", "valid_from",
)  # fmt: skip
APPEND_SEPARATOR = "\n\n---\n\n"


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
    }


def merge_append(current: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
    """An append never shortens a record: the summary grows, aliases and tags are a union."""
    merged = dict(current)
    cur, add = current["canonical_summary"], new["canonical_summary"]
    if add and add not in cur:
        merged["canonical_summary"] = add if cur in add else _append_new_lines(cur, add)
    if new["index_summary"]:
        merged["index_summary"] = new["index_summary"]
    merged["aliases"] = list(dict.fromkeys([*current["aliases"], *new["aliases"]]))
    merged["tags"] = list(dict.fromkeys([*current["tags"], *new["tags"]]))
    times = [t for t in (current["occurred_at"], new["occurred_at"]) if t]
    merged["occurred_at"] = min(times) if times else None
    valid = [t for t in (current["valid_from"], new["valid_from"]) if t]
    merged["valid_from"] = max(valid) if valid else None
    return merged


def _append_new_lines(cur: str, add: str) -> str:
    """Append only what the current summary does not already say, line by line (a re-drafted
    conversation that grew repeats most of its old summary), keeping the heading each new line
    stood under. When nothing is new, the summary stays as it is."""
    have = {normalize_for_identity(line) for line in cur.splitlines() if line.strip()}
    out: list[str] = []
    heading: str | None = None
    heading_done = False
    for line in add.splitlines():
        if line.lstrip().startswith("#"):
            heading, heading_done = line, False
            continue
        if not line.strip() or normalize_for_identity(line) in have:
            continue
        if heading is not None and not heading_done:
            out.append(heading)
            heading_done = True
        out.append(line)
        have.add(normalize_for_identity(line))
    return cur + APPEND_SEPARATOR + "\n".join(out) if out else cur


def _request_hash(req: CommitRequest) -> str:
    body = req.model_dump(mode="json", exclude={"idempotency_key", "run_id", "proposal_id"})
    return sha256_hex(canonical_json(body))


class MemoryStore:
    """All memory reads and writes. The only code that touches the memory tables."""

    #: hook for ``search``: an embedder (``providers.embeddings.Embedder``) for the query vector;
    #: None searches without vectors. Set by callers that own one (CLI, MCP server).
    search_embedder: Any = None

    def __init__(self, db: Database) -> None:
        self.db = db

    # ---------------------------------------------------------------- writes

    def commit(self, req: CommitRequest) -> CommitResult:
        with self.db.connection() as conn, conn.transaction():
            replay = self._replay(conn, req.idempotency_key, _request_hash(req))
            if replay is not None:
                return replay
            result = self._create(conn, req) if req.memory_id is None else self._append(conn, req)
            self._remember(conn, req.idempotency_key, "commit", result, _request_hash(req))
            fault_point("store:commit-before-tx-end")
            return result

    def restore(
        self, memory_id: str, revision: int, *, expected_revision: int, idempotency_key: str,
        client: str = "pmem-cli",
    ) -> CommitResult:  # fmt: skip
        """Make an old revision current again, as a new revision (history is never rewritten)."""
        with self.db.connection() as conn, conn.transaction():
            rhash = sha256_hex(canonical_json(["restore", memory_id, revision, expected_revision]))
            replay = self._replay(conn, idempotency_key, rhash)
            if replay is not None:
                return replay
            row = self._lock(conn, memory_id, expected_revision)
            old = conn.execute(
                "SELECT record FROM memory_revisions WHERE memory_id = %s AND revision = %s",
                (memory_id, revision),
            ).fetchone()
            if old is None:
                raise StoreError(f"memory {memory_id} has no revision {revision}")
            record = old[0]
            new_rev = row["current_revision"] + 1
            self._write_revision(
                conn, memory_id, new_rev, record, reason="restore", restored_from=revision,
                run_id=None, client=client, model=None, prompt_version=None,
            )  # fmt: skip
            self._update_memory(conn, memory_id, record, new_rev)
            result = CommitResult(memory_id=memory_id, revision=new_rev)
            self._remember(conn, idempotency_key, "restore", result, rhash)
            return result

    def delete(self, memory_id: str, *, expected_revision: int, reason: str | None = None) -> None:
        """Mark deleted and leave a tombstone; revisions stay. No later commit can resurrect it."""
        with self.db.connection() as conn, conn.transaction():
            row = self._lock(conn, memory_id, expected_revision)
            keys = [
                r[0]
                for r in conn.execute(
                    "SELECT DISTINCT source_key FROM evidence WHERE memory_id = %s ORDER BY 1",
                    (memory_id,),
                )
            ]
            conn.execute(
                """INSERT INTO tombstones (memory_id, source_keys, conversation_keys, last_revision, reason)
                   VALUES (%s, %s, %s, %s, %s)""",
                (memory_id, keys, sorted({conversation_key_of(k) for k in keys}),
                 row["current_revision"], reason),
            )  # fmt: skip
            conn.execute(
                "UPDATE memories SET status = 'deleted', updated_at = now() WHERE id = %s",
                (memory_id,),
            )
            conn.execute("DELETE FROM search_projections WHERE memory_id = %s", (memory_id,))

    def propose(self, run_id: str, batch_id: str, draft_id: str, payload: dict[str, Any]) -> str:
        proposal_id = tagged_hash("prop", [run_id, batch_id, draft_id], length=24)
        with self.db.connection() as conn, conn.transaction():
            conn.execute(
                """INSERT INTO proposals (proposal_id, run_id, batch_id, draft_id, payload)
                   VALUES (%s, %s, %s, %s, %s) ON CONFLICT (proposal_id) DO NOTHING""",
                (proposal_id, run_id, batch_id, draft_id, Jsonb(payload)),
            )
        return proposal_id

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
            if conn.execute("SELECT 1 FROM memories WHERE id = %s", (memory_id,)).fetchone() is None:
                raise MemoryNotFound(memory_id)
            return self._history(conn, memory_id)

    def search(self, query: str, limit: int = 10) -> list[SearchHit]:
        """Hybrid search (lexical + trigram, + vectors when ``search_embedder`` is set), fused by
        weighted RRF in one SQL statement: see ``store.search.SearchStore.search``."""
        from store.search import SearchStore

        return list(SearchStore(self.db, self.search_embedder).search(query, limit=limit))

    def related(self, conversation_keys: list[str], titles: list[str]) -> list[MemoryIndexEntry]:
        """Existing memories a drafter should see: same source conversation, or same title."""
        with self.db.connection() as conn:
            rows = conn.cursor(row_factory=dict_row).execute(
                """
                SELECT m.id, m.title, m.index_summary, m.kind, m.current_revision,
                       coalesce(array_agg(DISTINCT e.conv) FILTER (WHERE e.conv IS NOT NULL),
                                '{}') AS source_conversation_keys
                FROM memories m
                LEFT JOIN LATERAL (
                    SELECT regexp_replace(source_key, ':[^:]*$', '') AS conv
                    FROM evidence WHERE memory_id = m.id
                ) e ON true
                WHERE m.status = 'active' AND (m.title = ANY(%(titles)s) OR m.id IN (
                    SELECT memory_id FROM evidence
                    WHERE regexp_replace(source_key, ':[^:]*$', '') = ANY(%(convs)s)))
                GROUP BY m.id ORDER BY m.id
                """,
                {"titles": titles, "convs": conversation_keys},
            ).fetchall()
        return [MemoryIndexEntry(**r) for r in rows]

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
        row = conn.execute("SELECT response FROM idempotency_keys WHERE key = %s", (key,)).fetchone()
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

    def _lock(self, conn: Connection, memory_id: str, expected: int | None) -> dict[str, Any]:
        row = conn.cursor(row_factory=dict_row).execute(
            "SELECT * FROM memories WHERE id = %s FOR UPDATE", (memory_id,)
        ).fetchone()
        if row is None:
            tomb = conn.execute("SELECT 1 FROM tombstones WHERE memory_id = %s", (memory_id,)).fetchone()
            if tomb:
                raise TombstonedMemory(memory_id)
            raise MemoryNotFound(memory_id)
        if row["status"] == "deleted":
            raise TombstonedMemory(memory_id)
        if expected != row["current_revision"]:
            raise StaleRevision(memory_id, expected, row["current_revision"])
        return row

    def _create(self, conn: Connection, req: CommitRequest) -> CommitResult:
        source_keys = sorted({e.source_key for e in req.evidence})
        if source_keys:
            tomb = conn.execute(
                "SELECT memory_id FROM tombstones WHERE source_keys @> %s::text[] LIMIT 1",
                (source_keys,),
            ).fetchone()
            if tomb is not None:
                raise TombstonedMemory(tomb[0])
        memory_id = "mem_" + tagged_hash("memory", req.idempotency_key, length=20).split(":")[1]
        record = _record_from_request(req)
        conn.execute(
            """INSERT INTO memories (id, kind, title, canonical_summary, index_summary, aliases,
                   tags, occurred_at, valid_from, current_revision)
               VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, 1)""",
            (memory_id, req.kind, req.title, req.canonical_summary, req.index_summary,
             record["aliases"], record["tags"], req.occurred_at, req.valid_from),
        )  # fmt: skip
        self._write_revision(
            conn, memory_id, 1, record, reason=req.reason, restored_from=None, run_id=req.run_id,
            client=req.client, model=req.model, prompt_version=req.prompt_version,
        )  # fmt: skip
        added = self._add_evidence(conn, memory_id, req, 1)
        self._project(conn, memory_id, record)
        return CommitResult(memory_id=memory_id, revision=1, created=True, evidence_added=added)

    def _append(self, conn: Connection, req: CommitRequest) -> CommitResult:
        assert req.memory_id is not None
        row = self._lock(conn, req.memory_id, req.expected_revision)
        current = _record_from_row(row)
        new = _record_from_request(req)
        record = new if req.reason in ("correction", "restore") else merge_append(current, new)
        fresh = self._new_evidence(conn, req)
        rev = row["current_revision"]
        if record == current and not fresh:
            return CommitResult(memory_id=req.memory_id, revision=rev, noop=True)
        self._write_revision(
            conn, req.memory_id, rev + 1, record, reason=req.reason, restored_from=None,
            run_id=req.run_id, client=req.client, model=req.model,
            prompt_version=req.prompt_version,
        )  # fmt: skip
        self._update_memory(conn, req.memory_id, record, rev + 1)
        added = self._add_evidence(conn, req.memory_id, req, rev + 1)
        return CommitResult(memory_id=req.memory_id, revision=rev + 1, evidence_added=added)

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
        self, conn: Connection, memory_id: str, revision: int, record: dict[str, Any], *,
        reason: str, restored_from: int | None, run_id: str | None, client: str,
        model: str | None, prompt_version: str | None,
    ) -> None:  # fmt: skip
        conn.execute(
            """INSERT INTO memory_revisions (memory_id, revision, record, record_hash, reason,
                   restored_from, run_id, client, model, prompt_version)
               VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s)""",
            (memory_id, revision, Jsonb(record), tagged_hash("rec", record), reason,
             restored_from, run_id, client, model, prompt_version),
        )  # fmt: skip

    def _update_memory(self, conn: Connection, memory_id: str, record: dict[str, Any], rev: int) -> None:
        conn.execute(
            """UPDATE memories SET kind = %s, title = %s, canonical_summary = %s,
                   index_summary = %s, aliases = %s, tags = %s, occurred_at = %s, valid_from = %s,
                   current_revision = %s, updated_at = now()
               WHERE id = %s""",
            (record["kind"], record["title"], record["canonical_summary"], record["index_summary"],
             record["aliases"], record["tags"], record["occurred_at"], record["valid_from"], rev,
             memory_id),
        )  # fmt: skip
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
            {"id": memory_id, "text": head + "\n" + body, "head_text": head,
             "head": index_tokens(head), "body": index_tokens(body)},
        )  # fmt: skip

    def _history(self, conn: Connection, memory_id: str) -> list[dict[str, Any]]:
        rows = conn.cursor(row_factory=dict_row).execute(
            """SELECT revision, reason, restored_from, run_id, client, model, prompt_version,
                      record, record_hash, created_at
               FROM memory_revisions WHERE memory_id = %s ORDER BY revision""",
            (memory_id,),
        ).fetchall()
        return [dict(r) for r in rows]


