"""Issue 29, finding 3: the two secret shapes that passed the guard. A key whose tail the person
sends after the assistant's answer, and a token typed in groups (as read off a screen), in
Japanese and English surroundings: each is redacted whole in every one of its draws (not only
on average, as the corpus's catch rate), by the conversation scan every write path uses, with
and without the speakers known; and ordinary grouped words stay."""

from __future__ import annotations

import pytest

from core.secrets import (
    apply_findings,
    find_secrets_in_messages,
    redact,
    redact_messages,
    secret_values,
)
from tests.security.planted import corpus, surviving_pieces

SHAPES = ("split-after-reply", "split-after-reply-en", "typed-in-groups")


def _draws() -> list:
    return [p for seed in (1, 2, 3) for p in corpus(seed=seed, per_format=4) if p.format in SHAPES]


@pytest.mark.parametrize("speakers", [False, True])
def test_every_draw_of_the_two_shapes_is_redacted_whole(speakers: bool) -> None:
    draws = _draws()
    assert {p.format for p in draws} == set(SHAPES) and len(draws) == 36
    for p in draws:
        texts = ["今日の作業メモ", "了解です。", *p.messages]
        roles = ["user", "assistant", *p.roles]
        found = find_secrets_in_messages(texts, roles if speakers else None)
        red = [apply_findings(t, fs) for t, fs in zip(texts, found, strict=True)]
        left = surviving_pieces(p, "\n".join(texts), "\n".join(red))
        assert not left, (p.format, left)
        assert texts[1] == red[1]  # the assistant's turn between holds nothing to redact
        values = secret_values(texts, roles if speakers else None)
        assert any(p.parts[-1] in v for v in values), p.format  # the tail is a known value too


def test_grouped_words_and_numbers_are_not_secrets() -> None:
    for text in [
        "the quick brown fox jumps over the lazy dog 2024 times",
        "gh repo clone owner name now",
        "sk-learn is the usual abbreviation people type for scikit learn 1 2",
        "会議は 10 30 から 11 45 まで、部屋は A 302 です",
    ]:
        assert redact(text) == (text, []), text
    chat = ["OpenAI の記事を読んだ 2024", "面白いですね。", "2025 年もよろしく"]
    assert redact_messages(chat) == chat
