"""Titles, salient terms, aliases and tags of a case record."""

from __future__ import annotations

import re
from collections import Counter
from datetime import datetime

from core.models import Channel, Conversation, Message
from core.textsearch import analyze
from providers.extractive.roles import _LEAD_FILLER_RE, _Parts
from providers.extractive.sentences import (
    _JA_CHAR_RE,
    _REDACTED_RE,
    _STOP_TERMS,
    _cap,
    _dedupe,
    _is_filler,
    _one_line,
    person_sentences,
)
from stages.prefilter import split_prose

_TITLE_MAX = 80


_MAX_ALIASES = 8


_MAX_TAG_TERMS = 5


_KATAKANA_RE = re.compile(r"[ァ-ヺ][ァ-ヺー]+(?:・[ァ-ヺー]+)*[ァ-ヺー]")


_LATIN_TERM_RE = re.compile(
    r"(?<![A-Za-z0-9_.])[A-Za-z][A-Za-z0-9_]*(?:[.+#&-][A-Za-z0-9_]+)*[+#]*"
)


# words written in capitals that are keywords or plain English, not names (SQL, shouting, notes)
_CAPS_TEXT = """
not and or null select from where join insert update delete into values table create drop
alter index group order by having limit union case when then else end true false todo
fixme note warning error info debug ok yes no the is are was it this that all any none
asap fyi imo btw lol omg pls please help new old get set put post
"""


_CAPS_WORDS = frozenset(_CAPS_TEXT.split())


_URL_RE = re.compile(r"(?:https?://|www\.)\S+", re.IGNORECASE)


_PLACEHOLDER_RE = re.compile(r"\[[A-Z][A-Z0-9_:\-]*\]")  # [REDACTED_PROMPT] in a redacted export


_SENTENCE_OPENERS = frozenset(".!?。！？\n\"'(*-:>")


def _title(conv: Conversation, messages: list[Message], parts: _Parts, terms: list[str]) -> str:
    """The export's title; else (Codex and Claude Code sessions have none) what the session was
    about: its subject (the names it uses most) and its gist (the decision, else the result,
    else the first request), cut at a clause end, never mid-word with an ellipsis."""
    if conv.title and conv.title.strip() and not _is_marker(conv.title.strip()):
        return _cap(_one_line(conv.title), _TITLE_MAX)
    first_person = [
        s for s in person_sentences(messages) if s.message.key == _first_person_key(messages)
    ]
    session = conv.source in _SESSION_SOURCES
    # a coding session is named by what it did; a chat by what it asked
    candidates = (
        [*parts.decisions[:1], *parts.results[:1], *first_person] if session else first_person
    )
    gist = next((g for s in candidates if (g := _gist(s.text))), "")
    subject = " / ".join(t for t in terms[:2] if t.casefold() not in gist.casefold())
    if not gist:
        first = next((m for m in messages if m.channel == Channel.PERSON), messages[0])
        gist = _gist(next((ln.strip() for ln in first.text.splitlines() if ln.strip()), ""))
    if subject and (session or not gist):
        gist = _gist(gist, _TITLE_MAX - len(subject) - 2) if gist else ""
        title = f"{subject}: {gist}" if gist else subject
    else:
        title = gist
    if not title:  # nothing but placeholders: where and when
        when = _occurred_at(conv, messages)
        title = f"{conv.source} session" + (f" {when.date().isoformat()}" if when else "")
    return _cap(title, _TITLE_MAX)


_CLAUSE_END_RE = re.compile(r"[、,;:：；]|\s[-–—]\s|(?<=[a-z]) (?:and|but|so|then) ")


_MARKER_RE = re.compile(r"^\W*\[[A-Z_:\-]+\]\W*$|^\W*[A-Z]+(?:_[A-Z]+)+\W*$|^\W*$")


_GIST_MAX = 60


_SESSION_SOURCES = ("codex", "claude-code")


def _gist(sentence: str, limit: int = _GIST_MAX) -> str:
    """A sentence as a title: without its end mark, cut at the first clause end past a dozen
    characters when it is long."""
    text = _one_line(_REDACTED_RE.sub("", sentence)).strip().rstrip("。．.！!？?")
    text = _LEAD_FILLER_RE.sub("", text)  # "ok, I'll …" → "I'll …"
    if _is_marker(text) or _is_filler(text):
        return ""
    limit = max(limit, 16)
    if len(text) > limit:
        cut = next(
            (m.start() for m in _CLAUSE_END_RE.finditer(text) if 12 <= m.start() <= limit), None
        )
        if cut is None:
            space = text.rfind(" ", 12, limit)
            cut = space if space > 0 else limit
        text = text[:cut].rstrip(" 、,")
    return text


def _is_marker(text: str) -> bool:
    return bool(_MARKER_RE.match(text)) or bool(_REDACTED_RE.fullmatch(text.strip()))


def _comparable(text: str) -> str:
    return re.sub(r"\W+", "", text).casefold()


def _first_person_key(messages: list[Message]) -> str:
    return next(
        (m.key for m in messages if m.channel == Channel.PERSON and _gist(split_prose(m.text)[0])),
        "",
    )


def salient_terms(conv: Conversation, messages: list[Message]) -> list[str]:
    """Product-like Latin names and katakana runs, most frequent first (ties: first seen)."""
    person = [m.text for m in messages if m.channel == Channel.PERSON]
    sources = [(conv.title or "", True), *((text, False) for text in person)]
    counts: Counter[str] = Counter()
    first_seen: dict[str, int] = {}
    canonical: dict[str, str] = {}
    for text, strong_only in sources:
        prose = _URL_RE.sub(
            " ", _PLACEHOLDER_RE.sub(" ", _REDACTED_RE.sub(" ", split_prose(text)[0]))
        )
        for term in _terms_in(prose, strong_only=strong_only):
            folded = term.casefold()
            canonical.setdefault(folded, term)
            first_seen.setdefault(folded, len(first_seen))
            counts[folded] += 1
    title = (conv.title or "").casefold()
    ranked = sorted(counts, key=lambda k: (-counts[k], first_seen[k]))
    return [
        canonical[k]
        for k in ranked
        if _KATAKANA_FULL_RE.match(k) is None
        or k in title
        or _katakana_name(canonical[k], counts[k])
    ]


_KATAKANA_FULL_RE = re.compile(r"^[ァ-ヺー・]+$")


def _katakana_name(word: str, count: int) -> bool:
    """A katakana word worth searching for: a name (Sudachi: a proper noun, or a word it does not
    know: product names), a compound of several words (スタンディングデスク), or a noun the
    person keeps using (three times or more); a single common loanword said once or twice
    (ライト, スムーズ, リスト) or a unit (インチ) is not."""
    morphemes = [m for m in analyze(word) if m.pos[0] != "補助記号"]
    if len(morphemes) != 1:
        return len(morphemes) > 1 and all(m.pos[0] == "名詞" for m in morphemes)
    pos = morphemes[0].pos
    if pos[0] != "名詞" or "助数詞" in "".join(pos[2:3]):
        return False
    return pos[1] != "普通名詞" or count >= 3


def _terms_in(text: str, *, strong_only: bool = False) -> list[str]:
    """Salient terms in order; ``strong_only`` ignores mere capitals (title case)."""
    found: list[tuple[int, str]] = []
    latin: list[tuple[int, int, bool]] = []  # (start, end, salient on its own)
    for m in _LATIN_TERM_RE.finditer(text):
        word = m.group()
        weak = False
        if word.isupper() and word.casefold() in _CAPS_WORDS:
            salient = False
        elif _next_to_japanese(text, m.start(), m.end()) and not strong_only:
            salient = len(word) >= 2 and word.casefold() not in _STOP_TERMS
        else:
            at_start = strong_only or _at_sentence_start(text, m.start())
            salient = _is_salient_latin(word, sentence_start=at_start)
            # a capitalised first word of a sentence may begin a name ("Cloud SQL")
            weak = not salient and word[0].isupper() and word.casefold() not in _STOP_TERMS
        if salient or weak:
            latin.append((m.start(), m.end(), salient))
    # names of several words stay one term: "Cloud SQL", "Lattice Works", "FlexiSpot E7"
    runs: list[list[tuple[int, int, bool]]] = []
    for item in latin:
        if runs and text[runs[-1][-1][1] : item[0]] == " ":
            runs[-1].append(item)
        else:
            runs.append([item])
    for run in runs:
        if len(run) > 1 or run[0][2]:
            found.append((run[0][0], text[run[0][0] : run[-1][1]]))
    found.extend((m.start(), m.group()) for m in _KATAKANA_RE.finditer(text))
    return [term for _, term in sorted(found)]


def _next_to_japanese(text: str, start: int, end: int) -> bool:
    """A Latin word inside Japanese text is a name or a term (Japanese has no capitals)."""
    around = text[max(start - 1, 0) : start] + text[end : end + 1]
    return bool(_JA_CHAR_RE.search(around))


def _at_sentence_start(text: str, pos: int) -> bool:
    i = pos - 1
    while i >= 0 and text[i] in " \t":
        i -= 1
    return i < 0 or text[i] in _SENTENCE_OPENERS


def _is_salient_latin(word: str, *, sentence_start: bool) -> bool:
    if len(word) < 2 or word.casefold() in _STOP_TERMS:
        return False
    inner_caps = any(ch.isupper() for ch in word[1:])
    has_digit = any(ch.isdigit() for ch in word) and any(ch.isalpha() for ch in word)
    dotted = any(ch in ".+#" for ch in word)
    capitalised = word[0].isupper() and not sentence_start
    return inner_caps or has_digit or dotted or capitalised


def _aliases(title: str, terms: list[str]) -> list[str]:
    """Names and phrases someone would search for (the title is searched anyway)."""
    return _dedupe([t for t in terms if t.casefold() != title.casefold()], casefold=True)[
        :_MAX_ALIASES
    ]


def _tags(source: str, kind: str, terms: list[str]) -> list[str]:
    lowered = [t.casefold() for t in terms[:_MAX_TAG_TERMS]]
    return _dedupe([source, kind, *lowered])


def _occurred_at(conv: Conversation, messages: list[Message]) -> datetime | None:
    return next((m.created_at for m in messages if m.created_at is not None), conv.created_at)
