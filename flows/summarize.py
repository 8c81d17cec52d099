"""`pmem summarize`: seed 001's reconstruction batch, month by month, then the global profile.

Sequencing (``run_summarize``) is plain Python; the Prefect flow ``summarize`` wraps each month
and the profile as tasks (parameters: the run id and a month, never text). Resume is ours, as
in the backfill:

- a month whose inputs (its memories' revisions and the person's messages: ``inputs_hash``)
  are unchanged since its newest summary, by the same summarizer and prompt version, is
  skipped: a re-run with nothing new makes 0 drafter calls;
- a drafted month is written to ``runs/<run>/months/<YYYY-MM>.json`` before it is stored, so a
  run stopped between the two stores it on the next run without drafting it again;
- a stopped run is resumed by running the same command (same summarizer, prompt versions and
  time zone); the profile is redone only when a month under it got a new version.

Months are done in order (the seed's sequential reconstruction); vendor models are paced by
their own rate limits through the adapters' retry layer.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from core.errors import RateLimitStop, ResultFileError, TransientDraftError
from core.settings import SUMMARY_RUN_PREFIX, Settings, time_zone
from core.summaries import MonthDraft, MonthInputs, profile_inputs_hash
from providers.summaries import Summarizer, get_summarizer
from state.files import read_checked, write_atomic
from store.db import Database
from store.summaries import SummaryStore

log = logging.getLogger("pmem.summarize")

MONTH_SCHEMA = "pmem-month-summary-v1"
STATE_SCHEMA = "pmem-summarize-state-v1"

Event = Callable[[str, dict[str, Any]], None]


@dataclass
class SummarizeRun:
    settings: Settings
    db: Database
    store: SummaryStore
    summarizer: Summarizer
    run_id: str
    time_zone: str
    _corpus_ready: bool = False
    _inputs: dict[str, MonthInputs] = field(default_factory=dict)  # the month at hand only

    @property
    def folder(self) -> Path:
        return self.settings.runs_dir / self.run_id

    def month_file(self, month: str) -> Path:
        return self.folder / "months" / f"{month}.json"

    def inputs(self, month: str) -> MonthInputs:
        if month not in self._inputs:  # one month in memory at a time
            self._inputs = {month: self.store.month_inputs(month, self.time_zone)}
        return self._inputs[month]

    def ensure_corpus(self, months: list[str]) -> None:
        """Keywords are weighed across every month: read them once, one month at a time, and
        only when some month is to be drafted."""
        if not self._corpus_ready:
            self.summarizer.keyword_corpus(
                self.store.month_inputs(m, self.time_zone) for m in months
            )
            self._corpus_ready = True


_RUNS: dict[str, SummarizeRun] = {}
_progress: list[
    Event
] = []  # this process's progress listeners (the CLI's bar); never a flow parameter


def set_progress(listener: Event | None) -> None:
    _progress[:] = [listener] if listener else []


def run_identity(summarizer: Summarizer, time_zone: str) -> str:
    key = "\0".join(
        (
            summarizer.model,
            summarizer.month_prompt_version,
            summarizer.profile_prompt_version,
            time_zone,
        )
    )
    return hashlib.sha256(key.encode()).hexdigest()[:10]


CONSENT_SCOPE = "summaries"  # the person's messages and case records of every month


def consent_target(llm: str | None) -> Any:
    """Where a vendor summarizer sends the months (a flows.consent.Target), or None (offline)."""
    from flows.consent import drafting_target

    return drafting_target(llm or "extractive", CONSENT_SCOPE)


def preview(settings: Settings) -> dict[str, Any]:
    """What a vendor summarizer would be sent, in counts (for the consent question)."""
    db = Database.open(settings)
    try:
        store = SummaryStore(db)
        tz = time_zone()[0]
        months = store.months(tz)
        convs: set[str] = set()
        chars = 0
        for month in months:  # one month in memory at a time
            inputs = store.month_inputs(month, tz)
            convs.update(msg.conversation_key for msg in inputs.messages)
            chars += sum(len(msg.text) for msg in inputs.messages)
    finally:
        db.close()
    return {
        "conversations_to_draft": len(convs),
        "characters": chars,
        "sources": [f"{len(months)} months of your messages and case records"],
        "first_date": months[0] if months else None,
        "last_date": months[-1] if months else None,
        "excluded": 0,
    }


def open_run(settings: Settings, llm: str | None) -> SummarizeRun:
    """The unfinished run of this summarizer, prompt versions and time zone, or a new one."""
    target = consent_target(llm)
    if target is not None:  # text would leave the machine: only under the owner's consent
        from flows.consent import require

        require(settings, target)
    summarizer = get_summarizer(llm)
    tz = time_zone()[0]
    ident = run_identity(summarizer, tz)
    run_id = None
    for state in sorted(
        settings.runs_dir.glob(f"{SUMMARY_RUN_PREFIX}{ident}-*/run-state.json"), reverse=True
    ):
        try:
            doc = read_checked(state, STATE_SCHEMA)
        except ResultFileError:
            continue
        if doc.get("status") != "complete":
            run_id = doc["run_id"]
            break
    if run_id is None:
        run_id = f"{SUMMARY_RUN_PREFIX}{ident}-{datetime.now(UTC).strftime('%Y%m%dT%H%M%S')}"
    db = Database.open(settings)
    run = SummarizeRun(settings, db, SummaryStore(db), summarizer, run_id, tz)
    _RUNS[run_id] = run
    return run


def get_run(run_id: str) -> SummarizeRun:
    return _RUNS[run_id]


def close_run(run: SummarizeRun) -> None:
    _RUNS.pop(run.run_id, None)
    run.db.close()


def _write_state(run: SummarizeRun, status: str, extra: dict[str, Any] | None = None) -> None:
    write_atomic(
        run.folder / "run-state.json",
        {
            "run_id": run.run_id,
            "kind": "summarize",
            "status": status,
            "model": run.summarizer.model,
            "month_prompt_version": run.summarizer.month_prompt_version,
            "profile_prompt_version": run.summarizer.profile_prompt_version,
            "time_zone": run.time_zone,
            "updated_at": datetime.now(UTC).isoformat(),
            **(extra or {}),
        },
        STATE_SCHEMA,
    )


# ---------------------------------------------------------------- one month


def summarize_month(run: SummarizeRun, month: str, all_months: list[str]) -> dict[str, Any]:
    """Skip, store a drafted file again, or draft and store one month. Returns ids and counts."""
    s = run.summarizer
    inputs = run.inputs(month)
    h = inputs.inputs_hash
    latest = run.store.latest(month)
    if (
        latest
        and latest.inputs_hash == h
        and latest.model == s.model
        and latest.prompt_version == s.month_prompt_version
    ):
        return {"month": month, "status": "skipped", "version": latest.version, "drafted": 0}
    path = run.month_file(month)
    draft: MonthDraft | None = None
    try:
        doc = read_checked(path, MONTH_SCHEMA)
        if doc.get("inputs_hash") == h and doc.get("model") == s.model:
            draft = MonthDraft.from_json(doc["draft"])
    except ResultFileError:
        pass
    drafted = 0
    if draft is None:
        run.ensure_corpus(all_months)
        draft = s.summarize_month(inputs)
        drafted = 1
        _keep_own_citations(draft, inputs)
        write_atomic(
            path,
            {
                "month": month,
                "inputs_hash": h,
                "model": s.model,
                "prompt_version": s.month_prompt_version,
                "draft": draft.to_json(),
            },
            MONTH_SCHEMA,
        )
    stored = run.store.add_month(
        month,
        draft,
        inputs_hash=h,
        model=s.model,
        prompt_version=s.month_prompt_version,
        time_zone=run.time_zone,
        run_id=run.run_id,
    )
    return {
        "month": month,
        "status": "drafted" if drafted else "stored",
        "version": stored.version,
        "drafted": drafted,
        "input_tokens": draft.input_tokens,
        "output_tokens": draft.output_tokens,
    }


def _keep_own_citations(draft: MonthDraft, inputs: MonthInputs) -> None:
    """A month cites only its own memories and messages (a model may name others: dropped), and
    every line of it cites at least one of the month's memories: a line citing only messages is
    cited through the memories drawn from their conversations; a line that no memory of the
    month supports is left out (never a sentence without its source)."""
    mem = {m.id for m in inputs.memories}
    keys = {m.key for m in inputs.messages}
    conversation = {m.key: m.conversation_key for m in inputs.messages}
    records_of: dict[str, list[str]] = {}
    for m in inputs.memories:
        for ck in m.conversation_keys:
            records_of.setdefault(ck, []).append(m.id)
    if draft.citations:
        lines, cites = [], []
        for line, c in zip(draft.summary.splitlines(), draft.citations, strict=False):
            own_keys = [k for k in c.get("message_keys", []) if k in keys]
            own = [m for m in c.get("memory_ids", []) if m in mem]
            for k in own_keys:
                own.extend(m for m in records_of.get(conversation[k], []) if m not in own)
            if own:
                lines.append(line)
                cites.append({"memory_ids": own, "message_keys": own_keys})
        draft.summary = "\n".join(lines)
        draft.citations = cites
    draft.memory_ids = [m for m in draft.memory_ids if m in mem]
    draft.message_keys = [k for k in draft.message_keys if k in keys]


def build_profile(run: SummarizeRun) -> dict[str, Any]:
    s = run.summarizer
    months = run.store.latest_all()
    if not months:
        return {"updated": False, "version": None, "drafted": 0}
    h = profile_inputs_hash(months)
    latest = run.store.profile()
    if (
        latest
        and latest.inputs_hash == h
        and latest.model == s.model
        and latest.prompt_version == s.profile_prompt_version
    ):
        return {"updated": False, "version": latest.version, "drafted": 0}
    draft = s.summarize_profile(months)
    known = {m for mo in months for m in mo.memory_ids}
    draft.memory_ids = [m for m in draft.memory_ids if m in known]
    draft.months = [m for m in draft.months if m in {mo.month for mo in months}]
    for c in draft.citations:  # a line cites only what the months it rests on cite
        c["memory_ids"] = [m for m in c.get("memory_ids", []) if m in known]
    stored = run.store.add_profile(
        draft,
        inputs_hash=h,
        model=s.model,
        prompt_version=s.profile_prompt_version,
        run_id=run.run_id,
    )
    return {
        "updated": True,
        "version": stored.version,
        "drafted": 1,
        "input_tokens": draft.input_tokens,
        "output_tokens": draft.output_tokens,
    }


# ---------------------------------------------------------------- the whole run


@dataclass
class Steps:
    month: Callable[[str, str, list[str]], dict[str, Any]]
    profile: Callable[[str], dict[str, Any]]


PLAIN_STEPS = Steps(
    month=lambda run_id, month, all_months: summarize_month(get_run(run_id), month, all_months),
    profile=lambda run_id: build_profile(get_run(run_id)),
)


def run_summarize(
    run: SummarizeRun,
    months: list[str] | None = None,
    *,
    steps: Steps = PLAIN_STEPS,
    on_event: Event | None = None,
) -> dict[str, Any]:
    """Every month (or the chosen ones) in order, then the profile. Returns the summary object."""

    def emit(kind: str, data: dict[str, Any]) -> None:
        for listener in [*([on_event] if on_event else []), *_progress]:
            listener(kind, data)

    all_months = run.store.months(run.time_zone)
    chosen = [m for m in all_months if not months or m in months]
    _write_state(run, "running", {"months": chosen})
    counts = {"drafted": 0, "stored": 0, "skipped": 0}
    tokens = [0, 0]
    prof: dict[str, Any] = {"drafted": 0, "updated": False, "version": None}

    def totals(status: str) -> dict[str, Any]:
        return {
            "run_id": run.run_id,
            "status": status,
            "model": run.summarizer.model,
            "time_zone": run.time_zone,
            "months_total": len(chosen),
            "months_drafted": counts["drafted"] + counts["stored"],
            "months_skipped": counts["skipped"],
            "drafter_calls": counts["drafted"] + prof["drafted"],
            "profile_updated": prof["updated"],
            "profile_version": prof["version"],
            "input_tokens": tokens[0],
            "output_tokens": tokens[1],
            "unknown_months": sorted(set(months or []) - set(all_months)),
        }

    emit("months", {"total": len(chosen)})
    try:
        for month in chosen:
            out = steps.month(run.run_id, month, all_months)
            counts[out["status"]] += 1
            tokens[0] += out.get("input_tokens", 0)
            tokens[1] += out.get("output_tokens", 0)
            emit("month", {"month": month, "status": out["status"], "version": out["version"]})
        prof = steps.profile(run.run_id)
        tokens[0] += prof.get("input_tokens", 0)
        tokens[1] += prof.get("output_tokens", 0)
    except TransientDraftError as err:
        # the vendor's rate limit outlasts the wait its adapter allows: stop cleanly (exit 75);
        # the months done are stored, the same command resumes with the next one
        _write_state(run, "stopped", {"months": chosen})
        if err.retry_after is None:
            raise
        stop = RateLimitStop(
            f"{run.summarizer.model} is rate limited for another {err.retry_after:.0f}s (Retry-After); "
            "the months summarized so far are kept",
            run_id=run.run_id,
            retry_after=err.retry_after,
        )
        stop.hint = "run the same command again later: it resumes with the next month"
        stop.summary = totals("stopped")  # type: ignore[attr-defined]
        raise stop from None
    except BaseException:
        _write_state(run, "stopped", {"months": chosen})
        raise
    summary = totals("complete")
    _write_state(run, "complete", {"months": chosen, "summary": summary})
    return summary
