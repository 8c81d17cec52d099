"""The `telegram` importer against fixtures written from Telegram Desktop's `result.json` shapes: a
single chat (entity lists, a reply, a pin, a sticker, a captioned photo, a message without id and
one that is not an object, two days) and a whole account (the account's own id, a group with
service messages and a deleted account, a bot chat, saved messages, a left chat); then
`pmem import` (sniffed) and `pmem ledger show` on the real ledger."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from cli.main import app
from core.errors import ConsentRequired, InputError
from core.models import Channel, Conversation, DraftOutput, MemoryIndexEntry
from core.settings import Settings
from flows import consent as cs
from flows import pipeline as pl
from importers import sniff
from importers._common import Quarantined
from importers.telegram import flatten, iter_conversations
from providers.fake import ScriptedDrafter

FIXTURES = Path(__file__).parent / "fixtures" / "chatlogs" / "telegram"
CHAT = FIXTURES / "ChatExport_2026-03-09" / "result.json"
ACCOUNT = FIXTURES / "account.json"


@pytest.fixture(autouse=True)
def tokyo(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PMEM_TZ", "Asia/Tokyo")
    monkeypatch.delenv("PMEM_ME", raising=False)


def _read(path: Path, **kw: Any) -> tuple[dict[str, Conversation], list[Quarantined]]:
    items = list(iter_conversations(path, **kw))
    return (
        {i.key: i for i in items if isinstance(i, Conversation)},
        [i for i in items if isinstance(i, Quarantined)],
    )


def _rows(conv: Conversation) -> list[tuple[str, str, str, str]]:
    return [(m.channel.value, m.role, m.content_type, m.text) for m in conv.active_messages]


def test_single_chat_entities_service_media_and_days() -> None:
    assert sniff(CHAT) == "telegram" and sniff(FIXTURES) == "telegram"
    convs, bad = _read(CHAT)  # no PMEM_ME: in a personal chat the partner is the other one
    assert [(q.position, q.reason) for q in bad] == [(5, "missing-id"), (6, "not-an-object")]
    assert sorted(convs) == ["telegram:4242424242:2026-03-01", "telegram:4242424242:2026-03-02"]
    day1 = convs["telegram:4242424242:2026-03-01"]
    assert day1.title == "Hanako 2026-03-01"
    assert _rows(day1) == [
        ("other", "Hanako", "text", "おはよう！発表は何時から？"),
        (
            "person",
            "user",
            "text",
            "10時から。資料は ここ。\n金曜日 に変更！",
        ),  # entities flattened
        ("machinery", "Hanako", "service:pin_message", "pin_message"),
        ("machinery", "Hanako", "sticker", "👍"),
        ("person", "user", "text", "会場の写真"),  # a photo's caption is the sender's words
    ]
    assert [m.key for m in day1.active_messages][:2] == [
        "telegram:4242424242:2026-03-01:101",
        "telegram:4242424242:2026-03-01:102",
    ]
    assert day1.active_messages[1].parent_id == "101"  # the reply
    assert day1.active_messages[0].created_at.isoformat() == "2026-03-01T00:15:00+00:00"
    # 08:00 in Tokyo on the 2nd is still the 1st in UTC: the day is the configured zone's
    day2 = convs["telegram:4242424242:2026-03-02"]
    assert _rows(day2) == [("other", "Hanako", "text", "@taro 了解、金曜ね")]
    assert day2.active_messages[0].created_at.isoformat() == "2026-03-01T23:00:00+00:00"
    named, _ = _read(CHAT, me="hanako")
    assert [m.channel.value for m in named["telegram:4242424242:2026-03-01"].active_messages][
        :2
    ] == ["person", "other"]


def test_whole_account_export() -> None:
    convs, bad = _read(ACCOUNT)
    assert bad == []
    assert sorted(convs) == [
        "telegram:1111:2026-03-04",
        "telegram:5000000001:2026-03-01",
        "telegram:6000000002:2026-03-03",
        "telegram:7000000003:2025-12-24",
    ]
    group = convs["telegram:5000000001:2026-03-01"]  # the account's own user_id is the person
    assert _rows(group) == [
        ("machinery", "Hanako", "service:create_group", "create_group"),
        ("machinery", "Jiro", "service:join_group_by_link", "join_group_by_link"),
        ("other", "Jiro", "text", "Jiro here, hi all"),
        ("person", "user", "text", "発表は金曜日にしました"),
        ("machinery", "Hanako", "voice_message", "[voice_message]"),
        ("other", "(deleted account)", "text", "a deleted account's words"),  # `date` only: local
    ]
    assert group.active_messages[-1].created_at.isoformat() == "2026-03-01T01:05:00+00:00"
    assert [m.text for m in group.drafting_messages] == ["発表は金曜日にしました"]
    bot = convs["telegram:6000000002:2026-03-03"]
    assert [m.channel.value for m in bot.active_messages] == ["person", "assistant"]
    saved = convs["telegram:1111:2026-03-04"]
    assert saved.title == "Saved Messages 2026-03-04" and _rows(saved)[0][0] == "person"
    assert _rows(convs["telegram:7000000003:2025-12-24"]) == [
        ("other", "Club Admin", "text", "Merry Christmas")
    ]


def test_flatten_and_a_cut_off_file(tmp_path: Path) -> None:
    assert flatten(["a ", {"type": "bold", "text": "b"}, {"type": "custom_emoji"}, " c"]) == "a b c"
    assert flatten(None) == ""
    text = CHAT.read_text(encoding="utf-8")
    cut = tmp_path / "result.json"
    cut.write_text(text[: text.index('"id": 107') - 20], encoding="utf-8")
    items: list[Any] = []
    with pytest.raises(InputError) as err:
        for item in iter_conversations(cut):
            items.append(item)
    assert err.value.file == str(cut)
    # what was read before the damage was handed on first
    assert [i.key for i in items if isinstance(i, Conversation)] == [
        "telegram:4242424242:2026-03-01"
    ]
    deep = tmp_path / "deep.json"
    deep.write_bytes(b'{"name": "x", "messages": [' + b"[" * 20000)  # a hostile nesting stops early
    with pytest.raises(InputError) as err:
        list(iter_conversations(deep))
    assert getattr(err.value, "reason", None) == "too-deep"


def test_import_and_ledger_show(pmem_env, db, tmp_path: Path) -> None:
    export = tmp_path / "Telegram Desktop"
    shutil.copytree(FIXTURES / "ChatExport_2026-03-09", export / "ChatExport_2026-03-09")
    runner = CliRunner()
    result = runner.invoke(app, ["import", str(export), "--no-embed", "--json"])
    assert result.exit_code == 3, result.output  # two messages set aside, the rest imported
    out = json.loads(result.stdout.strip().splitlines()[-1])
    assert out["source"] == "telegram" and out["conversations"]["new"] == 2
    assert sorted((e["record"], e["reason"]) for e in out["errors"]) == [
        (5, "missing-id"),
        (6, "not-an-object"),
    ]
    show = runner.invoke(app, ["ledger", "show", "telegram:4242424242:2026-03-01", "--json"])
    assert show.exit_code == 0, show.output
    assert "資料は ここ" in show.stdout  # --json keeps non-ASCII
    assert [m["kind"] for m in json.loads(show.stdout)["messages"]] == [
        "other",
        "person",
        "machinery",
        "machinery",
        "person",
    ]


class Recording(ScriptedDrafter):
    """A "remote" drafter (an OpenAI model id) that records what it was given."""

    def __init__(self) -> None:
        super().__init__(model="openai:gpt-test")
        self.seen: list[tuple[Channel, str]] = []

    def draft(
        self, conversations: list[Conversation], context: list[MemoryIndexEntry]
    ) -> DraftOutput:
        self.seen += [(m.channel, m.text) for c in conversations for m in c.drafting_messages]
        return super().draft(conversations, context)


def _run(drafter: Recording, options: pl.RunOptions | None = None) -> dict[str, Any]:
    p = pl.Pipeline.open(Settings(), options=options)
    p.drafter = drafter
    try:
        return pl.run_backfill(p, "telegram", str(ACCOUNT), embed=False)
    finally:
        p.close()


def test_other_speakers_reach_a_cloud_drafter_only_with_include_others(
    pmem_env, db, monkeypatch
) -> None:
    monkeypatch.setenv("PMEM_EMBEDDER", "none")
    cfg = Settings()
    plain = Recording()
    with pytest.raises(ConsentRequired):  # a remote model without the owner's consent: nothing sent
        _run(plain)
    cs.grant(cfg, cs.drafting_target(plain.model, "telegram"), [], {})
    assert _run(plain)["status"] == "complete"
    assert ("person", "発表は金曜日にしました") in [(ch.value, t) for ch, t in plain.seen]
    assert all(ch is not Channel.OTHER for ch, _ in plain.seen)
    assert not any("Jiro here" in t or "deleted account" in t for _, t in plain.seen)

    options = pl.RunOptions(include_others=True, redraft=())
    others = Recording()
    with pytest.raises(ConsentRequired):  # the consent given without them does not cover them
        _run(others, options)
    assert cs.drafting_scope("telegram", True) == "telegram+others"
    cs.grant(cfg, cs.drafting_target(others.model, cs.drafting_scope("telegram", True)), [], {})
    assert _run(others, options)["status"] == "complete"
    assert (Channel.OTHER, "Jiro here, hi all") in others.seen
    assert all(ch is not Channel.MACHINERY for ch, _ in others.seen)  # service lines never


def test_an_exchange_past_midnight_stays_one_conversation(tmp_path: Path) -> None:
    """Issue 28, item 4: a reply a few minutes after midnight continues the evening's
    conversation (it was a day of its own, one message long, and never drafted); a message after
    an hour's pause is the next day's."""
    from datetime import datetime
    from zoneinfo import ZoneInfo

    def at(text: str) -> str:
        return str(
            int(datetime.fromisoformat(text).replace(tzinfo=ZoneInfo("Asia/Tokyo")).timestamp())
        )

    said = [
        (1, "2026-03-01T23:40:00", "Hanako", "user42", "明日の発表、どうする？"),
        (2, "2026-03-01T23:52:00", "Taro", "user1", "スライドは半分できた"),
        (3, "2026-03-02T00:05:00", "Hanako", "user42", "じゃあ残りは私が作るね"),
        (4, "2026-03-02T00:20:00", "Taro", "user1", "ありがとう、助かる"),
        (5, "2026-03-02T09:30:00", "Hanako", "user42", "おはよう"),
    ]
    export = {
        "name": "Hanako",
        "type": "personal_chat",
        "id": 4242,
        "messages": [
            {
                "id": i,
                "type": "message",
                "date": t,
                "date_unixtime": at(t),
                "from": who,
                "from_id": uid,
                "text": text,
            }
            for i, t, who, uid, text in said
        ],
    }
    path = tmp_path / "result.json"
    path.write_text(json.dumps(export, ensure_ascii=False), encoding="utf-8")
    convs, bad = _read(path)
    assert bad == [] and sorted(convs) == ["telegram:4242:2026-03-01", "telegram:4242:2026-03-02"]
    evening = convs["telegram:4242:2026-03-01"]
    assert [m.text for m in evening.active_messages] == [t for *_, t in said[:4]]
    assert (
        evening.updated_at is not None
        and evening.updated_at.isoformat() == "2026-03-01T15:20:00+00:00"
    )
    assert [m.text for m in convs["telegram:4242:2026-03-02"].active_messages] == ["おはよう"]
