"""Review and apply a dry run, export the memory, serve the memory API."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape

from cli.app import (
    EXIT_ERROR,
    ask,
    backup_app,
    err_console,
    handle_errors,
    memory_app,
    print_json,
    runs_app,
    settings,
)
from core.display import for_terminal as tty


@runs_app.command()
@handle_errors
def review(
    run_id: Annotated[str, typer.Argument(help="The run to review (from `pmem status`).")],
    reject: Annotated[
        list[str] | None,
        typer.Option("--reject", help="Exclude this draft id from apply (repeatable)."),
    ] = None,
    accept: Annotated[
        list[str] | None, typer.Option("--accept", help="Take a rejection back (repeatable).")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """Show a run's drafts: new records, or diffs against the target memories; write
    runs/<run>/review.md and review.html."""
    from reports.review import build_review, write_review
    from store.db import Database
    from store.records import MemoryStore
    from store.runs import RunStore

    cfg = settings()
    db = Database.open(cfg)
    runs = RunStore(db)
    if runs.get_run(run_id) is None:  # no decision row for a run that does not exist
        from core.errors import ConfigError

        raise ConfigError(f"no run {run_id}", hint="`pmem status` lists the runs")
    for draft_id in reject or []:
        runs.set_decision(run_id, draft_id, "reject")
    for draft_id in accept or []:
        runs.set_decision(run_id, draft_id, "accept")
    from state.files import runs_root

    rv = build_review(
        runs, MemoryStore(db), runs_root(cfg), run_id
    )  # the drafts: PMEM_RUNS_URL too
    if as_json:
        md, page = write_review(rv, cfg.runs_dir)
        print_json(rv.as_json() | {"markdown": str(md), "html": str(page)})
        return
    for line in review_words(rv):
        err_console.print(line, highlight=False)
    if rv.counts["drafts"]:  # a run with nothing to review stops at saying so
        md, page = write_review(rv, cfg.runs_dir)
        err_console.print(
            f"\nwritten: {escape(str(md))} and {escape(str(page))}\n"
            f"commit them with: pmem runs apply {run_id}",
            highlight=False,
        )


def review_words(rv: Any) -> list[str]:
    """A review on the terminal (Rich markup): the counts in words, then each draft; a run with
    no drafts says so in one line and what to do instead."""
    from core.display import clip, plural, terminal_width

    width = terminal_width()
    c = rv.counts
    if not c["drafts"]:
        return [
            f"[bold]run {rv.run_id}[/]: nothing to review, it made no drafts (every conversation "
            "was drafted before, or none was kept for drafting); nothing to apply"
        ]
    parts = [f"{c['new']} new", plural(c["appends"], "append")]
    if c["uncommittable"]:
        parts.append(
            f"{c['uncommittable']} not committable"
            + (
                f" ({c['target_not_offered']} named a memory its batch was not shown)"
                if c["target_not_offered"]
                else ""
            )
        )
    if c["rejected"]:
        parts.append(f"{c['rejected']} rejected by you")
    tokens = rv.tokens["input"] + rv.tokens["output"]
    used = (
        f"{rv.tokens['input']:,} input and {rv.tokens['output']:,} output tokens"
        if tokens
        else "no tokens"
    )
    out = [f"[bold]run {rv.run_id}[/]: {plural(c['drafts'], 'draft')} ({', '.join(parts)}); {used}"]
    for d in rv.drafts:
        tag = "[red]rejected[/]" if d.rejected else f"[cyan]{d.action}[/]"
        out.append(f"\n{tag} [bold]{escape(tty(d.title))}[/]  ({escape(tty(d.draft_id))})")
        if d.reason:
            out.append(f"  [yellow]{escape(tty(d.reason))}[/]")
        if d.action == "create":  # its first line of text (the summary's headings are empty)
            first = next(
                (x for x in d.summary.splitlines() if x.strip() and not x.lstrip().startswith("#")),
                "",
            )
            if first:
                out.append(f"  {escape(clip(tty(first), width - 2))}")
        for line in d.diff:
            style = "green" if line.startswith("+") else "red" if line.startswith("-") else "dim"
            out.append(f"  [{style}]{escape(tty(line))}[/]")
        for _key, text in d.evidence_added[:3]:  # the keys are in review.md / review.html
            out.append(f"  + evidence: {escape(clip(tty(text), width - 14))}")
        if len(d.evidence_added) > 3:
            out.append(f"  + {len(d.evidence_added) - 3} more evidence excerpts (review.md)")
    return out


@runs_app.command()
@handle_errors
def apply(
    run_id: Annotated[str, typer.Argument(help="A reviewed (dry) run.")],
    as_json: Annotated[
        bool, typer.Option("--json", help="The same keys as the backfill summary.")
    ] = False,
) -> None:
    """Commit a reviewed run's accepted drafts without drafting again. Drafts whose target moved
    on meanwhile are listed as conflicts, never forced."""
    from flows.pipeline import Pipeline, apply_run

    p = Pipeline.open(settings())
    try:
        summary = apply_run(p, run_id, p.runs.rejected_drafts(run_id))
    finally:
        p.close()
    err_console.print(
        f"applied run {run_id}: {summary['commits']} commits, {summary['commits_replayed']} already "
        f"committed, {summary['conflicts']} conflicts, {summary.get('rejected_drafts', 0)} rejected drafts skipped"
    )
    for c in summary["conflict_drafts"]:
        err_console.print(
            f"  conflict: draft {c['draft_id']} ({c['reason']}): review it again after `pmem show`"
        )
    if as_json:
        print_json(summary)
    if summary["status"] != "complete":
        raise typer.Exit(EXIT_ERROR)


@backup_app.command(name="export")
@handle_errors
def export_(
    out: Annotated[
        Path | None, typer.Option("--out", "-o", help="Write to this file (default: stdout).")
    ] = None,
) -> None:
    """Write a canonical, deterministic JSONL dump of the memory (a backup you can diff)."""
    from store.db import Database
    from store.export import write_export

    db = Database.open(settings())
    if out is None:
        counts = write_export(db, sys.stdout)
    else:
        from core.private import open_private

        tmp = out.with_suffix(out.suffix + ".tmp")
        with open_private(tmp, "w", encoding="utf-8") as f:  # 0600: the export is private text
            counts = write_export(db, f)
        tmp.replace(out)
    from core.display import plural

    words = ", ".join(
        plural(counts.get(kind, 0), word, many)
        for kind, word, many in (
            ("memory", "memory", "memories"),
            ("revision", "revision", None),
            ("evidence", "evidence excerpt", None),
            ("tombstone", "tombstone", None),
        )
    ) + "".join(  # what was made from them, when there is some
        f", {plural(counts[kind], word, many)}"
        for kind, word, many in (
            ("month_summary", "month summary", "month summaries"),
            ("profile", "profile version", None),
            ("concept", "concept name", None),
            ("marker", "marker", None),
        )
        if counts.get(kind)
    )
    err_console.print(
        f"exported {words}" + (f" to {out}" if out is not None else ""), highlight=False
    )


@memory_app.command()
@handle_errors
def restore(
    memory_id: Annotated[
        str, typer.Argument(help="The memory (see `pmem show MEMORY_ID --history`).")
    ],
    revision: Annotated[int, typer.Argument(help="The old revision to make current again.")],
    yes: Annotated[bool, typer.Option("--yes", help="Do not ask for confirmation.")] = False,
    as_json: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """Make an old revision current again, as a new revision (history is never rewritten).
    A confirmed action: it asks first unless --yes is given."""
    from store.db import Database
    from store.records import MemoryStore

    store = MemoryStore(Database.open(settings()))
    current = store.get(memory_id)
    ask(
        f"restore revision {revision} of {memory_id} (current revision {current.current_revision})?",
        yes,
    )
    result = store.restore(
        memory_id,
        revision,
        expected_revision=current.current_revision,
        idempotency_key=f"restore:{memory_id}:{revision}:{current.current_revision}",
    )
    err_console.print(f"{memory_id}: revision {revision} restored as revision {result.revision}")
    if as_json:
        print_json(result.model_dump(mode="json"))


@runs_app.command()
@handle_errors
def prices(
    as_json: Annotated[
        bool,
        typer.Option(
            "--json",
            help="One object: as_of, prices (model, USD per million input / output tokens), free.",
        ),
    ] = False,
) -> None:
    """The price table the cost estimate and --max-cost use, with its date: US dollars per
    million input / output tokens (standard tier, no cache discount). A model not listed needs
    `pmem backfill --price IN/OUT` for --max-cost."""
    from providers.pricing import FREE_PROVIDERS, PRICES_AS_OF, price_rows

    rows = price_rows()
    if as_json:
        print_json(
            {
                "as_of": PRICES_AS_OF,
                "currency": "USD",
                "unit": "per million tokens",
                "prices": rows,
                "free": sorted(FREE_PROVIDERS),
            }
        )
        return
    typer.echo(
        f"prices as of {PRICES_AS_OF} (USD per million tokens: input / output; check the vendor's page)"
    )
    width = max(len(str(r["model"])) for r in rows)
    for r in rows:
        typer.echo(
            f"  {str(r['model']):<{width}}  {r['input_per_million']:>7.3f} / {r['output_per_million']:.3f}"
        )
    typer.echo(f"  free (offline): {', '.join(sorted(FREE_PROVIDERS))}")
