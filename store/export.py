"""`pmem export`: a canonical, deterministic JSONL dump of the memory (a backup, and the way the
crash tests compare stores). Memories, revisions and evidence, sorted; timestamps of the write
itself and run ids (which differ between runs) are left out; memory ids are content-derived and
kept."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import IO, Any

from psycopg.rows import dict_row

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


def write_export(db: Database, out: IO[str]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for row in iter_export(db):
        out.write(json.dumps(row, ensure_ascii=False, sort_keys=True, separators=(",", ":")) + "\n")
        counts[row["type"]] = counts.get(row["type"], 0) + 1
    counts.pop("header", None)
    return counts
