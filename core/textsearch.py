"""Japanese- and English-aware lexical tokens, shared by the index writer and the query side.

Japanese has no spaces, so ``to_tsvector('simple', ...)`` turns a Japanese sentence into one
token. We emit:

- character bigrams for runs of CJK characters (kanji, hiragana, katakana, hangul) plus single
  characters on the index side (so a one-character query still matches);
- lower-cased words for Latin / digit runs, and the Snowball English stem of each word
  (PyStemmer: ``decided`` → ``decid``, ``laptops`` → ``laptop``) when it differs;
- the SudachiPy normalised form of each Japanese content word (nouns, verbs, adjectives) when it
  differs from the written form: the dictionary form of a verb (決めた → 決める, 買いました →
  買う) and one spelling of variants (ｻｰﾊﾞ / サーバ → サーバー).

Text is NFKC-normalised first (full-width ＡＢＣ → abc, half-width ｶﾀｶﾅ → カタカナ). ``analyze``
gives the morphemes themselves, for the query side (``search.understand``), which needs the
parts of speech to tell content words from particles and auxiliaries.

``INDEX_VERSION`` names this token scheme: a stored index built with another version is rebuilt
(``store.index``).
"""

from __future__ import annotations

import re
import threading
import unicodedata
from collections.abc import Iterator
from functools import lru_cache
from typing import Any, NamedTuple

INDEX_VERSION = 2  # 1: bigrams + words; 2: + English stems, Japanese normalised forms

_CJK = (
    "\u3040-\u30ff"  # hiragana, katakana
    "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"  # CJK ideographs
    "\uac00-\ud7af"  # hangul syllables
    "\u30fc\u3005"  # prolonged sound mark, 々
)
_RUN = re.compile(rf"[{_CJK}]+|[^\W_{_CJK}]+", re.UNICODE)
_IS_CJK = re.compile(rf"^[{_CJK}]+$")
_JA_CHARS = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
_LATIN_WORD = re.compile(r"^[a-z][a-z'\-]*$")
MAX_ANALYZED_CHARS = 12_000  # Sudachi's input limit is ~49k bytes: one call per slice

# Sudachi parts of speech that carry content (the first field); 代名詞 (pronouns), 助詞,
# 助動詞, 連体詞, 副詞, 接続詞, 感動詞, symbols and blanks do not.
CONTENT_POS = frozenset({"名詞", "動詞", "形容詞", "形状詞", "接頭辞"})


class Morpheme(NamedTuple):
    surface: str  # as written (NFKC, lower-cased)
    normalized: str  # Sudachi's normalised form (dictionary form, one spelling)
    pos: tuple[str, ...]  # Sudachi's part of speech fields


def _runs(text: str) -> list[str]:
    return _RUN.findall(unicodedata.normalize("NFKC", text).lower())


@lru_cache(maxsize=1)
def _stemmer_factory() -> Any:
    import Stemmer

    return Stemmer


_local = threading.local()


def _stemmer() -> Any:
    st = getattr(_local, "stemmer", None)
    if st is None:  # a PyStemmer object is not thread-safe: one per thread
        st = _local.stemmer = _stemmer_factory().Stemmer("english")
    return st


def stem(word: str) -> str:
    """The Snowball English stem of a lower-cased word."""
    return str(_stemmer().stemWord(word))


def _tokenizer() -> Any:
    tok = getattr(_local, "sudachi", None)
    if tok is None:  # one per thread, built from the shared dictionary
        from sudachipy import SplitMode

        tok = _local.sudachi = _dictionary().tokenizer(mode=SplitMode.C)
    return tok


@lru_cache(maxsize=1)
def _dictionary() -> Any:
    from sudachipy import Dictionary

    return Dictionary(dict="core")


def _slices(text: str) -> Iterator[str]:
    """``text`` in slices Sudachi accepts, cut at a line or sentence end where possible."""
    while len(text) > MAX_ANALYZED_CHARS:
        cut = max(text.rfind("\n", 0, MAX_ANALYZED_CHARS), text.rfind("。", 0, MAX_ANALYZED_CHARS))
        cut = cut + 1 if cut > MAX_ANALYZED_CHARS // 2 else MAX_ANALYZED_CHARS
        yield text[:cut]
        text = text[cut:]
    if text:
        yield text


def analyze(text: str) -> list[Morpheme]:
    """Sudachi's morphemes of the Japanese in ``text`` (NFKC, lower-cased; mode C: the longest
    units, so 高額療養費 stays one word). Text without Japanese characters gives []."""
    norm = unicodedata.normalize("NFKC", text).lower()
    if not _JA_CHARS.search(norm):
        return []
    out: list[Morpheme] = []
    tok = _tokenizer()
    for part in _slices(norm):
        for m in tok.tokenize(part):
            out.append(Morpheme(m.surface(), m.normalized_form(), tuple(m.part_of_speech())))
    return out


def is_content(m: Morpheme) -> bool:
    """A noun, verb, adjective or prefix that is not a dependent form (する, いる, ある...)."""
    return m.pos[0] in CONTENT_POS and (len(m.pos) < 2 or m.pos[1] != "非自立可能")


_KATAKANA = re.compile(r"^[\u30a0-\u30ff]+$")


def normal_form(m: Morpheme) -> str | None:
    """The normalised form worth indexing beside the bigrams: a verb's or adjective's dictionary
    form (決めた → 決める), a katakana word's one spelling (サーバ → サーバー); else None."""
    if not is_content(m) or m.normalized == m.surface or not _IS_CJK.match(m.normalized):
        return None
    if m.pos[0] in ("動詞", "形容詞"):
        return m.normalized
    if _KATAKANA.match(m.surface) and _KATAKANA.match(m.normalized):
        return m.normalized
    return None


def _cjk_tokens(run: str, out: dict[str, None], unigrams: bool) -> None:
    if unigrams or len(run) == 1:
        for ch in run:
            out[ch] = None
    for i in range(len(run) - 1):
        out[run[i : i + 2]] = None


def index_tokens(text: str, forms: bool = True) -> list[str]:
    """Tokens to index: words and their stems, CJK bigrams and unigrams, the normalised forms
    of Japanese content words (not with ``forms=False``: the import's pass, ``index_forms``
    adds them later). Deduplicated, in first-seen order."""
    return list(_index_tokens(text, {}, None, forms))


class _Seen:
    """What the passages of one long text already gave: runs, analysed Japanese slices, and how
    many characters of Japanese may still be analysed (``MAX_ANALYZED_PER_TEXT``)."""

    def __init__(self) -> None:
        self.runs: set[tuple[str, str]] = set()
        self.slices: set[str] = set()
        self.analyze_left = MAX_ANALYZED_PER_TEXT


MAX_ANALYZED_PER_TEXT = 200_000  # characters of Japanese given to Sudachi per message


def _index_tokens(
    text: str, out: dict[str, None], seen: _Seen | None, forms: bool = True
) -> dict[str, None]:
    norm = unicodedata.normalize("NFKC", text).lower()
    runs = dict.fromkeys(_RUN_KIND.findall(norm))  # a repeated run adds nothing
    if seen is not None:  # nor one an earlier passage had
        runs = {r: None for r in runs if r not in seen.runs}
        seen.runs.update(runs)
    for cjk, word in runs:
        if cjk:
            out.update(dict.fromkeys(cjk))  # unigrams, then bigrams (as _cjk_tokens)
            out.update(dict.fromkeys(map(str.__add__, cjk, cjk[1:])))
        else:
            out[word] = None
            if len(word) > 3:
                st = _STEMS.get(word)
                if st is None and _LATIN_WORD.match(word):
                    st = _stem_cached(word)
                if st:
                    out[st] = None
    if forms:
        _index_forms(norm, out, seen)
    return out


_STEMS: dict[str, str] = {}  # word -> stem: a message repeats the words of the others
_MAX_STEMS = 200_000


def _stem_cached(word: str) -> str:
    if len(_STEMS) >= _MAX_STEMS:
        _STEMS.clear()
    st = _STEMS[word] = _stemmer().stemWord(word)
    return st


def _tokens_bytes(tokens: list[str]) -> int:
    """What ``tokens`` take in a tsvector, as the budget counts it (bytes + 8 per lexeme)."""
    return len("".join(tokens).encode()) + 8 * len(tokens)


# _RUN with a group per kind of run: (CJK run, "") or ("", word run)
_RUN_KIND = re.compile(rf"([{_CJK}]+)|([^\W_{_CJK}]+)", re.UNICODE)


# The index side's Japanese analysis: the same forms as ``normal_form`` over ``analyze``, found
# faster (the import indexes every message): a tokenizer that loads only the parts of speech and
# normalised forms, a morpheme's kind read from its part-of-speech id (no tuple per morpheme), and
# only the lines that hold Japanese given to Sudachi (a newline ends every morpheme, so the other
# lines, code and English, change nothing).
_VERB_ADJ, _OTHER_CONTENT = 1, 2


@lru_cache(maxsize=1)
def _pos_kinds() -> tuple[int, ...]:
    dic = _dictionary()
    kinds: list[int] = []
    for pos_id in range(100_000):
        pos = dic.pos_of(pos_id)
        if pos is None:
            break
        m = Morpheme("", "", tuple(pos))
        kinds.append(
            0
            if not is_content(m)
            else _VERB_ADJ
            if pos[0] in ("動詞", "形容詞")
            else _OTHER_CONTENT
        )
    return tuple(kinds)


def _index_tokenizer() -> Any:
    tok = getattr(_local, "sudachi_index", None)
    if tok is None:
        from sudachipy import SplitMode

        tok = _local.sudachi_index = _dictionary().tokenizer(
            mode=SplitMode.C, fields={"pos", "normalized_form"}
        )
    return tok


def _japanese_lines(norm: str) -> str:
    """The lines of ``norm`` that hold Japanese, each once."""
    if "\n" not in norm:
        return norm if _JA_CHARS.search(norm) else ""
    return "\n".join(dict.fromkeys(line for line in norm.split("\n") if _JA_CHARS.search(line)))


def _index_forms(norm: str, out: dict[str, None], seen: _Seen | None = None) -> None:
    """Add ``normal_form`` of every morpheme of ``norm`` (NFKC, lower-cased) to ``out``; with
    ``seen`` (a long text's passages), a slice analysed before is not analysed again, and no
    more than ``seen.analyze_left`` characters are."""
    ja = _japanese_lines(norm)
    if not ja:
        return
    kinds = _pos_kinds()
    tok = _index_tokenizer()
    is_cjk, katakana = _IS_CJK.match, _KATAKANA.match
    for part in _slices(ja):
        if seen is not None:
            if part in seen.slices or seen.analyze_left <= 0:
                continue
            seen.slices.add(part)
            seen.analyze_left -= len(part)
        for m in tok.tokenize(part):
            pid = m.part_of_speech_id()
            kind = kinds[pid] if pid < len(kinds) else 0
            if not kind:
                continue
            normalized = m.normalized_form()
            if not is_cjk(normalized):
                continue
            surface = m.surface()
            if normalized == surface:
                continue
            if kind == _VERB_ADJ or (katakana(surface) and katakana(normalized)):
                out[normalized] = None


def query_tokens(text: str) -> list[str]:
    """Tokens of a query: words, and CJK bigrams (a one-character run stays a unigram)."""
    out: dict[str, None] = {}
    for run in _runs(text):
        if _IS_CJK.match(run):
            _cjk_tokens(run, out, unigrams=False)
        else:
            out[run] = None
    return list(out)


def cjk_bigrams(word: str) -> list[str]:
    """The bigrams of a CJK word (a one-character word stays itself)."""
    out: dict[str, None] = {}
    for run in _runs(word):
        if _IS_CJK.match(run):
            _cjk_tokens(run, out, unigrams=False)
        else:
            out[run] = None
    return list(out)


PASSAGE_CHARS = 1200  # a passage of a long message: what one vector stands for
MAX_TSVECTOR_BYTES = 900_000  # PostgreSQL's tsvector holds at most 1 MB


def passages(text: str, size: int = PASSAGE_CHARS) -> list[str]:
    """``text`` cut into passages of at most ``size`` characters, at a paragraph, line or
    sentence end where one falls in the second half of the window (a short text: one passage).
    Linear in the length (positions move along the text; nothing after the cut is copied)."""
    out: list[str] = []
    stripped = text.strip()
    if len(stripped) <= size:
        return [stripped]
    start = len(text) - len(text.lstrip())
    end = start + len(stripped)
    pos = start
    while end - pos > size:
        cut = -1
        for mark in _PASSAGE_MARKS:
            at = text.rfind(mark, pos, pos + size)
            if at - pos >= size // 2:
                cut = at - pos + len(mark)
                break
        cut = cut if cut > 0 else size
        out.append(text[pos : pos + cut].strip())
        found = _NON_SPACE.search(text, pos + cut, end)
        pos = found.start() if found else end
    if pos < end or not out:
        out.append(text[pos:end])
    return out


_PASSAGE_MARKS = ("\n\n", "\n", "。", ". ", "！", "？", "! ", "? ")
_NON_SPACE = re.compile(r"\S")


def index_tokens_long(text: str, size: int = 20_000, forms: bool = True) -> list[str]:
    """``index_tokens`` of a text of any length: computed passage by passage, united, and kept
    within the tsvector limit (CJK unigrams go first when it is too much, then the latest
    tokens). Bounded work for a huge text: a passage, a run or a Japanese slice seen before adds
    nothing, Sudachi reads at most ``MAX_ANALYZED_PER_TEXT`` characters (the normalised forms of
    the rest are left out; its bigrams and words are all there), and reading stops once the
    tokens that are kept fill the limit."""
    if len(text) <= size:
        toks = index_tokens(text, forms)
    else:
        merged: dict[str, None] = {}
        seen = _Seen()
        budget, used = MAX_TSVECTOR_BYTES, 0
        for part in dict.fromkeys(passages(text, size)):
            for t in _index_tokens(part, {}, seen, forms):
                if t not in merged:
                    merged[t] = None
                    if not (len(t) == 1 and _IS_CJK.match(t)):
                        used += len(t.encode()) + 8
            if used > budget:
                break  # what follows would be cut off below anyway
        toks = list(merged)
    budget = MAX_TSVECTOR_BYTES
    if _tokens_bytes(toks) <= budget:
        return toks
    keep = [t for t in toks if not (len(t) == 1 and _IS_CJK.match(t))]
    out, used = [], 0
    for t in keep:
        used += len(t.encode()) + 8
        if used > budget:
            break
        out.append(t)
    return out


def tsquery_literal(tokens: list[str], op: str = "|") -> str:
    """A tsquery text whose lexemes are taken literally (no parser, no dictionary)."""
    quoted = ["'" + t.replace("\\", "\\\\").replace("'", "''") + "'" for t in tokens]
    return f" {op} ".join(quoted)


def index_tokens_many(
    texts: list[str], max_chars: int = 200, forms: bool = True
) -> list[list[str]]:
    """``index_tokens_long`` of each text, without tokens longer than ``max_chars`` (what the
    message index stores); a module-level function, so that worker processes can run it."""
    out = []
    for text in texts:
        toks = index_tokens_long(text, forms=forms)
        if toks and max(map(len, toks)) > max_chars:
            toks = [t for t in toks if len(t) <= max_chars]
        out.append(toks)
    return out


def tsvector_literal(tokens: list[str]) -> str:
    """The text form of a tsvector holding exactly ``tokens`` as lexemes (no positions): the
    same value as ``array_to_tsvector`` of the array, cheaper to send (one string per row)."""
    if not tokens:
        return ""
    joined = "\x1f".join(tokens)  # index tokens are word or CJK characters: no quote to escape
    if "'" not in joined and "\\" not in joined and joined.count("\x1f") == len(tokens) - 1:
        return "'" + joined.replace("\x1f", "' '") + "'"
    return " ".join("'" + t.replace("\\", "\\\\").replace("'", "''") + "'" for t in tokens)


def index_tsvectors_many(texts: list[str], max_chars: int = 200, forms: bool = True) -> list[str]:
    """``index_tokens_many`` as tsvector literals (what worker processes hand back)."""
    return [tsvector_literal(toks) for toks in index_tokens_many(texts, max_chars, forms)]


def has_japanese(text: str) -> bool:
    """Whether ``text`` holds Japanese (kana or kanji, after NFKC): only such a text has
    normalised forms for ``index_forms`` to add."""
    return bool(_JA_CHARS.search(text)) or (
        not text.isascii() and bool(_JA_CHARS.search(unicodedata.normalize("NFKC", text)))
    )


def index_forms(text: str, size: int = 20_000) -> list[str]:
    """The normalised forms of the Japanese content words of ``text`` (any length): what
    ``index_tokens_long`` adds beside the bigrams and words, computed on their own, passage by
    passage with the same bounds (a slice analysed before is not analysed again; at most
    ``MAX_ANALYZED_PER_TEXT`` characters). The message index's later stage adds them to the
    tokens the import's pass stored (``index_tokens_long(text, forms=False)``): the union is
    the same set of lexemes as ``index_tokens_long(text)``."""
    out: dict[str, None] = {}
    if len(text) <= size:
        _index_forms(unicodedata.normalize("NFKC", text).lower(), out, None)
        return list(out)
    seen = _Seen()
    for part in dict.fromkeys(passages(text, size)):
        _index_forms(unicodedata.normalize("NFKC", part).lower(), out, seen)
        if seen.analyze_left <= 0:
            break
    return list(out)


MAX_FORMS_BYTES = 100_000  # forms added to one message's tokens (they stay within 1 MB)


def index_forms_many(texts: list[str], max_chars: int = 200) -> list[str]:
    """``index_forms`` of each text as a tsvector literal ('' for none), without tokens longer
    than ``max_chars`` and at most ``MAX_FORMS_BYTES`` of them (a module-level function, so
    that worker processes can run it)."""
    out = []
    for text in texts:
        kept, used = [], 0
        for t in index_forms(text):
            if len(t) <= max_chars:
                used += len(t.encode()) + 8
                if used > MAX_FORMS_BYTES:
                    break
                kept.append(t)
        out.append(tsvector_literal(kept))
    return out


def index_rows_many(
    texts: list[str], max_chars: int = 200, forms: bool = True
) -> list[tuple[str, bool]]:
    """Each text's tsvector literal (``index_tsvectors_many``) and whether it holds Japanese
    (without ``forms``, such a message waits for ``index_forms``)."""
    vectors = index_tsvectors_many(texts, max_chars, forms)
    if forms:
        return [(v, False) for v in vectors]
    return [(v, has_japanese(t)) for v, t in zip(vectors, texts, strict=True)]


#: the least evidence quote (issue 29, item 2): this many characters besides white space and
#: punctuation, and at least one content word (a Japanese noun, verb or adjective by Sudachi, or
#: a Latin word of 3+ letters that is not a function word, or a number). A 1-character quote ("は", "a") is
#: verbatim in almost any message, so it proves nothing the record says.
MIN_QUOTE_CHARS = 4


#: English closed-class words (articles, pronouns, auxiliaries, prepositions, conjunctions,
#: answer words): a quote of these alone says nothing. Not stopwords-iso's list, which also
#: holds content words ("text", "home", "move").
_FUNCTION_WORDS = frozenset(
    [
        "a",
        "an",
        "the",
        "and",
        "or",
        "but",
        "nor",
        "so",
        "yet",
        "if",
        "then",
        "than",
        "that",
        "this",
        "these",
        "those",
        "it",
        "its",
        "i",
        "me",
        "my",
        "you",
        "your",
        "he",
        "him",
        "his",
        "she",
        "her",
        "we",
        "us",
        "our",
        "they",
        "them",
        "their",
        "is",
        "am",
        "are",
        "was",
        "were",
        "be",
        "been",
        "being",
        "do",
        "does",
        "did",
        "have",
        "has",
        "had",
        "will",
        "would",
        "shall",
        "should",
        "can",
        "could",
        "may",
        "might",
        "must",
        "not",
        "no",
        "yes",
        "ok",
        "okay",
        "of",
        "in",
        "on",
        "at",
        "to",
        "for",
        "from",
        "by",
        "with",
        "as",
        "into",
        "onto",
        "about",
        "over",
        "under",
        "up",
        "down",
        "out",
        "off",
        "also",
        "too",
        "very",
        "just",
        "what",
        "which",
        "who",
        "whom",
        "whose",
        "when",
        "where",
        "why",
        "how",
        "all",
        "any",
        "some",
        "each",
        "there",
        "here",
    ]
)


def thin_quote(text: str) -> bool:
    """Whether ``text`` is too little to be evidence (see ``MIN_QUOTE_CHARS``)."""
    norm = unicodedata.normalize("NFKC", text)
    if sum(ch.isalnum() for ch in norm) < MIN_QUOTE_CHARS:
        return True
    if any(is_content(m) for m in analyze(norm)):
        return False
    words = re.findall(r"[A-Za-z][A-Za-z'-]{2,}|\d{2,}", norm)
    return not any(w.lower() not in _FUNCTION_WORDS for w in words)
