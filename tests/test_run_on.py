"""Run-on messages (typed or dictated in one breath, commas for full stops) are read clause by
clause (issue 27 item 1: roles by structure): the clause units, their joining back, and a drafted
record of such a conversation."""

from __future__ import annotations

from providers.extractive.drafter import draft_record
from providers.extractive.sentences import RUN_ON_CHARS, clause_units
from tests.test_extractive_drafter import make_conv

RUN_ON = (
    "ありがとう、いろいろ考えたけど、結局寝室の隅に折りたたみデスクを置くことにした、"
    "夫の昼寝は週1くらいだし、その日はカフェに行けばいいし、ただ椅子をどうするかはまだ決めてなくて、"
    "腰痛持ちだからちゃんとしたのがほしいけど予算が気になる"
)


def test_a_run_on_sentence_is_cut_where_its_grammar_ends_a_clause() -> None:
    units = clause_units(RUN_ON)
    assert all(u in RUN_ON for u in units)
    assert "結局寝室の隅に折りたたみデスクを置くことにした" in units  # a terminal form, then 、
    assert "夫の昼寝は週1くらいだし" in units  # the conjunctive し
    # て goes on into the next clause: 「…決めてなくて、腰痛持ちだから…」 stays one unit
    assert any(u.startswith("ただ椅子をどうするか") and u.endswith("予算が気になる") for u in units)
    assert not any(u.endswith(("、", "，")) for u in units)


def test_short_and_english_sentences_stay_whole() -> None:
    short = "迷ったけど、寝室にした。"
    assert len(short) < RUN_ON_CHARS and clause_units(short) == [short]
    english = (
        "Chloe's baby is due in October, so we'd meet the little one too, and the flights are "
        "cheaper then, which settles it for me."
    )
    assert clause_units(english) == [english]


def test_a_run_on_conversation_gets_its_decision_reasons_and_open_point() -> None:
    conv = make_conv(
        [
            (
                "user",
                "来月から週3で在宅勤務になるんだけど、今の部屋だと机を置く場所がなくて、寝室の隅で"
                "やるか、リビングの食卓を使うか迷ってて、子どもが帰ってくる4時以降はリビングうるさい"
                "し、どっちも微妙なんだよね",
            ),
            ("assistant", "それぞれの利点と欠点を整理すると、静けさと広さのどちらを取るかです。"),
            ("user", RUN_ON),
        ]
    )
    record = draft_record(conv, [])
    assert record is not None
    sections = dict(
        (block.split("\n", 1)[0], block) for block in record.canonical_summary.split("\n\n")
    )
    decision = next(v for k, v in sections.items() if k == "## 決定")
    assert "寝室の隅に折りたたみデスクを置くことにした" in decision
    assert "椅子" not in decision and "昼寝" not in decision
    reasons = next(v for k, v in sections.items() if k == "## 理由")
    # neighbouring clauses of one role are one item again, an exact span of the message
    assert "- 夫の昼寝は週1くらいだし、その日はカフェに行けばいいし" in reasons
    opened = next(v for k, v in sections.items() if k == "## 未解決")
    assert "椅子をどうするかはまだ決めてなくて" in opened
    assert record.memory_kind == "decision"
    for e in record.evidence:
        assert e.quote_hint in RUN_ON or e.quote_hint in conv.messages[0].text
