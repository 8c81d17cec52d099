"""The concept stage of the backfill (seed 003): after the commit, every new or grown case record
is read for its concepts and stated relations, each concept is matched to a stored one (its id
reused) or made new, and the links learn (store/concepts.py). `pmem concepts rebuild` runs the same
stage over every memory from empty tables.

- Order: the memories in the order they were made (created_at, id), incrementally and on a
  rebuild, so both reach the same concepts, links and weights.
- Resumable like the other stages: an experience already read at the memory's current revision
  with the same extractor is skipped; what an extractor returned is kept in
  ``<runs>/concepts/<memory id>.json`` with the inputs' hash and reused as long as they match (a
  model is not asked twice for the same record, a rebuild reuses it too).
- A memory that is no longer active (deleted, merged away) is withdrawn: its links are
  recomputed from the experiences that remain.
- Matching (``Resolver``): the model's chosen id (only among the candidates it was shown), else
  a stored concept with the same lookup key (name, alias, reading; NFKC + case folded), else a
  fuzzy match (rapidfuzz), else Japanese ↔ English by the local embedder's vectors of the names;
  otherwise a new concept, its id derived from its name.

Logs and returned counts carry ids and numbers only.
"""

from __future__ import annotations

import json
import logging
import os
import re
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from core.concepts import (
    Concept,
    ExperienceInput,
    Extraction,
    FoundConcept,
    FoundRelation,
    ResolvedExperience,
    concept_id,
    language_of,
    link_id,
    norm,
    safe_name,
)
from core.private import private_dir, write_private
from core.settings import CONCEPT_CACHE
from providers.concepts import ConceptExtractor, get_concept_extractor
from stages.concepts import VECTOR_MIN, lookup_keys
from store.concepts import ConceptStore
from store.db import Database

_log = logging.getLogger("pmem.concepts")

ENV = "PMEM_CONCEPTS_LLM"  # the extractor of the backfill's concept stage (default: offline)
RESULT_VERSION = 1
CHUNK = 50  # records resolved, then stored in one transaction


# ---------------------------------------------------------------- matching names to concepts


class Resolver:
    """Stored concepts in memory for one stage run: lookup keys, fuzzy candidates and name
    vectors, kept current as concepts are added."""

    def __init__(self, store: ConceptStore, embedder: Any = None) -> None:
        self.store = store
        self.embedder = embedder
        self.by_key: dict[str, Concept] = {}
        self.concepts: dict[str, Concept] = {}
        self.latin_keys: list[str] = []
        self.ja_keys: list[str] = []
        self.key_owner: dict[str, str] = {}
        self.vectors: dict[str, Any] = {}  # concept id -> unit vector (numpy)
        self._vec_cache: dict[str, Any] = {}
        self._matrix: dict[
            str, tuple[list[str], Any]
        ] = {}  # language -> (ids, their vectors stacked)
        self.reload()

    def reload(self) -> None:
        self.by_key.clear()
        self.concepts.clear()
        self.key_owner.clear()
        with self.store.db.connection() as conn:
            rows = conn.execute(
                "SELECT id, name, aliases, language, kind, first_memory_id, keys FROM concept_names"
            ).fetchall()
        for cid, name, aliases, lang, kind, first, keys in rows:
            c = Concept(cid, name, tuple(aliases), lang, kind, first)
            self._index(c, keys)
        if self.embedder is not None:
            import numpy as np

            for cid, v in self.store.embeddings(self.embedder.model).items():
                if cid in self.concepts:
                    self.vectors[cid] = _unit(np.asarray(v, dtype=np.float32))

    def _index(self, c: Concept, keys: Sequence[str]) -> None:
        self.concepts[c.id] = c
        for k in keys:
            own = self.by_key.get(k)
            if own is None or (norm(own.name) != k and norm(c.name) == k):
                self.by_key[k] = c
            if k not in self.key_owner:
                self.key_owner[k] = c.id
                (self.latin_keys if re.fullmatch(r"[a-z][a-z\- ]*", k) else self.ja_keys).append(k)

    def add(self, c: Concept, keys: Sequence[str]) -> None:
        self._index(c, keys)

    def resolve(self, found: FoundConcept) -> Concept | None:
        if found.concept_id and found.concept_id in self.concepts:
            return self.concepts[found.concept_id]
        for k in lookup_keys(found):
            if k in self.by_key:
                return self.by_key[k]
        c = self._fuzzy(norm(found.surface))
        if c is not None:
            return c
        return self._by_vector(found)

    def _fuzzy(self, me: str) -> Concept | None:
        from rapidfuzz import fuzz, process

        from stages.concepts import FUZZY_MIN

        latin = bool(re.fullmatch(r"[a-z][a-z\- ]*", me))
        if (latin and len(me) < 5) or (not latin and len(me) < 4):
            return None
        keys = self.latin_keys if latin else self.ja_keys
        got = process.extractOne(me, keys, scorer=fuzz.ratio, score_cutoff=FUZZY_MIN)
        if got is None:
            return None
        return self.concepts.get(self.key_owner[got[0]])

    def embed(self, names: Sequence[str]) -> None:
        """Embed the names not embedded yet, in one call."""
        if self.embedder is None:
            return
        todo = list(dict.fromkeys(n for n in names if n not in self._vec_cache))
        if not todo:
            return
        import numpy as np

        for n, v in zip(todo, self.embedder.embed(todo), strict=True):
            self._vec_cache[n] = _unit(np.asarray(v, dtype=np.float32))

    def vector(self, name: str) -> Any:
        if self.embedder is None:
            return None
        self.embed([name])
        return self._vec_cache[name]

    def _vectors_of(self, language: str) -> list[str]:
        """The ids of the concepts of ``language``, each with its name's vector: the missing ones
        are embedded at once and stored (a concept's vector is made once, when first needed)."""
        ids = [cid for cid, c in self.concepts.items() if c.language == language]
        missing = [cid for cid in ids if cid not in self.vectors]
        if missing:
            self.embed([self.concepts[cid].name for cid in missing])
            for cid in missing:
                self.vectors[cid] = self._vec_cache[self.concepts[cid].name]
            self.store.set_embeddings(
                self.embedder.model, {cid: [float(x) for x in self.vectors[cid]] for cid in missing}
            )
        return ids

    def prefetch(self, found: Sequence[FoundConcept]) -> None:
        """Embed in one call the names of a record that no key matches and that will be compared
        with the other language's concepts (batched: a third of the time of one by one)."""
        if self.embedder is None:
            return
        langs = {c.language for c in self.concepts.values()}
        self.embed(
            [
                f.surface
                for f in found
                if not any(k in self.by_key for k in lookup_keys(f))
                and {"ja": "en", "en": "ja"}.get(f.language or language_of(f.surface)) in langs
            ]
        )

    def _by_vector(self, found: FoundConcept) -> Concept | None:
        """Japanese ↔ English only: a name of one is compared with the concepts of the other
        (the embedder is not loaded while the store has none of the other language)."""
        lang = found.language or language_of(found.surface)
        other = {"ja": "en", "en": "ja"}.get(lang)
        if (
            self.embedder is None
            or other is None
            or not any(c.language == other for c in self.concepts.values())
        ):
            return None
        ids = self._vectors_of(other)
        import numpy as np

        cached = self._matrix.get(other)
        if cached is None or cached[0] != ids:  # stacked again only when concepts were added
            cached = self._matrix[other] = (ids, np.stack([self.vectors[c] for c in ids]))
        sims = cached[1] @ self.vector(found.surface)
        i = int(np.argmax(sims))
        return self.concepts[ids[i]] if float(sims[i]) >= VECTOR_MIN else None


def _unit(v: Any) -> Any:
    import numpy as np

    n = float(np.linalg.norm(v))
    return v / n if n else v


# ---------------------------------------------------------------- one experience


def resolve(
    exp: ExperienceInput,
    extraction: Extraction,
    resolver: Resolver,
    *,
    extractor: str,
    prompt_version: str,
) -> ResolvedExperience:
    """Every found concept to a stored or a new concept id; relations to link ids. A flagged
    name (the secret guard) is dropped here already, with its relations."""
    out = ResolvedExperience(
        memory_id=exp.memory_id,
        revision=exp.revision,
        inputs_hash=exp.inputs_hash,
        extractor=extractor,
        prompt_version=prompt_version,
    )
    by_surface: dict[str, str] = {}
    resolver.prefetch(extraction.concepts)
    for f in extraction.concepts:
        if not safe_name(f.surface) or (f.reading and not safe_name(f.reading)):
            continue
        c = resolver.resolve(f)
        if c is None:
            cid = concept_id(f.surface)
            c = out.new_concepts.get(cid) or Concept(
                cid, f.surface, (), f.language or language_of(f.surface), f.kind, exp.memory_id
            )
        # every concept the record shows is made sure of (a stored one may have gone since the
        # resolver read it: its last experience taken back earlier in this run)
        out.new_concepts[c.id] = c
        had = out.concepts.get(c.id)
        if had is None or (had.source_key is None and f.source_key):
            out.concepts[c.id] = f
        if had is not None and had.topic != out.concepts[c.id].topic:  # one of its names is a topic
            out.concepts[c.id] = replace(out.concepts[c.id], topic=True)
        by_surface[norm(f.surface)] = c.id
    for r in extraction.relations:
        s, t = by_surface.get(norm(r.source)), by_surface.get(norm(r.target))
        if s is None or t is None or s == t:
            continue
        lid = link_id(s, t, r.relation, r.stated)
        keys = tuple(k for k in (r.source_key,) if k)
        if lid in out.links:
            keys = tuple(sorted(set(out.links[lid][4]) | set(keys)))
        out.links[lid] = (s, t, r.relation, r.stated, keys)
    return out


# ---------------------------------------------------------------- result files


def result_path(runs_dir: Path, memory_id: str) -> Path:
    return runs_dir / CONCEPT_CACHE / (memory_id.replace(":", "-").replace("/", "-") + ".json")


def _read_result(
    path: Path, exp: ExperienceInput, extractor: ConceptExtractor
) -> Extraction | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if (
        data.get("version"),
        data.get("inputs_hash"),
        data.get("extractor"),
        data.get("prompt_version"),
    ) != (RESULT_VERSION, exp.inputs_hash, extractor.model, extractor.prompt_version):
        return None
    try:
        return Extraction(
            concepts=tuple(FoundConcept(**c) for c in data["concepts"]),
            relations=tuple(FoundRelation(**r) for r in data["relations"]),
        )
    except (KeyError, TypeError):
        return None


def _write_result(
    path: Path, exp: ExperienceInput, extractor: ConceptExtractor, ex: Extraction
) -> None:
    private_dir(path.parent)
    concepts = [c for c in ex.concepts if safe_name(c.surface)]
    body = {
        "version": RESULT_VERSION,
        "memory_id": exp.memory_id,
        "revision": exp.revision,
        "inputs_hash": exp.inputs_hash,
        "extractor": extractor.model,
        "prompt_version": extractor.prompt_version,
        "concepts": [c.__dict__ for c in concepts],
        "relations": [r.__dict__ for r in ex.relations],
    }
    write_private(path, json.dumps(body, ensure_ascii=False, sort_keys=True, indent=1))


# ---------------------------------------------------------------- the stage


def extract_concepts(
    db: Database,
    runs_dir: Path,
    *,
    extractor: ConceptExtractor | None = None,
    embedder: Any = None,
    run_id: str | None = None,
    rebuild: bool = False,
    progress: Callable[[int], None] | None = None,
) -> dict[str, Any]:
    """Bring the concept memory up to date with the memories (see the module doc). ``rebuild``
    empties the concept tables first and reads every memory again. Returns counts."""
    store = ConceptStore(db)
    extractor = extractor or get_concept_extractor(os.environ.get(ENV))
    if embedder is not None and not getattr(embedder, "local", False):
        embedder = None  # concept names go to a local embedder only
    counts: dict[str, Any] = {
        "extractor": extractor.model,
        "experiences_read": 0,
        "results_reused": 0,
        "experiences_withdrawn": 0,
        "concepts_added": 0,
        "links_strengthened": 0,
        "links_withdrawn": 0,
    }
    if rebuild:
        store.reset()
    for mid in store.withdrawn_candidates():
        n = store.withdraw(mid, run_id=run_id)
        counts["experiences_withdrawn"] += n["experiences_withdrawn"]
        counts["links_withdrawn"] += n["links_withdrawn"]
    state = store.experience_state()
    todo = [
        mid
        for mid, rev in store.active_memories()
        if state.get(mid, (None, None, None, None))[0::2] != (rev, extractor.model)
        or state[mid][3] != extractor.prompt_version
    ]
    if not todo:
        return counts
    resolver = Resolver(store, embedder)
    for chunk_start in range(0, len(todo), CHUNK):
        batch: list[ResolvedExperience] = []
        for exp in store.inputs(todo[chunk_start : chunk_start + CHUNK]):
            path = result_path(runs_dir, exp.memory_id)
            ex = _read_result(path, exp, extractor)
            if ex is None:
                candidates = _candidates(exp, resolver) if extractor.model != "offline" else []
                ex = extractor.extract(exp, candidates)
                _write_result(path, exp, extractor, ex)
            else:
                counts["results_reused"] += 1
            resolved = resolve(
                exp,
                ex,
                resolver,
                extractor=extractor.model,
                prompt_version=extractor.prompt_version,
            )
            for c in resolved.new_concepts.values():  # the next record of the chunk finds them
                f = resolved.concepts.get(c.id)
                resolver.add(c, [norm(c.name), *([norm(f.reading)] if f and f.reading else [])])
            batch.append(resolved)
        n = store.apply_many(batch, run_id=run_id)  # one transaction per chunk
        for k in ("concepts_added", "links_strengthened", "links_withdrawn"):
            counts[k] += n[k]
        counts["experiences_read"] += len(batch)
        if progress is not None:
            progress(len(batch))
    _log.info(
        "concepts: %d experiences read (%d reused), %d concepts added, %d links strengthened",
        counts["experiences_read"],
        counts["results_reused"],
        counts["concepts_added"],
        counts["links_strengthened"],
    )
    return counts


def _candidates(exp: ExperienceInput, resolver: Resolver) -> list[Concept]:
    """The stored concepts a model is shown for one record: those the offline rules' concepts
    resolve to (same key, fuzzy, across languages)."""
    from stages.concepts import extract

    out: dict[str, Concept] = {}
    for f in extract(exp).concepts:
        c = resolver.resolve(f)
        if c is not None:
            out.setdefault(c.id, c)
    return list(out.values())


def backfill_stage(
    db: Database, runs_dir: Path, *, run_id: str | None, embed: bool
) -> dict[str, Any]:
    """The backfill's call after its commit and index steps: never fails the run (derived data;
    reported in the counts, `pmem concepts rebuild` catches up). A vendor model
    (``PMEM_CONCEPTS_LLM``) is used only under the owner's remembered consent (scope
    ``concepts``); without it nothing is sent and the counts say ``ConsentRequired``."""
    try:
        spec = os.environ.get(ENV)
        if spec and spec.strip().lower() not in ("offline", "extractive"):
            from core.settings import get_settings
            from flows.consent import drafting_target, require

            target = drafting_target(spec, "concepts")
            if target is not None:  # the memories would leave the machine: only under consent
                require(get_settings(), target)
        embedder = None
        if embed:
            from providers.embeddings import embedder_from_env, is_local_spec

            if is_local_spec():
                embedder = embedder_from_env()
        return extract_concepts(db, runs_dir, embedder=embedder, run_id=run_id)
    except Exception as err:  # noqa: BLE001 - derived data only; reported, never fatal
        _log.warning(
            "concept extraction failed (%s); run `pmem concepts rebuild`", type(err).__name__
        )
        return {"error": type(err).__name__}
