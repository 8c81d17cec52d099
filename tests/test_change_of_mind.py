"""The change of mind found by meaning (issue 27, item 2): a later conversation that reverses or
redoes an earlier decision in words no cue list holds is appended to that decision's memory,
and a conversation on another matter that shares a word with it is not."""

from __future__ import annotations

from datetime import timedelta

import pytest

from core.models import DraftRecord, MemoryIndexEntry
from providers.extractive import change, draft_record
from providers.extractive.change import _CHANGE_RE, turns_back
from providers.extractive.structure import dropped_things
from tests.test_extractive_drafter import make_conv

A = "ご相談です"  # an assistant turn between the person's messages

EARLIER = {
    "kyoto": [
        "来月の三連休、家族で京都に一泊旅行することにした。",
        "理由は、紅葉がちょうど見頃なのと、娘が嵐山のトロッコ列車に乗りたがってるから。",
        "まだ決まってないのは、宿を町家にするかホテルにするか。",
    ],
    "school": [
        "駅前の英会話スクールに週2回通うことにする。",
        "理由は、仕事で英語の会議が増えたから。",
    ],
    "camera": [
        "I'll buy the Sony A7 IV for the trip photos.",
        "The main reason is the autofocus on moving kids.",
        "Still not sure whether I need a second lens.",
    ],
    "insurance": [
        "終身保険を解約して、掛け捨ての収入保障保険に入ることにする。",
        "理由は、保険料が半分以下になるから。",
    ],
    "osaka": [
        "We'll move to Osaka next spring when my transfer starts.",
        "Mostly because the rent there is lower and my parents live nearby.",
    ],
}

# reversals in wording none of the drafter's cue lists holds (checked below)
REVERSALS = [
    ("kyoto", ["京都旅行は行かないことにした。", "娘が熱を出したので、三連休は家でゆっくりする。"]),
    ("kyoto", ["京都の一泊旅行、今回は見送ることにする。", "宿の予約も取り消した。"]),
    ("kyoto", ["京都に行くつもりだったけど、旅行は来年の春に回すことにした。"]),
    (
        "school",
        ["英会話スクールに通うのはやめにした。", "オンライン英会話で毎朝25分やることにする。"],
    ),
    ("school", ["英会話スクールの申し込み、結局キャンセルすることにした。"]),
    ("camera", ["I'm not buying the Sony A7 IV.", "I'll keep using my phone for the trip photos."]),
    ("camera", ["I was going to buy the Sony A7 IV, but I'll rent one for the trip instead."]),
    (
        "osaka",
        ["We won't move to Osaka next spring.", "My transfer was cancelled, so we stay here."],
    ),
    ("osaka", ["We had planned the move to Osaka, but we'll stay in Tokyo for two more years."]),
    (
        "school",
        ["英会話スクールに通う予定だったが、会社の研修で足りるので申し込まないことにした。"],
    ),
    # names the memory holds inside compounds (終身保険, 収入保障保険), said alone here
    ("insurance", ["収入保障は審査で断られた。", "終身は解約しないで、このまま続ける。"]),
    # the turn back beside the new decision, in a later message than the opening
    (
        "camera",
        [
            "The trip is in two weeks and the Sony A7 IV is back-ordered.",
            "We're not ordering the Sony A7 IV. I'll rent a Fujifilm body for the trip photos.",
        ],
    ),
]

# other matters that share a word with one of the memories
LOOK_ALIKES = [
    [
        "京都の出張で食べたラーメンがおいしかった店を、yamalogのメモに残しておきたい。",
        "店名はメモにする。",
    ],
    ["英語の本を月に1冊読むことにした。", "理由は語彙を増やしたいから。"],
    ["I'll clean the camera sensor myself this weekend.", "Because the shop charges too much."],
    [
        "Osaka friends are visiting next week, so I'll book a table at the izakaya.",
        "They like sake.",
    ],
    ["旅行保険はクレジットカード付帯のものにする。", "理由は、年会費の範囲で足りるから。"],
]


def _turns(lines: list[str]) -> list[tuple[str, str]]:
    turns = [("user", lines[0]), ("assistant", A)]
    for line in lines[1:]:
        turns += [("user", line), ("assistant", A)]
    return turns


@pytest.fixture(scope="module")
def memories() -> dict[str, MemoryIndexEntry]:
    """The earlier decisions as the pipeline offers them: drafted, then committed."""
    out = {}
    for name, lines in EARLIER.items():
        record = draft_record(make_conv(_turns(lines), key=f"chatgpt:{name}"), [])
        assert record is not None and record.memory_kind == "decision"
        out[name] = _entry(name, record)
    return out


def _entry(name: str, record: DraftRecord) -> MemoryIndexEntry:
    return MemoryIndexEntry(
        id=f"mem-{name}",
        title=record.title,
        index_summary=record.index_summary,
        kind=record.memory_kind,
        current_revision=1,
        aliases=record.aliases,
        source_conversation_keys=list(record.source_conversation_keys),
    )


def _later(lines: list[str], i: int):  # type: ignore[no-untyped-def]
    conv = make_conv(_turns(lines), key=f"chatgpt:later{i}")
    return conv.model_copy(update={"created_at": conv.created_at + timedelta(days=30)})


def test_the_reversals_use_no_cue_word() -> None:
    for _, lines in REVERSALS:
        assert not any(_CHANGE_RE.search(line) for line in lines), lines


@pytest.mark.parametrize("i", range(len(REVERSALS)))
def test_a_reversal_in_new_words_appends_to_its_memory(
    i: int, memories: dict[str, MemoryIndexEntry]
) -> None:
    name, lines = REVERSALS[i]
    record = draft_record(_later(lines, i), list(memories.values()))
    assert record is not None
    assert (record.action, record.target_memory_id) == ("append", f"mem-{name}"), lines


@pytest.mark.parametrize("i", range(len(LOOK_ALIKES)))
def test_another_matter_sharing_a_word_is_not_appended(
    i: int, memories: dict[str, MemoryIndexEntry]
) -> None:
    record = draft_record(_later(LOOK_ALIKES[i], 100 + i), list(memories.values()))
    assert record is not None
    assert record.action == "create", (LOOK_ALIKES[i], record.target_memory_id)


# earlier decisions of titled conversations (exports carry a title, so the record's index line
# is its decision), reversed by a sentence that restates the decision and drops it, with no
# turn-back structure the drafter reads (ADR 0037: the restatement of the nearest memory)
TITLED = {
    "drums": (
        "ドラム教室",
        ["駅前のドラム教室に月2回通うことにする。", "理由は、ストレス解消になるから。"],
    ),
    "sofa": ("ソファ 買い替え", ["無印の3人掛けソファを買うことにした。", "座面が広いから。"]),
    "pottery": (
        "Pottery class",
        ["I'll join the Saturday pottery class at the community studio.", "A friend goes there."],
    ),
}

RESTATED = [
    ("drums", ["駅前のドラム教室に通う話は、なしにした。", "家で電子ドラムを練習する。"]),
    ("sofa", ["無印の3人掛けソファは、うちの玄関を通らないと言われた。", "2人掛けのを買う。"]),
    (
        "pottery",
        [
            "The Saturday pottery class at the community studio is not happening for me.",
            "I'll take an online course at home.",
        ],
    ),
]

RESTATED_LOOK_ALIKES = [
    ["ドラマの最終回、録画して週末に見ることにする。", "平日は帰りが遅いから。"],
    ["I'll paint the studio wall white this weekend.", "The old color is too dark."],
]


@pytest.fixture(scope="module")
def titled(memories: dict[str, MemoryIndexEntry]) -> list[MemoryIndexEntry]:
    out = list(memories.values())
    for name, (title, lines) in TITLED.items():
        conv = make_conv(_turns(lines), key=f"chatgpt:{name}", title=title)
        record = draft_record(conv, [])
        assert record is not None and record.memory_kind == "decision"
        out.append(_entry(name, record))
    return out


def test_the_restatements_use_no_cue_word_nor_turn_back() -> None:
    for _, lines in RESTATED:
        assert not any(_CHANGE_RE.search(line) for line in lines), lines
        assert not any(turns_back(line) for line in lines), lines


@pytest.mark.parametrize("i", range(len(RESTATED)))
def test_a_restated_and_dropped_decision_appends_to_its_memory(
    i: int, titled: list[MemoryIndexEntry]
) -> None:
    name, lines = RESTATED[i]
    record = draft_record(_later(lines, 200 + i), titled)
    assert record is not None
    assert (record.action, record.target_memory_id) == ("append", f"mem-{name}"), lines


@pytest.mark.parametrize("i", range(len(RESTATED_LOOK_ALIKES)))
def test_a_look_alike_of_a_titled_memory_is_not_appended(
    i: int, titled: list[MemoryIndexEntry]
) -> None:
    record = draft_record(_later(RESTATED_LOOK_ALIKES[i], 300 + i), titled)
    assert record is not None
    assert record.action == "create", (RESTATED_LOOK_ALIKES[i], record.target_memory_id)


# a decision given up by a predicate whose head stops, cancels or refuses what it governs, or
# by a state of being given up ("X is out"), with that argument the nearest memory's decision
# (ADR 0037: structure.dropped_things); each fails with that reading off
GIVEN_UP = [
    (
        "osaka",
        [
            "Osaka is out for now, my transfer got postponed by a year.",
            "We'll renew the lease here.",
        ],
    ),
    (
        "pottery",
        ["The pottery class is over for me, the stools hurt my back.", "I'll swim on Saturdays."],
    ),
    ("kyoto", ["一泊旅行は見送って、日帰りで鎌倉に行く。"]),
    ("sofa", ["3人掛けソファは見合わせて、今のを張り替える。"]),
]

# a giving-up predicate whose argument is another thing than a memory's decision, though the
# sentence names a memory's thing (京都, ソファ, camera)
GIVEN_UP_LOOK_ALIKES = [
    ["京都のお土産を買うのはやめて、駅でお菓子を買う。"],
    ["ソファの下の掃除はロボット掃除機をやめて、手でやる。"],
    ["Scrap the old camera bag, I'll get a backpack for hiking.", "It hurts my shoulder."],
]


@pytest.mark.parametrize("i", range(len(GIVEN_UP)))
def test_a_decision_given_up_appends_to_its_memory(
    i: int, titled: list[MemoryIndexEntry], monkeypatch: pytest.MonkeyPatch
) -> None:
    name, lines = GIVEN_UP[i]
    assert not any(_CHANGE_RE.search(line) for line in lines), lines
    record = draft_record(_later(lines, 400 + i), titled)
    assert record is not None
    assert (record.action, record.target_memory_id) == ("append", f"mem-{name}"), lines
    monkeypatch.setattr(change, "_drops_nearest", lambda *a: False)
    monkeypatch.setattr("providers.extractive.pairing._weights", {"off": True})  # rules alone
    record = draft_record(_later(lines, 400 + i), titled)
    assert record is not None and record.action == "create", "passes without the reading"


@pytest.mark.parametrize("i", range(len(GIVEN_UP_LOOK_ALIKES)))
def test_giving_up_another_thing_is_not_appended(i: int, titled: list[MemoryIndexEntry]) -> None:
    lines = GIVEN_UP_LOOK_ALIKES[i]
    assert any(dropped_things(line) for line in lines), lines
    record = draft_record(_later(lines, 450 + i), titled)
    assert record is not None
    assert record.action == "create", (lines, record.target_memory_id)


def test_the_index_line_after_a_change_names_the_new_plan(
    titled: list[MemoryIndexEntry],
) -> None:
    lines = ["駅前のドラム教室には、もう通わないことにした。", "代わりに家で電子ドラムを練習する。"]
    record = draft_record(_later(lines, 470), titled)
    assert record is not None and record.target_memory_id == "mem-drums"
    assert "電子ドラム" in record.index_summary, record.index_summary
