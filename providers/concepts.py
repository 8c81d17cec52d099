"""Concept extractors (seed 003) behind one small interface: ``extract(experience, candidates)``
→ ``core.concepts.Extraction``.

    offline          the default: SudachiPy nouns and proper nouns, relations only from explicit
                     cue patterns in one sentence (``stages/concepts.py``); no model, no network
    <provider:model> a vendor model through the case-record adapters' ``complete_json``
                     (``providers/concepts_llm.py``, prompt ``prompts/concepts.py``)

``candidates`` are the stored concepts that may be the same as what the experience shows (a
model is asked to reuse their ids; the offline rules ignore them: matching is done after, by
lookup key, fuzzy match and the embedder, in ``flows/concepts.py``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from core.concepts import OFFLINE_EXTRACTOR, Concept, ExperienceInput, Extraction
from stages.concepts import OFFLINE_VERSION, extract


class ConceptExtractor(Protocol):
    model: str
    prompt_version: str

    def extract(self, exp: ExperienceInput, candidates: Sequence[Concept]) -> Extraction: ...


class OfflineConceptExtractor:
    model = OFFLINE_EXTRACTOR
    prompt_version = OFFLINE_VERSION

    def extract(self, exp: ExperienceInput, candidates: Sequence[Concept]) -> Extraction:
        return extract(exp)


def get_concept_extractor(spec: str | None) -> ConceptExtractor:
    """``offline`` (also ``extractive``, the offline drafter's name, and None) or a model spec."""
    if (
        not spec
        or spec.strip().lower() in ("offline", "extractive")
        or spec.startswith("extractive:")
    ):
        return OfflineConceptExtractor()
    from providers.concepts_llm import LlmConceptExtractor

    return LlmConceptExtractor(spec)
