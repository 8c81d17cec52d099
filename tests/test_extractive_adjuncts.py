"""A clause that modifies a time noun recalls an act, it does not do it now (ADR 0037, round 8):
「去年の12月に見送ったときは…」 gives nothing up; the same verb as the sentence's own predicate
does."""

from __future__ import annotations

import pytest

from core.textsearch import analyze
from providers.extractive.adjuncts import modifies_a_time_noun
from providers.extractive.readings import given_up
from providers.extractive.structure import dropped_things


@pytest.mark.parametrize(
    "text",
    [
        "去年の12月に見送ったときは正直もう無理かもって思ってたけど、半年計画ちゃんと続いた。",
        "ジムを解約した後で、違約金があると気づいた。",
        "教室をやめた頃には、もう秋だった。",
    ],
)
def test_a_recalled_act_gives_nothing_up(text: str) -> None:
    assert not dropped_things(text)
    assert not given_up(text)


@pytest.mark.parametrize(
    ("text", "thing"),
    [
        ("ジムは解約した。", "ジム"),
        ("引っ越しは見合わせて、今の部屋の更新にした。", "引っ越"),
        ("教室はやめたので、土曜は空いた。", "教室"),
    ],
)
def test_the_sentences_own_act_still_gives_up(text: str, thing: str) -> None:
    assert thing in given_up(text)


def test_the_adjunct_is_read_by_the_part_of_speech() -> None:
    ms = [m for m in analyze("見送ったときは") if m.pos[0] != "空白"]
    assert modifies_a_time_noun(ms, 0)
    ms = [m for m in analyze("見送った。") if m.pos[0] != "空白"]
    assert not modifies_a_time_noun(ms, 0)
    ms = [m for m in analyze("時は金なり") if m.pos[0] != "空白"]
    assert not modifies_a_time_noun(ms, 0)  # a time noun alone modifies nothing
