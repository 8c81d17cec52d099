"""Issue 10, point 2 (coverage) and the guard part of point 1: a corpus of planted secrets in
many formats, mixed into Japanese/English conversations, is caught (>= 98 %), and every caught
secret goes whole: no piece of it longer than 4 characters survives, also when it is wrapped
over two lines, split across two messages, written in full-width characters or encoded."""

from __future__ import annotations

import pytest

from core.secrets import (
    contains_secret,
    find_secrets,
    find_secrets_in_messages,
    redact,
    redact_messages,
)
from tests.security.planted import Planted, conversations, corpus, surviving_pieces

MIN_CATCH_RATE = 0.98


def _caught(planted: list[Planted]) -> tuple[list[Planted], list[tuple[Planted, list[str]]]]:
    """Redact every conversation as a whole; return (caught, missed with surviving pieces)."""
    caught: list[Planted] = []
    missed: list[tuple[Planted, list[str]]] = []
    convs = conversations(planted)
    redacted = [redact_messages(c) for c in convs]
    for p in planted:
        (orig, red) = next(
            ("\n".join(c), "\n".join(r))
            for c, r in zip(convs, redacted, strict=True)
            if all(m in c for m in p.messages)
        )
        left = surviving_pieces(p, orig, red)
        (missed.append((p, left)) if left else caught.append(p))
    return caught, missed


def test_the_corpus_is_large_varied_and_format_valid() -> None:
    planted = corpus()
    assert len(planted) >= 150
    assert len({p.format for p in planted}) >= 45
    assert len({p.secret for p in planted}) == len(planted)  # no value drawn twice
    for p in planted:
        text = "\n".join(p.messages)
        assert all(part in text for part in p.parts), p.format
        assert "".join(p.parts).replace(" ", "").replace("-", "") in (
            p.secret.replace(" ", "").replace("-", "").replace("\n", "")
        ), p.format


@pytest.mark.parametrize("seed", [20240501, 1, 2])
def test_the_guard_catches_at_least_98_percent_of_the_planted_secrets(seed: int) -> None:
    planted = corpus(seed=seed)
    caught, missed = _caught(planted)
    rate = len(caught) / len(planted)
    detail = [(p.format, pieces[:2]) for p, pieces in missed]
    assert rate >= MIN_CATCH_RATE, f"{len(caught)}/{len(planted)} caught; missed {detail}"


def test_every_format_is_caught_somewhere() -> None:
    planted = corpus()
    caught, _ = _caught(planted)
    assert {p.format for p in caught} == {p.format for p in planted}


def test_a_key_wrapped_over_two_lines_goes_whole() -> None:
    head, tail = "sk-proj-Qw3rTy7uIoP4aSdF9gHjK2lZx", "Cv8bNm1QwErT6yUiOpA5sDfGhJkL0zXcVbNm"
    text = f"OPENAI_API_KEY={head}\n{tail}\nthanks"
    clean, findings = redact(text)
    assert len(findings) == 1
    assert clean == "OPENAI_API_KEY=[REDACTED:openai-api-key]\nthanks"


def test_a_secret_split_across_two_messages_goes_from_both() -> None:
    messages = ["CIのトークンこれ ghp_Ab12Cd34Ef56", "Gh78Ij90Kl12Mn34Op56Qr78St", "ありがとう"]
    # each message alone: the second part is an anonymous string
    assert not contains_secret(messages[1])
    out = redact_messages(messages)
    assert out == [
        "CIのトークンこれ [REDACTED:github-token]",
        "[REDACTED:github-token]",
        "ありがとう",
    ]
    per_message = find_secrets_in_messages(messages)
    assert [len(f) for f in per_message] == [1, 1, 0]
    assert per_message[1][0].start == 0 and per_message[1][0].end == len(messages[1])


def test_a_value_found_in_one_message_goes_from_every_message() -> None:
    out = redact_messages(["DB_PASSWORD=Kx9-vault-42!", "I typed Kx9-vault-42! in the wrong box"])
    assert all("Kx9-vault" not in m for m in out)


def test_full_width_text_is_read_through_nfkc_and_only_the_secret_is_replaced() -> None:
    text = "ルーターの管理画面　ｐａｓｓｗｏｒｄ：Ｋｘ９ｖＡｕｌｔ４２　（メモ）"
    clean, [finding] = redact(text)
    assert text[finding.start : finding.end] == "Ｋｘ９ｖＡｕｌｔ４２"
    assert clean == "ルーターの管理画面　ｐａｓｓｗｏｒｄ：[REDACTED:password]　（メモ）"


@pytest.mark.parametrize(
    ("text", "secret"),
    [
        ("redis://:S3cr3tRedisPw@cache:6379/0", "S3cr3tRedisPw"),
        ("mysql -u root -pHx7qLm2Pv9 yamalog", "Hx7qLm2Pv9"),
        ("curl -u minato:Tq8-Lp3xWz https://example.com", "Tq8-Lp3xWz"),
        ("sshpass -p 'Rk4mZ8qT2w' ssh deploy@host", "Rk4mZ8qT2w"),
        ("NASのパスは Qm7xKp2Lw9 だよ", "Qm7xKp2Lw9"),
        ("社内VPN pw→Zr5tYk8Wq2", "Zr5tYk8Wq2"),
        (
            "Enter passphrase for key '/home/me/.ssh/id_ed25519': tulip-Orbit-canyon-42",
            "tulip-Orbit-canyon-42",
        ),
        ("リカバリーキー 4KQ2MX 9PLR4T HWZCQB 7XNRT3 BQ8MZL", "4KQ2MX 9PLR4T HWZCQB 7XNRT3 BQ8MZL"),
        (
            "k8s の Secret: Z2hwX0FiQ2RFZkdoSWpLbE1uT3BRclN0VXZXeFl6MDEyMzQ1Njc4OQ==",
            "Z2hwX0FiQ2RFZkdoSWpLbE1uT3BRclN0VXZXeFl6MDEyMzQ1Njc4OQ==",
        ),
        (
            "署名用シークレット 3f9a2c7b1e0d4a5f6b8c9d0e1f2a3b4c でHMACを検証",
            "3f9a2c7b1e0d4a5f6b8c9d0e1f2a3b4c",
        ),
        ("GOCSPX-AbCdEfGh1234IjKlMnOp5678QrSt", "GOCSPX-AbCdEfGh1234IjKlMnOp5678QrSt"),
        (
            "echo dckr_pat_Ab12Cd34Ef56Gh78Ij90Kl12Mn3 | docker login",
            "dckr_pat_Ab12Cd34Ef56Gh78Ij90Kl12Mn3",
        ),
    ],
)
def test_each_class_from_the_issue_is_redacted_whole(text: str, secret: str) -> None:
    clean, findings = redact(text)
    assert findings
    pieces = {secret[i : i + 5] for i in range(len(secret) - 4)}
    assert not [p for p in pieces if p in clean]
    assert redact(clean) == (clean, [])


def test_findings_never_carry_the_value() -> None:
    planted = corpus(per_format=1)
    for p in planted[:40]:
        for f in find_secrets("\n".join(p.messages)):
            dumped = f.model_dump_json() + repr(f)
            assert p.parts[0][:12] not in dumped


def test_redacting_a_redacted_conversation_changes_nothing() -> None:
    for conv in conversations(corpus(per_format=1)):
        once = redact_messages(conv)
        assert redact_messages(once) == once
