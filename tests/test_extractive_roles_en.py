"""English readings of the drafter's roles (issue 27 item 1, round 7): a plan whose subject is
left out, a verdict that only evaluates the answer, list items as units of one list of reasons.
The wordings are this test's own (none from a labelled set)."""

from __future__ import annotations

import pytest

from providers.extractive import person_sentences, roles
from providers.extractive.structure import elided_past, elided_plan
from tests.test_extractive_drafter import make_conv


def _parts(turns: list[tuple[str, str]]) -> roles._Parts:
    return roles._parts(person_sentences(make_conv(turns).drafting_messages))


def _decisions(turns: list[tuple[str, str]]) -> list[str]:
    return [d.text for d in _parts(turns).decisions]


@pytest.mark.parametrize(
    ("text", "plan"),
    [
        ("not renting the van, borrowing my brother's car for the move.", True),
        ("Will cancel the gym membership on Monday.", True),
        ("So: just keep the old laptop another year.", True),
        ("moving the party to the garden.", True),
        ("Thinking about the garden party.", False),  # a deliberation
        ("Nothing works on that laptop.", False),  # an -ing pronoun
        ("Looking at the prices, it is a lot.", False),  # a participle before its own clause
        ("just the two of us then.", False),  # no verb after just
        ("- switching to the night train", False),  # a list item
        ("Going with the van?", False),  # a question
        ("Seeing them in person matters a lot to me.", False),  # the gerund is the subject
        ("Taking the train is cheaper.", False),  # the gerund is the subject of a copula
        ("will report back", False),  # a closing formula, no act with its object
    ],
)
def test_a_plan_whose_subject_is_left_out(text: str, plan: bool) -> None:
    assert elided_plan(text) is plan


def test_a_past_verb_that_opens_the_sentence_is_told() -> None:
    assert elided_past("Called the landlord yesterday.")
    assert not elided_past("Need a new plan.")


def test_an_elided_progressive_after_the_answer_is_the_decision() -> None:
    turns = [
        ("user", "Moving flats in May. Rent a van or borrow a car?"),
        ("assistant", "A van fits more, a car is cheaper."),
        ("user", "ok that makes sense."),
        ("user", "not renting the van, borrowing my brother's car for the move."),
    ]
    got = _decisions(turns)
    assert "not renting the van, borrowing my brother's car for the move." in got
    assert "ok that makes sense." not in got  # a verdict that evaluates the answer


def test_a_verdict_that_tells_a_past_act_is_no_decision_the_act_today_is() -> None:
    turns = [
        ("user", "My old bike is rusting in the yard. Sell it or fix it?"),
        ("assistant", "Fixing it costs about as much as a used one."),
        ("user", "Okay. Asked my neighbour last week. I sold the old bike today, 80 euros."),
    ]
    got = _decisions(turns)
    assert got == ["I sold the old bike today, 80 euros."]


def test_just_and_a_base_form_after_so_concludes_from_what_came_before() -> None:
    turns = [
        (
            "user",
            "Laptop check. The battery holds six hours. The screen is fine. "
            "So: just keep the old laptop another year. Thoughts?",
        ),
        ("assistant", "Sounds reasonable."),
    ]
    parts = _parts(turns)
    assert [d.text for d in parts.decisions] == ["So: just keep the old laptop another year."]
    assert "The battery holds six hours." in [r.text for r in parts.reasons]


def test_list_items_after_the_decision_are_its_reasons() -> None:
    turns = [
        ("user", "Two flats left on my list, the small one near the park and the big one."),
        ("assistant", "What matters most to you?"),
        (
            "user",
            "We're going with the small flat.\n- the rent is 300 less\n- it is next to the park\n"
            "- the landlord answers emails",
        ),
    ]
    parts = _parts(turns)
    assert [d.text for d in parts.decisions] == ["We're going with the small flat."]
    reasons = [r.text for r in parts.reasons]
    for item in ("- the rent is 300 less", "- it is next to the park"):
        assert item in reasons
    assert "- the landlord answers emails" in reasons


def test_list_items_in_an_opening_that_asks_are_no_reasons() -> None:
    turns = [
        ("user", "Which phone plan?\n- plan A, 10 GB\n- plan B, 20 GB"),
        ("assistant", "B if you stream."),
        ("user", "I'll take plan B."),
    ]
    parts = _parts(turns)
    assert [d.text for d in parts.decisions] == ["I'll take plan B."]
    assert "- plan A, 10 GB" not in [r.text for r in parts.reasons]


def test_a_why_label_makes_a_reason_not_a_decision() -> None:
    turns = [
        ("user", "Night train or flight to Vienna?"),
        ("assistant", "The train takes 11 hours."),
        ("user", "going for the night train. why: I'll save a hotel night."),
    ]
    parts = _parts(turns)
    assert [d.text for d in parts.decisions] == ["going for the night train."]
    assert "why: I'll save a hotel night." in [r.text for r in parts.reasons]


def test_a_question_is_no_decision() -> None:
    turns = [
        ("user", "Two sofas in the shop, the grey one and the red one."),
        ("assistant", "The grey one is sturdier."),
        ("user", "should I go with the red sofa?"),
    ]
    assert "should I go with the red sofa?" not in _decisions(turns)


def test_reported_speech_of_a_plan_is_no_decision_of_the_persons() -> None:
    turns = [
        ("user", "Release planning at work."),
        ("assistant", "What are the options?"),
        ("user", "my boss said we'll go with the March release. I'll book the test lab for it."),
    ]
    got = _decisions(turns)
    assert "my boss said we'll go with the March release." not in got
    assert "I'll book the test lab for it." in got


def test_ok_so_before_the_decision_concludes_it_from_the_statements_before() -> None:
    turns = [
        ("user", "Gym near work or near home?"),
        ("assistant", "Near home is easier on weekends."),
        (
            "user",
            "called the one near work, the evening classes are full until March. "
            "okay so: I'll join the gym near home.",
        ),
    ]
    parts = _parts(turns)
    assert [d.text for d in parts.decisions] == ["okay so: I'll join the gym near home."]
    assert "called the one near work, the evening classes are full until March." in [
        r.text for r in parts.reasons
    ]


@pytest.mark.parametrize(
    ("last", "decided"),
    [
        ("let's do the coast road then.", True),
        ("I'm not doing the trip for now.", True),
        ("let's see what the weather does.", False),  # a verb of deliberation
        ("I'm not sleeping well lately.", False),  # a state: no object after the verb
    ],
)
def test_lets_and_a_negated_progressive_with_its_object_are_plans(last: str, decided: bool) -> None:
    turns = [
        ("user", "Coast road or the motorway to Porto?"),
        ("assistant", "The coast road is prettier but slower."),
        ("user", last),
    ]
    assert (last in _decisions(turns)) is decided
