"""Recall over the raw messages: time first, then relevance.

The query arrives understood (``search.understand.Query``: content terms, focus, vector text);
a plain string is split into tokens as a fallback (``plain_query``). Then:

1. **Range first.** With a time range, the range filters every list. A range that holds at most
   ``RANGE_ALL`` messages makes all of them candidates; otherwise (and without a range) the
   candidates are the messages holding any term (at most ``TERM_CANDIDATES`` per term, so a
   common word cannot make recall read the whole ledger) and the ``VECTOR_CANDIDATES`` nearest
   messages by the embedder's vectors.
2. **Conversations as context.** The best conversations among the candidates (by their best
   lexical and vector match) bring in all their messages: a decision is often worded without the
   question's words ("FlexiSpot E7にする") in a conversation that holds them.
3. **Lists, fused.** ``lexical``: BM25 over the terms (idf from the whole message index, tf 0/1,
   length-normalised), plus a share for terms in the conversation's title and elsewhere in the
   conversation; ``vector``: cosine similarity of the message to the query; ``context``: the
   conversation's best similarity plus a part of the message's own. Weighted RRF with lexical
   above vector; the lexical list's weight scales with how much of the query its best message
   covers (a question in another language than its answer has few lexical matches, and those
   are noise). The person's messages weigh more when the question is about what the person
   said or decided, the assistant's when it is about what they were told. The embedder sees
   the question without the chat's speaker names; a ``turn`` list (a fitted ranker) joins, and
   a fitted reranker orders what passes the floor (ADR 0035).
4. **Floor.** A candidate is returned only when it holds a share of the query's terms, is
   similar enough to the query (a message in the other language than the question: to the floor
   times the embedder's cross-lingual shift, ``CROSS_LINGUAL_FLOOR``), or lies in a conversation
   that is: no padding ("OK", "Done.") for a question with nothing relevant.

Hits come back in relevance order with their rank and the lists they came from; the caller
shows a time-scoped answer in time order.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any, Literal

from psycopg import Connection, sql

from core.textsearch import query_tokens
from search import bridge
from search import rank as rk
from search.common import (
    CROSS_LINGUAL_FLOOR,
    RecallHit,
    RecallResult,
    _norm,
    doc_frequencies,
    writes_japanese,
)
from search.mentions import mentioned_times
from search.recall_reads import DECISION_STATEMENT, RecallReads, _Row
from search.turn_list import LIST_LIMIT, MIN_COVERAGE, person_names, turn_list
from search.understand import Query, Term
from store.index import MAX_TOKEN_CHARS, QueryEmbedder, _vector_literal
from store.message_times import sync_times

__all__ = [
    "DECISION_STATEMENT",
    "LIST_LIMIT",
    "MIN_COVERAGE",
    "Recall",
    "RecallReads",
    "person_names",
    "plain_query",
]

RANGE_ALL = 5000  # a range with at most this many messages: every one is a candidate
RANGE_SCAN = 100_000  # up to this many messages, a range is read and tested term by term
TERM_CANDIDATES = 2000  # per term, through the terms' index (no range, or a very wide one)
LEXICAL_POOL = 300  # lexical candidates kept (by the idf mass of the terms they hold)
VECTOR_CANDIDATES = 100  # nearest messages by vector
CONTEXT_CONVERSATIONS = 12  # conversations whose messages join the candidates
CONTEXT_MESSAGES = 80  # at most this many messages of each (the first ones: a long session is cut)
WEIGHTS = {"lexical": 1.0, "vector": 0.5, "context": 0.5}  # lexical above vector
RRF_K = 60
FOCUS_BOOST = 1.4  # the asked-about side's messages (the person's or the assistant's)
TITLE_SHARE = 0.3  # a term in the conversation's title, not in the message
CONVERSATION_SHARE = 0.3  # the idf of the terms found anywhere in the conversation
OWN_SHARE = 0.3  # the message's own similarity inside the context score
MIN_SIMILARITY = 0.3  # floor: cosine of the message, or of its conversation's best message
DECISION_BOOST = 1.5  # a message that states a decision, its reasons or open points, when asked
MIN_SIMILARITY_IN_RANGE = 0.15  # inside a time range the range itself is evidence
MENTION_WEIGHT = 0.5  # a message in the range by what it speaks of, not by when it was sent
TURN_FLOOR_RANK = 5  # the turn list's first few pass the floor beside the lexical first few


def plain_query(text: str) -> Query:
    """A query given as a string: its tokens are its terms (no time, no focus)."""
    toks = [t for t in query_tokens(text) if len(t) <= MAX_TOKEN_CHARS]
    return Query(
        text=text,
        rest=text,
        time=None,
        terms=tuple(Term(t, (t,), (False,)) for t in toks),
        focus=None,
        vector_text=" ".join(text.split()),
    )


class Recall(RecallReads):
    def recall(
        self,
        query: str | Query,
        start: datetime | None = None,
        end: datetime | None = None,
        *,
        limit: int = 20,
        embedder: QueryEmbedder | None | Literal["default"] = "default",
        include_branches: bool = False,
        **_: Any,
    ) -> RecallResult:
        """The messages that answer ``query`` within ``[start, end)``, most relevant first (see
        the module's docstring). An empty query lists the range in time order. Messages on
        ChatGPT branches that were not taken are left out unless ``include_branches`` (then
        they are marked ``on_active_path=False``)."""
        if not self._index_current():  # one statement when there is nothing to catch up
            self.sync_messages()
            sync_times(self.db, mentioned_times)
        q: Query = plain_query(query) if isinstance(query, str) else query
        emb = self.embedder if embedder == "default" else embedder
        terms = [t for t in q.terms if all(len(x) <= MAX_TOKEN_CHARS for x in t.lexemes)]
        with self.db.connection() as conn, conn.transaction():
            ranged = start is not None or end is not None
            local = emb if emb is not None and emb.local else None
            count, has_vectors, missing = self._state(conn, start, end, local)
            use_vec = bool(local is not None and q.vector_text and has_vectors)
            if not terms and not (use_vec and q.vector_text and not ranged):
                hits = self._list_range(conn, start, end, limit, include_branches) if ranged else []
                return RecallResult(
                    hits=hits,
                    start=start,
                    end=end,
                    terms="",
                    in_range=count,
                    without_vectors=missing,
                )
            vec = _query_vector(emb) if use_vec and emb is not None else None
            skipped: list[int] = [0]
            rank = functools.partial(
                self._rank,
                conn,
                q,
                terms,
                start,
                end,
                count,
                vec,
                emb if vec else None,
                limit,
                include_branches=include_branches,
                skipped=skipped,
            )
            hits = rank()
            if not hits and vec is not None:
                # the other script's words only when the question's own find nothing (the
                # vocabulary costs a fresh process ~0.6 CPU-s), and only when there are such
                # words (ADR 0045)
                extra = bridge.bridge_terms(conn, "message_search", emb, terms)
                if extra:
                    skipped[0] = 0
                    hits = rank(bridged_terms=extra)
        return RecallResult(
            hits=hits,
            start=start,
            end=end,
            terms=" ".join(t.text for t in terms),
            vectors=vec is not None,
            without_vectors=missing,
            in_range=count,
            branches_skipped=skipped[0],
        )

    # ---------------------------------------------------------------- ranking

    def _rank(
        self,
        conn: Connection,
        q: Query,
        terms: Sequence[Term],
        start: datetime | None,
        end: datetime | None,
        count: int | None,
        vec: Callable[[str], str] | None,
        emb: QueryEmbedder | None,
        limit: int,
        *,
        include_branches: bool = False,
        skipped: list[int] | None = None,
        bridged_terms: Sequence[Term] = (),
    ) -> list[RecallHit]:
        asked = list(terms)
        terms = [*terms, *bridged_terms]  # the terms' words of the other script (ADR 0045)
        tsqs = [t.tsquery() for t in terms]
        n_docs, dfs = doc_frequencies(conn, "message_search", tsqs)
        w = [rk.idf(n_docs, df) * t.weight for t, df in zip(terms, dfs, strict=True)]
        total = sum(x for x, t in zip(w, terms, strict=True) if not t.bridge) or 1.0
        params: dict[str, Any] = {
            "start": start,
            "end": end,
            "tsqs": tsqs,
            "ws": w,
            "qv": None,
            "tsq_any": " | ".join(f"({x})" for x in tsqs) if tsqs else None,
            "cap": TERM_CANDIDATES,
            "vk": VECTOR_CANDIDATES,
            "pool": LEXICAL_POOL,
        }
        ranged = start is not None or end is not None
        whole_range = ranged and count is not None and count <= RANGE_ALL
        # 1. candidates, cheaply: key, conversation, role, time, length, the terms each holds
        range_first = ranged and count is not None and count <= max(RANGE_SCAN, sum(dfs))
        pool = self._lexical_pool(conn, params, whole_range=whole_range, range_first=range_first)
        # the embedder sees the question without the chat's speaker names (the candidates' roles,
        # the person's own): on short chat turns a shared name dominates the cosine (ADR 0035)
        qv = None
        if vec is not None:
            names = rk.speaker_names((r.role for r in pool), person_names())
            qv = vec(rk.without_names(q.vector_text, names) or q.vector_text)
            params["qv"] = qv
        # a range of no more messages than asked for: every one is a candidate
        keys = {
            r.key
            for r in pool
            if r.matched or (whole_range and count is not None and count <= limit)
        }
        if qv is not None and emb is not None:
            keys |= self._nearest(conn, params, emb, exact=whole_range)
        # 2. the features of those that matter (similarity, whether it states a decision): the
        # lexical matches and the nearest by vector; then the best conversations as context
        rows = self._features(
            conn,
            sql.SQL("s.message_key = ANY(%(keys)s)"),
            params | {"keys": list(keys)},
            emb,
            known={r.key: r for r in pool if r.key in keys},
        )
        if not rows:
            return []
        by_conv: dict[str, list[_Row]] = {}
        for r in rows:
            by_conv.setdefault(r.conv, []).append(r)
        lex0 = {c: max(sum(w[i] for i in r.matched) for r in rs) for c, rs in by_conv.items()}
        sim0 = {c: max((r.sim or 0.0) for r in rs) for c, rs in by_conv.items()}
        top = rk.fuse(
            {
                "lexical": sorted((c for c in lex0 if lex0[c] > 0), key=lambda c: -lex0[c]),
                "vector": sorted(sim0, key=lambda c: -sim0[c]) if qv else [],
            },
            WEIGHTS,
        )[:CONTEXT_CONVERSATIONS]
        have = {r.key for r in rows}
        more = self._features(
            conn,
            sql.SQL(
                """s.message_key IN (
                       SELECT x.message_key FROM (
                           SELECT s2.message_key, row_number() OVER (
                                      PARTITION BY s2.conversation_key ORDER BY s2.created_at) AS n
                           FROM message_search s2 WHERE s2.conversation_key = ANY(%(convs)s)) x
                       WHERE x.n <= %(per_conv)s AND NOT (x.message_key = ANY(%(have)s)))"""
            ),
            params
            | {"convs": [f.key for f in top], "have": list(have), "per_conv": CONTEXT_MESSAGES},
            emb,
        )
        speaks_of = (
            {
                k
                for (k,) in conn.execute(
                    """SELECT message_key FROM message_times
                       WHERE span && tstzrange(%(start)s, %(end)s)
                         AND upper(span) - lower(span) <= %(end)s::timestamptz - %(start)s::timestamptz""",
                    {"start": start, "end": end},
                ).fetchall()
            }
            if ranged
            else set()
        )
        for r in more:
            r.candidate = r.key in speaks_of or (
                (start is None or (r.created_at is not None and r.created_at >= start))
                and (end is None or (r.created_at is not None and r.created_at < end))
            )
            rows.append(r)
        by_conv = {}
        for r in rows:
            by_conv.setdefault(r.conv, []).append(r)
        titles = self._titles(conn, list(by_conv))
        title_terms = {
            c: set(rk.matched_terms(terms, titles.get(c) or "", forms=False)) for c in by_conv
        }
        conv_terms = {
            c: set().union(*(set(r.matched) for r in rs)) | title_terms[c]
            for c, rs in by_conv.items()
        }
        # each floor on similarity, for a message (a conversation: its best message's language)
        # in the other language than the question: lowered by the embedder's cross-lingual shift
        asked_ja = writes_japanese(q.vector_text)
        shift = {r.key: CROSS_LINGUAL_FLOOR if r.japanese != asked_ja else 1.0 for r in rows}
        best_of = {c: max(rs, key=lambda r: r.sim or 0.0) for c, rs in by_conv.items()}
        conv_sim = {c: best_of[c].sim or 0.0 for c in by_conv}
        conv_floor = {c: MIN_SIMILARITY * shift[best_of[c].key] for c in by_conv}
        cands = [r for r in rows if r.candidate]
        lengths = {r.key: r.length for r in pool if r.candidate} | {r.key: r.length for r in cands}
        avg_len = sum(lengths.values()) / len(lengths) if lengths else 1.0  # over every candidate
        lex: dict[str, float] = {}
        cov: dict[str, float] = {}
        bridged: dict[str, float] = {}  # the part of it held through the other script's words
        for r in cands:
            own = set(r.matched)
            in_title = title_terms[r.conv] - own
            lex[r.key] = (
                rk.bm25((w[i] for i in own), r.length, avg_len)
                + TITLE_SHARE * sum(w[i] for i in in_title)
                + CONVERSATION_SHARE * sum(w[i] for i in conv_terms[r.conv])
            )
            cov[r.key] = sum(w[i] for i in own | in_title) / total
            via = {i for i in own | in_title if terms[i].bridge}
            # two words of the query at least (one stands for a verb of saying as often as not)
            if len({terms[i].stands_for for i in via}) >= min(2, len(asked)):
                bridged[r.key] = sum(w[i] for i in via) / total
        lexical = sorted((k for k in lex if cov[k] > 0), key=lambda k: (-lex[k], k))[:LIST_LIMIT]
        best_cov = max((cov[k] for k in lexical), default=0.0)
        lists: dict[str, list[str]] = {"lexical": lexical}
        sim = {r.key: r.sim for r in cands if r.sim is not None}
        if qv is not None:
            lists["vector"] = sorted(sim, key=lambda k: (-sim[k], k))[:LIST_LIMIT]
            ctx = {r.key: conv_sim[r.conv] + OWN_SHARE * (r.sim or 0.0) for r in cands}
            lists["context"] = sorted(ctx, key=lambda k: (-ctx[k], k))[:LIST_LIMIT]
        weights = dict(WEIGHTS, lexical=WEIGHTS["lexical"] * best_cov)
        lists["turn"], beside, turn_at, turn_feats = turn_list(
            rows, cands, terms, w, avg_len, conv_sim, set(lexical[:TURN_FLOOR_RANK])
        )
        weights["turn"] = rk.TURN_LIST_WEIGHT
        fused = rk.fuse(lists, weights, RRF_K)
        role = {r.key: r.role for r in cands}
        conv_of = {r.key: r.conv for r in cands}
        side = {"person": "user", "assistant": "assistant"}.get(q.focus or "")
        decided = (
            {r.key for r in cands if r.decision}
            if q.asks_decision and side != "assistant"
            else set()
        )
        floor = MIN_SIMILARITY_IN_RANGE if start is not None or end is not None else MIN_SIMILARITY
        # a conversation the question is about: similar enough, or holding enough of its terms
        on_topic = {
            c
            for c in conv_sim
            if conv_sim[c] >= conv_floor[c]
            or sum(w[i] for i in conv_terms[c]) / total >= MIN_COVERAGE
        }
        spoken_only = {
            r.key
            for r in cands
            if ranged
            and not (
                (start is None or (r.created_at is not None and r.created_at >= start))
                and (end is None or (r.created_at is not None and r.created_at < end))
            )
        }
        kept = []
        # the turn list's first few pass the floor beside a lexical lead (no range: inside one the
        # floors are lowered already, and a widened range keeps to its nearest answer)
        in_turn = set() if ranged else set(lists["turn"][:TURN_FLOOR_RANK]) & beside
        for f in fused:
            own_sim = sim.get(f.key, 0.0)
            conv = conv_of[f.key]
            # (a range's floor is lowered already: the range is evidence; it is not lowered twice)
            own_floor = min(floor, MIN_SIMILARITY * shift[f.key])
            relevant = (
                cov[f.key] >= MIN_COVERAGE
                or f.key in in_turn
                or own_sim >= own_floor
                # across languages the evidence adds up: the share of the query held through
                # bridged words and the cosine (at least half its floor), each against its own
                # floor (ADR 0045)
                or (
                    own_sim >= own_floor / 2
                    and bridged.get(f.key, 0.0) / MIN_COVERAGE + own_sim / own_floor >= 1.0
                )
                or (
                    conv_sim[conv] >= conv_floor[conv]
                    and "context" in f.ranks
                    and own_sim >= own_floor / 2
                )
                # asked what was decided: the decision stated in a conversation about it answers,
                # whatever its own words (「揚げ物を週1に減らすことにする」 for "what did I change")
                or (f.key in decided and conv in on_topic)
            )
            if f.ranks.keys() == {"turn"} and f.key not in in_turn:
                continue  # found by the turn list alone: only beside a lexical lead
            if not relevant:
                continue
            if side and role[f.key] == side:
                f.score *= FOCUS_BOOST
            if f.key in spoken_only:  # in the range by what it speaks of, not when it was sent
                f.score *= MENTION_WEIGHT
            if f.key in decided:
                f.score *= DECISION_BOOST
            kept.append(f)
        kept.sort(key=lambda f: (-f.score, -len(f.ranks), f.key))
        # 3b. the fitted reranker over the fused candidates (ADR 0035): each list's rank and
        # score, the fused score itself, and the message's own evidence as features
        top_fused = kept[0].score if kept else 1.0
        top_lex = max((lex[f.key] for f in kept), default=0.0) or 1.0
        top_sim = max((sim.get(f.key, 0.0) for f in kept), default=0.0)
        top_turn = max((turn_at.get(f.key, -1e9) for f in kept), default=0.0)
        feats = {
            f.key: rk.rerank_features(
                f.ranks,
                fused=f.score / (top_fused or 1.0),
                coverage=cov[f.key],
                lexical=lex[f.key] / top_lex,
                sim=sim.get(f.key, 0.0),
                sim_gap=sim.get(f.key, 0.0) - top_sim if qv is not None else 0.0,
                conv_sim=conv_sim[conv_of[f.key]],
                turn_gap=turn_at[f.key] - top_turn if f.key in turn_at else -10.0,
                focus=bool(side) and role[f.key] == side,
                decision=f.key in decided,
                mention=f.key in spoken_only,
                other_language=shift[f.key] != 1.0,
                turn=turn_feats.get(f.key),
            )
            for f in kept
        }
        for f in kept:
            f.score = rk.rerank_score(feats[f.key])
        kept.sort(key=lambda f: (-f.score, -len(f.ranks), f.key))
        # 4. branches that were not taken (rare): left out of the answer, or kept and marked when
        # asked for; the best candidates' texts are read a batch at a time, and each tells
        # whether it lies on the active path (one statement for the usual first batch)
        if not include_branches:
            shown: list[Any] = []
            texts: dict[str, dict[str, Any]] = {}
            step = max(2 * limit, 20)
            for at in range(0, len(kept), step):
                batch = kept[at : at + step]
                read = self._texts(conn, [f.key for f in batch])
                off = {k for k, t in read.items() if not t["on_active_path"]}
                texts |= read
                shown += [f for f in batch if f.key not in off]
                if skipped is not None:
                    skipped[0] += len(off)
                if len(shown) >= limit:
                    break
            kept = shown[:limit]
        else:
            kept = kept[:limit]
            texts = self._texts(conn, [f.key for f in kept])
        phrase = _norm(" ".join(t.text for t in asked))
        out = []
        for n, f in enumerate(kept, start=1):
            t = texts[f.key]
            best = max(
                (name for name in f.ranks if name != "turn"),
                key=lambda name: weights.get(name, 0.0) / (RRF_K + f.ranks[name]),
                default="lexical",
            )
            match: Any = "exact" if phrase and phrase in _norm(t["text"]) else best
            out.append(
                RecallHit(
                    conversation_key=t["conversation_key"],
                    conversation_title=t["conversation_title"],
                    message_key=f.key,
                    role=t["role"],
                    created_at=t["created_at"],
                    text=t["text"],
                    match=match,
                    score=round(f.score, 6),
                    rank=n,
                    lists=f.ranks,
                    similarity=round(sim[f.key], 4) if f.key in sim else None,
                    features={k: round(v, 4) for k, v in feats[f.key].items()},
                    on_active_path=t["on_active_path"],
                    memories=t["memories"],
                    memory=t["memory"],
                )
            )
        return out


def _query_vector(emb: QueryEmbedder) -> Callable[[str], str]:
    """The embedder's vector of a query text, as the SQL literal the vector scans take."""
    return lambda text: _vector_literal(emb.embed([text])[0])
