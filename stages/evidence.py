"""Evidence chosen by code, never by the model.

Each pointer (message key + quote hint) is located in its source message: an exact substring,
else the best fuzzy alignment (rapidfuzz) above a threshold, else rejected with a reason. The
SOURCE's characters are kept. The final check is the invariant itself: every accepted text is a
substring of its source message.

Evidence that holds a secret (or overlaps one the secret guard finds in its source message) is
rejected with the reason "secret": the model saw a redacted text, but a fuzzy match against the
raw source could otherwise bring the secret back. The batch's messages are also scanned as
conversations (``core.secrets.secret_values``), so an excerpt holding a part of a secret that
was split across two messages, or a value found elsewhere in the batch, is rejected too.
"""

from __future__ import annotations

from typing import Literal

from rapidfuzz import fuzz

from core.models import (
    Channel,
    DraftRecord,
    Message,
    RejectedEvidence,
    VerifiedDraft,
    VerifiedEvidence,
)
from core.secrets import Finding, contains_secret, find_secrets, secret_values
from core.textsearch import thin_quote

Method = Literal["exact", "fuzzy"]
FUZZY_THRESHOLD = 90.0
MIN_CHARS = 4
MAX_CHARS = 600


def _storable(text: str) -> bool:
    """PostgreSQL text holds no NUL and no lone surrogate."""
    if "\x00" in text:
        return False
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def locate(hint: str, source: str) -> tuple[str, Method, float] | None:
    """Return (source excerpt, method, score) or None."""
    hint = hint.strip()
    if len(hint) < MIN_CHARS:
        return None
    start = source.find(hint)
    if start >= 0:
        return source[start : start + len(hint)], "exact", 100.0
    if len(hint) > len(source) * 1.2:
        return None
    al = fuzz.partial_ratio_alignment(hint, source, score_cutoff=FUZZY_THRESHOLD)
    if al is None:
        return None
    excerpt = source[al.dest_start : al.dest_end].strip()
    if len(excerpt) < MIN_CHARS:
        return None
    return excerpt, "fuzzy", float(al.score)


_known_cache: tuple[tuple[tuple[str, int], ...], frozenset[str]] | None = None


def batch_secret_values(messages: dict[str, Message]) -> frozenset[str]:
    """The secret values of a batch's conversation text, its messages scanned in order as one
    conversation (split secrets found); cached for the last batch seen."""
    global _known_cache
    ident = tuple((k, id(m)) for k, m in messages.items())
    cached = _known_cache  # one read: batches may be verified in parallel threads
    if cached is not None and cached[0] == ident:
        return cached[1]
    texts = [m.text for m in messages.values() if m.channel in (Channel.PERSON, Channel.ASSISTANT)]
    values = frozenset(secret_values(texts))
    _known_cache = (ident, values)
    return values


def holds_secret(
    excerpt: str, source: str, findings: list[Finding], known: frozenset[str] = frozenset()
) -> bool:
    """Whether ``excerpt`` contains a secret or a known secret value, or any of its places in
    ``source`` overlaps one."""
    if contains_secret(excerpt) or any(v in excerpt for v in known):
        return True
    if not findings or not excerpt:
        return False
    start = source.find(excerpt)
    while start >= 0:
        end = start + len(excerpt)
        if any(f.start < end and start < f.end for f in findings):
            return True
        start = source.find(excerpt, start + 1)
    return False


def verify_draft(draft: DraftRecord, messages: dict[str, Message]) -> VerifiedDraft:
    accepted: list[VerifiedEvidence] = []
    rejected: list[RejectedEvidence] = []
    seen: set[tuple[str, str]] = set()
    secrets_in: dict[str, list[Finding]] = {}
    for p in draft.evidence:
        msg = messages.get(p.message_key)
        if msg is None:
            rejected.append(RejectedEvidence(message_key=p.message_key, reason="unknown-message"))
            continue
        if msg.channel not in (Channel.PERSON, Channel.ASSISTANT):
            rejected.append(
                RejectedEvidence(message_key=p.message_key, reason="not-conversation-text")
            )
            continue
        found = locate(p.quote_hint, msg.text)
        if found is None:
            rejected.append(
                RejectedEvidence(message_key=p.message_key, reason="not-found-in-source")
            )
            continue
        text, method, score = found
        if p.message_key not in secrets_in:
            secrets_in[p.message_key] = find_secrets(msg.text)
        if holds_secret(text, msg.text, secrets_in[p.message_key], batch_secret_values(messages)):
            rejected.append(RejectedEvidence(message_key=p.message_key, reason="secret"))
            continue
        if len(text) > MAX_CHARS:
            text = text[:MAX_CHARS]
        if not _storable(text):
            rejected.append(RejectedEvidence(message_key=p.message_key, reason="not-storable"))
            continue
        if thin_quote(text):  # the store refuses it too (EvidenceRefused "too-short")
            rejected.append(RejectedEvidence(message_key=p.message_key, reason="too-short"))
            continue
        if text not in msg.text:  # the invariant, checked on what we are about to keep
            rejected.append(RejectedEvidence(message_key=p.message_key, reason="not-verbatim"))
            continue
        if (p.message_key, text) in seen:
            continue
        seen.add((p.message_key, text))
        accepted.append(
            VerifiedEvidence(message_key=p.message_key, text=text, method=method, score=score)
        )
    # the person's own words first
    accepted.sort(key=lambda e: messages[e.message_key].channel != Channel.PERSON)
    if draft.action == "noop":
        return VerifiedDraft(
            draft=draft, evidence=accepted, rejected=rejected, committable=False, reason="noop"
        )
    if not accepted:
        return VerifiedDraft(
            draft=draft,
            evidence=[],
            rejected=rejected,
            committable=False,
            reason="no-verified-evidence",
        )
    return VerifiedDraft(draft=draft, evidence=accepted, rejected=rejected, committable=True)
