"""What each watched file looked like at the last pass (`pmem watch`, migration 0025).

A pass of the incremental re-index (``flows/watch.py``) compares a file's size and mtime with
its row here, hashes it only when they differ, and re-imports it only when its bytes changed; a
file that only grew (the bytes [0, old size) hash as before) is read from ``read_to`` on. A file
is recorded once it is imported (or found in a format pmem does not read), so a pass that stops
half-way leaves the files it did not reach to the next one. Paths, sizes, hashes and counts only:
never message text.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from psycopg.rows import dict_row
from psycopg.types.json import Jsonb

from core.hashing import canonical_json, sha256_hex
from store.db import Database
from store.ledger import storable


@dataclass(frozen=True)
class FileState:
    """One watched file as the last pass left it."""

    path: str  # absolute (storable form)
    root: str  # the watched PATH it was found under
    source: str | None  # its importer; None: not a format pmem reads
    size: int
    mtime_ns: int
    content_hash: str  # sha256 of bytes [0, size)
    read_to: int = 0  # bytes imported: the end of the last whole line (or the size)
    lines_read: int = 0  # newlines in [0, read_to)
    imports: int = 0
    gone: bool = False


_COLUMNS = (
    "path",
    "root",
    "source",
    "size",
    "mtime_ns",
    "content_hash",
    "read_to",
    "lines_read",
    "imports",
)


class WatchState:
    def __init__(self, db: Database) -> None:
        self.db = db

    def files(self, roots: Iterable[str] | None = None) -> dict[str, FileState]:
        """The recorded files (under ``roots``; every one when None), by path."""
        query = "SELECT *, gone_at IS NOT NULL AS gone FROM watched_files"
        params: tuple[Any, ...] = ()
        if roots is not None:
            query += " WHERE root = ANY(%s)"
            params = ([storable(r) for r in roots],)
        with self.db.connection() as conn:
            rows = conn.cursor(row_factory=dict_row).execute(query, params).fetchall()
        return {r["path"]: FileState(**{k: r[k] for k in _COLUMNS}, gone=r["gone"]) for r in rows}

    def roots(self) -> list[str]:
        """Every PATH a pass has watched (where a file of it is still recorded), sorted."""
        with self.db.connection() as conn:
            rows = conn.execute("SELECT DISTINCT root FROM watched_files ORDER BY root").fetchall()
        return [r[0] for r in rows]

    def record(self, states: Sequence[FileState]) -> None:
        """Insert or update these files' rows (``changed_at`` moves when the bytes changed)."""
        if not states:
            return
        with self.db.connection() as conn, conn.transaction(), conn.cursor() as cur:
            cur.executemany(
                """INSERT INTO watched_files (path, root, source, size, mtime_ns, content_hash,
                       read_to, lines_read, imports)
                   VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s)
                   ON CONFLICT (path) DO UPDATE SET root = EXCLUDED.root, source = EXCLUDED.source,
                       size = EXCLUDED.size, mtime_ns = EXCLUDED.mtime_ns,
                       content_hash = EXCLUDED.content_hash, read_to = EXCLUDED.read_to,
                       lines_read = EXCLUDED.lines_read, imports = EXCLUDED.imports, gone_at = NULL,
                       changed_at = CASE WHEN watched_files.content_hash = EXCLUDED.content_hash
                                         THEN watched_files.changed_at ELSE now() END""",
                [
                    (
                        storable(s.path),
                        storable(s.root),
                        s.source,
                        s.size,
                        s.mtime_ns,
                        s.content_hash,
                        s.read_to,
                        s.lines_read,
                        s.imports,
                    )
                    for s in states
                ],
            )

    def mark_gone(self, paths: Sequence[str]) -> None:
        """These files were not found by the pass (what they brought stays in the ledger)."""
        if not paths:
            return
        with self.db.connection() as conn, conn.transaction():
            conn.execute(
                "UPDATE watched_files SET gone_at = now() WHERE path = ANY(%s) AND gone_at IS NULL",
                ([storable(p) for p in paths],),
            )

    def forget_root(self, root: str) -> int:
        """Stop watching ``root``: its rows go (the ledger keeps what was imported)."""
        with self.db.connection() as conn, conn.transaction():
            cur = conn.execute("DELETE FROM watched_files WHERE root = %s", (storable(root),))
            return cur.rowcount

    # ---------------------------------------------------------------- passes

    def start_pass(self, trigger: str) -> str:
        now = datetime.now(UTC)
        pass_id = f"watch-{now:%Y%m%dT%H%M%S}-{sha256_hex(canonical_json([trigger, now.isoformat()]))[:8]}"
        with self.db.connection() as conn, conn.transaction():
            conn.execute(
                "INSERT INTO watch_passes (pass_id, trigger) VALUES (%s, %s)", (pass_id, trigger)
            )
        return pass_id

    def finish_pass(self, pass_id: str, status: str, stats: dict[str, Any]) -> None:
        with self.db.connection() as conn, conn.transaction():
            conn.execute(
                "UPDATE watch_passes SET finished_at = now(), status = %s, stats = %s WHERE pass_id = %s",
                (status, Jsonb(stats), pass_id),
            )

    def passes(self, limit: int = 10) -> list[dict[str, Any]]:
        """The latest passes, newest first."""
        with self.db.connection() as conn:
            return (
                conn.cursor(row_factory=dict_row)
                .execute(
                    """SELECT pass_id, trigger, started_at, finished_at, status, stats FROM watch_passes
                   ORDER BY started_at DESC, pass_id DESC LIMIT %s""",
                    (limit,),
                )
                .fetchall()
            )
