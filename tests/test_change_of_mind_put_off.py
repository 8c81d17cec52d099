"""A change of mind that puts the same act off (ADR 0037, round 7): the memory's act kept with
its time moved, read by the grammar of a time change (a head that moves an act governing a
later time: 「…まで待つ」, 「…にずらす」, 延期, "push X back", "hold off on X until"), in its
memory; another matter put off, a person waited for, a put-off negated, is no change of it."""

from __future__ import annotations

import pytest

from core.models import MemoryIndexEntry
from providers.extractive import draft_record, pairing
from providers.extractive.readings import put_off
from tests.test_change_of_mind import _later, drafted

EARLIER = {
    "land": [
        "母と相談して、実家の土地は売ることにした。",
        "理由は、誰も住む予定がなくて固定資産税だけかかるから。",
    ],
    "puppy": [
        "ブリーダーさんのところで柴犬の子犬を見てきた。",
        "一目ぼれしたので、その子を迎える契約をした。",
        "理由は、在宅勤務で昼間も家にいられるから。",
    ],
    "marathon": [
        "I signed up for the city marathon in November.",
        "Mostly because my running club is doing it together.",
    ],
    "fence": [
        "We decided to repaint the garden fence ourselves this summer.",
        "A painter quoted far more than the paint costs.",
    ],
    "camp": [
        "夏合宿の場所、いろいろ比べた。",
        "もう県立の青少年の家で予約した。",
        "理由は、体育館が2面使えるから。",
    ],
    "honeymoon": [
        "新婚旅行の行き先、夫とずっと話してた。",
        "新婚旅行は石垣島にする！",
        "理由は、夫が海が好きだから。",
    ],
}

# each puts off the act of the memory named, none with a cue word of the rules
PUT_OFF = [
    ("land", ["不動産屋さんに相談した。", "売却は来年の春まで待つことにした。"]),
    (
        "puppy",
        [
            "ブリーダーさんから電話があった。",
            "引っ越しが終わってないので、お迎えは3月頭にずらしてもらうことにした。",
        ],
    ),
    ("marathon", ["My knee is still sore.", "So I'm pushing the marathon back to next year."]),
    ("fence", ["It has rained every weekend.", "We'll hold off on the fence until September."]),
]

# near one of the memories, none changing it
NOT_PUT_OFF = [
    # another matter put off, nearer the summer camp (the gate's one candidate) by its words,
    # what is moved held by the honeymoon (旅行 in 新婚旅行)
    ("camp", ["夏合宿の日程が決まった。", "旅行は合宿のあとの8月後半に延ばす。"]),
    ("camp", ["夏休みの部活の予定表をもらった。", "なので、旅行は夏休みの8月に延ばす。"]),
    # a person waited for: 待つ with an object puts no act off
    ("land", ["実家の土地の件で、母と駅で会う。", "母を3時まで駅で待つことにした。"]),
]


@pytest.fixture(scope="module")
def offered() -> list[MemoryIndexEntry]:
    return list(drafted(EARLIER).values())


def test_the_time_change_is_read_by_its_grammar() -> None:
    assert put_off("売り出しは七回忌が終わる来年の4月まで待つことにしました") == {"売り出"}
    assert put_off("お迎えは新居に入ってからの2月頭にずらしてもらうことにした。") == {"御迎"}
    assert put_off("片付けは後回しにする。") == {"片付"}
    assert "sale" in (put_off("I'm pushing the sale back to April.") or set())
    assert put_off("We'll wait until March to list the house.")
    # no later time, a person waited for, negated, a question, nothing moved
    assert put_off("来年の春まで働くことにした。") is None
    assert put_off("駅で友達を3時まで待つことにした。") is None
    assert put_off("4月まで待たずに売ることにした。") is None
    assert put_off("売却は4月まで待つ？") is None
    assert put_off("I waited for the bus.") is None
    assert put_off("I put the bike back in the garage.") is None
    assert put_off("We moved back to Osaka in May.") is None
    assert put_off("We're putting the move off until spring.")


@pytest.mark.parametrize("i", range(len(PUT_OFF)))
def test_the_same_act_put_off_appends_to_its_memory(
    i: int, offered: list[MemoryIndexEntry], monkeypatch: pytest.MonkeyPatch
) -> None:
    name, lines = PUT_OFF[i]
    record = draft_record(_later(lines, 960 + i), offered)
    assert record is not None
    assert (record.action, record.target_memory_id) == ("append", f"mem-{name}"), lines
    # the put-off reading is what appends: without it the same conversation creates
    monkeypatch.setattr(pairing, "put_off", lambda *a, **k: None)
    record = draft_record(_later(lines, 960 + i), offered)
    assert record is not None and record.action == "create", record.target_memory_id


@pytest.mark.parametrize("i", range(len(NOT_PUT_OFF)))
def test_another_act_put_off_is_not_appended(i: int, offered: list[MemoryIndexEntry]) -> None:
    name, lines = NOT_PUT_OFF[i]
    record = draft_record(_later(lines, 970 + i), offered)
    assert record is not None
    assert record.target_memory_id != f"mem-{name}", lines
