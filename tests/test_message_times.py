"""The times a message speaks about (ADR 0036): the pure resolver (``search.mentions``) and the
index it fills (``store.message_times``, migration 0036) on the real PostgreSQL."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import psycopg
import pytest

from search.mentions import mentioned_times
from search.reader import SearchStore
from store.ledger import Ledger
from store.message_times import sync_times
from tests.test_recall import _conversation

JST = timezone(timedelta(hours=9))


def day(y: int, m: int, d: int, tz: timezone = UTC) -> tuple[datetime, datetime]:
    start = datetime(y, m, d, tzinfo=tz)
    return start, start + timedelta(days=1)


def test_relative_words_are_read_against_the_message_time():
    sent = datetime(2022, 3, 17, 14, 0, tzinfo=UTC)
    assert mentioned_times("Yesterday I went bowling with the team!", sent) == [day(2022, 3, 16)]
    found = mentioned_times("Last year I moved here; last week I bought a car.", sent)
    assert (datetime(2021, 1, 1, tzinfo=UTC), datetime(2022, 1, 1, tzinfo=UTC)) in found
    assert (datetime(2022, 3, 7, tzinfo=UTC), datetime(2022, 3, 14, tzinfo=UTC)) in found
    # an explicit date is kept as it is, whatever the message's time
    assert day(2021, 5, 3) in mentioned_times("it was on May 3, 2021", sent)


def test_japanese_and_the_calendar_zone():
    # 2022-03-17 23:30 UTC is already Friday the 18th in Tokyo: 昨日 is the 17th there
    sent = datetime(2022, 3, 17, 23, 30, tzinfo=UTC)
    assert mentioned_times("昨日ボウリングに行った", sent, "Asia/Tokyo") == [day(2022, 3, 17, JST)]
    assert mentioned_times("昨日ボウリングに行った", sent) == [day(2022, 3, 16)]
    # 先週の火曜 from Friday 2022-03-18 (JST): Tuesday the 8th
    assert mentioned_times("先週の火曜に決めた", sent, "Asia/Tokyo") == [day(2022, 3, 8, JST)]


def test_the_message_own_time_and_the_future_add_nothing():
    sent = datetime(2022, 3, 17, 14, 0, tzinfo=UTC)
    assert mentioned_times("Today is great, this week too, this year even more", sent) == []
    assert mentioned_times("no time here at all: version 2.1, top 10", sent) == []
    with pytest.raises(ValueError):
        mentioned_times("yesterday", datetime(2022, 3, 17))


def _resolve(text, at, zone):
    return mentioned_times(text, at, zone)


def test_what_the_index_writes_is_resolved_and_a_new_zone_resolves_all_again(
    db, db_url, monkeypatch
):
    monkeypatch.setenv("PMEM_TZ", "UTC")
    ledger = Ledger(db)
    imp = ledger.start_import("chatgpt", "synthetic")
    sent = datetime(2022, 3, 17, 14, 0, tzinfo=UTC)
    ledger.upsert(_conversation("bowl", "Yesterday I went bowling", sent), imp)
    ledger.upsert(_conversation("none", "Nothing dated in this one", sent), imp)
    SearchStore(db).sync_messages()  # the index queues what it writes for the time index
    assert sync_times(db, _resolve) == 2
    assert sync_times(db, _resolve) == 0  # nothing waits any more
    with psycopg.connect(db_url) as conn:
        rows = conn.execute(
            "SELECT message_key, lower(span), upper(span) FROM message_times"
        ).fetchall()
    assert rows == [("chatgpt:bowl:n1", *day(2022, 3, 16))]
    # another calendar zone: every message is resolved again
    monkeypatch.setenv("PMEM_TZ", "Asia/Tokyo")
    assert sync_times(db, _resolve) == 2
    with psycopg.connect(db_url) as conn:
        row = conn.execute("SELECT lower(span) FROM message_times").fetchone()
    assert row is not None and row[0] == datetime(2022, 3, 16, tzinfo=JST)


def test_a_range_that_holds_nothing_answers_from_the_nearest_relevant(db):
    from search.widen import widen

    ledger = Ledger(db)
    imp = ledger.start_import("chatgpt", "synthetic")
    near = datetime(2022, 3, 20, 9, 0, tzinfo=UTC)
    far = datetime(2021, 6, 1, 9, 0, tzinfo=UTC)
    ledger.upsert(_conversation("near", "We went bowling at the lanes downtown", near), imp)
    ledger.upsert(_conversation("far", "Bowling at the lanes downtown again", far), imp)
    ledger.upsert(_conversation("other", "The dentist appointment moved to Friday", near), imp)
    store = SearchStore(db)
    start, end = day(2022, 3, 16)

    def ask(lo, hi):
        return store.recall("bowling lanes", lo, hi, embedder=None, limit=5)

    assert ask(start, end).hits == []  # the range itself holds nothing
    w = widen(ask, start, end, 5)
    # the nearest step that holds a relevant message answers: the far one and the dentist not
    assert w.widened and [h.message_key for h in w.hits] == ["chatgpt:near:n1"]
    assert w.used == (start - timedelta(days=3), end + timedelta(days=10))
    # further off, only the whole history holds it
    w = widen(ask, *day(2023, 9, 1), 5)
    assert w.used == (None, None)
    assert [h.message_key for h in w.hits] == ["chatgpt:near:n1", "chatgpt:far:n1"]
    # a range that holds the answer keeps it first, with nothing added before it
    own = widen(ask, *day(2022, 3, 20), 1)
    assert not own.widened and [h.message_key for h in own.hits] == ["chatgpt:near:n1"]


def test_a_named_day_finds_the_next_day_that_says_yesterday(db, monkeypatch):
    from mcp_server.service import MemoryService

    monkeypatch.setenv("PMEM_TZ", "UTC")
    ledger = Ledger(db)
    imp = ledger.start_import("chatgpt", "synthetic")
    ledger.upsert(
        _conversation(
            "d17", "Yesterday I went bowling with my cousins", datetime(2022, 3, 17, 10, tzinfo=UTC)
        ),
        imp,
    )
    ledger.upsert(
        _conversation(
            "d16", "The dentist moved my appointment again", datetime(2022, 3, 16, 9, tzinfo=UTC)
        ),
        imp,
    )
    svc = MemoryService(db, embedder=None, tz="UTC")
    now = datetime(2022, 6, 1, 12, tzinfo=UTC)
    r = svc.recall("What did I do with my cousins on March 16, 2022?", now=now)
    assert r.range is not None and r.range["start"].startswith("2022-03-16")
    assert [h.message_key for h in r.hits] == ["chatgpt:d17:n1"]
    assert not r.range_widened  # in the range by what it speaks of: no widening needed
    # a range that holds nothing about the question answers from the nearest time, and says so
    w = svc.recall("What did I do with my cousins on March 10, 2022?", now=now).as_json()
    assert w["range_widened"] is True and w["range"]["start"].startswith("2022-03-10")
    assert [h["message_key"] for h in w["hits"]] == ["chatgpt:d17:n1"]
    assert w["range_used"] == {
        "start": "2022-03-07T00:00:00+00:00",
        "end": "2022-03-21T00:00:00+00:00",
    }


def test_every_row_a_statement_writes_is_queued_and_an_edit_queues_its_row(db, db_url):
    """Migration 0045: one set-based insert per statement (a COPY of many rows included) queues
    each new index row once; an UPDATE of the text or time queues that row (the row trigger)."""
    ledger = Ledger(db)
    imp = ledger.start_import("chatgpt", "synthetic")
    sent = datetime(2022, 3, 17, 14, 0, tzinfo=UTC)
    for key in ("a", "b", "c"):
        ledger.upsert(_conversation(key, f"Yesterday {key}", sent), imp)
    SearchStore(db).sync_messages()
    assert sync_times(db, _resolve) == 3
    with psycopg.connect(db_url) as conn:
        rows = conn.execute(
            "SELECT message_key, conversation_key, role, created_at, text, tokens::text"
            " FROM message_search ORDER BY message_key"
        ).fetchall()
        assert len(rows) == 3
        conn.execute("DELETE FROM message_search")
        with (
            conn.cursor() as cur,
            cur.copy(
                "COPY message_search (message_key, conversation_key, role, created_at, text, tokens)"
                " FROM STDIN"
            ) as copy,
        ):
            for row in rows:
                copy.write_row(row)
        queued = [k for (k,) in conn.execute("SELECT message_key FROM message_times_pending")]
        assert sorted(queued) == [r[0] for r in rows]
        conn.execute("DELETE FROM message_times_pending")
        conn.execute("UPDATE message_search SET role = role")  # neither text nor time: no queue
        assert conn.execute("SELECT count(*) FROM message_times_pending").fetchone() == (0,)
        conn.execute(
            "UPDATE message_search SET text = text || ' again' WHERE message_key = %s",
            (rows[1][0],),
        )
        assert conn.execute("SELECT message_key FROM message_times_pending").fetchall() == [
            (rows[1][0],)
        ]
