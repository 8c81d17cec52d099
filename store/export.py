"""`pmem export`: a canonical, deterministic JSONL dump of the memory (a backup, and the way the
crash tests compare stores). Memories, revisions, evidence, tombstones and the owner's queue
(`proposal` rows: requests and decisions, not the backfill's bookkeeping), sorted; timestamps of the write
itself and run ids (which differ between runs) are left out; memory ids are content-derived and
kept. ``read_export`` brings such a file back (`pmem backup load`) through the store's write
boundary (``MemoryStore.load_backup``: the secret guard and the evidence checks)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from psycopg.rows import dict_row

from core.errors import InputError
from store.db import Database

EXPORT_SCHEMA = "pmem.export/1"


def _iso(v: Any) -> Any:
    return v.isoformat() if hasattr(v, "isoformat") else v


def iter_export(db: Database) -> Iterator[dict[str, Any]]:
    yield {"type": "header", "schema_version": EXPORT_SCHEMA}
    with db.connection() as conn:
        cur = conn.cursor(row_factory=dict_row)
        for m in cur.execute(
            """SELECT id, kind, title, canonical_summary, index_summary, aliases, tags, occurred_at,
                      valid_from, visibility, status, current_revision FROM memories ORDER BY id"""
        ).fetchall():
            yield {"type": "memory", **{k: _iso(v) for k, v in m.items()}}
        for r in cur.execute(
            """SELECT memory_id, revision, record, record_hash, reason, restored_from, client, model,
                      prompt_version FROM memory_revisions ORDER BY memory_id, revision"""
        ).fetchall():
            yield {"type": "revision", **r}
        for e in cur.execute(
            """SELECT memory_id, source_key, text, text_hash, language, revision_added FROM evidence
               ORDER BY memory_id, source_key, text_hash"""
        ).fetchall():
            yield {"type": "evidence", **e}
        for t in cur.execute(
            "SELECT memory_id, source_keys, last_revision, reason FROM tombstones ORDER BY memory_id"
        ).fetchall():
            yield {"type": "tombstone", **t}
        # the owner's queue (what AI clients asked for, and the owner's decisions); the backfill's
        # own bookkeeping rows (action 'draft') and the times of the writes are left out
        for q in cur.execute(
            """SELECT proposal_id, action, status, memory_id, expected_revision, client, payload,
                      result, decided_by FROM proposals WHERE action <> 'draft' ORDER BY proposal_id"""
        ).fetchall():
            yield {"type": "proposal", **q}


def write_export(db: Database, out: IO[str]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for row in iter_export(db):
        out.write(json.dumps(row, ensure_ascii=False, sort_keys=True, separators=(",", ":")) + "\n")
        counts[row["type"]] = counts.get(row["type"], 0) + 1
    counts.pop("header", None)
    return counts


def read_export(path: Path) -> Iterator[dict[str, Any]]:
    """The rows of a `pmem export` file (its header checked). InputError names the line."""
    with path.open(encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError:
                raise InputError("not a JSON line", file=str(path), record=f"line {n}") from None
            if n == 1 and (
                row.get("type") != "header" or row.get("schema_version") != EXPORT_SCHEMA
            ):
                raise InputError(f"not a {EXPORT_SCHEMA} export", file=str(path), record="line 1")
            if isinstance(row, dict) and row.get("type") != "header":
                yield row
