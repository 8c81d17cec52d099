"""Every place pmem keeps text, in one list: the secret guard and `pmem forget` both read it.

A table that holds text (any ``text``, ``jsonb``, ``bytea``, ``tsvector`` or array column, or
a vector embedding of text) must be registered here with what each such column holds:

- ``text``: private text that may carry a secret (rewritten by ``pmem forget --secret``);
- ``ids``: only ids, keys, hashes, model names, enums or machine-readable reasons (scanned by
  forget's final check, never rewritten);
- ``indexes``: a ``tsvector`` built from the row's text (rebuilt from the redacted text);
- ``vectors``: an embedding of text (dropped with the text it embeds; ``pmem reindex`` makes
  it again from what is left).

``layer`` says what a store is: ``ledger`` (the raw record: byte-exact, erased only with
``--from-ledger``), ``derived`` (made from the ledger by pmem: memories, indexes, drafts; the
guard covers every write) or ``bookkeeping`` (runs, batches, budget: ids and counts).

`tests/security/test_registry.py` reads the live schema and fails when a table or column that
can hold text is missing here. Files pmem writes under the data dir are listed in
``FILE_STORES``. A store added later (monthly summaries, concepts, topic markers, backups)
registers here in the same change that creates it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

Layer = Literal["ledger", "derived", "bookkeeping"]


@dataclass(frozen=True)
class TableStore:
    table: str
    layer: Layer
    text: tuple[str, ...] = ()
    ids: tuple[str, ...] = ()
    indexes: dict[str, str] = field(default_factory=dict)  # tsvector column -> its text column
    vectors: tuple[str, ...] = ()
    #: how `pmem forget` erases it (special handling in store/forget.py; "generic": every
    #: ``text`` column is rewritten wherever the secret occurs)
    erase: str = "generic"
    guard: str = ""  # where the secret guard covers its writes

    @property
    def scanned(self) -> tuple[str, ...]:
        """Every column that can hold text, as forget's final check reads it."""
        return (*self.text, *self.ids, *self.indexes)


@dataclass(frozen=True)
class FileStore:
    pattern: str  # relative to the data dir
    layer: Layer
    erase: str
    guard: str = ""


TABLE_STORES: tuple[TableStore, ...] = (
    # ------------------------------------------------------------ ledger (0001)
    TableStore(
        "import_runs",
        "bookkeeping",
        text=("file", "stats"),
        ids=("import_id", "source"),
        guard="export paths and counts only",
    ),
    TableStore(
        "source_conversations",
        "ledger",
        text=("title", "title_raw", "provenance", "unknown_types"),
        ids=(
            "conversation_key",
            "source",
            "external_id",
            "content_hash",
            "first_import_id",
            "last_import_id",
        ),
        erase="ledger: title redacted (--secret --from-ledger); row deleted (--conversation --from-ledger)",
        guard="raw record: output paths redact",
    ),
    TableStore(
        "source_messages",
        "ledger",
        text=("body",),
        ids=(
            "message_key",
            "conversation_key",
            "node_id",
            "parent_id",
            "role",
            "channel",
            "content_type",
            "raw_type",
            "content_hash",
            "import_id",
        ),
        erase="ledger: body redacted and hashes recomputed (--from-ledger)",
        guard="raw record: byte-exact, output paths redact",
    ),
    TableStore("quarantine", "ledger", text=("file",), ids=("source", "reason", "import_id")),
    TableStore(
        "prefilter_decisions",
        "bookkeeping",
        ids=("conversation_key", "content_hash", "rule_version", "reason"),
        erase="hash follows the redacted conversation",
    ),
    TableStore("prefilter_overrides", "bookkeeping", ids=("conversation_key",)),
    # ------------------------------------------------------------ memories (0001, 0006)
    TableStore(
        "memories",
        "derived",
        text=(
            "title",
            "canonical_summary",
            "index_summary",
            "aliases",
            "tags",
            "stated_facts",
            "inferences",
        ),
        ids=("id", "kind", "visibility", "status"),
        erase="memory: fields redacted and a 'redaction' revision appended; row deleted (--memory)",
        guard="MemoryStore write boundary",
    ),
    TableStore(
        "memory_revisions",
        "derived",
        text=("record",),
        ids=(
            "memory_id",
            "record_hash",
            "reason",
            "run_id",
            "client",
            "model",
            "prompt_version",
            "redacted_fields",
        ),
        erase="memory: rewritten only through pmem_redact_revision / pmem_erase_revisions (audited)",
        guard="MemoryStore write boundary",
    ),
    TableStore(
        "evidence",
        "derived",
        text=("text",),
        ids=("memory_id", "source_key", "text_hash", "language"),
        erase="memory: excerpt redacted, text_hash recomputed",
        guard="verbatim check + guard",
    ),
    TableStore(
        "search_projections",
        "derived",
        text=("index_text", "head"),
        indexes={"tokens": "index_text"},
        ids=("memory_id",),
        erase="memory: projected again from the redacted record",
        guard="projected from the guarded record",
    ),
    TableStore(
        "tombstones",
        "derived",
        text=("reason",),
        ids=("memory_id", "source_keys", "conversation_keys"),
        guard="a backup's reason passes the guard; a delete's reason is stored as given (not yet guarded)",
    ),
    TableStore(
        "idempotency_keys",
        "derived",
        text=("response",),
        ids=("key", "operation", "memory_id"),
        guard="responses carry ids and counts",
    ),
    TableStore(
        "proposals",
        "derived",
        text=("payload", "result"),
        ids=(
            "proposal_id",
            "run_id",
            "batch_id",
            "draft_id",
            "status",
            "action",
            "memory_id",
            "client",
            "decided_by",
        ),
        erase="generic; deleted with their memory or conversation",
        guard="guard_payload",
    ),
    # ------------------------------------------------------------ runs (0001, 0002)
    TableStore(
        "backfill_runs",
        "bookkeeping",
        text=("export_path", "summary"),
        ids=(
            "run_id",
            "source",
            "export_fingerprint",
            "model",
            "prompt_version",
            "status",
            "pool",
            "finished_by",
        ),
    ),
    TableStore(
        "batches",
        "bookkeeping",
        text=("last_error",),
        ids=(
            "batch_id",
            "source",
            "model",
            "prompt_version",
            "members",
            "status",
            "run_id",
            "result_checksum",
        ),
        erase="member hashes follow the redacted conversation",
    ),
    TableStore(
        "batch_members",
        "bookkeeping",
        ids=("batch_id", "conversation_key", "content_hash", "prompt_version", "model"),
    ),
    TableStore("budget_events", "bookkeeping", ids=("bucket",)),
    # a run's batches as claims with a lease (0024): worker names, states, counts
    TableStore(
        "batch_claims", "bookkeeping", ids=("run_id", "batch_id", "state", "claimed_by", "outcome")
    ),
    TableStore("draft_decisions", "bookkeeping", ids=("run_id", "draft_id", "decision")),
    TableStore("schema_migrations", "bookkeeping", ids=("name", "checksum")),
    # ------------------------------------------------------------ tokens (0005)
    TableStore(
        "auth_tokens",
        "bookkeeping",
        ids=(
            "token_id",
            "name",
            "kind",
            "token_hash",
            "scopes",
            "client_id",
            "family_id",
            "resource",
            "successor_sealed",
        ),
        guard="a client's name and scopes; tokens only as SHA-256 (a grace replay's successor "
        "sealed under a key derived from the replayed token)",
    ),
    # ------------------------------------------------------------ the remote server (0018, 0019)
    TableStore(
        "oauth_clients",
        "bookkeeping",
        ids=("client_id", "name", "client_name", "metadata", "secret_hash"),
        guard="what a client registered (name, redirect URIs); its secret only as SHA-256",
    ),
    TableStore(
        "oauth_codes",
        "bookkeeping",
        ids=(
            "code_hash",
            "client_id",
            "scopes",
            "code_challenge",
            "redirect_uri",
            "resource",
            "family_id",
        ),
        guard="single-use codes only as SHA-256",
    ),
    TableStore(
        "owner_credentials", "bookkeeping", ids=("password_hash",), guard="Argon2id hash only"
    ),
    # failed owner passphrases (0018, 0044): when, from which address and client id, never what
    TableStore(
        "consent_failures",
        "bookkeeping",
        ids=("address", "client_id"),
        guard="an address and a client id; the passphrase tried is never stored",
    ),
    TableStore(
        "public_memories",
        "derived",
        text=("title", "summary"),
        ids=("memory_id",),
        erase="generic; deleted with its memory (pmem delete, merge, forget --memory)",
        guard="redact() before the owner confirms (`pmem publish`)",
    ),
    # ------------------------------------------------------------ search (0003)
    TableStore(
        "memory_embeddings",
        "derived",
        vectors=("embedding",),
        ids=("memory_id", "model", "text_hash"),
        erase="dropped for every memory whose text changed",
        guard="embeds the guarded projection",
    ),
    TableStore(
        "message_search",
        "derived",
        text=("text",),
        indexes={"tokens": "text"},
        ids=("message_key", "conversation_key", "role"),
        erase="redacted and re-tokenised (--secret); deleted (--conversation)",
        guard="raw-message index: output paths redact",
    ),
    TableStore("message_search_pending", "derived", ids=("message_key",)),
    TableStore("message_forms_pending", "derived", ids=("message_key",)),  # 0026: keys only
    TableStore(  # 0036: the times a message speaks of, as ranges (ADR 0036); no text
        "message_times",
        "derived",
        ids=("message_key",),
        erase="dropped with its message_search row (foreign key); a rewritten text is queued again",
        guard="holds no text",
    ),
    TableStore("message_times_pending", "derived", ids=("message_key",)),  # 0036: keys only
    TableStore("message_times_version", "derived", ids=("zone",)),  # 0036: the resolver's zone
    TableStore(  # 0029: offsets and kinds of what the guard found, never text
        "conversation_guard",
        "derived",
        ids=("conversation_key", "guard_key", "content_hash", "guard_version", "findings"),
        erase="dropped with its conversation (foreign key); a changed text has another key",
        guard="holds no text",
    ),
    TableStore(
        "message_embeddings",
        "derived",
        vectors=("embedding",),
        ids=("message_key", "model"),
        erase="dropped for every message whose text changed",
        guard="local embedder only",
    ),
    TableStore(
        "message_passage_embeddings",
        "derived",
        vectors=("embedding",),
        ids=("message_key", "model", "passage"),
        erase="dropped for every message whose text changed (and with its message_search row)",
        guard="local embedder only",
    ),
    # ------------------------------------------------------------ erasure (0007)
    TableStore(
        "erasure_audit",
        "bookkeeping",
        ids=("erasure_id", "action", "target", "memory_id", "fields", "counts"),
        guard="ids, field names and counts; never the text",
    ),
    TableStore("erased_content", "bookkeeping", ids=("hmac", "kind")),
    TableStore("forgotten_conversations", "bookkeeping", ids=("conversation_key",)),
    # ------------------------------------------------------------ summaries (0020, seed 001)
    TableStore(
        "month_summaries",
        "derived",
        text=("summary", "keywords"),
        ids=(
            "month",
            "memory_ids",
            "message_keys",
            "citations",  # per line: memory ids and message keys only
            "inputs_hash",
            "model",
            "prompt_version",
            "time_zone",
            "run_id",
        ),
        erase="generic; versions citing an erased memory are deleted (the next summarize redoes the month)",
        guard="SummaryStore.add_month: summary redacted, flagged keywords dropped",
    ),
    TableStore(
        "profile_versions",
        "derived",
        text=("profile",),
        ids=(
            "months",
            "memory_ids",
            "citations",  # per line: memory ids and message keys only
            "inputs_hash",
            "model",
            "prompt_version",
            "run_id",
        ),
        erase="generic; versions citing an erased memory are deleted",
        guard="SummaryStore.add_profile: profile redacted",
    ),
    # ------------------------------------------------------------ watch (0025, seed 004)
    TableStore(
        "watched_files",
        "bookkeeping",
        text=("path", "root"),
        ids=("source", "content_hash"),
        guard="paths, sizes and hashes of watched files; never their text",
    ),
    TableStore(
        "watch_passes",
        "bookkeeping",
        text=("stats",),
        ids=("pass_id", "trigger", "status"),
        guard="counts only",
    ),
    # ------------------------------------------------------------ concepts (0021, seed 003)
    TableStore(
        "concept_names",  # every name an experience shows; the view `concepts`: the concepts
        "derived",
        text=("name", "norm", "aliases", "keys"),
        ids=("id", "language", "kind", "first_memory_id"),
        erase="generic; a concept no remaining experience shows is deleted with its memory (ConceptStore.erase)",
        guard="ConceptStore.apply: a flagged name, alias or reading is dropped with its links",
    ),
    TableStore(
        "concept_embeddings",
        "derived",
        vectors=("embedding",),
        ids=("concept_id", "model"),
        erase="deleted with its concept",
        guard="embeds a guarded concept name (local embedder)",
    ),
    TableStore(
        "experiences",
        "derived",
        ids=("memory_id", "inputs_hash", "extractor", "prompt_version", "run_id"),
        erase="deleted with its memory (ConceptStore.erase)",
    ),
    TableStore(
        "experience_links",
        "derived",
        text=("surface", "reading"),
        ids=("memory_id", "concept_id", "source_key"),
        erase="generic; deleted with its memory (ConceptStore.erase)",
        guard="ConceptStore.apply: a flagged surface or reading is dropped",
    ),
    TableStore(
        "concept_relations",  # every stated relation; the view `concept_links`: between concepts
        "derived",
        ids=("id", "source_id", "target_id", "relation", "experiences", "source_keys"),
        erase="an erased memory leaves every link (weight recomputed; removed when no supporter is left)",
    ),
    TableStore(
        "concept_link_updates",
        "derived",
        ids=("link_id", "memory_id", "action", "run_id"),
        erase="the rows naming an erased memory are deleted (append-only otherwise)",
    ),
    # ------------------------------------------------------------ topic markers (0023, seed 004)
    TableStore(
        "markers",
        "ledger",
        text=("body", "session"),
        ids=("marker_id", "content_hash", "client", "redacted"),
        erase="marker: text and session redacted through pmem_redact_marker, hash recomputed "
        "(every --secret: load_context shows markers to every client)",
        guard="MarkerStore.add: redact() and the forgotten secrets before the row is written",
    ),
)

FILE_STORES: tuple[FileStore, ...] = (
    FileStore(
        "runs/<run>/batches/<batch>/result.json",
        "derived",
        "drafts redacted or removed, checksum rewritten",
        "redact_draft before writing",
    ),
    FileStore(
        "runs/<run>/batches/<batch>/chunk-*.json",
        "derived",
        "redacted; deleted with their conversation",
        "drafter output",
    ),
    FileStore("runs/<run>/batches/<batch>/run-state.json", "bookkeeping", "generic (ids only)"),
    FileStore(
        "runs/<run>/review.md", "derived", "deleted when affected (`pmem review` rewrites it)"
    ),
    FileStore(
        "runs/<run>/review.html", "derived", "deleted when affected (`pmem review` rewrites it)"
    ),
    FileStore(
        "runs/<run>/months/<YYYY-MM>.json",
        "derived",
        "deleted when affected (a month draft; `pmem summarize` drafts it again)",
        "the summary is guarded when stored",
    ),
    FileStore(
        "runs/concepts/<memory>.json",
        "derived",
        "deleted with its memory (pmem forget --memory / --conversation)",
        "flagged concept names dropped before writing",
    ),
)

REGISTRY: dict[str, TableStore] = {s.table: s for s in TABLE_STORES}


def text_holding(data_type: str, udt_name: str) -> bool:
    """Can a column of this type hold text (or an embedding of text)?"""
    if data_type in (
        "text",
        "character varying",
        "character",
        "json",
        "jsonb",
        "bytea",
        "tsvector",
    ):
        return True
    if data_type == "ARRAY":
        return udt_name.lstrip("_") in (
            "text",
            "varchar",
            "bpchar",
            "json",
            "jsonb",
            "bytea",
            "tsvector",
        )
    return data_type == "USER-DEFINED" and udt_name in (
        "vector",
        "halfvec",
        "sparsevec",
        "tsvector",
    )


SCHEMA_COLUMNS_SQL = """
SELECT c.table_name, c.column_name, c.data_type, c.udt_name
  FROM information_schema.columns c
  JOIN information_schema.tables t
    ON t.table_schema = c.table_schema AND t.table_name = c.table_name
 WHERE c.table_schema = current_schema() AND t.table_type = 'BASE TABLE'
 ORDER BY c.table_name, c.ordinal_position
"""


def unregistered(columns: list[tuple[str, str, str, str]]) -> list[str]:
    """``table.column`` of every text-holding column the registry does not list."""
    missing: list[str] = []
    for table, column, data_type, udt in columns:
        if not text_holding(data_type, udt):
            continue
        store = REGISTRY.get(table)
        if store is None or column not in (*store.scanned, *store.vectors):
            missing.append(f"{table}.{column}")
    return missing
