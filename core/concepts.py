"""Seed 003's concept memory, as data and arithmetic (no I/O).

A *concept* is a word the person's experiences are indexed by (登山, 友人, 気分転換, 丹沢); an
*experience* is a case record (a memory id: its evidence leads back to the raw messages); an
*experience link* says an experience shows a concept; a *concept link* says the text states a
relation between two concepts (登山 → 気分転換, "led_to"), with a weight in [0, 1] and the
experiences that support it. Co-occurrence alone never makes a link.

Learning (the seed's rule): a link starts at ``INITIAL_WEIGHT`` on the first experience that
states it, and every further *independent* experience strengthens it once,
``w ← w + LEARNING_RATE · (1 − w)`` (0.5 → 0.55). Processing the same experience again changes
nothing (one update per (link, experience)). Because the rule depends only on how many
experiences support a link, ``weight_for(n)`` is the weight of a link with ``n`` supporters,
whatever their order: a withdrawn experience (a correction, a deleted memory) recomputes the
weight from the supporters that remain, and `pmem concepts rebuild` reaches the same numbers.

Ids are derived from content: a concept's id from the normalised name it was created with, a
link's from its two concepts, its relation and whether it was stated.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass, field
from functools import lru_cache

from core.hashing import tagged_hash
from core.secrets import contains_secret

LEARNING_RATE = 0.1
#: the weight a link starts with on its first supporting experience
INITIAL_WEIGHT = {True: 0.5, False: 0.25}  # stated, inferred (a guess starts weaker)

#: relations offline rules and models may name; symmetric ones are stored with the smaller id first
RELATIONS = ("with", "led_to", "felt", "for", "part_of", "about", "at", "related")
SYMMETRIC = frozenset({"with", "related"})

#: the versions of what extraction produces (a change makes the stage read every memory again)
OFFLINE_EXTRACTOR = "offline"

_WS = re.compile(r"\s+")
_ASCII_ALNUM = re.compile(r"[A-Za-z0-9]")
_JA = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")


def strengthen(weight: float, learning_rate: float = LEARNING_RATE) -> float:
    """The seed's update: a little closer to 1 (0.5 → 0.55)."""
    return weight + learning_rate * (1.0 - weight)


def weight_for(n: int, stated: bool = True) -> float:
    """The weight of a link supported by ``n`` independent experiences (0 when none)."""
    if n <= 0:
        return 0.0
    w = INITIAL_WEIGHT[stated]
    for _ in range(n - 1):
        w = strengthen(w)
    return round(w, 12)


def norm(name: str) -> str:
    """A name as it is compared: NFKC, case-folded, white space collapsed (Ｔａｎｚａｗａ = tanzawa)."""
    return _WS.sub(" ", unicodedata.normalize("NFKC", name).casefold()).strip()


@lru_cache(maxsize=65536)
def safe_name(name: str | None) -> bool:
    """May this concept name (or alias, or reading) be stored: not empty and not flagged by the
    secret guard. Names repeat across experiences: the guard's verdict is kept per name. A name
    without a single ASCII letter or digit (a Japanese noun) carries no credential format and
    skips the scan."""
    if not name:
        return False
    if not _ASCII_ALNUM.search(unicodedata.normalize("NFKC", name)):
        return True
    return not contains_secret(name)


def language_of(name: str) -> str:
    if _JA.search(name):
        return "ja"
    if re.search(r"[A-Za-z]", name):
        return "en"
    return "und"


def concept_id(name: str) -> str:
    return tagged_hash("concept", norm(name), length=16)


def link_key(source_id: str, target_id: str, relation: str) -> tuple[str, str]:
    """(source, target) as stored: symmetric relations with the smaller id first."""
    if relation in SYMMETRIC and target_id < source_id:
        return target_id, source_id
    return source_id, target_id


def link_id(source_id: str, target_id: str, relation: str, stated: bool) -> str:
    s, t = link_key(source_id, target_id, relation)
    return tagged_hash("link", [s, t, relation, bool(stated)], length=16)


# ---------------------------------------------------------------- what extraction returns


@dataclass(frozen=True)
class FoundConcept:
    """A concept an experience shows, as the extractor found it (before ids are resolved)."""

    surface: str  # as written in the record
    kind: str = "noun"  # noun, proper, feeling
    source_key: str | None = None  # the evidence message it was found in (None: the record)
    reading: str | None = None  # a romanised reading (丹沢 → tanzawa), an extra lookup key
    concept_id: str | None = None  # an existing concept the extractor (a model) chose
    language: str | None = None  # of the sentence it was found in (None: by its script)
    topic: bool = False  # the record names it as its topic (its title or one of its tags)


@dataclass(frozen=True)
class FoundRelation:
    """A relation the text states (or, ``stated=False``, a model inferred) between two found
    concepts, by their surfaces."""

    source: str
    target: str
    relation: str
    stated: bool = True
    source_key: str | None = None


@dataclass(frozen=True)
class Extraction:
    concepts: tuple[FoundConcept, ...] = ()
    relations: tuple[FoundRelation, ...] = ()


@dataclass(frozen=True)
class ExperienceInput:
    """What extraction reads of one case record: its current revision and its evidence."""

    memory_id: str
    revision: int
    title: str
    summary: str  # canonical summary
    stated_facts: tuple[str, ...] = ()
    evidence: tuple[tuple[str, str], ...] = ()  # (message key, verbatim excerpt)
    tags: tuple[str, ...] = ()  # the record's tags: with the title, what it names as its topics

    @property
    def inputs_hash(self) -> str:
        return tagged_hash(
            "exp-inputs",
            [
                self.memory_id,
                self.title,
                self.summary,
                list(self.stated_facts),
                [list(e) for e in self.evidence],
                list(self.tags),
            ],
        )


# ---------------------------------------------------------------- what the store holds


@dataclass(frozen=True)
class Concept:
    id: str
    name: str
    aliases: tuple[str, ...] = ()
    language: str = "und"
    kind: str = "noun"
    first_memory_id: str | None = None


@dataclass(frozen=True)
class ConceptLink:
    """A stored link seen from one of its concepts: ``other`` is the concept at the other end,
    ``outgoing`` whether the stated direction is from the concept asked about."""

    id: str
    source_id: str
    target_id: str
    relation: str
    stated: bool
    weight: float
    experiences: tuple[str, ...] = ()
    source_keys: tuple[str, ...] = ()
    other: Concept | None = None
    outgoing: bool = True


@dataclass(frozen=True)
class WeightUpdate:
    seq: int
    link_id: str
    memory_id: str
    revision: int
    action: str  # strengthen | withdraw
    weight_before: float
    weight_after: float


@dataclass
class ResolvedExperience:
    """An extraction with every concept resolved to an id (existing or new), ready to store."""

    memory_id: str
    revision: int
    inputs_hash: str
    extractor: str
    prompt_version: str
    concepts: dict[str, FoundConcept] = field(
        default_factory=dict
    )  # concept id -> how it was found
    # concept id -> the concept, stored or new: a missing one is created (id derived from its name)
    new_concepts: dict[str, Concept] = field(default_factory=dict)
    aliases: dict[str, list[str]] = field(default_factory=dict)  # concept id -> names to add
    keys: dict[str, list[str]] = field(default_factory=dict)  # concept id -> lookup keys to add
    links: dict[str, tuple[str, str, str, bool, tuple[str, ...]]] = field(default_factory=dict)
    # link id -> (source id, target id, relation, stated, source keys)
