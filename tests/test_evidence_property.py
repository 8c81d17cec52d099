"""Evidence is chosen by code: whatever quote hints a model returns, every accepted evidence text
is a substring of its source message (invariant 3), and never holds a secret (invariant 7)."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core.models import Channel, DraftRecord, EvidencePointer, Message
from core.secrets import contains_secret
from stages.evidence import verify_draft

# Japanese, English, digits, punctuation, white space of several kinds, and the characters a
# raw export may hold that PostgreSQL text cannot (NUL, a lone surrogate).
ALPHABET = st.sampled_from(
    list("abcdefghij ABC 0123 .,!?-_'\"")
    + list("家計簿アプリのDBはPostgreSQLにした。理由は同期、端末")
    + ["\n", "\t", "\u3000", "\r\n", "\x00", "\ud800", "é", "ｶﾞ"]
)
WORDS = st.sampled_from(
    [
        "I",
        "decided",
        "to",
        "use",
        "PostgreSQL",
        "because",
        "sync",
        "matters",
        ".",
        "we",
        "compared",
        "SQLite",
        "and",
        "Postgres",
        "家計簿アプリ",
        "の",
        "DB",
        "は",
        "PostgreSQL",
        "に",
        "した",
        "。",
        "理由",
        "は",
        "複数端末",
        "で",
        "同期",
        "したい",
        "から",
    ]
    + ["\n", "\t", "\u3000", "\r\n", "  ", "\x00", "\ud800", "ｶﾞ"]
)
TEXT = st.one_of(
    st.lists(WORDS, max_size=40).map(" ".join),  # prose-like: quotes and fuzzy matches happen
    st.lists(ALPHABET, max_size=120).map("".join),  # anything at all
)
SECRET_LINES = [
    "password: hunter2hunter2",
    "key sk-proj-Zq8vR2mK7xT4nB9wL3pH6yJ1cF5gD0sA8eU2iO7tY4rW",
    "パスワードは aB3dE5gH7 です",
]


def _message(key: str, text: str, channel: Channel) -> Message:
    return Message(
        key=key,
        node_id=key.rsplit(":", 1)[-1],
        role="user" if channel is Channel.PERSON else "assistant",
        channel=channel,
        content_type="text",
        text=text,
        position=0,
    )


@st.composite
def sources(draw: st.DrawFn) -> dict[str, Message]:
    count = draw(st.integers(min_value=1, max_value=3))
    messages: dict[str, Message] = {}
    for i in range(count):
        text = draw(TEXT)
        if draw(st.integers(min_value=0, max_value=3)) == 3:
            secret = draw(st.sampled_from(SECRET_LINES))
            cut = draw(st.integers(min_value=0, max_value=len(text)))
            text = f"{text[:cut]}\n{secret}\n{text[cut:]}"
        channel = draw(
            st.sampled_from([Channel.PERSON, Channel.ASSISTANT, Channel.PERSON, Channel.TOOL])
        )
        key = f"chatgpt:c1:n{i}"
        messages[key] = _message(key, text, channel)
    return messages


@st.composite
def hint_for(draw: st.DrawFn, source: str) -> str:
    """What a model might send: a true quote, a tidied one, a fragment, or anything at all."""
    kind = draw(st.sampled_from(["exact", "exact", "tidied", "tidied", "anything", "secret"]))
    if kind == "anything" or not source:
        return draw(TEXT)
    if kind == "secret":
        return draw(st.sampled_from(SECRET_LINES + ["hunter2hunter2", "aB3dE5gH7"]))
    length = draw(st.integers(min_value=min(6, len(source)), max_value=min(60, len(source))))
    start = draw(st.integers(min_value=0, max_value=len(source) - length))
    quote = source[start : start + length]
    if kind == "exact":
        return quote
    # tidied: white space normalised, a character dropped or changed, trimmed
    quote = " ".join(quote.split())
    if len(quote) > 3 and draw(st.booleans()):
        i = draw(st.integers(min_value=0, max_value=len(quote) - 1))
        quote = quote[:i] + draw(st.sampled_from(["", "x", "。", " "])) + quote[i + 1 :]
    return quote


@st.composite
def drafts(draw: st.DrawFn) -> tuple[DraftRecord, dict[str, Message]]:
    messages = draw(sources())
    pointers = []
    for _ in range(draw(st.integers(min_value=0, max_value=5))):
        unknown = draw(st.integers(min_value=0, max_value=7)) == 7
        key = "chatgpt:c1:unknown" if unknown else draw(st.sampled_from(list(messages)))
        text = messages[key].text if key in messages else ""
        pointers.append(EvidencePointer(message_key=key, quote_hint=draw(hint_for(text))))
    action = draw(st.sampled_from(["create", "append", "noop"]))
    draft = DraftRecord(
        action=action,
        target_memory_id="mem_1" if action == "append" else None,
        expected_revision=3 if action == "append" else None,
        title="t",
        memory_kind="decision",
        canonical_summary="s",
        index_summary="i",
        evidence=pointers,
    )
    return draft, messages


@given(drafts())
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_accepted_evidence_is_always_a_verbatim_excerpt(
    case: tuple[DraftRecord, dict[str, Message]],
) -> None:
    draft, messages = case
    verified = verify_draft(draft, messages)
    assert len(verified.evidence) + len(verified.rejected) <= len(draft.evidence)
    for ev in verified.evidence:
        source = messages[ev.message_key]
        assert ev.text in source.text  # the source's characters, whatever the hint was
        assert ev.text.strip() and "\x00" not in ev.text
        ev.text.encode("utf-8")  # storable: no lone surrogate
        assert source.channel in (Channel.PERSON, Channel.ASSISTANT)
        assert not contains_secret(ev.text)
        for secret in (
            "hunter2hunter2",
            "aB3dE5gH7",
            "sk-proj-Zq8vR2mK7xT4nB9wL3pH6yJ1cF5gD0sA8eU2iO7tY4rW",
        ):
            assert secret not in ev.text
    assert verified.committable == (draft.action != "noop" and bool(verified.evidence))
    # the person's own words come first
    channels = [messages[e.message_key].channel for e in verified.evidence]
    assert channels == sorted(channels, key=lambda c: c != Channel.PERSON)


def test_a_tidied_quote_is_stored_as_the_source_wrote_it() -> None:
    source = "結局、家計簿アプリのDBは PostgreSQL にした。複数端末で同期したいから。"
    messages = {"k:1": _message("k:1", source, Channel.PERSON)}
    tidied = "家計簿アプリのDBはPostgreSQLにした。"  # the model dropped the spaces
    draft = DraftRecord(
        action="create",
        title="t",
        memory_kind="decision",
        canonical_summary="s",
        index_summary="i",
        evidence=[EvidencePointer(message_key="k:1", quote_hint=tidied)],
    )
    [ev] = verify_draft(draft, messages).evidence
    assert ev.method == "fuzzy"
    assert ev.text != tidied and ev.text in source
    assert "PostgreSQL にした" in ev.text


@pytest.mark.parametrize(
    ("hint", "reason"),
    [
        ("the db password: hunter2hunter2", "secret"),  # exact, holds the secret
        ("hunter2hunter2", "secret"),  # the bare value: overlaps the secret in its source
        ("password: hunter2hunter3", "secret"),  # a near miss found by fuzzy alignment
        ("the db password: [REDACTED:password]", "not-found-in-source"),  # what the model saw
    ],
)
def test_evidence_holding_a_secret_is_rejected(hint: str, reason: str) -> None:
    source = "PostgreSQLにした。 the db password: hunter2hunter2 (do not share)"
    messages = {"k:1": _message("k:1", source, Channel.PERSON)}
    draft = DraftRecord(
        action="create",
        title="t",
        memory_kind="decision",
        canonical_summary="s",
        index_summary="i",
        evidence=[
            EvidencePointer(message_key="k:1", quote_hint=hint),
            EvidencePointer(message_key="k:1", quote_hint="PostgreSQLにした"),
        ],
    )
    verified = verify_draft(draft, messages)
    assert [e.text for e in verified.evidence] == ["PostgreSQLにした"]
    assert [r.reason for r in verified.rejected] == [reason]
