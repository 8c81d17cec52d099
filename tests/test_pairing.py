"""The learned pair model of the change of mind (issue 27 item 2, ``providers.extractive.pairing``):
it loads and its features are finite. It is a report of ``bench/fit_pairing.py`` only: the
drafter decides a change by the revisit reading (``pairing.revisits``, tested in
tests/test_change_of_mind.py), which out of fold on eval1, H1 and H2 appended more changes with
no false append than the model gated the same way (ADR 0037)."""

from __future__ import annotations

import math
from collections.abc import Iterator

import pytest

from core.models import MemoryIndexEntry
from core.secrets import redact_conversation
from providers.extractive import pairing, person_sentences
from providers.extractive.roles import _parts
from tests.test_change_of_mind import _turns, drafted
from tests.test_extractive_drafter import make_conv

# earlier decisions of our own (no corpus holds them)
EARLIER = {
    "bike": [
        "通勤用の自転車、クロスバイクとロードバイクで迷ったけど、クロスバイクを買うことにする。",
        "理由は、段差に強くて荷台も付けられるから。",
        "ロードは前傾がきつそうなので見送り。",
    ],
    "wedding": [
        "友人の結婚式、6月の式に出席することにする。",
        "理由は、大学時代からの親友だから。",
    ],
    "piano": [
        "I'll sign my son up for piano lessons at the music school on Saturdays.",
        "Because he keeps playing the keyboard at his grandma's.",
    ],
}

# a switch to the option the earlier conversation turned down, told as a past act
SWITCH = [
    "試乗してみて、結局ロードバイクを注文した。",
    "前傾も思ったほど気にならなかったし、通勤が速くなる。",
]
# a postponement in the past tense (the attendance called off, the gift later)
POSTPONE = ["結婚式の出席、体調のこともあって式は欠席の連絡を入れた。", "お祝いは後日渡しに行く。"]
POSTPONE_EN = [
    "We pushed the piano lessons back to the autumn term.",
    "He has swimming on Saturdays until September.",
]
# another matter that shares one name (自転車) with the bike decision
LOOK_ALIKE = ["会社の駐輪場が満杯で、自転車置き場の申請を出した。", "来月から使える。"]


@pytest.fixture(scope="module")
def memories() -> dict[str, MemoryIndexEntry]:
    return drafted(EARLIER)


@pytest.fixture
def weights() -> Iterator[dict]:
    yield pairing.pair_weights()
    pairing.set_pair_weights(None)


def _probabilities(lines: list[str], context: list[MemoryIndexEntry]) -> dict[str, float]:
    conv, _ = redact_conversation(make_conv(_turns(lines), key="chatgpt:later"))
    person = person_sentences(conv.drafting_messages)
    side = pairing.side_of(person, _parts(person).decisions)
    w = pairing.pair_weights()["weights"]
    return {
        e.id: pairing.probability(r, w)
        for e, r in zip(context, pairing.features(side, context), strict=True)
    }


def test_the_model_loads(weights: dict) -> None:
    # above 1 means off: no held-out fold of bench/fit_pairing.py passed without a false append
    assert 0.0 < weights["threshold"] < 2.0
    assert set(pairing.FEATURES) <= set(weights["weights"])
    assert all(math.isfinite(v) for v in weights["weights"].values())


def test_features_are_finite(memories: dict[str, MemoryIndexEntry]) -> None:
    context = list(memories.values())
    for lines in (SWITCH, POSTPONE, POSTPONE_EN, LOOK_ALIKE):
        conv, _ = redact_conversation(make_conv(_turns(lines), key="chatgpt:later"))
        person = person_sentences(conv.drafting_messages)
        rows = pairing.features(pairing.side_of(person, _parts(person).decisions), context)
        assert len(rows) == len(context)
        for row in rows:
            assert set(row) == set(pairing.FEATURES)
            assert all(math.isfinite(v) for v in row.values())
