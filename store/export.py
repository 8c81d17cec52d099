"""`pmem export`: a canonical, deterministic JSONL dump of the memory (a backup, and the way the
crash tests compare stores). Memories, revisions, evidence, tombstones and the owner's queue
(`proposal` rows: requests and decisions, not the backfill's bookkeeping), then what was made
from them and costs a model's time to make again: the month summaries and profile versions,
the concept memory (names, experiences, their links, the relations and the log of their
weights; not the names' vectors, made again on first use) and the owner's markers. Sorted;
timestamps of the write itself, run ids (which differ between runs) and serial numbers are left
out; memory ids are content-derived and kept. ``read_export`` brings such a file back (`pmem backup restore --merge`) through the store's write
boundary (``MemoryStore.load_backup``: the secret guard and the evidence checks)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from psycopg.rows import dict_row

from core.errors import InputError
from core.hashing import bytes_text
from store.db import Database

EXPORT_SCHEMA = "pmem.export/1"

# the derived tables a backup carries, in the order a restore writes them (foreign keys):
# (table, row type, order, columns left out: the write's own time, run ids, serial numbers)
DERIVED: tuple[tuple[str, str, str, frozenset[str]], ...] = (
    ("month_summaries", "month_summary", "month, version", frozenset({"created_at", "run_id"})),
    ("profile_versions", "profile", "version", frozenset({"created_at", "run_id"})),
    ("concept_names", "concept", "id", frozenset({"created_at"})),
    ("experiences", "experience", "memory_id", frozenset({"extracted_at", "run_id"})),
    ("experience_links", "experience_link", "memory_id, concept_id", frozenset()),
    ("concept_relations", "concept_relation", "id", frozenset()),
    (
        "concept_link_updates",
        "concept_link_update",
        "seq",
        frozenset({"seq", "run_id", "created_at"}),
    ),
)
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def _iso(v: Any) -> Any:
    return v.isoformat() if hasattr(v, "isoformat") else v


def iter_export(db: Database, *, derived: bool = True) -> Iterator[dict[str, Any]]:
    """The rows of an export; ``derived=False``: the memories' rows alone (what two runs of one
    export must agree on byte for byte whatever the order of their batches; which memory first
    named a concept, and the order of the weights' log, follow that order)."""
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
        if not derived:
            return
        for table, kind, order, left_out in DERIVED:
            for row in cur.execute(f"SELECT * FROM {table} ORDER BY {order}").fetchall():  # noqa: S608 - names from DERIVED
                yield {"type": kind, **{k: _iso(v) for k, v in row.items() if k not in left_out}}
        # the owner's markers: the text as stored (byte-exact: a lone surrogate is escaped)
        for mk in cur.execute(
            "SELECT marker_id, at, body, session, client, redacted FROM markers ORDER BY at, marker_id"
        ).fetchall():
            body = bytes_text(bytes(mk.pop("body")))
            yield {"type": "marker", **{k: _iso(v) for k, v in mk.items()}, "text": body}


def write_export(db: Database, out: IO[str], *, derived: bool = True) -> dict[str, int]:
    counts: dict[str, int] = {}
    for row in iter_export(db, derived=derived):
        line = json.dumps(row, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
        line = _LONE_SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", line)  # valid UTF-8
        out.write(line + "\n")
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
