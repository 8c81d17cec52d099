"""Issue 10, point 2: on the eval corpus and the real export samples at most 1 non-secret is
redacted per 10,000 words.

What is scanned: every conversation as the guard sees it on the way out (titles and message
texts, the conversation as one unit through ``find_secrets_in_messages``): the eval corpus'
``conversations.json`` (active path and regenerated branches), and every file under
``fixtures/real/`` read by our own importers (ChatGPT, Claude Code, Codex).

What counts as a non-secret: any redaction in the real samples (they hold no live credential;
a dev default such as ``testpwd_123`` counts against the guard), and any redaction in the eval
corpus that does not overlap one of the strings its authors planted (each conversation's
``secrets``).

How words are counted (Japanese has no spaces): a run of Latin letters or digits is one word,
and every two kana/kanji characters are one word (a common rule of thumb for Japanese, whose
words average about two characters).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator

import pytest

from core.secrets import find_secrets_in_messages
from tests.conftest import REAL, SHARED

EVAL = SHARED / "eval" / "conversations.json"
MAX_PER_10K_WORDS = 1.0

_LATIN_WORD = re.compile(r"[A-Za-z0-9]+(?:['’][A-Za-z]+)?")
_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uff66-\uff9f]")


def count_words(text: str) -> float:
    return len(_LATIN_WORD.findall(text)) + len(_CJK.findall(text)) / 2


def eval_conversations() -> Iterator[tuple[str, list[str], list[str]]]:
    """(id, [title, message texts...], planted secrets) of the eval corpus."""
    data = json.loads(EVAL.read_text(encoding="utf-8"))
    for conv in data["conversations"]:
        texts = [conv.get("title") or ""]
        texts += [m["text"] for m in conv["messages"]]
        texts += [b["text"] for b in conv.get("branches") or [] if "text" in b]
        yield conv["id"], texts, list(conv.get("secrets") or [])


def real_conversations() -> Iterator[tuple[str, list[str], list[str]]]:
    from importers import iter_source, sniff

    files = sorted(f for f in REAL.rglob("*") if f.is_file() and f.suffix in (".json", ".jsonl"))
    for f in files:
        source = sniff(f)
        if source is None:
            continue
        for conv in iter_source(source, f):
            messages = getattr(conv, "messages", None)
            if messages is None:
                continue
            yield f"{f.name}:{conv.key}", [conv.title or "", *(m.text for m in messages)], []


def false_positives(convs: Iterator[tuple[str, list[str], list[str]]]) -> tuple[int, float, list]:
    """(non-secret redactions, words, where) over the conversations."""
    fps = 0
    words = 0.0
    where: list[tuple[str, str]] = []
    for cid, texts, planted in convs:
        words += sum(count_words(t) for t in texts)
        for text, findings in zip(texts, find_secrets_in_messages(texts), strict=True):
            for f in findings:
                value = text[f.start : f.end]
                if any(value in s or s in value for s in planted):
                    continue
                fps += 1
                where.append((cid, f.type))  # the type only: no text in a failure message
    return fps, words, where


def test_word_count_rule() -> None:
    assert count_words("I decided to use PostgreSQL 16.") == 6
    assert count_words("家計簿アプリにした") == 4.5


@pytest.mark.needs_shared
@pytest.mark.parametrize(
    ("name", "convs"), [("eval", eval_conversations), ("real", real_conversations)]
)
def test_at_most_one_non_secret_redacted_per_10k_words(name: str, convs) -> None:  # noqa: ANN001
    fps, words, where = false_positives(convs())
    assert words > 20_000  # the corpus was read
    rate = fps * 10_000 / words
    assert rate <= MAX_PER_10K_WORDS, f"{name}: {fps} in {words:.0f} words: {where[:20]}"


@pytest.mark.needs_shared
def test_the_eval_corpus_planted_secrets_are_all_found() -> None:
    found = 0
    total = 0
    for _, texts, planted in eval_conversations():
        joined = "\n".join(texts)
        for s in planted:
            total += 1
            hits = [
                text[f.start : f.end]
                for text, fs in zip(texts, find_secrets_in_messages(texts), strict=True)
                for f in fs
            ]
            found += any(s in h or h in s for h in hits) and s in joined
    assert total >= 3 and found == total


def fp_report() -> dict[str, dict[str, float]]:
    """For bench/planted_secrets.py: the numbers behind the assertion."""
    out: dict[str, dict[str, float]] = {}
    for name, convs in (("eval", eval_conversations), ("real", real_conversations)):
        fps, words, _ = false_positives(convs())
        out[name] = {
            "non_secret_redactions": fps,
            "words": round(words),
            "per_10k_words": round(fps * 10_000 / words, 3),
        }
    return out
