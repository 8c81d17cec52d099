"""The concept-extraction prompt (seed 003), its response schema and version.

Static instructions first (provider prompt caches apply), then one case record: its id, title,
summary, stated facts and evidence excerpts (message key + text), each passed through the secret
guard first, and the existing concepts that may be the same as what it shows (id, name, aliases),
so that the model reuses their ids. Relations only when the text states them; a guess is marked
``stated: false`` and kept apart.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from core.concepts import Concept, ExperienceInput
from core.secrets import redact_messages

CONCEPTS_PROMPT_VERSION = "concepts-v2"  # v2: about, at
CONCEPTS_SCHEMA_NAME = "concepts"
MAX_EXCERPT_CHARS = 1_500
MAX_CANDIDATES = 60

Relation = Literal["with", "led_to", "felt", "for", "part_of", "about", "at", "related"]


class ConceptItem(BaseModel):
    model_config = ConfigDict(extra="ignore")

    name: str = Field(min_length=1, max_length=40)
    id: str = ""  # an existing concept's id, or "" for a new one
    kind: Literal["noun", "proper", "feeling"] = "noun"
    messageKey: str = ""  # the evidence message it appears in, or "" (the record)


class RelationItem(BaseModel):
    model_config = ConfigDict(extra="ignore")

    source: str = Field(min_length=1)
    target: str = Field(min_length=1)
    relation: Relation
    stated: bool
    messageKey: str = ""


class ConceptsResponse(BaseModel):
    model_config = ConfigDict(extra="ignore")

    concepts: list[ConceptItem] = Field(default_factory=list)
    relations: list[RelationItem] = Field(default_factory=list)


def concepts_schema() -> dict[str, Any]:
    return ConceptsResponse.model_json_schema()


STATIC = """You organise a person's memory. The input is one experience of theirs (a case record drafted from their
conversations, with verbatim excerpts) and the concepts already in their memory that may be the same as
what this experience shows.

Extract the concepts of the experience: the activities, places, people, things and feelings it is about
(short names, as the person would say them: 登山, 友人, 気分転換, 丹沢). When an existing concept is the
same thing (also across languages: 登山 and hiking), give its `id`; otherwise leave `id` empty to propose
a new one. Give each concept's `messageKey` when an excerpt shows it.

Extract relations between two of these concepts only when the text states the relation (友人と登山した:
登山 with 友人; 登山で気分転換になった: 登山 led_to 気分転換; とても楽しかった about 登山: 登山 felt 楽しい).
Two concepts that merely appear together have no relation. If you infer a relation the text does not
state, set `stated` to false: facts and guesses stay apart. Relations: with, led_to (source caused or
helped the target), felt (the source made the person feel the target), for (source is done for the
target), part_of (父の体調: 体調 part_of 父), about (DBを選定した: 選定 about DB), at (丹沢で登山した:
登山 at 丹沢), related. Use the concepts' names in `source` and `target`. Answer in JSON."""


def build_prompt(exp: ExperienceInput, candidates: Sequence[Concept]) -> tuple[str, str]:
    texts = redact_messages(
        [
            exp.title,
            exp.summary,
            *exp.stated_facts,
            *(t[:MAX_EXCERPT_CHARS] for _, t in exp.evidence),
        ]
    )
    title, summary, rest = texts[0], texts[1], texts[2:]
    facts, excerpts = rest[: len(exp.stated_facts)], rest[len(exp.stated_facts) :]
    lines = [f"Experience {exp.memory_id}", f"Title: {title}", f"Summary: {summary}"]
    if facts:
        lines += ["Stated facts:", *(f"- {f}" for f in facts)]
    lines.append("Excerpts (message key, verbatim text):")
    for (key, _), text in zip(exp.evidence, excerpts, strict=True):
        lines.append(f"[{key}] {text}")
    lines += ["", "Existing concepts that may be the same (id, name, aliases):"]
    if not candidates:
        lines.append("(none)")
    for c in list(candidates)[:MAX_CANDIDATES]:
        alias = f" ({', '.join(c.aliases)})" if c.aliases else ""
        lines.append(f"- {c.id} {c.name}{alias}")
    return STATIC, "\n".join(lines)
