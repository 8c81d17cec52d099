"""The same matter decided anew (ADR 0037, round 8; ``providers.extractive.matter``): a later
conversation that fronts the matter of an earlier decision (「駅前のジムの件。」) and calls the
act off in words no giving-up list holds (取り下げる, 休会) is appended to that memory, offered
alone as the append gate offers it; a follow-up that keeps the decision, another matter that
shares a word, and a matter fronted without calling anything off are not."""

from __future__ import annotations

import pytest

from core.models import MemoryIndexEntry
from providers.extractive import draft_record, matter
from providers.extractive.change import _CHANGE_RE
from providers.extractive.structure import dropped_things
from tests.test_change_of_mind import _later, drafted

EARLIER = {
    "garden": [
        "市民農園の区画を借りることにした。",
        "理由は、子どもに野菜を育てる経験をさせたいから。",
    ],
    "piano": [
        "娘のピアノ教室は、駅前の山田先生のところに通わせることにする。",
        "理由は、家から歩いて行けるから。",
    ],
    "gym": ["駅前のジムに月額8000円で入会することにした。", "理由は、会社の帰りに寄れるから。"],
}

# the matter fronted, the act called off by a predicate no list of the drafter's holds
ANEW = [
    (
        "gym",
        [
            "駅前のジムの件。",
            "入会の申し込みは取り下げてもらうことにした。",
            "しばらくは家で筋トレする。",
        ],
    ),
    ("piano", ["娘のピアノ教室の話。", "夏のあいだは休会させてもらうことにした。"]),
    (
        "garden",
        ["市民農園の区画の件。", "区画の申し込みは取り下げて、ベランダで育てることにした。"],
    ),
]

LOOK_ALIKES = [
    # the same matter, the decision kept (the act done again, nothing called off)
    ("gym", ["駅前のジムの件。", "月額8000円のまま、週3回通うことにした。"]),
    ("piano", ["娘のピアノ教室の話。", "山田先生のところに、このまま通わせることにする。"]),
    ("garden", ["市民農園の区画の件。", "春からトマトとナスを植えることにした。"]),
    # another matter that shares a word, with an act called off
    ("piano", ["息子の水泳教室の話。", "夏のあいだは休会させてもらうことにした。"]),
    ("gym", ["駅前の歯医者の件。", "予約は取り下げて、来月にすることにした。"]),
]


@pytest.fixture(scope="module")
def memories() -> dict[str, MemoryIndexEntry]:
    return drafted(EARLIER)


def test_the_wording_is_in_no_cue_list() -> None:
    for _, lines in ANEW:
        assert not any(_CHANGE_RE.search(line) for line in lines), lines
        assert not any(dropped_things(line) for line in lines), lines


@pytest.mark.parametrize("i", range(len(ANEW)))
def test_the_matter_decided_anew_appends_to_its_memory(
    i: int, memories: dict[str, MemoryIndexEntry]
) -> None:
    name, lines = ANEW[i]
    record = draft_record(_later(lines, 700 + i), [memories[name]])
    assert record is not None
    assert (record.action, record.target_memory_id) == ("append", f"mem-{name}"), lines
    # the reading is what appends: without it the same conversation creates
    matter.set_matter_weights({"off": True})
    try:
        record = draft_record(_later(lines, 700 + i), [memories[name]])
    finally:
        matter.set_matter_weights(None)
    assert record is not None and record.action == "create", ("passes without it", lines)


@pytest.mark.parametrize("i", range(len(LOOK_ALIKES)))
def test_a_kept_decision_or_another_matter_is_not_appended(
    i: int, memories: dict[str, MemoryIndexEntry]
) -> None:
    name, lines = LOOK_ALIKES[i]
    record = draft_record(_later(lines, 750 + i), [memories[name]])
    assert record is not None
    assert record.action == "create", (lines, record.target_memory_id)


def test_the_fronted_matter_and_the_calling_off() -> None:
    t = matter.topic_phrase
    assert t("正月の件、ちょっと変更。") == "正月の件"
    assert t("膝の話。") == "膝の話"
    assert (
        t("先月ご相談した千本今出川の家ですが、報告が届きました。")
        == "先月ご相談した千本今出川の家"
    )
    assert t("でさ、火金の生徒のやつ、年明けから週1に戻す。") == "火金の生徒のやつ"
    # a clause's own subject, a time, a person, a bare noun front no matter
    assert t("父はステントを1本追加で入れることになった。") == ""
    assert t("来週、実家に帰省する。") == ""
    assert t("結衣、第一志望に合格した！") == ""
    assert t("定休日、いまは月曜だけ。") == ""
    # the nominaliser of ことにする is no predicate; a noun made one by に + する is
    assert matter.predicates("週3回通うことにした。") == ["通う"]
    assert "白紙" in matter.predicates("譲ってもらう話は白紙にして、リースにする。")
    floor = matter.matter_weights()["cancel"]
    assert matter.calls_off("申し込みを取り下げたいと連絡しました。") >= floor
    assert matter.calls_off("9月と10月は休会させてもらうことにしました。") >= floor
    assert matter.calls_off("こむぎをトライアルで迎えることにした。") < floor
    assert matter.calls_off("MITライセンスで公開する。") < floor
