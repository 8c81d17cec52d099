"""The change of mind on unseen writers (ADR 0037, round 7): what keeps a conversation from
being appended to a memory it does not change. A memory whose matter began after the
conversation ended cannot be what it changes; a question about an earlier act takes nothing
back; a conditional (〜たら) qualifies no noun; between two memories a sentence names, the one
nearer by meaning is what it is about."""

from __future__ import annotations

from datetime import timedelta

import pytest

from core.models import MemoryIndexEntry
from providers.extractive import draft_record, pairing
from providers.extractive.change import asks, conversation_end, earlier_memories
from providers.extractive.readings import _proper_nouns, _refers_back, _values, given_up
from tests.test_change_of_mind import REVISITS, _entry, _later, _turns, drafted
from tests.test_change_of_mind import revisited as revisited  # noqa: F401 (the fixture)
from tests.test_extractive_drafter import make_conv


def test_a_memory_later_than_the_conversation_is_not_changed(
    revisited: list[MemoryIndexEntry],  # noqa: F811
) -> None:
    name, lines = REVISITS[0]
    conv = _later(lines, 900)
    end = conversation_end(conv)
    assert end is not None
    target = f"mem-{name}"

    def at(when: timedelta) -> list[MemoryIndexEntry]:
        return [
            e.model_copy(update={"occurred_at": end + when}) if e.id == target else e
            for e in revisited
        ]

    record = draft_record(conv, at(-timedelta(days=60)))
    assert record is not None and (record.action, record.target_memory_id) == ("append", target)
    record = draft_record(conv, at(timedelta(days=60)))  # an export imported late
    assert record is not None and record.action == "create", record.target_memory_id


def test_its_own_memory_is_kept_whatever_its_time() -> None:
    conv = make_conv(_turns(["来週の土曜に高尾山に登ることにした。"]), key="chatgpt:own")
    end = conversation_end(conv)
    assert end is not None
    own = MemoryIndexEntry(
        id="m-own",
        title="高尾山",
        index_summary="",
        kind="decision",
        current_revision=1,
        source_conversation_keys=[conv.key],
        occurred_at=end + timedelta(days=1),
    )
    later = own.model_copy(update={"id": "m-later", "source_conversation_keys": []})
    undated = later.model_copy(update={"id": "m-undated", "occurred_at": None})
    assert [e.id for e in earlier_memories(conv, [own, later, undated])] == [
        "m-own",
        "m-undated",
    ]


EARLIER = {
    "piano": [
        "中古のアップライトピアノを30万で買うことにした。",
        "理由は、娘が本格的にレッスンを続けたいと言ったから。",
    ],
    "juku": [
        "長男は駅前の学習塾に週2で通わせることにする。",
        "理由は、来年の受験に向けて塾のペースに慣れさせたいから。",
    ],
    "flat": [
        "今日、駅の北側の1LDKに申し込んだ。",
        "理由は、大学まで歩いて10分だから。",
    ],
    "cat": [
        "保護猫の譲渡会で会った茶トラの子の譲渡を申し込んだ。",
        "理由は、人懐っこくて一目ぼれしたから。",
    ],
}

# each near one of the memories above, none changing it
OTHER_MATTERS = [
    # a question about an earlier act (the grammar's final か), the decision about taxes: the
    # revisit reading and the rules' turn back both read the recall
    [
        "会社員で、去年から副業でピアノ教室をやってる。確定申告って必要？",
        "住民税の申告は別なの知らなかった、税務署に聞いてみます。"
        "ピアノは去年の12月に30万で買ったけど減価償却になるのか。。",
    ],
    [
        "会社員で、去年から副業でピアノ教室をやってる。確定申告って必要？",
        "税務署に聞いてみます。"
        "中古のアップライトピアノは去年の12月に30万で買ったけど減価償却になるのか。。",
    ],
    # another child's offer declined and kept as is: 〜たら is a condition, no earlier act
    [
        "娘が水泳教室のコーチから上のクラスに誘われた。今は週2で通ってる。",
        "コーチに聞いたら来年の春にまた選考があるそうなので、今回は誘いを断って、"
        "今のクラスのままにする。",
    ],
]


@pytest.fixture(scope="module")
def offered() -> list[MemoryIndexEntry]:
    return list(drafted(EARLIER).values())


@pytest.mark.parametrize("i", range(len(OTHER_MATTERS)))
def test_another_matter_near_a_memory_is_not_appended(
    i: int, offered: list[MemoryIndexEntry]
) -> None:
    lines = OTHER_MATTERS[i]
    record = draft_record(_later(lines, 910 + i), offered)
    assert record is not None and record.action == "create", (lines, record.target_memory_id)


def test_a_question_and_a_time_topic_are_read_by_their_grammar() -> None:
    assert asks("ピアノは去年の12月に30万で買ったけど減価償却になるのか。。")
    assert not asks("ピアノは去年の12月に30万で買ったけど、手放すことにした。")
    assert "今回" not in given_up("今回は誘いを断って、今のクラスのままにする。")
    assert "誘" in given_up("今回は誘いを断って、今のクラスのままにする。")


def test_a_conditional_qualifies_no_noun() -> None:
    assert not _refers_back("コーチに聞いたら3年生の春にまた選考がある。")
    assert _refers_back("頼んでた方は取り消してもらった。")
    assert _refers_back("申し込んだコースは来月から始まる。")


def test_between_two_memories_it_names_the_nearer_is_what_a_sentence_is_about(
    offered: list[MemoryIndexEntry],
) -> None:
    flat, cat = (next(e for e in offered if e.id == f"mem-{n}") for n in ("flat", "cat"))
    said = ["先週申し込んだ部屋、審査は通ったけど断りの連絡を入れた。"]
    # both memories hold 申し込む: the flat's is the nearer
    assert pairing._names(said[0], flat) and pairing._names(said[0], cat)
    assert pairing._about(said, flat, offered) == [True]
    assert pairing._about(said, cat, offered) == [False]
    assert pairing._nearest_named(said, cat, offered) == [False]
    assert pairing._nearest_named(said, flat, offered) == [True]


def test_a_recall_is_not_taken_for_the_nearest_memory_it_is_not_about(
    offered: list[MemoryIndexEntry],
) -> None:
    """The cat is what the whole conversation is nearest to (the gate's one candidate); the
    flat is what its recalled act names: no append to the cat."""
    lines = [
        "先週申し込んだ部屋、審査は通ったけど断りの連絡を入れた。",
        "保護猫の団体の人に、猫と住むならペット可の物件じゃないと譲渡できないって言われた。"
        "譲渡の面談も来週ある。",
        "それで、猫と住めるペット可の2LDKにする。",
    ]
    conv = _later(lines, 920)
    near = pairing.gate_nearest(pairing.gate_text(conv), offered)
    record = draft_record(conv, offered)
    assert record is not None
    assert record.target_memory_id != "mem-cat", (near, record.target_memory_id)


def test_a_date_with_the_month_cut_short_is_a_date() -> None:
    assert _values("I changed the flights to Feb 14 - Feb 24.") == {"月": {"2"}}
    assert _values("I booked Air Canada on Dec 19, back Jan 6.") == {"月": {"12", "1"}}
    assert _values("The exam is on Sept. 3") == {"月": {"9"}}
    assert _values("I fed the cat at 8") == {}


def test_a_booking_moved_to_other_dates_appends_and_another_booking_does_not() -> None:
    earlier = [
        "Okay, I booked the Shinkansen to Kyoto for Mar 3, back Mar 5.",
        "Mostly because the hotel near the station was cheaper that weekend.",
    ]
    record = draft_record(make_conv(_turns(earlier), key="chatgpt:kyoto-train"), [])
    assert record is not None and record.memory_kind == "decision"
    memory = _entry("kyoto-train", record)
    moved = [
        "My sister's wedding got moved to that weekend.",
        "So I changed the Shinkansen tickets to Apr 10 - Apr 12.",
    ]
    got = draft_record(_later(moved, 940), [memory])
    assert got is not None and (got.action, got.target_memory_id) == ("append", memory.id)
    other = [
        "My sister's wedding is on Apr 11 in Osaka.",
        "I'll bring the gift we talked about and stay with my parents.",
    ]
    got = draft_record(_later(other, 941), [memory])
    assert got is not None and got.action == "create", got.target_memory_id


def test_another_place_named_in_english_is_another_matter() -> None:
    """A booking for other dates to another place, naming the partner the memory names too, is
    no new date for the memory's plan (capitalised words inside an English sentence are its
    proper nouns: Melbourne, Naomi)."""
    assert _proper_nouns("So I booked flights to Melbourne for Naomi and me.") == {
        "melbourne",
        "naomi",
    }
    assert _proper_nouns("I'll move my TOEIC to Mar 8.") == {"toeic"}
    earlier = [
        "Naomiと話して、引っ越しは来年の6月にする。",
        "理由は、Naomiの契約が5月で切れるから。",
    ]
    record = draft_record(make_conv(_turns(earlier), key="chatgpt:move-date"), [])
    assert record is not None and record.memory_kind == "decision"
    memory = _entry("move-date", record)
    other = [
        "There was a sale this morning, so I booked flights to Melbourne for Dec 19 to Jan 4, "
        "for Naomi and me."
    ]
    got = draft_record(_later(other, 950), [memory])
    assert got is not None and got.action == "create", got.target_memory_id
