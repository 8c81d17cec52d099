"""The `jsonl-log` importer: a person's own daily JSONL logs (7-field and generic), sessions per
day, who speaks (PMEM_ME / --me), odd dates, missing fields, reading from a byte offset, and the
byte-exact round trip through the real ledger and `pmem import` / `pmem ledger show`."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from cli.main import app
from core.models import Channel, Conversation
from importers import iter_source, sniff
from importers._common import Quarantined
from importers.jsonl_log import file_date, iter_conversations, merge, read_tail
from store.ledger import Ledger

FIXTURES = Path(__file__).parent / "fixtures" / "chatlogs" / "jsonl-log"
DAY1 = FIXTURES / "2026" / "2026-03-01.jsonl"
DAY2 = FIXTURES / "2026" / "2026-03-02.jsonl"
GENERIC = FIXTURES / "generic.jsonl"


def _read(path: Path, **kw: Any) -> tuple[dict[str, Conversation], list[Quarantined]]:
    items = list(iter_conversations(path, **kw))
    convs = {i.key: i for i in items if isinstance(i, Conversation)}
    return convs, [i for i in items if isinstance(i, Quarantined)]


def _kinds(conv: Conversation) -> list[tuple[str, str, str]]:
    return [(m.channel.value, m.role, m.content_type) for m in conv.active_messages]


def test_daily_files_sessions_per_day_and_who_speaks(monkeypatch) -> None:
    monkeypatch.setenv("PMEM_ME", "Taro, 太郎")
    convs, bad = _read(FIXTURES / "2026")
    assert sorted(convs) == ["jsonl-log:lab:2026-03-01", "jsonl-log:night:2026-03-01"]
    lab = convs["jsonl-log:lab:2026-03-01"]
    assert _kinds(lab) == [
        ("person", "user", "text"),
        ("assistant", "assistant", "text"),
        ("machinery", "assistant", "action"),
        ("machinery", "system", "meta"),
        ("other", "hanako", "text"),  # another human: the role names them
    ]
    assert lab.active_messages[1].text == "いいテーマですね。構成案:\n1. 背景\n2. 手法"
    assert [m.key for m in lab.drafting_messages] == [m.key for m in lab.active_messages[:2]]
    assert lab.created_at.isoformat() == "2026-03-01T00:10:00+00:00"
    assert lab.updated_at.isoformat() == "2026-03-01T00:12:30+00:00"
    # the session at 23:50 in Tokyo goes on in the next day's file at 00:05 (within the hour):
    # one conversation, keyed by the day it started, each message with its own time
    night = convs["jsonl-log:night:2026-03-01"]
    assert [m.text for m in night.active_messages][1:3] == [
        "Noted — Friday it is. 🗓️",
        "日付が変わったけど、発表練習を続ける。",
    ]
    assert [m.channel for m in night.active_messages] == [Channel.PERSON, Channel.ASSISTANT] * 2
    assert [m.position for m in night.active_messages] == [0, 1, 2, 3]
    assert night.updated_at.isoformat() == "2026-03-01T15:05:09+00:00"
    assert lab.unknown_types == {"skipped:blank-line": 1} and night.unknown_types == {}
    # damaged lines are set aside with the file, the line number and a reason; the rest is read
    assert sorted((Path(q.file).name, q.position, q.reason) for q in bad) == [
        ("2026-03-02.jsonl", 3, "missing-text"),
        ("2026-03-02.jsonl", 4, "missing-role"),
        ("2026-03-02.jsonl", 5, "invalid-json"),
        ("2026-03-02.jsonl", 6, "not-an-object"),
    ]
    # keys are stable: the same files read again give the same keys, texts and hashes
    again, _ = _read(FIXTURES / "2026")
    assert {k: c.content_hash for k, c in again.items()} == {
        k: c.content_hash for k, c in convs.items()
    }


def test_without_names_role_user_is_the_person_and_me_overrides(monkeypatch) -> None:
    monkeypatch.delenv("PMEM_ME", raising=False)
    lab = _read(DAY1)[0]["jsonl-log:lab:2026-03-01"]
    assert [m.channel.value for m in lab.active_messages if m.content_type == "text"] == [
        "person",
        "assistant",
        "person",
    ]
    hanako = _read(DAY1, me="HANAKO")[0]["jsonl-log:lab:2026-03-01"]  # names compare folded
    assert [
        (m.channel.value, m.role) for m in hanako.active_messages if m.content_type == "text"
    ] == [("other", "taro"), ("assistant", "assistant"), ("person", "user")]


def test_generic_variant_odd_dates_and_the_day_in_the_configured_zone(monkeypatch) -> None:
    monkeypatch.setenv("PMEM_TZ", "Asia/Tokyo")
    assert sniff(GENERIC) == "jsonl-log" and sniff(FIXTURES) == "jsonl-log"
    convs, bad = _read(GENERIC)
    # issue 28, item 4: a ts that is there but cannot be read is quarantined, with its line
    assert [(q.position, q.reason) for q in bad] == [(6, "unreadable-time")]
    assert sorted(convs) == ["jsonl-log:generic:2026-02-11", "jsonl-log:generic:undated"]
    dated = convs["jsonl-log:generic:2026-02-11"]  # 23:30 UTC is the next morning in Tokyo
    times = [m.created_at.isoformat() if m.created_at else None for m in dated.active_messages]
    assert times == [
        "2026-02-10T23:30:00+00:00",
        "2026-02-10T23:31:00+00:00",
        "2026-02-10T23:32:00+00:00",
        "2026-02-10T23:33:00+00:00",
        "2026-02-10T15:34:00+00:00",
        "2026-02-11T00:40:00+00:00",
    ]
    unknown = dated.active_messages[-1]
    assert (unknown.channel, unknown.raw_type) == (Channel.MACHINERY, "role:narrator")
    undated = convs["jsonl-log:generic:undated"]
    assert [(m.text, m.created_at) for m in undated.active_messages] == [("no ts at all", None)]
    assert undated.unknown_types == {}
    assert file_date("log-20260301.jsonl") == "2026-03-01" and file_date("2026-02-30.jsonl") is None


def test_reading_from_an_offset_then_merging_equals_a_full_read(tmp_path: Path) -> None:
    log = tmp_path / "2026-04-01.jsonl"
    first = DAY1.read_bytes()
    log.write_bytes(first)
    tail = read_tail(log)
    assert tail.end == len(first) and tail.last_line == first.count(b"\n")
    stored = {c.key: c for c in tail.conversations}
    added = (
        b'{"ts": "2026-04-01T02:00:00Z", "actor": "taro", "role": "user", "text": "appended", '
        b'"session": "lab"}\n{"ts": "2026-04-01T02:01:00Z", "role": "user", "text": "new sess'
        b'ion", "session": "s2"}\n{"ts": "2026-04-01T02:02:00Z", "role": "user", "text": "half'
    )
    with log.open("ab") as fp:
        fp.write(added)
    grown = read_tail(log, tail.end, first_line=tail.last_line + 1, me="taro")
    assert grown.end == len(first) + added.rindex(b"\n") + 1  # the line being written waits
    assert grown.quarantined == []
    assert sorted(c.key for c in grown.conversations) == [
        "jsonl-log:lab:2026-04-01",
        "jsonl-log:s2:2026-04-01",
    ]
    new_lab = next(c for c in grown.conversations if c.key == "jsonl-log:lab:2026-04-01")
    assert [m.text for m in new_lab.messages] == ["appended"]
    merged = merge(stored["jsonl-log:lab:2026-04-01"], new_lab)
    full = {c.key: c for c in iter_conversations(log, me="taro") if isinstance(c, Conversation)}
    assert merged.content_hash == full["jsonl-log:lab:2026-04-01"].content_hash
    assert [m.position for m in merged.active_messages] == list(range(6))
    # the writer finishes the line: the next pass reads it from where the last one stopped
    with log.open("ab") as fp:
        fp.write(b'"}\n')
    last = read_tail(log, grown.end, me="taro")  # line number counted from the file
    assert [m.text for c in last.conversations for m in c.messages] == ["half"]
    assert last.last_line == grown.last_line + 1 and last.end == log.stat().st_size


TRICKY = [
    "nul\x00inside",
    "lone \ud800 surrogate",
    "emoji 😀 👩\u200d👩\u200d👧",
    "crlf\r\nline\r\n",
    "line sep \u2028 para \u2029",
    "日本語　全角スペース",
    "  spaces  \t",
    "",
]


def test_import_sniffs_the_log_and_the_ledger_round_trips_it_byte_exact(
    pmem_env, db, tmp_path: Path
) -> None:
    logs = tmp_path / "logs"
    shutil.copytree(FIXTURES / "2026", logs)
    exact = logs / "2026-03-03.jsonl"
    lines = [
        json.dumps(
            {
                "ts": f"2026-03-03T10:00:0{i}Z",
                "actor": "taro",
                "role": "user",
                "type": "text",
                "text": t,
                "session": "exact",
            },
            ensure_ascii=i % 2 == 1,
        )
        for i, t in enumerate(TRICKY)
    ]
    exact.write_bytes("\n".join(lines).encode("utf-8") + b"\n")
    runner = CliRunner()
    result = runner.invoke(app, ["import", str(logs), "--me", "taro", "--no-embed", "--json"])
    assert result.exit_code == 3, result.output  # four lines quarantined, the rest imported
    out = json.loads(result.stdout.strip().splitlines()[-1])
    assert out["source"] == "jsonl-log"
    assert out["conversations"] == {"new": 3, "changed": 0, "unchanged": 0, "quarantined": 4}
    assert {(Path(e["file"]).name, e["record"], e["reason"]) for e in out["errors"]} >= {
        ("2026-03-02.jsonl", 3, "missing-text")
    }

    back = Ledger(db).load("jsonl-log:exact:2026-03-03")
    assert [m.text for m in back.active_messages] == TRICKY
    raw_lines = exact.read_bytes().split(b"\n")[:-1]  # each message is named by its line's bytes
    assert [m.node_id for m in back.active_messages] == [
        hashlib.sha1(line, usedforsecurity=False).hexdigest()[:16] for line in raw_lines
    ]
    show = runner.invoke(app, ["ledger", "show", "jsonl-log:exact:2026-03-03", "--raw", "--json"])
    assert show.exit_code == 0, show.output
    assert [m["text"] for m in json.loads(show.stdout)["messages"]] == TRICKY

    lab = runner.invoke(app, ["ledger", "show", "jsonl-log:lab:2026-03-01", "--json"])
    assert "ゼミ発表の準備" in lab.stdout  # --json keeps non-ASCII as it is
    kinds = [(m["kind"], m["role"]) for m in json.loads(lab.stdout)["messages"]]
    assert kinds == [
        ("person", "user"),
        ("assistant", "assistant"),
        ("machinery", "assistant"),
        ("machinery", "system"),
        ("other", "hanako"),
    ]
    with db.connection() as conn:  # another speaker's words are searchable by recall
        indexed = conn.execute(
            """SELECT count(*) FROM message_search s JOIN source_messages m USING (message_key)
               WHERE m.channel = 'other'"""
        ).fetchone()[0]
    assert indexed == 1


def test_iter_source_names_the_importer() -> None:
    items = list(iter_source("jsonl-log", DAY1))
    assert {i.source for i in items if isinstance(i, Conversation)} == {"jsonl-log"}


def _line(ts: str, text: str, session: str = "s", role: str = "user") -> str:
    return json.dumps({"ts": ts, "role": role, "text": text, "session": session}) + "\n"


def _texts(conv: Conversation) -> list[str]:
    return [m.text for m in conv.active_messages]


def test_a_session_past_midnight_in_one_file_is_one_conversation(tmp_path: Path, monkeypatch):
    monkeypatch.setenv("PMEM_TZ", "UTC")
    lines = [
        _line("2026-03-01T23:50:00Z", "still up?"),
        _line("2026-03-01T23:55:00Z", "yes, writing", role="assistant"),
        _line("2026-03-02T00:10:00Z", "past midnight, same talk"),
        _line("2026-03-02T09:00:00Z", "next morning: a new talk"),  # nine hours later
    ]
    undated = tmp_path / "chat.jsonl"  # no date in the name: each line's day is its own
    undated.write_text("".join(lines))
    convs, _ = _read(undated)
    assert sorted(convs) == ["jsonl-log:s:2026-03-01", "jsonl-log:s:2026-03-02"]
    assert _texts(convs["jsonl-log:s:2026-03-01"]) == [
        "still up?",
        "yes, writing",
        "past midnight, same talk",
    ]
    assert _texts(convs["jsonl-log:s:2026-03-02"]) == ["next morning: a new talk"]
    # read from an offset (the watcher), the line after midnight still goes with its exchange
    undated.write_text("".join(lines[:2]))
    first = read_tail(undated)
    with undated.open("a") as fp:
        fp.write("".join(lines[2:]))
    grown = read_tail(undated, first.end)
    stored = {c.key: c for c in first.conversations}
    by_key = {c.key: c for c in grown.conversations}
    assert sorted(by_key) == ["jsonl-log:s:2026-03-01", "jsonl-log:s:2026-03-02"]
    merged = merge(stored["jsonl-log:s:2026-03-01"], by_key["jsonl-log:s:2026-03-01"])
    assert merged.content_hash == convs["jsonl-log:s:2026-03-01"].content_hash
    # a daily file holds its day whatever the times say
    dated = tmp_path / "2026-03-01.jsonl"
    dated.write_text("".join(lines))
    assert sorted(_read(dated)[0]) == ["jsonl-log:s:2026-03-01"]


def _two_days(folder: Path) -> tuple[Path, Path]:
    folder.mkdir(parents=True, exist_ok=True)
    day1, day2 = folder / "2026-03-01.jsonl", folder / "2026-03-02.jsonl"
    day1.write_text(
        _line("2026-03-01T20:00:00Z", "an evening talk", session="t")
        + _line("2026-03-01T23:50:00Z", "still up?")
        + _line("2026-03-01T23:55:00Z", "yes, writing", role="assistant")
    )
    day2.write_text(
        _line("2026-03-02T00:10:00Z", "past midnight, same talk")
        + _line("2026-03-02T00:20:00Z", "good night", role="assistant")
        + _line("2026-03-02T00:30:00Z", "another session, new", session="u")
        + _line("2026-03-02T09:00:00Z", "next morning: a new talk")
        + _line("2026-03-02T21:30:00Z", "t again, a day later", session="t")
    )
    return day1, day2


def test_a_session_continued_in_the_next_days_file_is_one_conversation(tmp_path: Path) -> None:
    day1, day2 = _two_days(tmp_path / "logs")
    convs, bad = _read(tmp_path / "logs")
    assert bad == []
    assert sorted(convs) == [
        "jsonl-log:s:2026-03-01",
        "jsonl-log:s:2026-03-02",
        "jsonl-log:t:2026-03-01",
        "jsonl-log:t:2026-03-02",
        "jsonl-log:u:2026-03-02",
    ]
    night = convs["jsonl-log:s:2026-03-01"]
    assert _texts(night) == ["still up?", "yes, writing", "past midnight, same talk", "good night"]
    assert [m.position for m in night.active_messages] == [0, 1, 2, 3]
    assert night.provenance.file == str(day1) and night.provenance.position == 2
    assert _texts(convs["jsonl-log:s:2026-03-02"]) == ["next morning: a new talk"]
    # either file read alone yields that conversation whole, the same
    for alone in (day1, day2):
        got, _ = _read(alone)
        assert got["jsonl-log:s:2026-03-01"].content_hash == night.content_hash
    assert sorted(_read(day2)[0]) == [
        "jsonl-log:s:2026-03-01",
        "jsonl-log:s:2026-03-02",
        "jsonl-log:t:2026-03-02",
        "jsonl-log:u:2026-03-02",
    ]
    # the watcher: the next day's file written line by line, each pass merged into the stored
    full = day2.read_text().splitlines(keepends=True)
    day2.write_text(full[0])
    stored = {c.key: c for c in read_tail(day2).conversations}
    assert _texts(stored["jsonl-log:s:2026-03-01"]) == _texts(night)[:3]
    end = day2.stat().st_size
    for line in full[1:]:
        with day2.open("a") as fp:
            fp.write(line)
        tail = read_tail(day2, end)
        end = tail.end
        for conv in tail.conversations:
            stored[conv.key] = merge(stored[conv.key], conv) if conv.key in stored else conv
    assert stored["jsonl-log:s:2026-03-01"].content_hash == night.content_hash
    assert (
        stored["jsonl-log:s:2026-03-02"].content_hash
        == convs["jsonl-log:s:2026-03-02"].content_hash
    )
    # one midnight at most: a session that ran on into a file from the day before and through it
    # starts a new conversation in the file after
    day3 = tmp_path / "logs" / "2026-03-03.jsonl"
    day2.write_text(_line("2026-03-02T00:10:00Z", "on") + _line("2026-03-02T00:50:00Z", "on"))
    day3.write_text(_line("2026-03-02T01:20:00Z", "still on"))
    again, _ = _read(tmp_path / "logs")
    assert _texts(again["jsonl-log:s:2026-03-01"]) == ["still up?", "yes, writing", "on", "on"]
    assert _texts(again["jsonl-log:s:2026-03-03"]) == ["still on"]


def test_reimporting_logs_that_cross_midnight_adds_nothing(pmem_env, db, tmp_path: Path) -> None:
    runner = CliRunner()

    def imported(path: Path) -> dict[str, int]:
        result = runner.invoke(app, ["import", str(path), "--no-embed", "--json"])
        assert result.exit_code == 0, result.output
        return json.loads(result.stdout.strip().splitlines()[-1])["conversations"]

    def rows() -> list[tuple[str, str, int, int]]:
        with db.connection() as conn:
            return conn.execute(
                """SELECT message_key, conversation_key, position, xmin::text::bigint
                   FROM source_messages ORDER BY message_key"""
            ).fetchall()

    day1, day2 = _two_days(tmp_path / "logs")
    later = day2.read_bytes()
    day2.unlink()  # the next day's file is not written yet
    assert imported(day1) == {"new": 2, "changed": 0, "unchanged": 0, "quarantined": 0}
    day2.write_bytes(later)
    # the next day's file: the earlier night's conversation grows by the two lines after midnight
    assert imported(day2) == {"new": 3, "changed": 1, "unchanged": 0, "quarantined": 0}
    before = rows()
    assert len(before) == 8  # every line once
    assert imported(tmp_path / "logs") == {"new": 0, "changed": 0, "unchanged": 5, "quarantined": 0}
    assert imported(day1)["unchanged"] == 2 and imported(day2)["unchanged"] == 4
    assert rows() == before  # not a row written again
    night = Ledger(db).load("jsonl-log:s:2026-03-01")
    assert _texts(night) == ["still up?", "yes, writing", "past midnight, same talk", "good night"]


def test_a_ledger_keyed_by_file_day_keeps_its_rows_on_reimport(pmem_env, db, tmp_path) -> None:
    """Before a session past midnight stayed one conversation, the next day's file's lines were
    their own day's conversation. A re-import adds them to the earlier night's conversation
    under its key; the rows stored under the old key stay (the ledger never deletes), so those
    two lines are then in both conversations."""
    runner = CliRunner()
    day1, day2 = _two_days(tmp_path / "logs")
    old = tmp_path / "old"  # the next day's file alone: read as the file-day keys read it
    old.mkdir()
    shutil.copy(day2, old / day2.name)
    assert runner.invoke(app, ["import", str(old), "--no-embed", "--json"]).exit_code == 0
    ledger = Ledger(db)
    assert _texts(ledger.load("jsonl-log:s:2026-03-02")) == [
        "past midnight, same talk",
        "good night",
        "next morning: a new talk",
    ]
    result = runner.invoke(app, ["import", str(tmp_path / "logs"), "--no-embed", "--json"])
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout.strip().splitlines()[-1])["conversations"]
    assert out == {"new": 2, "changed": 1, "unchanged": 2, "quarantined": 0}
    assert _texts(ledger.load("jsonl-log:s:2026-03-01"))[2:] == [
        "past midnight, same talk",
        "good night",
    ]
    with db.connection() as conn:
        kept = conn.execute(
            """SELECT m.position, m.on_active_path FROM source_messages m
               WHERE conversation_key = 'jsonl-log:s:2026-03-02' ORDER BY message_key"""
        ).fetchall()
    assert len(kept) == 3  # the old rows are all there, not retired (the importer cannot)
