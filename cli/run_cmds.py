"""Review and apply a dry run, export the memory, serve the memory API."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from cli.app import (
    EXIT_ERROR,
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
    md, page = write_review(rv, cfg.runs_dir)
    if as_json:
        print_json(rv.as_json() | {"markdown": str(md), "html": str(page)})
        return
    c = rv.counts
    err_console.print(
        f"[bold]run {run_id}[/]: {c['drafts']} drafts, {c['new']} new, {c['appends']} appends, "
        f"{c['uncommittable']} not committable ({c['target_not_offered']} target-not-offered), "
        f"{c['rejected']} rejected; tokens {rv.tokens}"
    )
    for d in rv.drafts:
        tag = "[red]rejected[/]" if d.rejected else f"[cyan]{d.action}[/]"
        err_console.print(f"\n{tag} [bold]{escape(tty(d.title))}[/]  ({escape(tty(d.draft_id))})")
        if d.reason:
            err_console.print(f"  [yellow]{escape(tty(d.reason))}[/]")
        for line in d.diff:
            style = "green" if line.startswith("+") else "red" if line.startswith("-") else "dim"
            err_console.print(f"  [{style}]{escape(tty(line))}[/]")
        for key, text in d.evidence_added[:3]:
            err_console.print(f"  + evidence [dim]{escape(tty(key))}[/] {escape(tty(text[:100]))}")
    err_console.print(f"\nwritten: {md} and {page}\napply with: pmem apply {run_id}")


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
    if not yes and not typer.confirm(
        f"restore revision {revision} of {memory_id} (current revision {current.current_revision})?",
        err=True,
    ):
        raise typer.Exit(EXIT_ERROR)
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
