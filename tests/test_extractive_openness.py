"""Open points after the decision read by structure (providers/extractive/openness.py, ADR 0037
round 8): a question the sentence holds, a difficulty foreseen, a deliberation; and the forms
that look like them and are none (a quotation, a hedge, a past, a potential, hearsay, a cause,
a question put to the assistant, a choice between nouns)."""

from __future__ import annotations

import pytest

from providers.extractive import draft_record, person_sentences, roles
from providers.extractive.openness import deliberates, foreseen, leaves_open, pending_question
from tests.test_extractive_drafter import _sections, make_conv


@pytest.mark.parametrize(
    ("text", "held"),
    [
        ("送別会の会費がいくらになるか それだけ引っかかってる", True),
        ("抽選に通るか微妙。", True),
        ("ベビーカーが玄関に入るかだけ測っておく。", True),
        ("引き継ぎを誰に頼むかまだ詰めきれてない", True),
        ("式は6月か9月かで両家の都合を聞く。", True),  # a question between alternatives
        ("Whether the deposit comes back is the part left.", True),
        ("How much the piano move costs depends on the stairs.", True),
        # look-alikes
        ("先輩から一緒に出ないかって誘われた。", False),  # a quotation
        ("雨になるかもって。", False),  # a hedge
        ("どこに泊まるか決めた。", False),  # told as done
        ("いくらかかるか教えて？", False),  # asked of the assistant
        ("週末は山か海。", False),  # a choice between nouns
        ("予算が出るか出ないかもわからないし", False),  # a reason said on its own
        ("治療は二択(縫うか削る)。", False),  # an aside
        ("保険料がいくらになるか読めないし、今回は見送る。", False),  # inside a cause
        ("How much does the move cost?", False),
        ("I asked whether the deposit comes back.", False),
    ],
)
def test_a_question_the_sentence_holds(text: str, held: bool) -> None:
    assert pending_question(text) is held


@pytest.mark.parametrize(
    ("text", "held"),
    [
        ("義母は反対しそう。", True),
        ("年末は引き継ぎで手一杯になりそう", True),
        # look-alikes
        ("来月から通えそう。", False),  # a potential: what can be done
        ("延長できるそうです。", False),  # hearsay
        ("年内に取れそうって。", False),  # quoted
        ("駅から近いから毎日通いそう。", False),  # argued from a cause: a reason
        ("雨が降りそうだから傘を持っていく。", False),
    ],
)
def test_a_difficulty_foreseen(text: str, held: bool) -> None:
    assert foreseen(text) is held


@pytest.mark.parametrize(
    ("text", "held"),
    [
        ("もし落ちたらどうしよう。", True),
        ("当日は何を持っていこう…", True),
        ("どうしよう？", False),  # put to the assistant
        ("どうしようか迷ったけど、行くことにした。", False),  # told in the past
        ("みんなで行こう。", False),  # a volitional with no interrogative
        ("どうしたもんでしょう", False),  # the copula's conjecture: a question put to the assistant
    ],
)
def test_a_deliberation(text: str, held: bool) -> None:
    assert deliberates(text) is held


def test_thanks_and_small_talk_leave_nothing_open() -> None:
    for text in ("ありがとう、助かった！", "Thanks, that helps a lot.", "今日は寒いね。"):
        assert not leaves_open(text)


TURNS = [
    ("user", "駐車場をどこに借りるか それだけが引っかかる。車を買い替えるか迷ってる。"),
    ("assistant", "今の車は何年目ですか？"),
    ("user", "12年目。軽のハイブリッドに買い替える。駐車場をどこに借りるか それだけが引っかかる。"),
]


def _roles(turns: list[tuple[str, str]]) -> list[tuple[str, str]]:
    person = person_sentences(make_conv(turns).drafting_messages)
    got = roles._rule_roles(person)
    return [(s.text, got.get(s.index, "-")) for s in person]


def test_after_the_decision_the_held_question_is_open_before_it_not() -> None:
    got = _roles(TURNS)
    held = "駐車場をどこに借りるか それだけが引っかかる。"
    assert (held, "open") in got[-1:]  # after 「軽のハイブリッドに買い替える。」
    assert got[0] == (held, "-")  # the opening: the question the conversation answers
    roles.set_rules_off({"open:after_decision"})
    try:
        assert (held, "open") not in _roles(TURNS)
    finally:
        roles.set_rules_off(set())


def test_a_foreseen_difficulty_after_the_decision_is_drafted_as_open() -> None:
    conv = make_conv(
        [
            ("user", "実家の片付け、どう進めるか相談したい。"),
            ("assistant", "いつ頃から始めますか？"),
            ("user", "お盆に3日間帰って片付けることにした。父は古い本を手放すのを渋りそう。"),
        ]
    )
    record = draft_record(conv, [])
    assert record is not None
    sections = _sections(record.canonical_summary)
    assert "父は古い本を手放すのを渋りそう。" in sections.get("未解決", "")
    assert any("渋りそう" in e.quote_hint for e in record.evidence)


def test_a_conjecture_from_a_cause_after_the_decision_stays_a_reason() -> None:
    got = dict(
        _roles(
            [
                ("user", "通勤用の自転車を買うか迷ってる。"),
                ("assistant", "距離はどのくらいですか？"),
                (
                    "user",
                    "電動アシストにする。坂が多いし、バッテリーが大きいから往復しても持ちそう。",
                ),
            ]
        )
    )
    assert got["電動アシストにする。"] == "decision"
    assert got["坂が多いし、バッテリーが大きいから往復しても持ちそう。"] != "open"


def test_english_whether_after_the_decision_is_open() -> None:
    got = dict(
        _roles(
            [
                ("user", "Should I renew the lease or move out?"),
                ("assistant", "What matters most to you?"),
                (
                    "user",
                    "I'll renew for one more year. Whether the landlord fixes the boiler is the part left.",
                ),
            ]
        )
    )
    assert got["I'll renew for one more year."] == "decision"
    assert got["Whether the landlord fixes the boiler is the part left."] == "open"
