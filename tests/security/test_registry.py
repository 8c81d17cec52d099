"""Issue 10, point 1 (registry): every table that can hold text is listed in store/derived.py,
so the guard and `pmem forget` know it. Reads the live, fully migrated schema."""

from __future__ import annotations

import psycopg

from store.derived import REGISTRY, SCHEMA_COLUMNS_SQL, TABLE_STORES, text_holding, unregistered


def _columns(db_url: str) -> list[tuple[str, str, str, str]]:
    with psycopg.connect(db_url) as conn:
        return [tuple(r) for r in conn.execute(SCHEMA_COLUMNS_SQL).fetchall()]  # type: ignore[misc]


def test_every_text_holding_table_and_column_is_registered(db_url: str) -> None:
    columns = _columns(db_url)
    assert unregistered(columns) == [], (
        "register these in store/derived.py (text / ids / indexes / vectors) so the secret "
        "guard and `pmem forget` cover them"
    )
    tables = {t for t, *_ in columns}
    stale = sorted(set(REGISTRY) - tables)
    assert stale == [], f"registered tables that no migration creates: {stale}"
    # every registered store says what it is, and no column is listed twice
    for s in TABLE_STORES:
        listed = [*s.scanned, *s.vectors]
        assert len(listed) == len(set(listed)), s.table
        assert s.layer in ("ledger", "derived", "bookkeeping")
        if s.layer == "derived" and (s.text or s.vectors):
            assert s.guard, f"{s.table}: say how the secret guard covers its writes"


def test_a_new_text_table_or_column_fails_the_check(db_url: str) -> None:
    before = set(unregistered(_columns(db_url)))
    with psycopg.connect(db_url, autocommit=True) as conn:
        conn.execute("CREATE TABLE monthly_summaries (month date PRIMARY KEY, summary text)")
        conn.execute("ALTER TABLE memories ADD COLUMN profile_note jsonb")
        conn.execute("CREATE TABLE counters (n integer)")  # no text: needs no entry
    missing = set(unregistered(_columns(db_url))) - before
    assert sorted(missing) == ["memories.profile_note", "monthly_summaries.summary"]


def test_text_holding_types() -> None:
    assert text_holding("text", "text") and text_holding("jsonb", "jsonb")
    assert text_holding("bytea", "bytea") and text_holding("tsvector", "tsvector")
    assert text_holding("ARRAY", "_text") and text_holding("USER-DEFINED", "halfvec")
    assert not text_holding("integer", "int4") and not text_holding("ARRAY", "_int4")
    assert not text_holding("timestamp with time zone", "timestamptz")
