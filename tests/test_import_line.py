"""The `line` importer against fixtures written from the format's public descriptions: the phone
(Japanese header, 午前/午後, a BOM) and PC (English header, CRLF, `2026.03.01 Sunday`,
`Sun, 03/08/2026`, AM/PM) variants, quoted multi-line messages, placeholders and system lines as
machinery, another speaker and a non-person speaker, odd dates and times, lines before any date;
then `pmem import` (sniffed) and `pmem ledger show` on the real ledger."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from cli.main import app
from core.models import Channel, Conversation
from importers import sniff
from importers._common import Quarantined
from importers.line import iter_conversations, parse_date_line, parse_time

FIXTURES = Path(__file__).parent / "fixtures" / "chatlogs" / "line"
PHONE = FIXTURES / "phone-ja.txt"
PC = FIXTURES / "pc-en.txt"
NO_HEADER = FIXTURES / "no-header.txt"


@pytest.fixture(autouse=True)
def tokyo(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PMEM_TZ", "Asia/Tokyo")
    monkeypatch.delenv("PMEM_ME", raising=False)


def _read(path: Path, **kw: Any) -> tuple[list[Conversation], list[Quarantined]]:
    items = list(iter_conversations(path, **kw))
    return [i for i in items if isinstance(i, Conversation)], [
        i for i in items if isinstance(i, Quarantined)
    ]


def _rows(conv: Conversation) -> list[tuple[str, str, str, str]]:
    return [(m.channel.value, m.role, m.content_type, m.text) for m in conv.active_messages]


def test_phone_export_in_japanese_with_a_quoted_multi_line_message() -> None:
    convs, bad = _read(PHONE)  # no PMEM_ME: in a one-to-one chat the partner is the other one
    assert bad == [] and sniff(PHONE) == "line"
    first, second = convs
    assert first.key.startswith("line:") and first.key.endswith(":2026-03-01")
    assert "花子" not in first.key and first.title == "花子 2026-03-01"  # keys carry no names
    assert _rows(first) == [
        ("other", "花子", "text", "おはよう！明日の発表、何時から？"),
        # quoted over several lines: the quotes go, the line breaks (and the blank line) stay
        ("person", "user", "text", '10時からだよ\nスライドはまだ半分\n\n"がんばる"って言っておく'),
        ("machinery", "花子", "sticker", "[スタンプ]"),
        ("machinery", "user", "photo", "[写真]"),
        (
            "other",
            "花子",
            "text",
            '"引用"で始まる一行',
        ),  # a quote that opens a one-line message stays
        ("other", "花子", "text", '"引用"で始まる一行'),
    ]
    keys = [m.key for m in first.active_messages]
    assert len(set(keys)) == len(keys) and keys[-1] == keys[-2] + "~2"
    times = [m.created_at.isoformat() for m in first.active_messages]  # local times, JST → UTC
    assert times[0] == "2026-03-01T00:15:00+00:00" and times[3] == "2026-03-01T04:05:00+00:00"
    assert _rows(second) == [
        ("machinery", "system", "system", "花子がメッセージの送信を取り消しました"),
        ("person", "user", "text", "おやすみ"),
    ]
    assert (
        second.active_messages[0].created_at.isoformat() == "2026-03-01T15:30:00+00:00"
    )  # 午前0:30
    assert [m.text for m in first.drafting_messages] == [first.active_messages[1].text]
    again, _ = _read(PHONE)
    assert [c.content_hash for c in again] == [c.content_hash for c in convs]


def test_pc_export_in_english_group_with_names_and_odd_dates(monkeypatch) -> None:
    monkeypatch.setenv("PMEM_ME", "taro")
    convs, bad = _read(PC)
    assert bad == [] and sniff(PC) == "line"
    by_day = {c.key.rsplit(":", 1)[1]: c for c in convs}
    assert sorted(by_day) == ["2026-03-01", "2026-03-08", "undated"]
    assert _rows(by_day["2026-03-01"]) == [
        ("person", "user", "text", "Morning all"),
        ("other", "Notice Bot", "text", "Reminder: presentations on Friday"),  # not the person
        ("other", "Hanako", "text", "Multi-line\nmessage in English"),  # CRLF file, \n kept
        ("machinery", "system", "system", "Jiro joined the group."),
    ]
    impossible = by_day["undated"]  # 2026.02.30: kept, without a time, and counted
    assert _rows(impossible) == [("other", "Jiro", "text", "a message under an impossible date")]
    assert impossible.active_messages[0].created_at is None
    assert impossible.unknown_types == {"date:unreadable": 1}
    late = by_day["2026-03-08"]  # "Sun, 03/08/2026": month first; 10:00 PM
    assert _rows(late) == [
        ("machinery", "Hanako", "photo", "[Photo]"),
        ("machinery", "user", "sticker", "[Sticker]"),
        ("person", "user", "text", "a plain line\nthat wraps without quotes"),
    ]
    assert late.active_messages[0].created_at.isoformat() == "2026-03-08T13:00:00+00:00"
    # in a group without names nobody is the person: everything is kept, nothing is drafted
    monkeypatch.delenv("PMEM_ME")
    unnamed, _ = _read(PC)
    assert not any(m.channel is Channel.PERSON for c in unnamed for m in c.messages)
    assert all(c.drafting_messages == [] for c in unnamed)


def test_no_header_lines_before_a_date_and_odd_times() -> None:
    assert sniff(NO_HEADER) is None  # no header: --source line reads it
    convs, bad = _read(NO_HEADER, me="Taro")
    assert [(q.position, q.reason) for q in bad] == [(1, "no-date-line")]
    [conv] = convs
    assert conv.title == "no-header 2026-03-10"
    assert [(m.text, m.created_at is None) for m in conv.active_messages] == [
        ("after the date line", False),
        ("an odd time", True),
    ]
    assert conv.unknown_types == {"time:unreadable": 1}


def test_date_and_time_shapes() -> None:
    assert parse_date_line("2026/03/01(日)") == ("2026-03-01",)
    assert parse_date_line("2026/03/01(Sun)") == ("2026-03-01",)
    assert parse_date_line("2026.03.01 日曜日") == ("2026-03-01",)
    assert parse_date_line("2026年3月1日(日)") == ("2026-03-01",)
    assert parse_date_line("Sun, 03/01/2026") == ("2026-03-01",)
    assert parse_date_line("2026/13/01(日)") == (None,)
    assert parse_date_line("9:15\t花子\tこんにちは") is None
    assert [
        str(parse_time(t)) for t in ("9:15", "午後1:05", "午前12:10", "10:00 PM", "AM 7:05")
    ] == ["09:15:00", "13:05:00", "00:10:00", "22:00:00", "07:05:00"]
    assert parse_time("25:99") is None


def test_import_ledger_show_and_forget_speaker(pmem_env, db, tmp_path: Path) -> None:
    chats = tmp_path / "line"
    chats.mkdir()
    shutil.copy(PHONE, chats / PHONE.name)
    shutil.copy(PC, chats / PC.name)
    (chats / "notes.md").write_text("not a chat")
    runner = CliRunner()
    result = runner.invoke(app, ["import", str(chats), "--me", "太郎,Taro", "--no-embed", "--json"])
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout.strip().splitlines()[-1])
    assert out["source"] == "line" and out["conversations"]["new"] == 5
    assert out["skipped"] == {"not-a-chat-file": 1}
    key = next(c.key for c in _read(PHONE)[0] if c.title == "花子 2026-03-01")
    show = runner.invoke(app, ["ledger", "show", key, "--json"])
    assert show.exit_code == 0, show.output
    assert "スライドはまだ半分" in show.stdout  # non-ASCII as it is
    messages = json.loads(show.stdout)["messages"]
    assert [m["kind"] for m in messages] == [
        "other",
        "person",
        "machinery",
        "machinery",
        "other",
        "other",
    ]
    assert messages[1]["text"] == '10時からだよ\nスライドはまだ半分\n\n"がんばる"って言っておく'
    text = runner.invoke(app, ["ledger", "show", key])
    assert "[other] 花子" in text.stdout and "[person] user" in text.stdout
    with db.connection() as conn:
        before = conn.execute("SELECT count(*) FROM message_search WHERE role = '花子'").fetchone()[
            0
        ]
    assert before == 3  # another speaker's words are searchable (stickers are not indexed)

    # pmem forget --speaker: their words and name leave the index and the ledger
    gone = runner.invoke(app, ["forget", "--speaker", "三郎", "--yes", "--json"])  # no such speaker
    assert gone.exit_code == 1 and "no other speaker by that name" in gone.stderr
    result = runner.invoke(app, ["forget", "--speaker", " 花子 ", "--yes", "--json"])
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout.strip().splitlines()[-1])
    assert out["target"] == "speaker" and out["from_ledger"] is True and out["remaining"] == {}
    assert (
        out["counts"]["ledger_messages"] == 4 and "花子" not in result.stdout
    )  # ids and counts only
    with db.connection() as conn:
        rows = conn.execute(
            """SELECT role, channel, convert_from(body, 'UTF8') FROM source_messages
               WHERE conversation_key LIKE %s ORDER BY conversation_key, position""",
            (key.rsplit(":", 1)[0] + ":%",),
        ).fetchall()
        indexed = conn.execute(
            "SELECT count(*) FROM message_search WHERE role NOT IN ('user', 'Hanako', 'Notice Bot', 'Jiro')"
        ).fetchone()[0]
    theirs = [
        (role, text)
        for role, ch, text in rows
        if ch == "other" or (ch == "machinery" and role != "system") and role != "user"
    ]
    assert theirs == [("[REDACTED:forgotten]", "[REDACTED:forgotten]")] * 4
    assert [(role, text) for role, ch, text in rows if ch == "person"][0] == (
        "user",
        '10時からだよ\nスライドはまだ半分\n\n"がんばる"って言っておく',
    )  # the person's words stay
    assert indexed == 0

    def titles() -> list[str]:
        with db.connection() as conn:
            return [
                t
                for (t,) in conn.execute(
                    "SELECT title FROM source_conversations WHERE source = 'line' ORDER BY 1"
                )
            ]

    # issue 28, item 4: the one-to-one chat is titled by its partner: the name leaves the titles
    assert not any("花子" in t for t in titles())
    assert "[REDACTED:forgotten] 2026-03-01" in titles()
    # the same export again changes nothing; a later export's new message of theirs arrives erased
    again = runner.invoke(app, ["import", str(chats), "--me", "太郎,Taro", "--no-embed", "--json"])
    assert json.loads(again.stdout.strip().splitlines()[-1])["conversations"]["changed"] == 0
    later = tmp_path / "later.txt"
    later.write_text(
        "[LINE] 花子とのトーク履歴\n\n2026/04/01(水)\n9:00\t花子\tまた会おうね\n", encoding="utf-8"
    )
    assert runner.invoke(app, ["import", str(later), "--me", "太郎", "--no-embed"]).exit_code == 0
    with db.connection() as conn:
        texts = [
            bytes(b).decode()
            for (b,) in conn.execute(
                "SELECT body FROM source_messages WHERE conversation_key LIKE 'line:%%:2026-04-01'"
            )
        ]
    assert texts == ["[REDACTED:forgotten]"]
    assert not any("花子" in t for t in titles())  # a later chat's title too


def test_an_exchange_past_midnight_stays_one_conversation(tmp_path: Path, monkeypatch) -> None:
    """Issue 28, item 4: the replies after midnight that continue the evening's exchange (each
    within an hour of the one before) stay in its conversation, with their own date's times; a
    message after a pause starts the next day's."""
    monkeypatch.setenv("PMEM_TZ", "Asia/Tokyo")
    path = tmp_path / "chat.txt"
    path.write_text(
        "[LINE] 花子とのトーク履歴\n\n"
        "2026/03/01(日)\n23:40\t花子\t明日の発表、どうする？\n23:52\t太郎\tスライドは半分できた\n"
        "2026/03/02(月)\n0:05\t花子\tじゃあ残りは私が作るね\n0:20\t太郎\tありがとう、助かる\n"
        "9:30\t花子\tおはよう\n",
        encoding="utf-8",
    )
    convs, bad = _read(path, me="太郎")
    assert bad == []
    by_day = {c.key.rsplit(":", 1)[1]: c for c in convs}
    assert sorted(by_day) == ["2026-03-01", "2026-03-02"]
    evening = by_day["2026-03-01"]
    assert [m.text for m in evening.active_messages][2:] == [
        "じゃあ残りは私が作るね",
        "ありがとう、助かる",
    ]
    assert [m.created_at.isoformat() for m in evening.active_messages if m.created_at][2:] == [
        "2026-03-01T15:05:00+00:00",
        "2026-03-01T15:20:00+00:00",
    ]
    assert [m.text for m in by_day["2026-03-02"].active_messages] == ["おはよう"]
