"""`pmem import-backup FILE`: a `pmem export` file restored into an empty memory store.

Memories, revisions, evidence and tombstones go through ``MemoryStore.load_backup``; the owner's
queue (``proposal`` rows) comes back here, its text through the same guard.

The rows go through ``MemoryStore.load_backup`` (the store's write boundary: the secret guard on
every field and revision, evidence checked against the ledger the store has, secrets that
`pmem forget` erased redacted again). Erased content is respected: a memory that `pmem forget`
erased from this store (its erasure audit or its tombstone says so) is not brought back from an
older backup, nor are its revisions and evidence. "Empty" means no memory, revision or
evidence yet; tombstones and the erasure records may be there (they are what is respected).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from core.errors import StoreError
from store.db import Database


def memory_rows(db: Database) -> dict[str, int]:
    """How many memories, revisions and evidence rows the store holds."""
    with db.connection() as conn:
        row = conn.execute(
            """SELECT (SELECT count(*) FROM memories), (SELECT count(*) FROM memory_revisions),
                      (SELECT count(*) FROM evidence)"""
        ).fetchone()
    assert row is not None
    return dict(zip(("memories", "revisions", "evidence"), (int(v) for v in row), strict=True))


def erased_memory_ids(db: Database) -> set[str]:
    """Memories this store erased (`pmem forget --memory` / `--conversation`), or holds a
    tombstone for: a backup never brings them back."""
    with db.connection() as conn:
        rows = conn.execute(
            """SELECT memory_id FROM erasure_audit WHERE memory_id IS NOT NULL
               UNION SELECT memory_id FROM tombstones"""
        ).fetchall()
    return {r[0] for r in rows}


def import_backup(
    db: Database, rows: Iterable[dict[str, Any]], *, ledger_evidence: bool = True
) -> dict[str, int]:
    """Restore ``rows`` (``store.export.read_export``) into an empty store. Counts as
    ``MemoryStore.load_backup`` returns them, plus ``erased_skipped`` (memories this store
    erased or tombstoned, left out with their revisions and evidence). StoreError when the
    store already holds memories (nothing is written)."""
    from store.records import MemoryStore

    held = memory_rows(db)
    if any(held.values()):
        raise StoreError(
            f"the memory store is not empty ({held['memories']} memories, {held['revisions']} "
            f"revisions, {held['evidence']} evidence rows); import-backup restores into an empty store only",
            hint="use another data dir (PMEM_DATA_DIR) or database (PMEM_DB_NAME), or `pmem backup load FILE` "
            "to add the memories this store lacks",
        )
    erased = erased_memory_ids(db)
    skipped: set[str] = set()
    kept: list[dict[str, Any]] = []
    for row in rows:
        kind = row.get("type")
        memory_id = row.get("id") if kind == "memory" else row.get("memory_id")
        if kind in ("memory", "revision", "evidence") and memory_id in erased:
            if kind == "memory":
                skipped.add(str(memory_id))
            continue
        kept.append(row)
    counts = MemoryStore(db, ledger_evidence=ledger_evidence).load_backup(kept)
    counts["erased_skipped"] = len(skipped)
    counts["proposals"] = _load_proposals(
        db, [r for r in kept if r.get("type") == "proposal"], erased
    )
    return counts


def _load_proposals(db: Database, rows: list[dict[str, Any]], erased: set[str]) -> int:
    """The owner's queue back (requests and decisions), its text through the guard; a request
    about an erased memory is left out."""
    from psycopg.types.json import Jsonb

    from store.revisions import guard_payload

    n = 0
    with db.connection() as conn, conn.transaction():
        for q in rows:
            if q.get("memory_id") in erased or q.get("action") == "draft":
                continue
            n += conn.execute(
                """INSERT INTO proposals (proposal_id, payload, status, action, memory_id,
                       expected_revision, client, result, decided_by)
                   VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s) ON CONFLICT (proposal_id) DO NOTHING""",
                (
                    q["proposal_id"],
                    Jsonb(guard_payload(q.get("payload") or {})),
                    q["status"],
                    q["action"],
                    q.get("memory_id"),
                    q.get("expected_revision"),
                    q.get("client"),
                    None if q.get("result") is None else Jsonb(guard_payload(q["result"])),
                    q.get("decided_by"),
                ),
            ).rowcount
    return n
