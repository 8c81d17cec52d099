"""The document frequencies recall and search weigh terms by (``search.common.doc_frequencies``):
one statement for a small index (the row count and each term's capped count, exactly), the
planner's estimates for a large one, where the exact counts are never run."""

from __future__ import annotations

import pytest

import search.common as common
from core.textsearch import index_tokens_long

TEXTS = [
    "the lake house has a new dock",
    "we went to the lake again",
    "a dock for the boat",
    "nothing about it here",
    "lake lake lake",
]


@pytest.fixture
def conn(db):
    with db.connection() as conn:
        conn.execute("CREATE TABLE df_probe (id int PRIMARY KEY, tokens tsvector)")
        for n, text in enumerate(TEXTS):
            conn.execute(
                "INSERT INTO df_probe VALUES (%s, array_to_tsvector(%s::text[]))",
                (n, sorted(set(index_tokens_long(text)))),
            )
        yield conn


def test_a_small_index_is_counted_exactly(conn) -> None:
    tsqs = ["'lake'", "'dock'", "'boat' | 'house'", "'absent'"]
    assert common.doc_frequencies(conn, "df_probe", tsqs) == (5, [3, 2, 2, 0])
    assert common.doc_frequencies(conn, "df_probe", []) == (5, [])
    # capped: a term in more rows than the cap counts as the cap
    common_cap = common.DF_COUNT_CAP
    try:
        common.DF_COUNT_CAP = 2
        assert common.doc_frequencies(conn, "df_probe", ["'lake'"]) == (5, [2])
    finally:
        common.DF_COUNT_CAP = common_cap


def _scans(conn) -> int:
    """Scans of the probe table in this transaction so far (not yet reported counters too)."""
    row = conn.execute("SELECT pg_stat_get_xact_numscans('df_probe'::regclass)").fetchone()
    return int(row[0])


def test_a_large_index_takes_the_planners_estimates(conn, monkeypatch) -> None:
    conn.execute("ANALYZE df_probe")
    before = _scans(conn)
    common.doc_frequencies(conn, "df_probe", ["'lake'"])
    assert _scans(conn) > before  # small: counted, so the table is scanned
    monkeypatch.setattr(common, "EXACT_COUNT_ROWS", 4)  # 5 rows count as large
    before = _scans(conn)
    n, dfs = common.doc_frequencies(conn, "df_probe", ["'lake'", "'dock'"])
    assert n == 5 and len(dfs) == 2 and all(d >= 1 for d in dfs)
    assert _scans(conn) == before  # the exact counts of the same statement never ran
