"""What a backfill run says in words on stderr (its estimate, its summary, what the import made
answerable) and its progress bars: shared by `pmem backfill`, `pmem import`, `pmem runs demo`
and the re-import."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from rich.markup import escape

from cli.app import (
    err_console,
    step_bars,
)
from core.display import plural


def _usd(value: float | None) -> str:
    if value is None:
        return "unknown (no price for this model: --price IN/OUT gives one)"
    return f"${value:,.2f}" if value >= 0.995 or value == 0 else f"${value:.4f}"


def _duration(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def estimate_words(est: dict[str, Any]) -> str:
    """The estimate in one line: tokens, cost, batches, expected commits, the memory API's time."""
    n, b = est["conversations_to_draft"], est["batches_to_draft"]
    if not n:
        return f"estimate for {est['model']}: nothing to draft"
    line = (
        f"estimate for {est['model']}: {plural(n, 'conversation')} in {plural(b, 'batch')} to draft, "
        f"~{est['estimated_input_tokens']:,} input and ~{est['estimated_output_tokens']:,} output tokens, "
        + (
            "no cost (offline), "
            if est["estimated_cost_usd"] == 0
            else f"cost ~{_usd(est['estimated_cost_usd'])} (prices of {est['price_as_of']}), "
        )
        + f"~{plural(est['expected_commits'], 'commit')} (about one per conversation)"
    )
    if est.get("memory_api_seconds"):
        line += f"; the memory API's budget makes the commits take at least {_duration(est['memory_api_seconds'])}"
    if est.get("max_cost") is not None:
        line += f"; --max-cost {_usd(est['max_cost'])}, spent so far {_usd(est.get('spent_usd') or 0.0)}"
    return line


_STATUS_WORDS = {
    "complete": "complete",
    "failed": "failed",
    "stopped": "stopped by a rate limit",
    "cost_limit": "stopped at --max-cost",
    "interrupted": "interrupted",
    "open": "running",
}


def commit_words(s: dict[str, Any]) -> str:
    """The commits, and in one clause why the other counts of the same thing differ: the new
    memories among them (a commit can revise one you had) and the estimate made before the run
    (about one per conversation drafted)."""
    text = plural(s["commits"], "commit")
    if s.get("dry_run"):
        return text + (
            " (a dry run commits nothing: review the drafts, then apply them)"
            if s.get("batches_total")
            else ""
        )
    why = []
    created = s.get("memories_created")
    if created is not None and created != s["commits"]:
        why.append(
            f"{created} new memories, {s['commits'] - created} revising ones you had"
            if created != 1
            else f"1 new memory, {s['commits'] - 1} revising ones you had"
        )
    expected = (s.get("estimate") or {}).get("expected_commits")
    if expected is not None and s.get("batches_drafted") and expected != s["commits"]:
        why.append(
            f"~{expected} estimated, one per conversation drafted: a conversation can give more, "
            "one or none"
        )
    return text + (f" ({'; '.join(why)})" if why else "")


def summary_words(summary: dict[str, Any]) -> list[str]:
    """The run's summary in words (no Python reprs, plurals right)."""
    s = summary
    head = f"run {s['run_id']} {_STATUS_WORDS.get(s['status'], s['status'])}"
    extras = [
        w
        for w, on in (
            ("resumed", s.get("resumed")),
            ("dry run", s.get("dry_run")),
            ("redraft", s.get("redraft")),
        )
        if on
    ]
    if extras:
        head += f" ({', '.join(extras)})"
    conv = plural(s["conversations"], "conversation")
    if s.get("kept") or s.get("dropped"):
        conv += f" ({s['kept']} kept, {s['dropped']} dropped by the prefilter)"
    if s.get("excluded"):
        conv += f", {s['excluded']} excluded by your rules"
    batches = plural(s["batches_total"], "batch")
    if s["batches_total"]:
        parts = [
            f"{s['batches_drafted']} drafted now",
            f"{s['batches_skipped_complete']} drafted before",
        ]
        if s.get("batches_failed"):
            parts.append(f"{s['batches_failed']} failed")
        if s.get("batches_left"):
            parts.append(f"{s['batches_left']} left for the next run")
        batches += f" ({', '.join(parts)})"
    work = f"{plural(s['drafter_calls'], 'drafter call')}, {commit_words(s)}"
    if s["rejected_evidence"]:
        work += (
            f", {plural(s['rejected_evidence'], 'evidence pointer')} rejected (a quote a draft "
            "cited that its conversation does not hold, or one holding a secret: left out, the "
            "rest of the draft kept)"
        )
    if s.get("input_tokens") or s.get("output_tokens") or s.get("run_cost_usd"):
        work += f"; {s['input_tokens']:,} input and {s['output_tokens']:,} output tokens, cost {_usd(s.get('cost_usd'))}"
        if s.get("resumed") and s.get("run_cost_usd") is not None:
            work += f" ({_usd(s['run_cost_usd'])} over all of this run)"
    return [f"{head}: {conv}; {batches}", f"  {work}; {s['elapsed_seconds']:.1f} s"]


def _print_summary(summary: dict[str, Any]) -> None:
    for line in summary_words(summary):
        err_console.print(escape(line), highlight=False)
    _print_indexed(summary.get("indexed"))
    if summary.get("flow_run_url"):
        err_console.print(f"Prefect flow run: {summary['flow_run_url']}", highlight=False)


def _print_indexed(out: dict[str, Any] | None) -> None:
    """One line on what the import made answerable: the recall index and the vectors."""
    if not out:
        return
    line = f"recall index: {out['indexed_messages']} new messages"
    if out["vectors"] == "skipped":
        line += "; vectors skipped (--no-embed): `pmem reindex` embeds them"
    elif out["vectors"] == "no-consent":
        line += "; vectors not sent: no consent recorded for the remote embedder"
    elif out["vectors"] == "off":
        line += "; vectors off (PMEM_EMBEDDER=none)"
    else:
        line += f"; embedded {out['messages']} messages, {out['memories']} memories with {out['vectors']}"
        if out["memories"]:
            line += " (the memories whose searched text is new or changed)"
    if out.get("messages_without_forms"):
        line += (
            f"; Japanese normal forms pending for {out['messages_without_forms']} messages "
            "(`pmem reindex` adds them; recall matches on the characters meanwhile)"
        )
    if out.get("error"):
        line += f"; [yellow]indexing failed ({out['error']}): run `pmem reindex`[/]"
    err_console.print(line)


_STAGES = {
    "draft": "drafting batches",
    "commit": "committing batches",
    "embed": "embedding messages",
    "forms": "Japanese normal forms",
    "guard": "scanning conversations for secrets",
}


@contextmanager
def _progress_bars(first: str = "importing") -> Iterator[None]:
    """Progress bars on stderr while importing, drafting, committing and embedding (none when not
    a TTY)."""
    from flows import resources as pl  # set_progress (flows.pipeline would load the drafting path)

    bars = step_bars()
    tasks: dict[str, Any] = {"import": bars.add_task(first, total=None)}

    def hook(stage: str, total: int) -> None:
        if total >= 0:
            if "import" in tasks:
                bars.remove_task(tasks.pop("import"))
            if stage in tasks:  # a stage that runs again (the re-import's next export)
                bars.remove_task(tasks.pop(stage))
            tasks[stage] = bars.add_task(_STAGES.get(stage, stage), total=total)
        elif stage in tasks:
            bars.advance(tasks[stage], -total)

    pl.set_progress(hook)
    try:
        with bars:
            yield
    finally:
        pl.set_progress(None)


# the keys every `pmem backfill --json` summary carries, whatever the exit
_CONTRACT_KEYS = (
    "run_id",
    "status",
    "resume_command",
    "conversations",
    "batches_total",
    "batches_skipped_complete",
    "batches_drafted",
    "drafter_calls",
    "commits",
    "rejected_evidence",
    "input_tokens",
    "output_tokens",
    "cost_usd",
)
