"""The conversation's main decision, not a detail said after it (issue 27 item 1, round 8): the
person's act or plan nearest the matter the title names is a decision even when a later
sentence that only refines it (a means, a time, a reply) was read as one; a bare 「決めた。」 takes
the next sentence as its content. Own wording, in Japanese and English, and look-alikes."""

from __future__ import annotations

import pytest

from providers.extractive import draft_record
from providers.extractive.mainline import _act, _bare
from providers.extractive.sentences import person_sentences
from tests.test_extractive_drafter import _sections, make_conv


def _decision(turns: list[tuple[str, str]], title: str) -> str:
    record = draft_record(make_conv(turns, title=title), [])
    assert record is not None
    sections = _sections(record.canonical_summary)
    return sections.get("決定") or sections.get("Decision") or ""


@pytest.mark.parametrize(
    ("title", "turns", "main", "detail"),
    [
        (  # a plan told before the question; the reply only picks the means
            "年末 盛岡 帰省",
            [
                (
                    "user",
                    "年末の予定の相談。\n12月28日から5日間、一人で盛岡の実家に帰る。\n"
                    "新幹線と夜行バス、冬はどっちが確実？",
                ),
                ("assistant", "冬の夜行バスは遅れやすいので、新幹線が確実です。"),
                ("user", "ありがとう、新幹線にする。"),
            ],
            "12月28日から5日間、一人で盛岡の実家に帰る",
            "新幹線にする",
        ),
        (  # an act told as done, with an aside at its end; the detail is a time
            "陶芸教室 入会",
            [
                (
                    "user",
                    "報告です。\nさっき駅前の陶芸教室に入会した(月謝8千円)。\n"
                    "道具は最初に揃えたほうがいい？",
                ),
                ("assistant", "最初は教室の道具を借りて、続けられそうなら揃えるのがおすすめです。"),
                ("user", "初回は土曜の午前にする。"),
            ],
            "駅前の陶芸教室に入会した",
            "初回は土曜の午前にする",
        ),
    ],
)
def test_the_main_act_before_a_detail_is_the_decision(
    title: str, turns: list[tuple[str, str]], main: str, detail: str
) -> None:
    decision = _decision(turns, title)
    assert main in decision
    assert detail in decision  # the detail stays where it was read


def test_a_bare_marker_takes_the_next_sentence_as_its_content() -> None:
    turns = [
        ("user", "娘の学費の積み立てをどうするか考えてる。\n学資保険と積立NISA、どっちがいい？"),
        ("assistant", "どちらにも利点があります。元本保証なら学資保険、増やすならNISAです。"),
        (
            "user",
            "決めた。\n娘の名前で積立NISAを始めて、毎月1万円ずつ入れる。\n口座の書類は明日取り寄せる。",
        ),
    ]
    decision = _decision(turns, "娘 学費 積み立て")
    assert "娘の名前で積立NISAを始めて、毎月1万円ずつ入れる" in decision
    assert "決めた。" not in decision


@pytest.mark.parametrize(
    ("text", "bare"),
    [
        ("決めた。", True),
        ("よし、決めました！", True),
        ("Decided.", True),
        ("OK, I've decided.", True),
        ("決めたのは、駅から近いから。", False),  # the ground follows: not bare
        ("1:50で行く。", False),
        ("週2に増やすことにする", False),
        ("I decided to sell the car.", False),
    ],
)
def test_a_bare_marker_is_only_the_marker(text: str, bare: bool) -> None:
    s = person_sentences(make_conv([("user", text)]).messages)[0]
    assert _bare(s) is bare


def test_an_act_on_another_matter_is_no_decision() -> None:
    # the past act before the decision is far from the matter the title names
    turns = [
        (
            "user",
            "雨の日の通勤をどうするか悩んでる。\n昨日は友達と駅前でラーメンを食べた。\n"
            "雨の日も自転車で行くか、バスにするか。",
        ),
        ("assistant", "上下の合羽があれば自転車でも通えます。バスは時間が読めます。"),
        ("user", "合羽を買って、雨の日も自転車で行く。"),
    ]
    decision = _decision(turns, "雨の日 自転車 通勤")
    assert "合羽を買って、雨の日も自転車で行く" in decision
    assert "ラーメン" not in decision


def test_a_question_or_a_list_item_is_no_main_act() -> None:
    turns = [
        (
            "user",
            "夏休みの帰省の相談。\n- 8月10日から家族で札幌に帰る？\n- 費用は10万まで\n"
            "飛行機とフェリー、どっちがいい？",
        ),
        ("assistant", "子連れなら飛行機が楽です。"),
        ("user", "飛行機にする。"),
    ]
    decision = _decision(turns, "夏休み 札幌 帰省")
    assert "飛行機にする" in decision
    assert "札幌に帰る" not in decision


def test_english_main_plan_before_a_detail() -> None:
    turns = [
        (
            "user",
            "Summer plans.\nWe're moving to Lisbon in August with the kids.\n"
            "Is shipping boxes by sea worth it?",
        ),
        ("assistant", "For a family, sea freight is cheaper for bulky items; it takes 4-6 weeks."),
        ("user", "Thanks, I'll ship the books by sea."),
    ]
    decision = _decision(turns, "moving to Lisbon in August")
    assert "We're moving to Lisbon in August with the kids" in decision
    assert "I'll ship the books by sea" in decision


@pytest.mark.parametrize(
    ("text", "act"),
    [
        ("中古の電気窯を買った。", True),  # the object's head is a nominal suffix (窯)
        ("で、さっきLHの便に取り直した(羽田経由)。", True),  # an aside at the end
        ("来月のハーフにエントリーした!ちょっと高い笑", True),  # what follows an inner "!"
        ("We're moving to Porto in May.", True),
        ("Instead I signed up for a pottery course (Tuesdays), 20 EUR a class.", True),
        ("親父の手術が終わった。", False),  # an event told, not an act on something
        ("生地が本ごねでベタつく。", False),
        ("We are planning a trip for the holidays.", False),  # a state of planning
        ("来週から一人で帰る？", False),  # a question
    ],
)
def test_an_act_on_something(text: str, act: bool) -> None:
    s = person_sentences(make_conv([("user", text)]).messages)[0]
    assert _act(s) is act
