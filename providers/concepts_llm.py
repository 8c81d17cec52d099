"""Concept extraction by a vendor model, through the case-record adapters' ``complete_json``
(same client, error mapping and retry layer; each SDK stays in its adapter).

The answer is validated against the prompt's schema; an ``id`` the model gives is kept only when
it is one of the candidates it was shown (else the name is matched like any other), relations
only between concepts it listed, and ``messageKey`` only when it is one of the record's evidence
keys (code checks the model's citations, as it checks evidence).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pydantic import ValidationError

from core.concepts import Concept, ExperienceInput, Extraction, FoundConcept, FoundRelation, norm
from core.errors import ConfigError, TerminalDraftError
from prompts.concepts import (
    CONCEPTS_PROMPT_VERSION,
    CONCEPTS_SCHEMA_NAME,
    ConceptsResponse,
    build_prompt,
    concepts_schema,
)


class LlmConceptExtractor:
    prompt_version = CONCEPTS_PROMPT_VERSION

    def __init__(self, spec: str, adapter: Any = None) -> None:
        if adapter is None:
            from providers import get_drafter

            adapter = get_drafter(spec)
        if not hasattr(adapter, "complete_json"):
            raise ConfigError(
                f"{spec} cannot extract concepts", hint="use offline or openai / anthropic / gemini"
            )
        self.adapter = adapter
        self.model = adapter.model
        self.input_tokens = 0
        self.output_tokens = 0

    def extract(self, exp: ExperienceInput, candidates: Sequence[Concept]) -> Extraction:
        static, dynamic = build_prompt(exp, candidates)
        data, (tin, tout) = self.adapter.complete_json(
            static, dynamic, CONCEPTS_SCHEMA_NAME, concepts_schema()
        )
        self.input_tokens += tin
        self.output_tokens += tout
        try:
            r = ConceptsResponse.model_validate(data)
        except ValidationError as exc:
            raise TerminalDraftError(
                f"{self.model}: the answer does not match the concepts schema ({exc.error_count()} error(s))"
            ) from None
        offered = {c.id for c in candidates}
        keys = {k for k, _ in exp.evidence}
        found: dict[str, FoundConcept] = {}
        title, tags = norm(exp.title), {norm(t) for t in exp.tags}
        for c in r.concepts:
            name = " ".join(c.name.split())
            if not name or norm(name) in found:
                continue
            found[norm(name)] = FoundConcept(
                surface=name,
                kind=c.kind,
                source_key=c.messageKey if c.messageKey in keys else None,
                concept_id=c.id if c.id in offered else None,
                topic=norm(name) in tags or norm(name) in title,  # the record names it
            )
        rels: list[FoundRelation] = []
        for rel in r.relations:
            a, b = found.get(norm(rel.source)), found.get(norm(rel.target))
            if a is None or b is None or a is b:
                continue
            rels.append(
                FoundRelation(
                    a.surface,
                    b.surface,
                    rel.relation,
                    rel.stated,
                    rel.messageKey if rel.messageKey in keys else None,
                )
            )
        return Extraction(concepts=tuple(found.values()), relations=tuple(rels))
