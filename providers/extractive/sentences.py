"""Sentences of the person's messages (exact substrings of the source), and the small text helpers
the drafter's modules share."""

from __future__ import annotations

import re
import threading
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache

from core.models import Channel, Message
from core.textsearch import analyze
from stages.prefilter import split_prose

#: a sentence ends at 。！？, at . ! ? before a space or the end, and at a half-width ! ? typed
#: straight before the next Japanese sentence (「…エントリーしました!父の家から近いので…」: an
#: IME's half-width mark); not before the quotative って / と (「…だ!って思った」 goes on)
_SENTENCE_END_RE = re.compile(
    r"[。！？]+|[.!?]+(?=\s|$)|[!?]+(?=[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff])(?!って|と)|\n"
)


_FENCE_RE = re.compile(r"```.*?(?:```|\Z)", re.DOTALL)


_JA_CHAR_RE = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uff66-\uff9f]")


_LATIN_RE = re.compile(r"[A-Za-z]")


_REDACTED_RE = re.compile(r"\[REDACTED:[a-z0-9\-]+\]")


_STOP_WORDS = """
i i'm a an the ok okay can could would please yes no what how why when where which who
is are do does if in on for to and or but so my we you it this that also now then
thanks thank hi hello sure e.g i.e etc vs
"""


_STOP_TERMS = frozenset(_STOP_WORDS.split())


@dataclass(frozen=True)
class Sentence:
    """One sentence of a message: ``text`` is an exact substring of ``message.text``."""

    message: Message
    text: str
    index: int  # position among the conversation's person sentences
    #: the whole sentence a clause unit was cut from (``clause_units``); "" when it is one
    sentence: str = ""
    units: int = 1  # how many clause units of ``sentence`` this span holds (joined_clauses)


def split_sentences(text: str) -> list[str]:
    """Sentences of ``text`` (code blocks skipped); each one is an exact substring of ``text``."""
    out: list[str] = []
    for start, end in _prose_spans(text):
        out.extend(_split_span(text, start, end))
    return out


def _prose_spans(text: str) -> list[tuple[int, int]]:
    spans: list[tuple[int, int]] = []
    pos = 0
    for m in _FENCE_RE.finditer(text):
        spans.append((pos, m.start()))
        pos = m.end()
    spans.append((pos, len(text)))
    return [(a, b) for a, b in spans if b > a]


def _split_span(text: str, start: int, end: int) -> list[str]:
    """Cut at sentence ends, except inside brackets (「…？」 or "(…？)" belongs to its sentence);
    a line break always ends a sentence."""
    out: list[str] = []
    pos = start
    for m in _SENTENCE_END_RE.finditer(text, start, end):
        if m.group() != "\n" and _bracket_depth(text[pos : m.start()]) > 0:
            continue
        if m.group() == "." and _ABBREVIATION_RE.search(text, pos, m.start() + 1):
            continue  # "Mt. Hakodate", "Dr. Sato": a title's abbreviation, not a sentence end
        _add_sentence(out, text[pos : m.end()])
        pos = m.end()
    _add_sentence(out, text[pos:end])
    return out


#: a capitalised word of two or three letters with no vowel, then its period (Mt., Dr., St.,
#: Mr., Mrs., Jr.): the spelling of an abbreviation, which a name follows
_ABBREVIATION_RE = re.compile(r"(?<![A-Za-z])[A-Z][b-df-hj-np-tv-xz]{1,2}\.$")


def _bracket_depth(piece: str) -> int:
    return sum(piece.count(c) for c in "(（「『") - sum(piece.count(c) for c in ")）」』")


def _add_sentence(out: list[str], piece: str) -> None:
    sentence = piece.strip()
    if len(sentence) >= 2 and any(ch.isalnum() for ch in sentence):
        out.append(sentence)


def person_sentences(messages: list[Message]) -> list[Sentence]:
    """The person's prose sentences, in order (log lines and code blocks left out); a run-on
    sentence (``RUN_ON_CHARS`` characters or more) as its clauses (``clause_units``)."""
    out: list[Sentence] = []
    for msg in messages:
        if msg.channel != Channel.PERSON:
            continue
        # prose lines are lines of the message text, so each sentence is a substring of it
        for sentence in split_sentences(split_prose(msg.text)[0]):
            units = clause_units(sentence)
            whole = sentence if len(units) > 1 else ""
            for text in units:
                if text in msg.text:
                    out.append(Sentence(msg, text, len(out), whole))
    return out


def whole_sentences(person: list[Sentence], run_on: int) -> list[Sentence]:
    """``person`` with the clause units of each sentence shorter than ``run_on`` characters
    given back as that one sentence (what ``person_sentences`` gives with that threshold),
    numbered again in order."""
    out: list[Sentence] = []
    for s in person:
        if s.sentence and len(s.sentence) < run_on:
            if out and out[-1].text == s.sentence and out[-1].message is s.message:
                continue  # a later unit of the sentence just given back
            s = Sentence(s.message, s.sentence, len(out))
        else:
            s = Sentence(s.message, s.text, len(out), s.sentence, s.units)
        out.append(s)
    return out


def joined_clauses(items: list[Sentence]) -> list[Sentence]:
    """``items`` with neighbouring clause units of one sentence given the same role joined back
    into the one span of that sentence they make (「…仕事が進まず、先週は…」 is one reason)."""
    out: list[Sentence] = []
    for s in items:
        prev = out[-1] if out else None
        if (
            prev is not None
            and s.sentence
            and s.sentence == prev.sentence
            and s.message is prev.message
            and s.index == prev.index + prev.units
        ):
            start = s.sentence.find(prev.text)
            end = s.sentence.find(s.text, start + len(prev.text))
            if start >= 0 and end >= 0:
                span = s.sentence[start : end + len(s.text)]
                out[-1] = Sentence(s.message, span, prev.index, s.sentence, prev.units + 1)
                continue
        out.append(s)
    return out


#: a sentence this long is read clause by clause when it runs on through commas (a message
#: typed or dictated without a 。: 「…迷ってて、…ことにした、…だし、…まだ決めてなくて、…」)
RUN_ON_CHARS = 70
#: the change of mind reads a sentence by its clauses only from this length (a message typed in
#: one breath): a shorter one keeps the frame of its clauses (「…決めたときは…のですが、…変わり
#: ました」 recalls the decision, it changes nothing)
RUN_ON_CHANGE_CHARS = 150
#: a clause shorter than this stays with the next one (「で、」「ただ、」 begin a clause)
CLAUSE_MIN_CHARS = 8
#: where a run-on sentence may be cut: a comma, or a space between two Japanese characters (a
#: message typed or dictated with spaces for its commas: 「…レンタルで回すことにしました 耕運は…」)
_COMMA_RE = re.compile(
    r"[、，]|(?<=[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff])[ \u3000]+"
    r"(?=[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff])"
)
#: a predicate's form that ends a clause before a comma: the terminal form (…ことにした、 : a
#: run-on message ends its sentences with a comma); the continuative (…で、 …くて、) goes on into
#: the next clause, which often gives the role (「…指定で、…確認できたから。」 is one reason)
_CLAUSE_END_FORMS = ("終止形",)


def _clause_ends(piece: str) -> bool:
    """``piece`` ends where a clause ends and another begins: its last morpheme (before the
    comma) is a conjunctive particle other than て/で, or a predicate in its terminal form
    (Sudachi's analysis)."""
    ms = [m for m in analyze(piece) if m.pos[0] not in ("補助記号", "空白")]
    if not ms:
        return False
    last = ms[-1]
    if last.pos[0] == "助詞":  # けど, ので, から, し, が, たら: a clause of its own; て/で goes on
        return last.pos[1] == "接続助詞" and last.surface not in ("て", "で")
    if last.pos[0] in ("動詞", "形容詞", "助動詞") and len(last.pos) > 5:
        return last.pos[5].startswith(_CLAUSE_END_FORMS)
    return False


def clause_units(sentence: str) -> list[str]:
    """``sentence`` itself, or, when it runs on (``RUN_ON_CHARS`` and more, with clause-ending
    commas), its clauses: each an exact substring, cut after a comma (or a space between two
    Japanese characters) that ends a clause by its
    grammar (``_clause_ends``); a clause under ``CLAUSE_MIN_CHARS`` joins the next (the last
    one joins the one before)."""
    if len(sentence) < RUN_ON_CHARS or not _JA_CHAR_RE.search(sentence):
        return [sentence]  # English: a comma is no clause's end (", so we'd meet …" is one)
    starts = [0]
    for m in _COMMA_RE.finditer(sentence):
        piece = sentence[starts[-1] : m.start()]
        if len(piece.strip()) >= CLAUSE_MIN_CHARS and _clause_ends(piece):
            starts.append(m.end())
    if len(starts) > 1 and len(sentence[starts[-1] :].strip()) < CLAUSE_MIN_CHARS:
        starts.pop()
    ends = [*starts[1:], len(sentence)]
    units = [
        sentence[a:b].strip().rstrip("、，").rstrip() for a, b in zip(starts, ends, strict=True)
    ]
    return [u for u in units if u] or [sentence]


_FILLER_RE = re.compile(
    r"^\W*(?:ありがとう|ありがと|thanks?|thank you|なるほど|了解|うん|ok|okay|はい)\W*(?:ございます)?\W*$",
    re.IGNORECASE,
)


_QUOTED_RE = re.compile(r"「[^「」]*」|『[^『』]*』|\"[^\"]*\"")


def _own(text: str) -> str:
    """The sentence without what it quotes (「…」 is someone else's words, not a cue of the
    person's own)."""
    return _QUOTED_RE.sub("「」", text)


_TERM_STOP = frozenset(
    [
        "こと",
        "もの",
        "とき",
        "ところ",
        "ため",
        "よう",
        "感じ",
        "自分",
        "今日",
        "今回",
        "一番",
        "最初",
        "あと",
        "それ",
        "これ",
        "時間",
        "方",
    ]
)


def _content_terms(text: str) -> set[str]:
    """The nouns and names in ``text`` (two characters or more): what a sentence is about."""
    terms = {
        m.normalized
        for m in analyze(text)
        if m.pos[0] == "名詞"
        and m.pos[1] in ("普通名詞", "固有名詞")
        and len(m.surface) >= 2
        and m.normalized not in _TERM_STOP
    }
    terms |= {
        w.casefold()
        for w in re.findall(r"[A-Za-z][A-Za-z0-9]{2,}", text)
        if w.casefold() not in _STOP_TERMS
    }
    return terms


_local = threading.local()


@lru_cache(maxsize=4096)
def _name_terms(text: str) -> frozenset[str]:
    """:func:`_content_terms` and the nouns inside its compounds (Sudachi's short units, split
    mode A: 終身保険 → 終身, 保険): one thing named as a compound in one text and alone in another
    (終身は…) is still the same name when two texts are compared."""
    terms = set(_content_terms(text))
    if not _JA_CHAR_RE.search(text):
        return frozenset(terms)
    tok = getattr(_local, "short", None)
    if tok is None:
        from sudachipy import SplitMode

        from core.textsearch import _dictionary

        tok = _local.short = _dictionary().tokenizer(mode=SplitMode.A)
    norm = unicodedata.normalize("NFKC", text).lower()[:2000]
    for m in tok.tokenize(norm):
        pos = m.part_of_speech()
        if (
            pos[0] == "名詞"
            and pos[1] in ("普通名詞", "固有名詞")
            and len(m.surface()) >= 2
            and m.normalized_form() not in _TERM_STOP
            and _JA_CHAR_RE.search(m.surface())
        ):
            terms.add(m.normalized_form())
    return frozenset(terms)


def _is_filler(text: str) -> bool:
    return bool(_FILLER_RE.match(text)) or len(text.strip()) < 3


def _first_message(person: list[Sentence]) -> list[Sentence]:
    return [s for s in person if s.message.key == person[0].message.key] if person else []


def _is_question(text: str) -> bool:
    return text.rstrip().endswith(("?", "？"))


def detect_language(messages: list[Message]) -> str:
    """ "ja" when kana/kanji are more than a trace next to the Latin letters, else "en"."""
    person = [m.text for m in messages if m.channel == Channel.PERSON]
    text = "\n".join(person or [m.text for m in messages])
    ja = len(_JA_CHAR_RE.findall(text))
    latin = len(_LATIN_RE.findall(text))
    return "ja" if ja >= 2 and ja >= 0.1 * latin else "en"


def _cap(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _dedupe(items: Iterable[str], *, casefold: bool = False) -> list[str]:
    seen: set[str] = set()
    out: list[str] = []
    for item in items:
        key = item.casefold() if casefold else item
        if item and key not in seen:
            seen.add(key)
            out.append(item)
    return out
