"""The resources of one backfill in this process (``Pipeline``: the database, the stores, the
drafter, the memory API, the budget and concurrency controllers, the run's options, given as
arguments), found by run id by the steps; how each step is executed (``Steps``); where a run says what it does
(announce) and how far it is (progress)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from core.errors import RateLimited
from core.models import Conversation
from core.ports import Drafter, MemoryAPI
from core.settings import Settings
from providers import get_drafter
from providers.pricing import Price, parse_price
from stages.exclude import ExcludeRule, parse_rules
from state import requests
from state.budget import SlidingWindowLimiter, Unlimited, Window
from state.concurrency import AdaptiveConcurrency
from state.cost import CostMeter
from state.summary import Outcome
from store.budget import PgWindow, client_window
from store.db import Database
from store.ledger import Ledger
from store.records import MemoryStore
from store.runs import RunStore

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
    def open(
        cls,
        settings: Settings,
        llm: str | None = None,
        *,
        options: RunOptions | None = None,
        excludes: list[ExcludeRule] | None = None,
    ) -> Pipeline:
        """The pipeline of one run: ``options`` and ``excludes`` are the run's (None: the
        defaults; a flow gets them from its parameters, ``flow_options``)."""
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
            excludes=list(excludes or ()),
            options=RunOptions() if options is None else options,
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


@dataclass(frozen=True)
class RunOptions:
    """A backfill's options besides its source, export, dry run and model: arguments of
    ``Pipeline.open``. A flow gets the plain ones as its parameters and the ones that name
    conversations (--redraft keys, with the --exclude rules) by a handle (``flow_options``)."""

    pending: bool = False  # --pending: draft everything pending in the ledger for the source
    redraft: tuple[str, ...] | None = None  # --redraft: these keys again (empty: the export's)
    max_cost: float | None = None  # --max-cost USD, over every resume of the run
    price: Price | None = None  # --price IN/OUT: USD per million tokens, for an unlisted model
    include_others: bool = False  # --include-others: other speakers' messages go to the drafter


def flow_options(
    settings: Settings,
    *,
    export_path: str,
    max_cost: float | None = None,
    price: str | None = None,
    include_others: bool = False,
    request: str | None = None,
) -> tuple[RunOptions, list[ExcludeRule]]:
    """A flow's options from its parameters: plain values (``price`` as --price's IN/OUT text),
    and ``request``, the id of the run request the CLI stored (state/requests.py: the --redraft
    keys and --exclude rules, private, never a parameter)."""
    asked = requests.read(settings.data_dir, request)
    options = RunOptions(
        pending=not export_path,
        redraft=asked.redraft,
        max_cost=max_cost,
        price=parse_price(price) if price else None,
        include_others=include_others,
    )
    return options, parse_rules(list(asked.excludes))


def with_max_wait(settings: Settings, max_wait: float | None) -> Settings:
    """``settings`` with --max-wait, when given, as the longest wait for a rate limit."""
    if max_wait is None:
        return settings
    return settings.model_copy(update={"max_wait_seconds": float(max_wait)})


def drafted(p: Pipeline, conv: Conversation) -> Conversation:
    """``conv`` as the drafter sees it: other speakers' messages of a chat history (channel
    ``other``) only with ``--include-others`` (the consent scope says so too)."""
    return conv.model_copy(update={"include_others": True}) if p.options.include_others else conv


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


def tick(stage: str, total: int = -1) -> None:
    for hook in _progress:
        hook(stage, total)


def register(p: Pipeline) -> None:
    _PIPELINES[p.run_id] = p


def pipeline(run_id: str) -> Pipeline:
    return _PIPELINES[run_id]


def unregister(run_id: str) -> None:
    _PIPELINES.pop(run_id, None)


@dataclass(frozen=True)
class Steps:
    """How each step is executed: plainly (threads), or as Prefect tasks (flows/backfill.py).

    ``draft_all`` / ``commit_all`` return one outcome per batch, in order: the step's result or
    the exception it raised."""

    import_export: Callable[[str, str, str], dict[str, Any]]
    plan: Callable[[str, str], list[str]]
    draft_all: Callable[[str, list[str]], list[Outcome]]
    commit_all: Callable[[str, list[str]], list[Outcome]]
