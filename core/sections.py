"""A case record's summary as sections: one ``## heading`` per part, updated in place.

A drafter writes the canonical summary as headed sections (``## 決定`` / ``## Decision``, ...).
An append merges a new draft into the current record section by section: a line the section
already holds (white space and width aside) is not repeated, a new line joins its own section,
and a section the record lacks is added in its place in the standard order, so a record never
shows two ``## Decision`` headings.

A change of mind (``supersede``: the new draft comes from another conversation and states a
decision of its own) makes the new decision the current one; the superseded decision and its
reasons move, verbatim, under the history heading (``## 経緯`` / ``## Earlier decisions``) with
a ``###`` line naming when it was current. An open point that the new draft lists as resolved
(``- <open point> → <how it was settled>``) leaves the open points.

Pure text functions, shared by the store (appends) and the offline drafter (several
conversations of one batch drafted into one record).
"""

from __future__ import annotations

import re

from core.hashing import normalize_for_identity

#: field → its headings (Japanese first, then English); the first of each is what a new
#: section is written with
HEADINGS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "background": (("背景",), ("Background",)),
    "decision": (("決定",), ("Decision",)),
    "reasons": (("理由",), ("Reasons",)),
    "result": (("結果",), ("Result",)),
    "topics": (("話題",), ("Topics",)),
    "open": (("未解決", "未決"), ("Open points",)),
    "resolved": (("解決済み",), ("Resolved",)),
    "history": (("経緯",), ("Earlier decisions", "History")),
}
ORDER = ("background", "decision", "reasons", "result", "topics", "open", "resolved", "history")
RESOLVED_ARROW = " → "

_HEADING_RE = re.compile(r"^#{1,2}\s+(\S.*?)\s*$")
_LOOKUP = {
    h.casefold(): (f, lang)
    for f, (ja, en) in HEADINGS.items()
    for lang, names in (("ja", ja), ("en", en))
    for h in names
}


def field_of(heading: str) -> str | None:
    """The field a heading names (``決定`` → ``decision``), or None for another heading."""
    hit = _LOOKUP.get(heading.strip().casefold())
    return hit[0] if hit else None


def heading(field: str, lang: str) -> str:
    ja, en = HEADINGS[field]
    return ja[0] if lang == "ja" else en[0]


class Sections:
    """An ordered summary: the text before the first heading, then (heading, lines) pairs."""

    def __init__(self, preamble: list[str], parts: list[tuple[str, list[str]]]) -> None:
        self.preamble = preamble
        self.parts = parts

    @classmethod
    def parse(cls, text: str) -> Sections:
        preamble: list[str] = []
        parts: list[tuple[str, list[str]]] = []
        for line in text.splitlines():
            m = _HEADING_RE.match(line)
            if m:
                name = m.group(1)
                same = next((p for p in parts if _key(p[0]) == _key(name)), None)
                if same is None:  # a heading seen twice (old piled appends): one section
                    parts.append((name, []))
                    same = parts[-1]
                parts.append(parts.pop(parts.index(same)))
                continue
            if not line.strip():
                continue
            (parts[-1][1] if parts else preamble).append(line.rstrip())
        return cls(preamble, parts)

    @property
    def structured(self) -> bool:
        return bool(self.parts)

    def lang(self) -> str | None:
        for name, _ in self.parts:
            hit = _LOOKUP.get(name.strip().casefold())
            if hit:
                return hit[1]
        return None

    def lines(self, field: str) -> list[str]:
        return next((ls for name, ls in self.parts if field_of(name) == field), [])

    def set(self, field: str, lines: list[str], lang: str) -> None:
        for i, (name, _) in enumerate(self.parts):
            if field_of(name) == field:
                self.parts[i] = (name, lines)
                return
        self.parts.append((heading(field, lang), lines))

    def render(self) -> str:
        known = {f: i for i, f in enumerate(ORDER)}
        ordered = sorted(
            (p for p in self.parts if p[1]),
            key=lambda p: (known.get(field_of(p[0]) or "", len(ORDER)),),
        )
        blocks = ["\n".join(self.preamble)] if self.preamble else []
        blocks += ["\n".join([f"## {name}", *lines]) for name, lines in ordered]
        return "\n\n".join(blocks)


def _key(name: str) -> str:
    return field_of(name) or name.strip().casefold()


def _norm(line: str) -> str:
    return normalize_for_identity(re.sub(r"^\s*(?:[-*・]|\d+[.)])\s*", "", line))


def merge_summaries(
    current: str, new: str, *, supersede: bool = False, since: str | None = None
) -> str:
    """``new`` merged into ``current`` section by section (see the module docstring).
    ``since``: when the superseded decision was made (a date), for its history line."""
    if not new.strip() or new == current:
        return current
    cur, add = Sections.parse(current), Sections.parse(new)
    if not cur.structured or not add.structured:
        return _merge_free_text(current, new)
    lang = cur.lang() or add.lang() or "en"
    new_decision = [
        ln
        for ln in add.lines("decision")
        if _norm(ln) not in {_norm(c) for c in cur.lines("decision")}
    ]
    superseded = bool(supersede and cur.lines("decision") and new_decision)
    if superseded:
        _supersede(cur, add, lang, since)
    for name, lines in add.parts:
        field = field_of(name)
        if superseded and field in ("decision", "reasons"):
            continue  # just replaced
        have = (
            cur.lines(field)
            if field
            else next((ls for n, ls in cur.parts if _key(n) == _key(name)), [])
        )
        seen = {_norm(ln) for ln in have}
        grown = list(have)
        for ln in lines:
            if _norm(ln) and _norm(ln) not in seen:
                grown.append(ln)
                seen.add(_norm(ln))
        if field:
            cur.set(field, grown, lang)
        elif grown != have:
            _set_other(cur, name, grown)
    _settle_open_points(cur)
    return cur.render()


def history_entry(
    cur: Sections, lang: str, since: str | None, fields: tuple[str, ...] = ("reasons",)
) -> list[str]:
    """The lines the history keeps of ``cur``'s decision: a ``###`` line naming when it was
    current, the decision, then each of ``fields`` under its own label."""
    label = (f"{since} " if since else "") + ("の決定" if lang == "ja" else "decision")
    entry = [f"### {label.strip()}", *cur.lines("decision")]
    for field in fields:
        if cur.lines(field):
            entry += [f"{heading(field, lang)}:", *cur.lines(field)]
    return entry


def _supersede(cur: Sections, add: Sections, lang: str, since: str | None) -> None:
    """The current decision and its reasons move to the history; the new ones are current."""
    cur.set("history", [*cur.lines("history"), *history_entry(cur, lang, since)], lang)
    cur.set("decision", list(add.lines("decision")), lang)
    cur.set("reasons", list(add.lines("reasons")), lang)


def _settle_open_points(cur: Sections) -> None:
    """An open point listed as resolved (``<point> → <how>``) leaves the open points."""
    settled = {
        _norm(ln.split(RESOLVED_ARROW, 1)[0])
        for ln in cur.lines("resolved")
        if RESOLVED_ARROW in ln
    }
    if not settled:
        return
    still = [ln for ln in cur.lines("open") if _norm(ln) not in settled]
    if still != cur.lines("open"):
        lang = cur.lang() or "en"
        cur.set("open", still, lang)


def _set_other(cur: Sections, name: str, lines: list[str]) -> None:
    for i, (n, _) in enumerate(cur.parts):
        if _key(n) == _key(name):
            cur.parts[i] = (n, lines)
            return
    cur.parts.append((name, lines))


def _merge_free_text(current: str, new: str) -> str:
    """Summaries without headings: the new paragraphs the current text does not hold yet."""
    if current in new:
        return new
    have = {_norm(p) for p in current.split("\n\n") if p.strip()}
    fresh = [p for p in new.split("\n\n") if p.strip() and _norm(p) not in have]
    return "\n\n".join([current, *fresh]) if fresh else current


#: the longest derived index line (the offline drafter's own cap)
INDEX_MAX = 140
_BULLET_RE = re.compile(r"^\s*(?:[-*・•]|\d+[.)])\s*")


def _cap(text: str, limit: int = INDEX_MAX) -> str:
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def derived_index_line(title: str, summary: str) -> str:
    """One line to recognise a memory by, from its own content: the first line of its summary
    that is not a heading, a history line or the title again; else the title."""
    gist = normalize_for_identity(title)
    for raw in summary.splitlines():
        line = " ".join(_BULLET_RE.sub("", raw).split())
        if not line or raw.lstrip().startswith("#"):
            continue
        said = normalize_for_identity(line)
        if said and said != gist:
            return _cap(line)
    return _cap(" ".join(title.split()))
