"""Japanese-aware lexical tokens, pure Python (shared by the index writer and the query side).

Japanese has no spaces, so ``to_tsvector('simple', ...)`` turns a Japanese sentence into one
token. We emit character bigrams for runs of CJK characters (kanji, hiragana, katakana, hangul)
plus single characters on the index side (so a one-character query still matches), and
lower-cased words for Latin / digit runs. Text is NFKC-normalised first (full-width ＡＢＣ → abc,
half-width ｶﾀｶﾅ → カタカナ).
"""

from __future__ import annotations

import re
import unicodedata

_CJK = (
    "\u3040-\u30ff"  # hiragana, katakana
    "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"  # CJK ideographs
    "\uac00-\ud7af"  # hangul syllables
    "\u30fc\u3005"  # prolonged sound mark, 々
)
_RUN = re.compile(rf"[{_CJK}]+|[^\W_{_CJK}]+", re.UNICODE)
_IS_CJK = re.compile(rf"^[{_CJK}]+$")


def _runs(text: str) -> list[str]:
    return _RUN.findall(unicodedata.normalize("NFKC", text).lower())


def index_tokens(text: str) -> list[str]:
    """Tokens to index: words, CJK bigrams and CJK unigrams. Deduplicated, in first-seen order."""
    out: dict[str, None] = {}
    for run in _runs(text):
        if _IS_CJK.match(run):
            for i in range(len(run)):
                out[run[i]] = None
                if i + 1 < len(run):
                    out[run[i : i + 2]] = None
        else:
            out[run] = None
    return list(out)


def query_tokens(text: str) -> list[str]:
    """Tokens of a query: words, and CJK bigrams (a one-character run stays a unigram)."""
    out: dict[str, None] = {}
    for run in _runs(text):
        if _IS_CJK.match(run):
            if len(run) == 1:
                out[run] = None
            for i in range(len(run) - 1):
                out[run[i : i + 2]] = None
        else:
            out[run] = None
    return list(out)


def tsquery_literal(tokens: list[str], op: str = "|") -> str:
    """A tsquery text whose lexemes are taken literally (no parser, no dictionary)."""
    quoted = ["'" + t.replace("\\", "\\\\").replace("'", "''") + "'" for t in tokens]
    return f" {op} ".join(quoted)
