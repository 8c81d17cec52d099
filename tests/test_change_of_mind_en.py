"""The English change of mind told by a plan given up in the opening (issue 27 item 2, ADR 0037
round 7): a negated plan of I / we whose object or sentence is the memory's thing ("I'm not
renewing the Urban Sports membership"), or a topic resumed by "it" in a clause of being given
up ("the Lisbon move, it's off"), for the conversation's one candidate memory; the act put
"instead" is the new decision. Each reversal fails with the reading off; a negated remark on
another thing beside the memory's name, or a state negated, appends nothing."""

from __future__ import annotations

from datetime import timedelta

import pytest

from core.models import MemoryIndexEntry
from providers.extractive import draft_record, pairing
from providers.extractive.readings import instead_act, plan_given_up_en
from tests.test_change_of_mind import _entry, _turns
from tests.test_extractive_drafter import make_conv

EARLIER = {
    "gym": (
        "Gym membership",
        [
            "I'll sign up for the Urban Sports membership at the Kreuzberg studio.",
            "Mainly because the climbing wall is five minutes from the office.",
        ],
    ),
    "move": (
        "Moving to Lisbon",
        [
            "We'll move to Lisbon in the spring and rent in Alfama.",
            "Because my remote contract allows it and rents are lower than here.",
        ],
    ),
    "piano": (
        "Piano lessons for Mia",
        [
            "We decided Mia starts piano lessons with Herr Kowalski on Saturdays.",
            "She keeps playing on her grandmother's keyboard.",
        ],
    ),
}

# each reversal opens with the plan given up in a structure of English clauses; none names a
# cue of giving up the older readings hold (cancel, drop, quit, instead of …); with ``True``,
# no older reading appends it (it creates with the reading off)
REVERSALS = [
    (
        "gym",
        [
            "The trial month at Urban Sports ends on Friday and I'm not renewing the membership.",
            "Instead I bought a pull-up bar for the flat.",
        ],
        False,  # the rules' negated restatement of the nearest memory reads it too
    ),
    (
        "move",
        [
            "About the Lisbon move, it's off for now.",
            "My contract became office-only, so we'll stay in Leipzig another year.",
        ],
        True,
    ),
    (
        "piano",
        [
            "We're not continuing the piano lessons after the summer, Mia wants to sing.",
            "She'll join the school choir in September.",
        ],
        False,
    ),
    (
        "move",
        [
            "The relocation plan, it's dead: the landlord in Alfama sold the flat.",
            "We'll look again next year.",
        ],
        True,
    ),
    (
        "move",
        [
            "We won't rent in Alfama, my contract became office-only.",
            "We'll stay in Leipzig another year.",
        ],
        False,
    ),
]

# a state of the thing resumed by "it" (off the market), a state negated, a negation under a
# condition: the decision kept
LOOK_ALIKES = [
    (
        "move",
        [
            "The flat in Alfama we liked, it's off the market now.",
            "We'll visit two others in Lisbon in March.",
        ],
    ),
    (
        "move",
        [
            "For Lisbon I'm not sure about the school for the kids yet.",
            "We'll visit two schools in Alfama in March.",
        ],
    ),
    # a negation under a condition restates no decision: the plan holds unless it happens
    (
        "move",
        [
            "If the rent in Alfama goes up again next year, we're not renting there.",
            "For now we'll sign the lease for the spring as planned.",
        ],
    ),
]


@pytest.fixture(scope="module")
def memories() -> list[MemoryIndexEntry]:
    out = []
    for name, (title, lines) in EARLIER.items():
        record = draft_record(make_conv(_turns(lines), key=f"chatgpt:{name}", title=title), [])
        assert record is not None and record.memory_kind == "decision", lines
        out.append(_entry(name, record))
    return out


def _later(lines: list[str], i: int):  # type: ignore[no-untyped-def]
    conv = make_conv(_turns(lines), key=f"chatgpt:en-later{i}")
    return conv.model_copy(update={"created_at": conv.created_at + timedelta(days=30)})


def test_the_plan_given_up_is_read_by_clause_structure() -> None:
    assert plan_given_up_en("I'm not renewing the membership.") == {"membership"}
    assert "lisbon" in (plan_given_up_en("About the Lisbon move, it's off for now.") or set())
    assert plan_given_up_en("We won't take the flat in Alfama.") is not None
    assert plan_given_up_en("The flat we liked, it's off the market now.") is None
    # a state, a deliberation, nothing done further, a condition, a question: no plan given up
    for text in [
        "I'm not sure about the school yet.",
        "I'm not thinking about it now.",
        "I'm not signing up for anything else there.",
        "If the rent goes up, we're not moving.",
        "Are we not moving after all?",
    ]:
        assert plan_given_up_en(text) is None, text


def test_the_act_put_instead() -> None:
    assert instead_act("Instead I bought a pull-up bar for the flat.")
    assert instead_act("We'll take the train instead.")
    assert not instead_act("Instead, the weather turned.")
    assert not instead_act("Should I rent one instead?")


@pytest.mark.parametrize("i", range(len(REVERSALS)))
def test_a_plan_given_up_appends_to_its_memory(
    i: int, memories: list[MemoryIndexEntry], monkeypatch: pytest.MonkeyPatch
) -> None:
    name, lines, needed = REVERSALS[i]
    record = draft_record(_later(lines, i), memories)
    assert record is not None
    assert (record.action, record.target_memory_id) == ("append", f"mem-{name}"), lines
    if not needed:
        return
    monkeypatch.setattr(pairing, "plan_given_up_en", lambda text: None)
    record = draft_record(_later(lines, i), memories)
    assert record is not None and record.action == "create", "passes without the reading"


def test_the_act_put_instead_is_the_new_decision(memories: list[MemoryIndexEntry]) -> None:
    record = draft_record(_later(REVERSALS[0][1], 50), memories)
    assert record is not None and record.target_memory_id == "mem-gym"
    assert "pull-up bar" in record.index_summary, record.index_summary


@pytest.mark.parametrize("i", range(len(LOOK_ALIKES)))
def test_a_negated_remark_beside_the_memory_is_not_appended(
    i: int, memories: list[MemoryIndexEntry]
) -> None:
    _, lines = LOOK_ALIKES[i]
    record = draft_record(_later(lines, 100 + i), memories)
    assert record is not None
    assert record.action == "create", (lines, record.target_memory_id)
