"""A reason said inside the decision's own sentence (issue 27 item 1): the decision sentence is
read clause by clause, and its causal clauses are drafted as reasons too, verbatim."""

from __future__ import annotations

import pytest

from providers.extractive import draft_record, person_sentences, roles
from providers.extractive.clauses import cause_clauses
from tests.test_extractive_drafter import make_conv


@pytest.mark.parametrize(
    ("text", "cause"),
    [
        # a cause before the main clause, closed by ので
        ("職場まで歩いて行けるので、部屋は二丁目のほうに決めた。", "職場まで歩いて行けるので"),
        # the ground closed by a verb of thinking, after what was reported
        (
            "姉が「春から在宅になる」って言ってきて、それなら週末に集まれるなと思って、"
            "法事は三月にやることにしました",
            "姉が「春から在宅になる」って言ってきて、それなら週末に集まれるなと思って",
        ),
        # the causes after the main clause, typed with spaces for commas
        (
            "物置は木製のをやめて樹脂のにした 雨ざらしでも腐らんし 組み立ても一人でできるから楽だ",
            "雨ざらしでも腐らんし 組み立ても一人でできるから楽だ",
        ),
        # a state in its て-form before the decision
        ("ベランダが狭くて、プランターは二つだけにする。", "ベランダが狭くて"),
        (
            "Since my contract ends in June, I'll start looking in March.",
            "Since my contract ends in June",
        ),
        (
            "As the clinic closes at five, we're moving the checkup to Saturday.",
            "As the clinic closes at five",
        ),
    ],
)
def test_a_causal_clause_of_the_decision_sentence_is_given(text: str, cause: str) -> None:
    assert cause in cause_clauses(text)
    assert all(c in text for c in cause_clauses(text))  # verbatim spans


@pytest.mark.parametrize(
    "text",
    [
        "実家に帰ってから決める。",  # a time clause: てから is no cause
        "ご飯を食べてから、ジムに行くことにした。",
        "晴れたら、庭の塀は自分で塗ることにする。",  # a condition
        "If the quote comes in under budget, we'll book the roofer.",
        "今日は図書館で、参考書をもう一冊買うことにした。",  # a place, not a ground
        "夫といろいろ考えて、車は来年買い替えることにした。",  # nothing thought is named
        "誰にも相談しないで、塾は週二回にすることにした。",  # "without doing", no state
    ],
)
def test_a_time_clause_or_a_condition_is_no_cause(text: str) -> None:
    assert cause_clauses(text) == []
    msg = make_conv([("user", text)]).messages
    s = person_sentences(msg)
    assert roles._reason_clauses(s) == []


def test_the_decision_keeps_its_sentence_and_the_cause_is_a_reason_too() -> None:
    conv = make_conv(
        [
            ("user", "自転車の置き場所で迷ってて。"),
            ("assistant", "どんな条件がありますか?"),
            (
                "user",
                "管理人さんが屋根付きの区画を空けてくれたので、自転車は一階の奥に置くことにした。",
            ),
        ]
    )
    r = draft_record(conv, [])
    assert r is not None
    summary = r.canonical_summary
    decision, reasons = summary.split("\n\n")[0], summary
    assert "自転車は一階の奥に置くことにした" in decision
    reason_part = reasons.split("## 理由", 1)[1].split("##", 1)[0]
    assert "管理人さんが屋根付きの区画を空けてくれたので" in reason_part
    assert any("管理人さんが屋根付きの区画を空けてくれた" in e.quote_hint for e in r.evidence)


def test_an_english_because_after_the_decision_is_its_reason() -> None:
    conv = make_conv(
        [
            ("user", "Trying to pick a laptop for school."),
            ("assistant", "What matters most to you?"),
            ("user", "I went with the lighter one because I carry it on the bus every day."),
        ]
    )
    r = draft_record(conv, [])
    assert r is not None
    reason_part = r.canonical_summary.split("## Reasons", 1)[1].split("##", 1)[0]
    assert "because I carry it on the bus every day" in reason_part
