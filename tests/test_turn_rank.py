"""The turn list of recall (ADR 0035): pure ranking arithmetic, no database."""

from __future__ import annotations

from search import rank as rk


def test_speaker_names_are_named_roles_and_the_person() -> None:
    assert rk.speaker_names(["user", "Maria", "assistant", "system"], ["John "]) == {
        "maria",
        "john",
    }
    assert rk.speaker_names(["user", "assistant"]) == set()


def _score(**kw: object) -> float:
    base: dict[str, object] = dict(
        own=0.0,
        coverage=0.0,
        sim=0.2,
        conv_sim=0.3,
        neighbour=0.0,
        conv_best=0.5,
        named=None,
        length=80,
    )
    base.update(kw)
    return rk.turn_score(rk.turn_features(**base))  # type: ignore[arg-type]


def test_the_named_speakers_message_beats_the_other_speakers_equal_one() -> None:
    assert _score(own=0.6, coverage=0.5, named=True) > _score(own=0.6, coverage=0.5, named=False)


def test_a_turn_after_the_question_it_answers_rises_by_its_neighbour() -> None:
    # the turn itself holds none of the words; the turn before it (the question asked) does
    assert _score(neighbour=1.0) > _score(neighbour=0.0)
    # and the lexical best still beats a turn that has only a matching neighbour
    assert _score(own=1.0, coverage=0.8) > _score(neighbour=1.0)
