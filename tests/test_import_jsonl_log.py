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
    assert sorted(convs) == [
        "jsonl-log:lab:2026-03-01",
        "jsonl-log:night:2026-03-01",
        "jsonl-log:night:2026-03-02",
    ]
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
    # a session that spans midnight is one conversation per daily file (the file names the day)
    night1, night2 = convs["jsonl-log:night:2026-03-01"], convs["jsonl-log:night:2026-03-02"]
    assert [m.text for m in night1.active_messages][1] == "Noted — Friday it is. 🗓️"
    assert lab.unknown_types == {"skipped:blank-line": 1} and night1.unknown_types == {}
    assert [m.channel for m in night2.active_messages] == [Channel.PERSON, Channel.ASSISTANT]
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
    assert out["conversations"] == {"new": 4, "changed": 0, "unchanged": 0, "quarantined": 4}
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
