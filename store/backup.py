"""`pmem backup restore FILE`: a `pmem export` file restored into an empty memory store.

Memories, revisions, evidence and tombstones go through ``MemoryStore.load_backup``; the owner's
queue (``proposal`` rows) comes back here, its text through the same guard, and so do the
derived rows a backup carries (``store.export.DERIVED``: summaries, profile, concepts) and the
markers: a summary's text redacted as ``SummaryStore.add_month`` redacts it, a concept row that
holds a secret left out with what rests on it, a marker's text through the markers' own guard
(``store.markers.guard_text``: secrets `pmem forget` erased included). Then the erasure's own
steps run for every memory this store erased (``SummaryStore.drop_citing``,
``ConceptStore.erase``), so nothing made from an erased memory comes back either.

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
            f"revisions, {held['evidence']} evidence rows); `pmem backup restore` restores into an empty store only",
            hint="use another data dir (PMEM_DATA_DIR) or database (PMEM_DB_NAME), or `pmem backup restore FILE --merge` "
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
    counts |= _load_derived(db, kept, erased)
    return counts


# the columns of a concept row that hold words (ids and hashes are not guarded)
_WORDS = {"concept": ("name", "norm", "aliases", "keys"), "experience_link": ("surface", "reading")}


def _load_derived(db: Database, rows: list[dict[str, Any]], erased: set[str]) -> dict[str, int]:
    """Summaries, profile versions, the concept memory and the markers back, in one
    transaction; counts per row type (``month_summaries``, ``profiles``, ``concepts``,
    ``markers``, ``derived_refused``: concept rows left out because they hold a secret)."""
    from psycopg.types.json import Jsonb

    from core.hashing import content_hash, text_bytes
    from core.secrets import contains_secret
    from store.concepts import ConceptStore
    from store.export import DERIVED
    from store.markers import guard_text
    from store.revisions import guard_payload
    from store.summaries import SummaryStore

    def strings(value: Any) -> list[str]:
        if isinstance(value, str):
            return [value]
        if isinstance(value, list | tuple):
            return [s for v in value for s in strings(v)]
        return [s for v in value.values() for s in strings(v)] if isinstance(value, dict) else []

    by_kind: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        by_kind.setdefault(str(r.get("type")), []).append(r)
    counts = dict.fromkeys(("month_summaries", "profiles", "concepts", "markers"), 0)
    counts["derived_refused"] = 0
    refused: set[str] = set()  # concept ids left out: what links to them stays out too
    with db.connection() as conn, conn.transaction():
        for table, kind, _order, _left_out in DERIVED:
            types = dict(
                conn.execute(
                    "SELECT column_name, data_type FROM information_schema.columns "
                    "WHERE table_schema = current_schema() AND table_name = %s",
                    (table,),
                ).fetchall()
            )
            for r in by_kind.get(kind, []):
                row = {k: v for k, v in r.items() if k in types}
                words = [s for k in _WORDS.get(kind, ()) for s in strings(row.get(k))]
                if kind in ("month_summary", "profile"):
                    row = guard_payload(row)  # the text redacted, as add_month writes it
                elif {row.get("concept_id"), row.get("source_id"), row.get("target_id")} & refused:
                    continue
                elif any(contains_secret(s) for s in words):  # as the concept store drops them
                    if kind == "concept":
                        refused.add(str(row["id"]))
                    counts["derived_refused"] += 1
                    continue
                names = list(row)
                values = [Jsonb(row[k]) if types[k] == "jsonb" else row[k] for k in names]
                done = conn.execute(
                    f"INSERT INTO {table} ({', '.join(names)}) VALUES "  # noqa: S608 - names are the table's own columns
                    f"({', '.join(['%s'] * len(names))}) ON CONFLICT DO NOTHING",
                    values,
                ).rowcount
                key = {"month_summary": "month_summaries", "profile": "profiles"}.get(kind)
                if key is not None:
                    counts[key] += done
                elif kind == "concept":
                    counts["concepts"] += done
        for mk in by_kind.get("marker", []):
            text, kinds = guard_text(conn, str(mk["text"]))
            session = mk.get("session")
            if session is not None:
                session, more = guard_text(conn, str(session))
                kinds = [*kinds, *more]
            counts["markers"] += conn.execute(
                """INSERT INTO markers (marker_id, at, body, content_hash, session, client, redacted)
                   VALUES (%s, %s, %s, %s, %s, %s, %s) ON CONFLICT (marker_id) DO NOTHING""",
                (
                    mk["marker_id"],
                    mk["at"],
                    text_bytes(text),
                    content_hash(text),
                    session,
                    mk.get("client") or "cli",
                    sorted({*(mk.get("redacted") or []), *kinds}),
                ),
            ).rowcount
        # what this store erased stays erased in what was made from it
        gone = sorted(erased)
        if gone:
            SummaryStore(db).drop_citing(conn, gone)
            concepts = ConceptStore(db)
            held = {r[0] for r in conn.execute("SELECT memory_id FROM experiences")}
            for memory_id in gone:
                if memory_id in held:
                    concepts.erase(conn, memory_id)
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
