"""Query understanding (pure: no database), shared by recall, search, load_context and the MCP
tools: a question in Japanese or English becomes

- ``time``: the range of its time expression (``search.timeexpr``), or None;
- ``terms``: its content terms, each a set of index lexemes (``core.textsearch``) that are OR-ed
  and ranked, never all required. Japanese content words come from SudachiPy's parts of speech
  (particles, auxiliaries, pronouns, adverbs and dependent verbs such as する / いる are not
  content) and match by their character bigrams and their normalised form (決めた → 決める);
  English words match by their Snowball stem as a prefix (decided → ``decid:*``, Postgres →
  ``postgr:*`` finds PostgreSQL). Question words, particles, auxiliaries and filler come off by
  the stop lists of ``stopwordsiso`` (English and Japanese), a maintained source;
- ``focus``: whom the question is about. "what did I decide", 「どうするって決めたっけ」 ask
  for the person's own words (``person``); "what was I told", 「何て言われた？」 ask for the
  assistant's (``assistant``); otherwise None. The ranking weighs that side's messages higher
  and keeps the other side findable;
- ``vector_text``: what the embedder sees (the question without its time expression).

Nothing here knows any particular question: only parts of speech, stop lists, stems and a few
grammatical markers of who is speaking (passive and benefactive endings, "I" as a subject).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from functools import lru_cache
from typing import Literal

from core.textsearch import (
    Morpheme,
    analyze,
    cjk_bigrams,
    is_content,
    normal_form,
    stem,
    tsquery_literal,
)
from search.timeexpr import TimeRange, split_time_expression

__all__ = ["Focus", "Query", "Term", "analysed_text", "content_terms", "focus_of", "understand"]

Focus = Literal["person", "assistant"] | None

_LATIN = re.compile(r"[a-z0-9]+")  # the index's own word runs (core.textsearch)
_NUMBER = re.compile(r"^\d+$")
MIN_PREFIX = 4  # an English stem of this many letters matches as a prefix


@dataclass(frozen=True)
class Term:
    """One content word of the query: any of ``lexemes`` matches it (``prefix``: as prefixes).
    ``weight`` multiplies its inverse document frequency."""

    text: str
    lexemes: tuple[str, ...]
    prefix: tuple[bool, ...]
    weight: float = 1.0
    lang: Literal["ja", "en"] = "en"
    generic: bool = False  # a word of deciding / choosing itself (決める, decide): no topic
    bridge: bool = False  # a word of the other script standing in for a term (search.bridge)
    stands_for: str = ""  # ... for this term of the query (its text)

    def tsquery(self) -> str:
        """This term as one tsquery text (its lexemes OR-ed, prefixes marked)."""
        parts = [
            tsquery_literal([lex]) + (":*" if pre else "")
            for lex, pre in zip(self.lexemes, self.prefix, strict=True)
        ]
        return " | ".join(parts)


@dataclass(frozen=True)
class Query:
    text: str
    rest: str  # the text without its time expression
    time: TimeRange | None
    terms: tuple[Term, ...]
    focus: Focus
    vector_text: str
    asks_decision: bool = False  # about a decision, its reasons or what stayed open
    stop_only: bool = False  # the question held nothing but question words and filler
    words: tuple[str, ...] = field(default=())  # the content words, for snippets and display

    @property
    def topical(self) -> tuple[Term, ...]:
        """The terms that name a topic (not the generic words of deciding)."""
        return tuple(t for t in self.terms if not t.generic)

    @property
    def display(self) -> str:
        return " ".join(self.words)


@lru_cache(maxsize=1)
def _stop_words() -> tuple[frozenset[str], frozenset[str]]:
    from core.stoplists import stop_words

    return stop_words("en"), stop_words("ja")


def _en_terms(text: str, out: dict[str, Term]) -> None:
    en_stop, _ = _stop_words()
    for word in _LATIN.findall(text):
        if word in en_stop or word in out or len(word) < 2 and not word.isdigit():
            continue
        if _NUMBER.match(word) or not word.isascii() or not word.isalpha():
            out[word] = Term(word, (word,), (False,), 1.0, "en")
            continue
        st = stem(word)
        if st in _EN_DECISION_STEMS:
            out[word] = Term(word, (st,), (len(st) >= MIN_PREFIX,), 1.0, "en", True)
        elif len(st) >= MIN_PREFIX:
            out[word] = Term(word, (st,), (True,), 1.0, "en")
        else:
            lex = tuple(dict.fromkeys((word, st)))
            out[word] = Term(word, lex, (False,) * len(lex), 1.0, "en")


def _ja_terms(morphemes: list[Morpheme], out: dict[str, Term]) -> None:
    _, ja_stop = _stop_words()
    for m in morphemes:
        if not is_content(m) or not re.search(r"[\u3040-\u30ff\u3400-\u9fff]", m.surface):
            continue
        if m.surface in ja_stop or m.normalized in ja_stop or m.surface in out:
            continue
        if m.pos[0] == "接頭辞" or (len(m.pos) > 1 and m.pos[1] == "数詞"):
            continue
        lexemes = cjk_bigrams(m.surface)
        form = normal_form(m)
        if m.pos[0] in ("動詞", "形容詞"):  # inflected: the dictionary form, and the bigrams
            # the written form shares with it (the stem: 決めた, 決める → 決め)
            base = form or m.surface
            lexemes = [base] + [b for b in cjk_bigrams(base) if b in lexemes]
        elif form:
            lexemes.append(form)
        lex = tuple(dict.fromkeys(lexemes))
        generic = m.normalized in _JA_DECISION_LEMMAS or m.surface in _JA_DECISION_LEMMAS
        out[m.surface] = Term(m.surface, lex, (False,) * len(lex), 1.0, "ja", generic)


def content_terms(text: str) -> list[Term]:
    """The content terms of ``text`` (Japanese and English mixed), in order."""
    norm = unicodedata.normalize("NFKC", text).lower()
    out: dict[str, Term] = {}
    morphemes = analyze(norm)
    _ja_terms(morphemes, out)
    _en_terms(norm, out)
    return list(out.values())


# who a question is about: grammatical markers only
_EN_ASSISTANT = re.compile(
    r"\b(?:was i (?:told|advised|recommended)|were the (?:tips|suggestions)|advice|advised|tips?|"
    r"recommend\w*|suggest\w*|(?:did|does) (?:it|the \w+|you) (?:say|tell|recommend|suggest))\b"
)
# what an answer holds: told, unless the question asks what the person did ("did I find a fix")
_EN_ANSWER = re.compile(
    r"\b(?:the|a|any) (?:fix|fixes|solution|solutions|remedy|workaround|explanation)\b"
)
_EN_PERSON = re.compile(
    r"\b(?:did i|do i|have i|had i|was i|i (?!was told)\w+(?:ed)?|my (?:decision|plan|choice|reason))\b"
)
_JA_ASSISTANT_AUX = frozenset({"れる", "られる", "もらう", "くれる", "貰う", "呉れる"})


def focus_of(text: str, morphemes: list[Morpheme] | None = None) -> Focus:
    """``assistant`` when the question asks what the person was told, ``person`` when it asks
    what the person said, decided or did, else None."""
    norm = unicodedata.normalize("NFKC", text).lower()
    if morphemes is None:
        morphemes = analyze(norm)
    if morphemes:
        told = any(
            m.normalized in _JA_ASSISTANT_AUX
            and i > 0
            and morphemes[i - 1].pos[0] in ("動詞", "助動詞", "助詞")
            for i, m in enumerate(morphemes)
        )
        if told:
            return "assistant"
        if any(m.pos[0] == "動詞" for m in morphemes):
            return "person"
    if _EN_ASSISTANT.search(norm):
        return "assistant"
    asking = _asking_clause(norm)
    if _EN_PERSON.search(asking):
        return "person"
    if _EN_ANSWER.search(asking):
        return "assistant"
    return None


# where a sentence or a clause that asks begins: "When I was negotiating the offer, what was ..."
_EN_CLAUSES = re.compile(
    r"[.?!;]\s+|,\s+(?=(?:what|which|how|why|when|where|who|did|do|does|was|were)\b)"
)
_EN_ASKS = re.compile(
    r"^\W*(?:what|which|how|why|when|where|who|did|do|does|was|were|is|are|have|had)\b"
)


def _asking_clause(text: str) -> str:
    """The last sentence or clause of ``text`` that asks (begins with a question word or an
    auxiliary): what the question is about, not the scene set before it; ``text`` when none."""
    asking = [c for c in _EN_CLAUSES.split(text) if _EN_ASKS.match(c)]
    return asking[-1] if asking else text


# a question about a decision, its reasons, or what stayed open (grammar and a few verbs of
# choosing, in both languages)
_JA_DECISION_LEMMAS = frozenset(
    {"決める", "決まる", "選ぶ", "結局", "最終的", "決め手", "理由", "残る", "課題"}
)
_EN_DECISION_STEMS = frozenset({"decid", "decis", "pick", "chose", "choos", "settl"})
_JA_DECISION = re.compile(r"ことにし|にし(?:た|よう)|なんで|なぜ|どうして|まだ")
_EN_DECISION = re.compile(
    r"\b(?:decid\w*|decision|end(?:ed)? up|pick(?:ed)?|chose|choose|go(?:ne)? with|went with|settle\w*|"
    r"why|still open|open points?|turn(?:ed)? down|buy|bought)\b"
)


def asks_decision(text: str, morphemes: list[Morpheme] | None = None) -> bool:
    """Whether the question asks what was decided, why, or what stayed open."""
    norm = unicodedata.normalize("NFKC", text).lower()
    morphemes = analyze(norm) if morphemes is None else morphemes
    if any(
        m.normalized in _JA_DECISION_LEMMAS or m.surface in _JA_DECISION_LEMMAS for m in morphemes
    ):
        return True
    return bool(_JA_DECISION.search(norm) or _EN_DECISION.search(norm))


def analysed_text(query: str, now: datetime | None = None, tz: str | None = None) -> str:
    """The text ``understand`` gives SudachiPy (``analyze``): the query without its time
    expression, NFKC, lower-cased."""
    return _split(query, now, tz)[2]


@lru_cache(maxsize=8)  # `pmem search` asks for the text first (``analysed_text``): parsed once
def _split(query: str, now: datetime | None, tz: str | None) -> tuple[TimeRange | None, str, str]:
    found, rest = split_time_expression(query, now, tz) if now is not None else (None, query)
    return found, rest, unicodedata.normalize("NFKC", rest).lower()


def understand(
    query: str,
    now: datetime | None = None,
    tz: str | None = None,
    analyzer: Callable[[str], list[Morpheme]] | None = None,
) -> Query:
    """The query's time range (when ``now`` is given), content terms, focus and vector text.
    ``analyzer``: ``analyze`` done elsewhere (the same morphemes; `pmem search` has it done in
    a second process while this one starts)."""
    found, rest, norm = _split(query, now, tz)
    morphemes = (analyzer or analyze)(norm)
    out: dict[str, Term] = {}
    _ja_terms(morphemes, out)
    _en_terms(norm, out)
    terms = tuple(out.values())
    vector_text = " ".join(rest.split()) or " ".join(query.split())
    return Query(
        text=query,
        rest=rest,
        time=found,
        terms=terms,
        focus=focus_of(rest, morphemes),
        vector_text=vector_text,
        asks_decision=asks_decision(rest, morphemes),
        stop_only=not terms and bool(rest.strip()),
        words=tuple(t.text for t in terms),
    )
