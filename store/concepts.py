"""Seed 003's concept memory in PostgreSQL (migration 0021; docs/adr/0021-concepts.md).

Tables: ``concepts`` (id, name, aliases, lookup keys, language, the experience it was created
from), ``concept_embeddings`` (a name's vector per embedding model: 登山 ↔ hiking),
``experiences`` (one per case record that was read: a memory id and the revision read),
``experience_links`` (concept ↔ experience, with the evidence message key), ``concept_links``
(source → target, relation, stated or inferred, weight, the supporting memory ids and the
evidence messages that state it) and ``concept_link_updates`` (append-only: which experience
moved which link from what to what).

Reading (what `pmem related`, `related_memories` and `pmem graph` use):

- ``find(name)`` / ``find_many(names)``: a concept by its name or any alias or reading, compared
  after NFKC + case folding (``core.concepts.norm``): ``find("Ｔａｎｚａｗａ")`` finds 丹沢 when
  "tanzawa" is one of its keys;
- ``candidates(keys)``: every concept having one of the given lookup keys;
- ``get(id)``, ``concepts()``, ``concepts_of(memory_id)``;
- ``links_of(concept_id, min_weight=…)``: the links at a concept, both directions, heaviest
  first, each with the concept at the other end (``ConceptLink.other``) and its supporting
  memory ids; ``links_from(ids, min_weight)`` the same for many concepts in one query (hops);
- ``experiences_of(concept_id)``: the memory ids of the active case records showing a concept;
- ``evidence_keys(memory_ids)``: per memory, the ledger message keys its evidence quotes (the raw
  record one step from the experience), the keys where its concepts were found first;
- ``links()``: every link (the graph); ``updates(link_id=…, memory_id=…)``: the weight log;
- ``embeddings(model)``: the stored name vectors of one embedding model.

Writing: ``apply(ResolvedExperience)`` stores what one case record shows, in one transaction:
new concepts, the experience's concept links (a link it no longer states is withdrawn), one
strengthening per (link, experience), the log; ``withdraw(memory_id)`` takes an experience back
(a deleted or corrected memory: the weights are recomputed from the remaining supporters);
``erase(conn, memory_id)`` is ``pmem forget``'s: the same, and the log rows that name it go too.
Every name, alias and reading passes the secret guard (a flagged one is dropped with its links).
Writes are serialized by one advisory lock (concept names are unique across the store).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from psycopg import Connection
from psycopg.rows import dict_row

from core.concepts import (
    Concept,
    ConceptLink,
    ExperienceInput,
    ResolvedExperience,
    WeightUpdate,
    link_id,
    link_key,
    norm,
    safe_name,
    weight_for,
)
from store.db import Database

#: a name recurs once this many experiences show it (or one names it as its topic); it is a
#: concept when it recurs or a stated relation joins it to one that does: a word of one record
#: that relates to nothing indexes nothing beyond that record, which search finds by itself; the
#: seed's unit of learning is the independent experience, and two is the least that links two
MIN_EXPERIENCES = 2

_LOCK = "SELECT pg_advisory_xact_lock(hashtext('pmem-concepts'))"
_TABLES = (
    "concept_link_updates",
    "concept_relations",
    "experience_links",
    "experiences",
    "concept_embeddings",
    "concept_names",
)


def _cur(conn: Connection) -> Any:
    return conn.cursor(row_factory=dict_row)


def _concept(r: dict[str, Any]) -> Concept:
    return Concept(
        id=r["id"],
        name=r["name"],
        aliases=tuple(r["aliases"]),
        language=r["language"],
        kind=r["kind"],
        first_memory_id=r["first_memory_id"],
    )


class ConceptStore:
    def __init__(self, db: Database) -> None:
        self.db = db

    # ------------------------------------------------------------ concepts

    def get(self, concept_id: str) -> Concept | None:
        with self.db.connection() as conn:
            row = (
                _cur(conn).execute("SELECT * FROM concepts WHERE id = %s", (concept_id,)).fetchone()
            )
        return _concept(row) if row else None

    def find(self, name: str) -> Concept | None:
        """The concept named ``name`` (or having it as an alias or reading), compared after NFKC
        and case folding; the concept whose own name matches wins over an alias."""
        key = norm(name)
        if not key:
            return None
        with self.db.connection() as conn:
            row = (
                _cur(conn)
                .execute(
                    """SELECT * FROM concepts WHERE norm = %(k)s OR keys @> ARRAY[%(k)s]
                   ORDER BY (norm = %(k)s) DESC, id LIMIT 1""",
                    {"k": key},
                )
                .fetchone()
            )
        return _concept(row) if row else None

    def find_many(self, names: Iterable[str]) -> dict[str, Concept]:
        """``norm(name)`` → concept, for the names that have one (name first, then alias)."""
        keys = sorted({norm(n) for n in names if norm(n)})
        found: dict[str, Concept] = {}
        for c, matched in self._by_keys(keys):
            if matched not in found or norm(c.name) == matched:
                found[matched] = c
        return found

    def candidates(self, keys: Iterable[str]) -> list[Concept]:
        """Every concept one of whose lookup keys (normalised name, aliases, readings) is in
        ``keys`` (already normalised with ``core.concepts.norm``)."""
        out: dict[str, Concept] = {}
        for c, _ in self._by_keys(sorted(set(keys))):
            out.setdefault(c.id, c)
        return list(out.values())

    def _by_keys(self, keys: list[str]) -> list[tuple[Concept, str]]:
        if not keys:
            return []
        with self.db.connection() as conn:
            rows = (
                _cur(conn)
                .execute(
                    """SELECT c.*, k AS matched FROM concepts c, unnest(c.keys) k
                   WHERE c.keys && %(keys)s::text[] AND k = ANY(%(keys)s) ORDER BY c.id""",
                    {"keys": keys},
                )
                .fetchall()
            )
        return [(_concept(r), r["matched"]) for r in rows]

    def concepts(self) -> list[Concept]:
        """Every concept, by name."""
        with self.db.connection() as conn:
            rows = _cur(conn).execute("SELECT * FROM concepts ORDER BY norm").fetchall()
        return [_concept(r) for r in rows]

    def concepts_of(self, memory_id: str) -> list[Concept]:
        """The concepts an experience shows."""
        with self.db.connection() as conn:
            rows = (
                _cur(conn)
                .execute(
                    """SELECT c.* FROM experience_links l JOIN concepts c ON c.id = l.concept_id
                   WHERE l.memory_id = %s ORDER BY c.norm""",
                    (memory_id,),
                )
                .fetchall()
            )
        return [_concept(r) for r in rows]

    def embeddings(self, model: str) -> dict[str, list[float]]:
        """concept id → the stored vector of its name for ``model``."""
        with self.db.connection() as conn:
            rows = conn.execute(
                "SELECT concept_id, embedding::text FROM concept_embeddings WHERE model = %s",
                (model,),
            ).fetchall()
        return {r[0]: [float(x) for x in r[1].strip("[]").split(",") if x] for r in rows}

    def set_embeddings(self, model: str, vectors: Mapping[str, Sequence[float]]) -> int:
        if not vectors:
            return 0
        with self.db.connection() as conn, conn.transaction(), conn.cursor() as cur:
            cur.executemany(
                """INSERT INTO concept_embeddings (concept_id, model, dim, embedding)
                   SELECT %s, %s, %s, %s::halfvec WHERE EXISTS (SELECT 1 FROM concept_names WHERE id = %s)
                   ON CONFLICT (concept_id, model) DO UPDATE
                   SET dim = EXCLUDED.dim, embedding = EXCLUDED.embedding""",
                [
                    (cid, model, len(v), "[" + ",".join(f"{float(x):.6g}" for x in v) + "]", cid)
                    for cid, v in vectors.items()
                ],
            )
        return len(vectors)

    # ------------------------------------------------------------ links and experiences

    def links_of(
        self, concept_id: str, *, min_weight: float = 0.0, stated_only: bool = False
    ) -> list[ConceptLink]:
        """The links at ``concept_id`` in both directions, heaviest first (then by the other
        concept's name): ``other`` is the concept at the other end, ``outgoing`` whether the
        stated direction starts here, ``experiences`` the supporting memory ids (sorted)."""
        return self.links_from([concept_id], min_weight=min_weight, stated_only=stated_only).get(
            concept_id, []
        )

    def links_from(
        self, concept_ids: Iterable[str], *, min_weight: float = 0.0, stated_only: bool = False
    ) -> dict[str, list[ConceptLink]]:
        """``links_of`` for many concepts in one query: concept id → its links."""
        ids = sorted(set(concept_ids))
        if not ids:
            return {}
        with self.db.connection() as conn:
            rows = (
                _cur(conn)
                .execute(
                    """SELECT l.*, c0.id AS at_id, o.id AS o_id, o.name AS o_name, o.aliases AS o_aliases,
                          o.language AS o_language, o.kind AS o_kind,
                          o.first_memory_id AS o_first_memory_id, (l.source_id = c0.id) AS outgoing
                     FROM concept_links l
                     JOIN concepts c0 ON c0.id IN (l.source_id, l.target_id)
                     JOIN concepts o ON o.id = CASE WHEN l.source_id = c0.id THEN l.target_id ELSE l.source_id END
                    WHERE c0.id = ANY(%(ids)s) AND l.weight >= %(w)s AND (l.stated OR NOT %(stated)s)
                    ORDER BY c0.id, l.weight DESC, o.norm, l.relation, l.stated DESC""",
                    {"ids": ids, "w": min_weight, "stated": stated_only},
                )
                .fetchall()
            )
        out: dict[str, list[ConceptLink]] = {}
        for r in rows:
            other = Concept(
                id=r["o_id"],
                name=r["o_name"],
                aliases=tuple(r["o_aliases"]),
                language=r["o_language"],
                kind=r["o_kind"],
                first_memory_id=r["o_first_memory_id"],
            )
            out.setdefault(r["at_id"], []).append(_link(r, other, r["outgoing"]))
        return out

    def links(self) -> list[ConceptLink]:
        """Every link (source → target as stored), heaviest first."""
        with self.db.connection() as conn:
            rows = (
                _cur(conn)
                .execute("SELECT * FROM concept_links ORDER BY weight DESC, id")
                .fetchall()
            )
        return [_link(r, None, True) for r in rows]

    def experiences_of(self, concept_id: str) -> list[str]:
        """The memory ids of the active case records that show ``concept_id``, sorted."""
        with self.db.connection() as conn:
            rows = conn.execute(
                """SELECT l.memory_id FROM experience_links l JOIN memories m ON m.id = l.memory_id
                   WHERE l.concept_id = %s AND m.status = 'active' ORDER BY l.memory_id""",
                (concept_id,),
            ).fetchall()
        return [r[0] for r in rows]

    def evidence_keys(self, memory_ids: Iterable[str]) -> dict[str, list[str]]:
        """memory id → the ledger message keys behind the experience: first the keys where its
        concepts were found (experience_links.source_key), then every other key its evidence
        quotes, each once, in order."""
        ids = sorted(set(memory_ids))
        if not ids:
            return {}
        out: dict[str, list[str]] = {m: [] for m in ids}
        with self.db.connection() as conn:
            rows = conn.execute(
                """SELECT memory_id, source_key, 0 AS rank FROM experience_links l
                    WHERE memory_id = ANY(%(ids)s) AND source_key IS NOT NULL
                      AND EXISTS (SELECT 1 FROM concepts c WHERE c.id = l.concept_id)
                   UNION
                   SELECT memory_id, source_key, 1 FROM evidence WHERE memory_id = ANY(%(ids)s)
                   ORDER BY 1, 3, 2""",
                {"ids": ids},
            ).fetchall()
        for mid, key, _ in rows:
            if key not in out[mid]:
                out[mid].append(key)
        return out

    def updates(
        self, *, link_id: str | None = None, memory_id: str | None = None
    ) -> list[WeightUpdate]:
        """The weight log, oldest first (all of it, or one link's, or one experience's)."""
        with self.db.connection() as conn:
            rows = (
                _cur(conn)
                .execute(
                    """SELECT * FROM concept_link_updates
                   WHERE (%(l)s::text IS NULL OR link_id = %(l)s) AND (%(m)s::text IS NULL OR memory_id = %(m)s)
                   ORDER BY seq""",
                    {"l": link_id, "m": memory_id},
                )
                .fetchall()
            )
        return [
            WeightUpdate(
                seq=r["seq"],
                link_id=r["link_id"],
                memory_id=r["memory_id"],
                revision=r["revision"],
                action=r["action"],
                weight_before=r["weight_before"],
                weight_after=r["weight_after"],
            )
            for r in rows
        ]

    def replayed_weights(self) -> dict[str, float]:
        """Every link's weight recomputed from the log alone (its supporters are the memories
        whose last entry for it is a strengthening): equals ``concept_links.weight``."""
        last: dict[tuple[str, str], str] = {}
        for u in self.updates():
            last[(u.link_id, u.memory_id)] = u.action
        stated = self._stated()
        counts: dict[str, int] = {}
        for (lid, _), action in last.items():
            counts[lid] = counts.get(lid, 0) + (action == "strengthen")
        return {lid: weight_for(n, stated.get(lid, True)) for lid, n in counts.items() if n}

    def _stated(self) -> dict[str, bool]:
        with self.db.connection() as conn:
            return {r[0]: r[1] for r in conn.execute("SELECT id, stated FROM concept_relations")}

    # ------------------------------------------------------------ the stage's bookkeeping

    def experience_state(self) -> dict[str, tuple[int, str, str, str]]:
        """memory id → (revision, inputs hash, extractor, prompt version) of what was read."""
        with self.db.connection() as conn:
            rows = conn.execute(
                "SELECT memory_id, revision, inputs_hash, extractor, prompt_version FROM experiences"
            ).fetchall()
        return {r[0]: (r[1], r[2], r[3], r[4]) for r in rows}

    def active_memories(self) -> list[tuple[str, int]]:
        """(memory id, current revision) of every active memory, in the order they were made
        (created_at, id): the order extraction reads them, incrementally and on a rebuild."""
        with self.db.connection() as conn:
            rows = conn.execute(
                "SELECT id, current_revision FROM memories WHERE status = 'active' ORDER BY created_at, id"
            ).fetchall()
        return [(r[0], r[1]) for r in rows]

    def inputs(self, memory_ids: Sequence[str]) -> list[ExperienceInput]:
        """What extraction reads of each active memory: its current revision's title, summary
        and stated facts, and its evidence excerpts (message key, verbatim text), in key order;
        after a correction only the evidence the correction (or a later revision) brought: what
        the person took back no longer states a relation."""
        ids = list(dict.fromkeys(memory_ids))
        if not ids:
            return []
        with self.db.connection() as conn:
            mems = {
                r["id"]: r
                for r in _cur(conn)
                .execute(
                    """SELECT id, current_revision, title, canonical_summary, stated_facts, tags FROM memories
                    WHERE id = ANY(%s) AND status = 'active'""",
                    (ids,),
                )
                .fetchall()
            }
            ev: dict[str, list[tuple[str, str]]] = {}
            for mid, key, text in conn.execute(
                """SELECT e.memory_id, e.source_key, e.text FROM evidence e
                    WHERE e.memory_id = ANY(%s)
                      AND e.revision_added >= coalesce((SELECT max(r.revision) FROM memory_revisions r
                                                         WHERE r.memory_id = e.memory_id
                                                           AND r.reason IN ('correction', 'restore')), 0)
                    ORDER BY e.memory_id, e.source_key, e.id""",
                (ids,),
            ):
                ev.setdefault(mid, []).append((key, text))
        out = []
        for mid in ids:
            r = mems.get(mid)
            if r is None:
                continue
            out.append(
                ExperienceInput(
                    memory_id=mid,
                    revision=r["current_revision"],
                    title=r["title"] or "",
                    summary=r["canonical_summary"] or "",
                    stated_facts=tuple(r["stated_facts"] or ()),
                    evidence=tuple(ev.get(mid, [])),
                    tags=tuple(r["tags"] or ()),
                )
            )
        return out

    def withdrawn_candidates(self) -> list[str]:
        """Experiences whose memory is no longer active (deleted, merged away, erased)."""
        with self.db.connection() as conn:
            rows = conn.execute(
                """SELECT e.memory_id FROM experiences e LEFT JOIN memories m ON m.id = e.memory_id
                   WHERE m.id IS NULL OR m.status <> 'active' ORDER BY e.memory_id"""
            ).fetchall()
        return [r[0] for r in rows]

    def counts(self) -> dict[str, int]:
        """Concepts, experiences, experience links (to concepts), links (between two concepts),
        log rows; ``names`` / ``relations``: every name and stated relation stored, concepts or
        not yet (a name one experience shows, not as its topic)."""
        with self.db.connection() as conn:
            row = conn.execute(
                """SELECT (SELECT count(*) FROM concepts), (SELECT count(*) FROM experiences),
                          (SELECT count(*) FROM experience_links l JOIN concepts c ON c.id = l.concept_id),
                          (SELECT count(*) FROM concept_links),
                          (SELECT count(*) FROM concept_link_updates),
                          (SELECT count(*) FROM concept_names), (SELECT count(*) FROM concept_relations)"""
            ).fetchone()
        assert row is not None
        return dict(
            zip(
                (
                    "concepts",
                    "experiences",
                    "experience_links",
                    "concept_links",
                    "updates",
                    "names",
                    "relations",
                ),
                row,
                strict=True,
            )
        )

    # ------------------------------------------------------------ writing

    def apply(self, exp: ResolvedExperience, *, run_id: str | None = None) -> dict[str, int]:
        """Store what one case record shows (see the module doc). Idempotent: applying the same
        resolved experience again changes no weight and logs nothing."""
        with self.db.connection() as conn, conn.transaction():
            conn.execute(_LOCK)
            return self._apply(conn, exp, run_id)

    def apply_many(
        self, exps: Sequence[ResolvedExperience], *, run_id: str | None = None
    ) -> dict[str, int]:
        """``apply`` for several experiences, in order, in one transaction (the stage's chunks)."""
        total = {"concepts_added": 0, "links_strengthened": 0, "links_withdrawn": 0}
        if not exps:
            return total
        with self.db.connection() as conn, conn.transaction():
            conn.execute(_LOCK)
            for exp in exps:
                for k, v in self._apply(conn, exp, run_id).items():
                    total[k] += v
        return total

    def withdraw(self, memory_id: str, *, run_id: str | None = None) -> dict[str, int]:
        """Take an experience back (its memory was deleted, merged away or no longer exists):
        its links lose it as a supporter and are recomputed (removed when none remain), its
        concept links go, concepts left without any experience go. Logged."""
        with self.db.connection() as conn, conn.transaction():
            conn.execute(_LOCK)
            return self._withdraw(conn, memory_id, run_id, erase=False)

    def withdraw_in(self, conn: Connection, memory_id: str) -> dict[str, int]:
        """``withdraw`` inside the caller's transaction: `pmem delete` and a merge take the
        experience back at once, with the memory's status (no rebuild needed). A store without
        the concept tables (an old schema mid-upgrade) has nothing to withdraw."""
        if conn.execute("SELECT to_regclass('experiences')").fetchone() == (None,):
            return {"links_withdrawn": 0, "experiences_withdrawn": 0}
        conn.execute(_LOCK)
        return self._withdraw(conn, memory_id, None, erase=False)

    def erase(self, conn: Connection, memory_id: str) -> dict[str, int]:
        """``pmem forget``'s part, inside its transaction: withdraw the experience and delete
        every log row naming the memory (the remaining log still explains every weight)."""
        conn.execute(_LOCK)
        return self._withdraw(conn, memory_id, None, erase=True)

    def reset(self) -> None:
        """Empty every concept table (`pmem concepts rebuild` starts from here)."""
        with self.db.connection() as conn, conn.transaction():
            conn.execute(_LOCK)
            for t in _TABLES:
                conn.execute(f"DELETE FROM {t}")  # noqa: S608 - fixed names

    def _apply(
        self, conn: Connection, exp: ResolvedExperience, run_id: str | None
    ) -> dict[str, int]:
        counts = {"concepts_added": 0, "links_strengthened": 0, "links_withdrawn": 0}
        # the guard: a flagged name never reaches a row; its links go with it
        dropped = {
            cid
            for cid, f in exp.concepts.items()
            if not safe_name(f.surface) or (f.reading and not safe_name(f.reading))
        }
        dropped |= {cid for cid, c in exp.new_concepts.items() if not safe_name(c.name)}
        remap: dict[str, str] = {}
        new = [c for cid, c in sorted(exp.new_concepts.items()) if cid not in dropped]
        if new:
            norms = [norm(c.name) for c in new]
            known: dict[str, str] = dict(
                conn.execute(
                    "SELECT norm, id FROM concept_names WHERE norm = ANY(%s)", (norms,)
                ).fetchall()
            )
            fresh = [(c, n) for c, n in zip(new, norms, strict=True) if n not in known]
            with conn.cursor() as cur:
                cur.executemany(
                    """INSERT INTO concept_names (id, name, norm, aliases, keys, language, kind, first_memory_id)
                       VALUES (%s, %s, %s, '{}', %s, %s, %s, %s) ON CONFLICT DO NOTHING""",
                    [(c.id, c.name, n, [n], c.language, c.kind, exp.memory_id) for c, n in fresh],
                )
            counts["concepts_added"] = len(fresh)
            for c, n in zip(new, norms, strict=True):  # the name exists already: reuse its id
                if n in known and known[n] != c.id:
                    remap[c.id] = known[n]
        found = {remap.get(cid, cid): f for cid, f in exp.concepts.items() if cid not in dropped}
        touched = set(found) | {
            r[0]
            for r in conn.execute(
                "SELECT concept_id FROM experience_links WHERE memory_id = %s", (exp.memory_id,)
            )
        }

        wanted: dict[str, tuple[str, str, str, bool, tuple[str, ...]]] = {}
        for s, t, rel, stated, keys in exp.links.values():
            s, t = remap.get(s, s), remap.get(t, t)
            if s in dropped or t in dropped or s == t or s not in found or t not in found:
                continue
            s, t = link_key(s, t, rel)
            wanted[link_id(s, t, rel, stated)] = (s, t, rel, stated, keys)

        have = {
            r[0]
            for r in conn.execute(
                "SELECT id FROM concept_relations WHERE experiences @> ARRAY[%s]", (exp.memory_id,)
            )
        }
        for lid in sorted(have - set(wanted)):
            counts["links_withdrawn"] += self._unsupport(
                conn, lid, exp.memory_id, exp.revision, run_id, erase=False
            )

        conn.execute("DELETE FROM experience_links WHERE memory_id = %s", (exp.memory_id,))
        conn.execute(
            """INSERT INTO experiences (memory_id, revision, inputs_hash, extractor, prompt_version, run_id)
               VALUES (%s, %s, %s, %s, %s, %s)
               ON CONFLICT (memory_id) DO UPDATE SET revision = EXCLUDED.revision,
                   inputs_hash = EXCLUDED.inputs_hash, extractor = EXCLUDED.extractor,
                   prompt_version = EXCLUDED.prompt_version, run_id = EXCLUDED.run_id, extracted_at = now()""",
            (
                exp.memory_id,
                exp.revision,
                exp.inputs_hash,
                exp.extractor,
                exp.prompt_version,
                run_id,
            ),
        )
        with conn.cursor() as cur:
            cur.executemany(
                """INSERT INTO experience_links (memory_id, concept_id, surface, reading, source_key, topic)
                   VALUES (%s, %s, %s, %s, %s, %s) ON CONFLICT DO NOTHING""",
                [
                    (exp.memory_id, cid, f.surface, f.reading, f.source_key, f.topic)
                    for cid, f in sorted(found.items())
                ],
            )

        current = {
            r[0]: (float(r[1]), list(r[2]), list(r[3]))
            for r in conn.execute(
                "SELECT id, weight, experiences, source_keys FROM concept_relations WHERE id = ANY(%s) ORDER BY id FOR UPDATE",
                (sorted(wanted),),
            )
        }
        inserts, updates, log = [], [], []
        for lid, (s, t, rel, stated, keys) in sorted(wanted.items()):
            keys_in = {k for k in keys if k}
            if lid not in current:
                after = weight_for(1, stated)
                inserts.append((lid, s, t, rel, stated, after, [exp.memory_id], sorted(keys_in)))
                log.append((lid, exp.memory_id, exp.revision, "strengthen", 0.0, after, run_id))
                continue
            before, supporters, skeys = current[lid]
            new_keys = sorted(set(skeys) | keys_in)
            if exp.memory_id in supporters:  # once per (link, experience)
                if new_keys != skeys:
                    updates.append((before, supporters, new_keys, lid))
                continue
            supporters.append(exp.memory_id)
            after = weight_for(len(supporters), stated)
            updates.append((after, supporters, new_keys, lid))
            log.append((lid, exp.memory_id, exp.revision, "strengthen", before, after, run_id))
        with conn.cursor() as cur:
            if inserts:
                cur.executemany(
                    """INSERT INTO concept_relations (id, source_id, target_id, relation, stated, weight,
                           experiences, source_keys) VALUES (%s, %s, %s, %s, %s, %s, %s, %s)""",
                    inserts,
                )
            if updates:
                cur.executemany(
                    "UPDATE concept_relations SET weight = %s, experiences = %s, source_keys = %s WHERE id = %s",
                    updates,
                )
            if log:
                cur.executemany(
                    """INSERT INTO concept_link_updates (link_id, memory_id, revision, action, weight_before,
                           weight_after, run_id) VALUES (%s, %s, %s, %s, %s, %s, %s)""",
                    log,
                )
        counts["links_strengthened"] = len(log)
        self._tidy(conn, touched)
        return counts

    def _withdraw(
        self, conn: Connection, memory_id: str, run_id: str | None, *, erase: bool
    ) -> dict[str, int]:
        counts = {"links_withdrawn": 0, "experiences_withdrawn": 0}
        rev_row = conn.execute(
            "SELECT revision FROM experiences WHERE memory_id = %s", (memory_id,)
        ).fetchone()
        revision = rev_row[0] if rev_row else 0
        touched = {
            r[0]
            for r in conn.execute(
                "SELECT concept_id FROM experience_links WHERE memory_id = %s", (memory_id,)
            )
        }
        for (lid,) in conn.execute(
            "SELECT id FROM concept_relations WHERE experiences @> ARRAY[%s] ORDER BY id",
            (memory_id,),
        ).fetchall():
            counts["links_withdrawn"] += self._unsupport(
                conn, lid, memory_id, revision, run_id, erase=erase
            )
        counts["experiences_withdrawn"] = conn.execute(
            "DELETE FROM experiences WHERE memory_id = %s", (memory_id,)
        ).rowcount
        if erase:
            conn.execute("DELETE FROM concept_link_updates WHERE memory_id = %s", (memory_id,))
            conn.execute(
                "UPDATE concept_names SET first_memory_id = NULL WHERE first_memory_id = %s",
                (memory_id,),
            )
        self._tidy(conn, touched)
        return counts

    def _unsupport(
        self,
        conn: Connection,
        lid: str,
        memory_id: str,
        revision: int,
        run_id: str | None,
        *,
        erase: bool,
    ) -> int:
        row = conn.execute(
            "SELECT weight, experiences, stated FROM concept_relations WHERE id = %s FOR UPDATE",
            (lid,),
        ).fetchone()
        if row is None or memory_id not in row[1]:
            return 0
        before, supporters, stated = (
            float(row[0]),
            [m for m in row[1] if m != memory_id],
            bool(row[2]),
        )
        after = weight_for(len(supporters), stated)
        if supporters:
            conn.execute(
                "UPDATE concept_relations SET weight = %s, experiences = %s WHERE id = %s",
                (after, supporters, lid),
            )
        else:
            conn.execute("DELETE FROM concept_relations WHERE id = %s", (lid,))
        if not erase:
            self._log(conn, lid, memory_id, revision, "withdraw", before, after, run_id)
        return 1

    @staticmethod
    def _log(
        conn: Connection,
        lid: str,
        memory_id: str,
        revision: int,
        action: str,
        before: float,
        after: float,
        run_id: str | None,
    ) -> None:
        conn.execute(
            """INSERT INTO concept_link_updates (link_id, memory_id, revision, action, weight_before,
                   weight_after, run_id) VALUES (%s, %s, %s, %s, %s, %s, %s)""",
            (lid, memory_id, revision, action, before, after, run_id),
        )

    @staticmethod
    def _tidy(conn: Connection, concept_ids: Iterable[str]) -> None:
        """For the concepts an experience touched: those no experience shows any more go (with
        their links); the others get their aliases, lookup keys and standing (``established``:
        shown by ``MIN_EXPERIENCES`` experiences or named as a topic by one) again from the
        experiences that show them (so they depend only on what is stored, as a rebuild makes
        them)."""
        ids = sorted(set(concept_ids))
        if not ids:
            return
        conn.execute(
            """DELETE FROM concept_names c WHERE c.id = ANY(%s)
                 AND NOT EXISTS (SELECT 1 FROM experience_links l WHERE l.concept_id = c.id)""",
            (ids,),
        )
        rows = conn.execute(
            """SELECT c.id, c.name, c.first_memory_id,
                      array_agg(l.surface ORDER BY l.surface) FILTER (WHERE l.surface IS NOT NULL),
                      array_agg(l.reading ORDER BY l.reading) FILTER (WHERE l.reading IS NOT NULL),
                      array_agg(l.memory_id ORDER BY m.created_at, l.memory_id),
                      bool_or(l.topic)
                 FROM concept_names c JOIN experience_links l ON l.concept_id = c.id
                 LEFT JOIN memories m ON m.id = l.memory_id
                WHERE c.id = ANY(%s) GROUP BY c.id""",
            (ids,),
        ).fetchall()
        changes = []
        for cid, name, first, surfaces, readings, mids, topic in rows:
            own = norm(name)
            aliases = sorted(
                {s for s in surfaces or [] if norm(s) != own}, key=lambda s: (norm(s), s)
            )
            keys = sorted(
                {own, *(norm(a) for a in aliases), *(norm(r) for r in readings or [] if r)}
            )
            first = first if first in mids else (mids[0] if mids else None)
            recurs = bool(topic) or len(set(mids)) >= MIN_EXPERIENCES
            changes.append((aliases, keys, first, recurs, cid))
        with conn.cursor() as cur:
            cur.executemany(
                """UPDATE concept_names SET aliases = %s::text[], keys = %s::text[], first_memory_id = %s::text,
                          recurs = %s
                   WHERE id = %s AND (aliases, keys, first_memory_id, recurs)
                         IS DISTINCT FROM (%s::text[], %s::text[], %s::text, %s)""",
                [(a, k, f, e, cid, a, k, f, e) for a, k, f, e, cid in changes],
            )
        # established: recurs, or a stated relation joins it to a name that recurs; for the
        # touched names and their neighbours (whose standing rests on theirs)
        conn.execute(
            """WITH ids AS (
                   SELECT unnest(%(ids)s::text[]) AS id
                   UNION SELECT CASE WHEN r.source_id = ANY(%(ids)s) THEN r.target_id ELSE r.source_id END
                     FROM concept_relations r
                    WHERE r.source_id = ANY(%(ids)s) OR r.target_id = ANY(%(ids)s))
               UPDATE concept_names c SET established = e.value
                 FROM (SELECT n.id, n.recurs OR EXISTS (
                              SELECT 1 FROM concept_relations r JOIN concept_names o
                                  ON o.id = CASE WHEN r.source_id = n.id THEN r.target_id ELSE r.source_id END
                               WHERE n.id IN (r.source_id, r.target_id) AND r.stated AND o.recurs) AS value
                         FROM concept_names n JOIN ids ON ids.id = n.id) e
                WHERE c.id = e.id AND c.established IS DISTINCT FROM e.value""",
            {"ids": ids},
        )


def _link(r: dict[str, Any], other: Concept | None, outgoing: bool) -> ConceptLink:
    return ConceptLink(
        id=r["id"],
        source_id=r["source_id"],
        target_id=r["target_id"],
        relation=r["relation"],
        stated=r["stated"],
        weight=float(r["weight"]),
        experiences=tuple(sorted(r["experiences"])),
        source_keys=tuple(r["source_keys"]),
        other=other,
        outgoing=outgoing,
    )
