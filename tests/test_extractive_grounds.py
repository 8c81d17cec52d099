"""The grounds of a decision read by structure (ADR 0037 round 8): a sentence that weighs a
circumstance, and a sentence cut after a clause of cause before the decision, are reasons; their
look-alikes (a question, a hesitation, an embedded question, no decision, English) are not."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from providers.extractive import person_sentences, roles
from providers.extractive.grounds import unfinished_cause, weighed_factor
from tests.test_extractive_drafter import make_conv


@pytest.fixture
def rules_on() -> Iterator[None]:
    yield
    roles.set_rules_off(set())


def _parts(turns: list[tuple[str, str]]) -> roles._Parts:
    return roles._parts(person_sentences(make_conv(turns).drafting_messages))


@pytest.mark.parametrize(
    "text",
    [
        "保育園まで歩いて行けるのが一番大きい。",
        "夜勤がなくなるのもありがたい。",
        "車を持たなくても暮らせるのは便利だ。",
        "今の職場だといつ異動になるかわからないのが一番大きくて、",
        "初期費用がほとんどかからないことが大きかった。",
    ],
)
def test_a_clause_made_a_noun_and_judged_weighs_a_circumstance(text: str) -> None:
    assert weighed_factor(text)


@pytest.mark.parametrize(
    "text",
    [
        "保育園まで歩いて行けるのがいいかな？",  # asked
        "歩いて行けるのがいいかなと思ってる。",  # a hesitation
        "どこに住むかは大きい問題だ。",  # an embedded question
        "今日の天気は悪い。",  # a genitive の: no clause made a noun
        "駅から近い部屋にする。",  # no nominalised clause at all
        "北海道には一度も行ったことがない。",  # an experience, not a weighing
        "Being able to walk to daycare is the biggest thing.",  # Japanese only
    ],
)
def test_look_alikes_weigh_nothing(text: str) -> None:
    assert not weighed_factor(text)


def test_a_weighed_uncertainty_is_a_reason_not_an_open_point(rules_on: None) -> None:
    turns = [
        ("user", "転職の話。今の会社に残るか、県内のメーカーに移るか迷ってる。"),
        ("assistant", "決め手になりそうなことは何ですか？"),
        (
            "user",
            "メーカーに移ることにした。今の会社だといつ転勤になるかわからないのが一番大きい。"
            "入社日をいつにするかはまだわからない。",
        ),
    ]
    parts = _parts(turns)
    weighed = "今の会社だといつ転勤になるかわからないのが一番大きい。"
    assert weighed in [r.text for r in parts.reasons], parts.reasons
    assert weighed not in [o.text for o in parts.open_points]
    # the open point after it, an uncertainty not weighed, stays open
    assert "入社日をいつにするかはまだわからない。" in [o.text for o in parts.open_points]
    # the rule switched off: the cue list's open point again
    roles.set_rules_off({"reason:weighed"})
    parts = _parts(turns)
    assert weighed not in [r.text for r in parts.reasons]


def test_without_a_decision_a_weighed_sentence_is_no_reason() -> None:
    turns = [
        ("user", "転職するか迷ってる。今の会社だといつ転勤になるかわからないのが一番大きい。"),
        ("assistant", "ほかに気になることは？"),
        ("user", "給料はあまり変わらない。"),
    ]
    parts = _parts(turns)
    assert not parts.decisions
    assert not parts.reasons


@pytest.mark.parametrize(
    ("text", "cut"),
    [
        ("今の部屋は更新が3月なのと、来月は出張も多いしで、", True),
        ("駅から近いので、", True),
        ("雪の日は車を出せないから、", True),
        ("駅から近いので。", False),  # a whole sentence
        ("駅まで歩いて、", False),  # a て-clause, no cause
        ("The lease ends in March, so,", False),  # Japanese only
    ],
)
def test_a_sentence_cut_after_a_cause(text: str, cut: bool) -> None:
    assert unfinished_cause(text) is cut


def test_a_cause_cut_before_the_decision_is_its_reason(rules_on: None) -> None:
    cut = "今の部屋はまだペット不可なのと、年末は出張で家にほぼいないしで、"
    turns = [
        (
            "user",
            f"保護猫の譲渡の件、団体の人と電話した。\n{cut}\n受け取りは3月にずらしてもらうことにした。",
        ),
        ("assistant", "それまでの準備はどうしますか？"),
        ("user", "トイレとケージは2月に買う。"),
    ]
    parts = _parts(turns)
    assert cut in [r.text for r in parts.reasons], parts.reasons
    assert cut not in [o.text for o in parts.open_points]  # まだ inside the cause is no open point
    roles.set_rules_off({"reason:cut_cause"})
    assert cut not in [r.text for r in _parts(turns).reasons]


def test_a_cause_cut_before_a_question_is_no_reason() -> None:
    cut = "今の部屋はまだペット不可なのと、年末は出張で家にほぼいないしで、"
    turns = [
        ("user", f"保護猫の譲渡の件、団体の人と電話した。\n{cut}\n受け取りはいつがいいと思う？"),
        ("assistant", "春がいいかもしれません。"),
        ("user", "ありがとう。"),
    ]
    assert cut not in [r.text for r in _parts(turns).reasons]
