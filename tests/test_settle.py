"""A load ends with its tables vacuumed and analyzed (``store.settle``, ADR 0027): a first
import leaves no statistics and no visibility map, and recall then ran on the planner's guesses
until autovacuum's first pass, a minute later. A small increment into a settled table is left to
autovacuum; a large one is settled again."""

from __future__ import annotations

import json
from pathlib import Path

from store.settle import BASE, grown_tables, settle


def _state(db, table: str) -> dict[str, object]:
    with db.connection() as conn:
        row = conn.execute(
            """SELECT s.last_vacuum IS NOT NULL, s.last_analyze IS NOT NULL, c.relpages,
                      c.relallvisible, (SELECT count(*) FROM pg_stats WHERE tablename = %s)
                 FROM pg_stat_user_tables s JOIN pg_class c ON c.oid = s.relid
                WHERE s.relname = %s""",
            (table, table),
        ).fetchone()
    assert row is not None
    return dict(zip(("vacuumed", "analyzed", "pages", "visible", "columns"), row, strict=True))


def _add(db, rows: int, start: int = 0) -> None:
    """``rows`` more rows, committed, and the inserting backend's statistics counters reported
    at once (a backend reports them within about a second of going idle; the test must not
    depend on that second)."""
    with db.connection() as conn:
        conn.execute(
            "INSERT INTO settle_probe SELECT n, repeat('x', 200) FROM generate_series(%s::int, %s::int) n",
            (start, start + rows - 1),
        )
        conn.commit()
        conn.execute("SELECT pg_stat_force_next_flush()")
        conn.commit()  # idle: the counters are reported before the next statement is read
        conn.execute("SELECT 1")


def test_a_table_is_settled_once_then_again_only_when_it_grew(db) -> None:
    with db.connection() as conn:
        conn.execute("CREATE TABLE settle_probe (id int PRIMARY KEY, body text)")
    _add(db, 1000)
    assert "settle_probe" in grown_tables_of(db)
    before = _state(db, "settle_probe")
    assert before["columns"] == 0 and before["visible"] == 0  # no statistics, no visibility map

    assert "settle_probe" in settle(db)
    after = _state(db, "settle_probe")
    assert after["vacuumed"] and after["analyzed"] and after["columns"] == 2
    assert after["pages"] and after["visible"] == after["pages"]  # index-only scans stay there
    assert "settle_probe" not in grown_tables_of(db)

    _add(db, BASE // 2, start=10_000)  # a small increment (`pmem watch`): autovacuum's
    assert "settle_probe" not in settle(db)
    _add(db, 500, start=20_000)  # half the table again: settled again
    assert "settle_probe" in settle(db)


def grown_tables_of(db) -> list[str]:
    with db.connection() as conn:
        return grown_tables(conn)


def test_the_import_settles_what_it_loaded(pmem_env, tmp_path: Path, monkeypatch) -> None:
    from typer.testing import CliRunner

    from cli.main import app
    from store.db import Database
    from tests.test_ledger_cmds import chatgpt_export, one_conversation

    monkeypatch.setenv("PMEM_EMBEDDER", "none")
    path = chatgpt_export(
        tmp_path / "conversations.json",
        [
            one_conversation(
                f"c{n}", f"topic {n}", [("user", f"question {n}"), ("assistant", f"answer {n}")]
            )
            for n in range(5)
        ],
    )
    result = CliRunner().invoke(app, ["import", str(path), "--json"])
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout.strip().splitlines()[-1])
    settled = out["indexed"]["settled_tables"]
    assert {"source_messages", "source_conversations", "message_search"} <= set(settled)
    db = Database(pmem_env["DATABASE_URL"])
    try:
        for table in ("source_messages", "message_search"):
            state = _state(db, table)
            assert state["vacuumed"] and state["analyzed"] and state["columns"], table
    finally:
        db.close()
