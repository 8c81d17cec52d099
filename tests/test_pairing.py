"""The learned pair model of the change of mind (issue 27 item 2, ``providers.extractive.pairing``):
it loads, its features are finite, it ranks the memory a later conversation changes first and a
look-alike that shares one name low, and the drafter's hook appends what it passes (and only
then: with the hook off the same conversations create)."""

from __future__ import annotations

import math
from collections.abc import Iterator

import pytest

from core.models import MemoryIndexEntry
from core.secrets import redact_conversation
from providers.extractive import draft_record, pairing, person_sentences
from providers.extractive.roles import _parts
from tests.test_change_of_mind import _entry, _turns
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
    out = {}
    for name, lines in EARLIER.items():
        record = draft_record(make_conv(_turns(lines), key=f"chatgpt:{name}"), [])
        assert record is not None and record.memory_kind == "decision"
        out[name] = _entry(name, record)
    return out


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


@pytest.mark.parametrize(
    ("lines", "changed"), [(SWITCH, "bike"), (POSTPONE, "wedding"), (POSTPONE_EN, "piano")]
)
def test_the_changed_memory_ranks_first_and_above_the_look_alike(
    memories: dict[str, MemoryIndexEntry], lines: list[str], changed: str
) -> None:
    context = list(memories.values())
    probs = _probabilities(lines, context)
    assert max(probs, key=lambda k: probs[k]) == f"mem-{changed}"
    look = _probabilities(LOOK_ALIKE, context)
    assert max(look.values()) < probs[f"mem-{changed}"]


def test_the_hook_appends_what_the_model_passes(
    memories: dict[str, MemoryIndexEntry], weights: dict
) -> None:
    """At the logistic midpoint (0.5; the shipped threshold is the leave-one-set-out one, above
    1 at present: the model is off, see ADR 0037), the switch and the past-tense postponement append to the memory they change,
    the switch's decision (the rules found none) the model's; the look-alike creates. With the hook off all three create."""
    context = list(memories.values())
    cases = [(SWITCH, "mem-bike", "ロードバイクを注文した"), (POSTPONE, "mem-wedding", None)]
    for off in (False, True):
        pairing.set_pair_weights({"off": True} if off else {**weights, "threshold": 0.5})
        for lines, target, new in cases:
            rec = draft_record(make_conv(_turns(lines), key="chatgpt:later"), context)
            assert rec is not None
            if off:
                assert rec.action == "create"
                continue
            assert (rec.action, rec.target_memory_id) == ("append", target)
            if new is None:  # the rules found a decision: theirs stands
                continue
            decision = rec.canonical_summary.split("## 決定", 1)[1].split("##", 1)[0]
            assert new in decision
        look = draft_record(make_conv(_turns(LOOK_ALIKE), key="chatgpt:look"), context)
        assert look is not None and look.action == "create"
