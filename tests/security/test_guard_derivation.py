"""Issue 10, point 1 (the guard part): the guard runs on the final text BEFORE it is cut into
sentences, aliases or tags, and on whole conversations, wherever text is derived or leaves:
the extractive drafter, the prompt builder, remote embedding requests, draft scrubbing and the
evidence verifier. No piece of a secret longer than 4 characters survives."""

from __future__ import annotations

import json

from core.models import Channel, DraftRecord, EvidencePointer, MemoryIndexEntry
from core.secrets import redact_draft, secret_values
from prompts.case_record import build_prompt
from providers._retry import RetryPolicy
from providers.embeddings._remote import embed_remote
from providers.extractive import ExtractiveDrafter, draft_record
from stages.evidence import verify_draft
from tests.fakeservers import conversation

OPENAI = "sk-proj-Xq7Lm2Vb9Nc4Kd8Rf3Tg6Yh1Ju5Ik0Ol2Pz7Aw4Se9"
AWS_SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYzq81Lm4Nw2"
SPLIT_HEAD, SPLIT_TAIL = "ghp_Ab12Cd34Ef56", "Gh78Ij90Kl12Mn34Op56Qr78St"
PASSWORD = "Tq8-Lp3x!Wz"
SECRETS = [OPENAI, AWS_SECRET, SPLIT_HEAD + SPLIT_TAIL, PASSWORD]


def pieces(secret: str, size: int = 5) -> set[str]:
    return {secret[i : i + size] for i in range(len(secret) - size + 1)}


def leaked(blob: str) -> list[str]:
    """Pieces of a planted secret found in ``blob`` (case folded, as a tag would be)."""
    folded = blob.casefold()
    return sorted(
        p
        for s in SECRETS
        for p in pieces(s)
        if p.casefold() in folded and not p.isalpha()  # a piece of plain letters may be a word
    )


def leaky_conversation():
    return conversation(
        [
            ("user", "Stripe の決済で OpenAI を使うことにした。理由は API が安定しているから。"),
            ("assistant", "了解です。鍵は環境変数に置きましょう。"),
            ("user", f"{OPENAI} が OpenAI のキー。AWS は {AWS_SECRET} で Tokyo リージョン。"),
            ("user", f"CI のトークン {SPLIT_HEAD}"),
            ("user", SPLIT_TAIL),
            (
                "user",
                f"Wi-Fiのパスワードは {PASSWORD} です。結局 Fly.io にデプロイすることにした。",
            ),
            ("assistant", "Please rotate those keys."),
        ],
        key="chatgpt:leaky",
        title=f"OpenAI キー {OPENAI[:24]} の管理",
    )


def test_the_extractive_draft_holds_no_piece_of_any_secret() -> None:
    conv = leaky_conversation()
    record = draft_record(conv, [])
    assert record is not None
    blob = json.dumps(record.model_dump(mode="json"), ensure_ascii=False)
    assert leaked(blob) == []
    # the prefix went with the key: no alias or tag is a cut piece of it
    assert not any(a.casefold().startswith(("proj", "xq7", "wjalr")) for a in record.aliases)
    assert not any(t.startswith(("proj", "xq7", "wjalr")) for t in record.tags)
    # the decision itself is still drafted
    assert "Fly.io" in record.canonical_summary or "OpenAI" in record.canonical_summary


def test_the_extractive_drafter_output_and_its_evidence_are_clean() -> None:
    conv = leaky_conversation()
    out = ExtractiveDrafter().draft([conv], [])
    messages = {m.key: m for m in conv.messages}
    for record in out.records:
        verified = verify_draft(record, messages)
        assert leaked(json.dumps(verified.model_dump(mode="json"), ensure_ascii=False)) == []


def test_the_prompt_holds_no_piece_of_a_secret_split_across_two_messages() -> None:
    conv = leaky_conversation()
    entry = MemoryIndexEntry(
        id="mem_1",
        title="Deploy",
        index_summary=f"key {OPENAI}",
        kind="project",
        current_revision=1,
    )
    static, dynamic = build_prompt([conv], [entry])
    assert leaked(static + dynamic) == []
    assert "chatgpt:leaky:n4" in dynamic  # the message is there, its text redacted


def test_remote_embedding_requests_are_guarded_as_a_batch_and_cut_after_redaction() -> None:
    sent: list[list[str]] = []

    def call(batch: list[str]) -> list[list[float]]:
        sent.append(batch)
        return [[0.0] for _ in batch]

    texts = [
        f"title: deploy\naliases: {OPENAI}",
        f"summary: the key was {OPENAI[:30]}",  # cut by max_chars below, whole before the cut
        f"PASSWORD={PASSWORD}",
        f"I typed {PASSWORD} twice",
    ]
    embed_remote(
        texts,
        model="m",
        max_chars=40,
        batch_size=2,
        call=call,
        retry=RetryPolicy(max_attempts=1),
        sleep=lambda _s: None,
    )
    body = "\n".join(t for batch in sent for t in batch)
    assert len(sent) == 2
    assert leaked(body) == []


def test_redact_draft_drops_a_label_that_holds_a_lower_cased_piece_of_a_known_secret() -> None:
    known = secret_values(m.text for m in leaky_conversation().drafting_messages)
    assert OPENAI in known and AWS_SECRET in known
    draft = DraftRecord(
        action="create",
        title="Keys",
        memory_kind="decision",
        canonical_summary="Chose OpenAI.",
        index_summary="OpenAI",
        aliases=["OpenAI", OPENAI.removeprefix("sk-")],
        tags=["openai", "wjalrxutnfemi", "k7mdeng"],
    )
    clean, changed = redact_draft(draft, known)
    assert clean.aliases == ["OpenAI"] and clean.tags == ["openai"]
    assert set(changed) == {"aliases", "tags"}


def test_evidence_holding_the_tail_of_a_split_secret_is_rejected() -> None:
    conv = leaky_conversation()
    messages = {m.key: m for m in conv.messages}
    tail_key = next(k for k, m in messages.items() if m.text == SPLIT_TAIL)
    draft = DraftRecord(
        action="create",
        title="CI",
        memory_kind="episode",
        canonical_summary="CI token.",
        index_summary="CI",
        evidence=[EvidencePointer(message_key=tail_key, quote_hint=SPLIT_TAIL)],
    )
    verified = verify_draft(draft, messages)
    assert verified.evidence == []
    assert [r.reason for r in verified.rejected] == ["secret"]
    assert messages[tail_key].channel == Channel.PERSON
