"""Write paths: `pmem backfill`, `import` (`status` and `demo` are in cli/owner_cmds.py). Prefect is
imported lazily."""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path, PurePosixPath
from typing import Annotated, Any

import typer
from rich.markup import escape

from cli.app import EXIT_ERROR, app, err_console, handle_errors, print_json, settings
from core.display import for_terminal as tty
from core.errors import ConfigError, ConsentRequired, PmemError, RateLimitStop
from core.settings import Settings
from state.consent import Target

# ---------------------------------------------------------------- write paths


def _prefect_env(settings: Settings) -> None:
    """Prefect reads its settings on import: keep its home under the data dir, telemetry off, and
    point it at the local Prefect server pmem manages under the data dir (started on first use,
    then reused: no temporary server started per command). PREFECT_API_URL set: that server is used.
    PMEM_PREFECT=ephemeral: Prefect's own temporary server, as before."""
    # Prefect's temporary server dies silently (start-up "timeout") when its home is missing
    settings.prefect_home.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("PREFECT_HOME", str(settings.prefect_home))
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    os.environ.setdefault("DO_NOT_TRACK", "1")
    os.environ.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")
    # the first start migrates its SQLite database: slow on a small machine
    os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "120")
    mode = os.environ.get("PMEM_PREFECT", "managed").strip().lower() or "managed"
    if mode not in ("managed", "ephemeral"):
        from core.errors import ConfigError

        raise ConfigError(f"PMEM_PREFECT must be 'managed' or 'ephemeral', not {mode!r}")
    if mode == "managed" and not os.environ.get("PREFECT_API_URL"):
        from flows.prefect_server import ensure_server

        def started(url: str, pid: int) -> None:
            err_console.print(f"started the local Prefect server {url.removesuffix('/api')} (pid {pid}); "
                              "it keeps running for the next commands: `pmem prefect stop` stops it")  # fmt: skip

        os.environ["PREFECT_API_URL"] = ensure_server(settings, on_start=started)
        from flows.prefect_server import client_env

        os.environ.update(client_env(settings))  # its API auth string (flows/prefect_server.py)


def quiet_prefect_console() -> None:
    """Prefect prints every run's logs and a full traceback on failure to the terminal; the CLI
    prints its own summary and one clear error line instead. Prefect's API still gets its logs
    (ids and counts only); `pmem -v` keeps the console output."""
    if logging.getLogger().level <= logging.INFO:  # --verbose
        return
    for name in [n for n in logging.root.manager.loggerDict if n == "prefect" or n.startswith("prefect.")]:
        for handler in logging.getLogger(name).handlers:
            if isinstance(handler, logging.StreamHandler):
                handler.setLevel(logging.CRITICAL)
    logging.getLogger("prefect").propagate = False  # nor through the CLI's own stderr handler


def _run_backfill(source: str, export: str | None, dry_run: bool, llm: str | None, embed: bool = True) -> dict[str, Any]:
    from cli.foreground import foreground_run
    from flows.pipeline import resolve_export

    cfg = settings()
    path = resolve_export(cfg, source, export)
    # one run at a time per data dir; waits said out loud; Ctrl-C as one line (cli/foreground.py)
    with foreground_run(cfg):
        _prefect_env(cfg)
        from flows.backfill import backfill as backfill_flow
        from flows.prefect_server import sweep_crashed_runs, tracked_runs

        quiet_prefect_console()
        sweep_crashed_runs(cfg)  # runs a kill left RUNNING become Crashed
        with tracked_runs(cfg):  # tags: this data dir and this process, for the next sweep
            return backfill_flow(source=source, export_path=str(path), dry_run=dry_run, llm=llm, embed=embed)


class _EstimateOnly:
    """Stands in for a vendor drafter whose API key (or SDK) is not there: an estimate needs only
    the model id and the prompt version, and never calls the drafter."""

    def __init__(self, spec: str) -> None:
        from prompts.case_record import PROMPT_VERSION

        provider, _, model = spec.strip().partition(":")
        self.model = f"{provider.strip().lower()}:{model.strip()}"
        self.prompt_version = PROMPT_VERSION

    def draft(self, conversations: Any, context: Any) -> Any:
        raise ConfigError("an estimate never drafts")


def _estimate(source: str, export: str | None, llm: str | None) -> dict[str, Any]:
    from flows.consent import drafting_target
    from flows.pipeline import Pipeline, estimate_run, resolve_export

    cfg = settings()
    path = resolve_export(cfg, source, export)
    spec = llm or cfg.llm
    try:
        p = Pipeline.open(cfg, llm)
    except ConfigError:  # no API key or SDK: the estimate still works, the run would not
        if drafting_target(spec, source) is None or not spec.partition(":")[2].strip():
            raise
        p = Pipeline.open(cfg, "extractive")
        p.drafter = _EstimateOnly(spec)
    try:
        return estimate_run(p, source, str(path))
    finally:
        p.close()


def _interactive() -> bool:
    return sys.stdin.isatty()


def _consent(source: str, export: str | None, llm: str | None, rules: list[str], yes: bool,
             est: dict[str, Any] | None) -> None:  # fmt: skip
    """Before text leaves the machine: show what would be sent to each remote model that has no
    remembered consent for this data dir and scope, and ask (or take --yes). Without a terminal
    and without --yes: refuse (ConsentRequired, exit 77). Nothing has been sent at this point."""
    from flows import consent as cs

    cfg = settings()
    targets = [t for t in (cs.drafting_target(llm or cfg.llm, source), cs.embedding_target()) if t is not None]
    for target in targets:
        if target.kind == "drafting" and cs.find(cfg, target) is None:
            est = est or _estimate(source, export, llm)
        confirm_send(target, est, rules, yes)


def confirm_send(target: Target, est: dict[str, Any] | None, rules: list[str], yes: bool) -> None:
    """One remote target (flows.consent.Target): nothing when its consent is remembered; else
    show what would go, then ask, take --yes, or refuse (ConsentRequired, exit 77)."""
    from flows import consent as cs

    cfg = settings()
    if cs.find(cfg, target) is not None:
        return
    if target.kind == "drafting":
        assert est is not None
        lines = cs.preview_lines(est, target, rules)
        preview = cs.preview_of(est)
    else:
        lines = [f"would send to {target.describe()} for embedding: the text of the memories (titles, "
                 "summaries, aliases, tags) and your search queries; never raw messages"]  # fmt: skip
        preview = {}
    for line in lines:
        err_console.print(escape(tty(line)))
    if not yes:
        if not _interactive():
            raise ConsentRequired(
                f"consent to send to {target.describe()} is needed and there is no terminal to ask",
                hint="run it in a terminal to answer, or add --yes to consent (it is remembered for this "
                "data dir)" + ("; --estimate shows what would be sent" if target.kind == "drafting" else ""),
            )
        what = "these conversations" if target.kind == "drafting" else "memory texts and queries"
        if not typer.confirm(f"send {what} to {target.describe()}? (remembered for this data dir)",
                             default=False, err=True):  # fmt: skip
            raise ConsentRequired(f"the owner declined sending to {target.describe()}")
    cs.grant(cfg, target, rules if target.kind == "drafting" else [], preview)
    err_console.print(f"consent recorded in {cfg.data_dir / 'consent.json'}")


def _print_summary(summary: dict[str, Any]) -> None:
    err_console.print(
        f"run [bold]{summary['run_id']}[/] {summary['status']}"
        f"{' (resumed)' if summary['resumed'] else ''}{' (dry run)' if summary['dry_run'] else ''}: "
        f"{summary['conversations']} conversations ({summary['kept']} kept, {summary['dropped']} dropped), "
        f"{summary['batches_total']} batches ({summary['batches_skipped_complete']} already complete), "
        f"{summary['drafter_calls']} drafter calls, {summary['commits']} commits, "
        f"{summary['rejected_evidence']} evidence pointers rejected, {summary['elapsed_seconds']:.1f}s"
        + (f", {summary['excluded']} conversations excluded" if summary.get("excluded") else "")
    )
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
    if out.get("error"):
        line += f"; [yellow]indexing failed ({out['error']}): run `pmem reindex`[/]"
    err_console.print(line)


_STAGES = {"draft": "drafting batches", "commit": "committing batches", "embed": "embedding messages"}


@contextmanager
def _progress_bars(first: str = "importing") -> Iterator[None]:
    """Progress bars on stderr while importing, drafting, committing and embedding (none when not
    a TTY)."""
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        SpinnerColumn,
        TextColumn,
        TimeElapsedColumn,
    )

    from flows import pipeline as pl

    bars = Progress(SpinnerColumn(), TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                    TimeElapsedColumn(), console=err_console, transient=True,
                    disable=not err_console.is_terminal)  # fmt: skip
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


@app.command()
@handle_errors
def backfill(
    source: Annotated[str, typer.Option("--source", "-s", help="chatgpt (more formats come with the importers).")] = "chatgpt",
    export: Annotated[str | None, typer.Option("--export", "-e", help="The export file. Default: newest file in <data dir>/exports/<source>/.")] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Draft and verify, commit nothing.")] = False,
    llm: Annotated[str | None, typer.Option("--llm", help="provider:model; default PMEM_LLM or the offline extractive drafter.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="End with one JSON object summarising the run.")] = False,
    estimate: Annotated[bool, typer.Option("--estimate", help="Only import and plan: print the tokens and cost the drafting would take.")] = False,
    max_cost: Annotated[float | None, typer.Option("--max-cost", help="Refuse to start when the estimated cost (USD) is higher.")] = None,
    no_embed: Annotated[bool, typer.Option("--no-embed", help="Index new messages for recall but do not embed them (`pmem reindex` does later).")] = False,
    exclude: Annotated[list[str] | None, typer.Option("--exclude", "-x", metavar="RULE", help=(
        "Leave conversations out: never drafted, never sent (repeatable). RULE is key:KEY "
        "(or a glob: key:'claude:*'), title:GLOB (case-insensitive: title:'*病院*'), "
        "before:YYYY-MM-DD, after:YYYY-MM-DD or range:YYYY-MM-DD..YYYY-MM-DD (inclusive; one "
        "side may be empty), by creation date (UTC days; an ISO time with offset is exact). "
        "With a remote model the rules are remembered with the consent and apply to later runs "
        "(the monthly re-import too)."))] = None,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Consent to sending to the remote model without being asked (remembered for this data dir).")] = False,
) -> None:
    """Import an export, draft case records and commit them. Run it again to resume.

    With a remote drafter (--llm openai:…, anthropic:…, gemini:…) or a remote embedder
    (PMEM_EMBEDDER=openai:…), the first run shows what would be sent (conversations, characters,
    sources, dates, exclusions) and asks; the answer is remembered per data dir, provider and
    source in <data dir>/consent.json. --estimate shows it without sending (no API key needed).

    Exit codes: 0 complete; 1 error or failed batches (run again to retry them); 75 stopped by a
    rate limit or a spent quota (run the same command again later: finished work is kept);
    77 not sent: consent to a remote model was declined, or is needed and there is no terminal
    to ask (add --yes)."""
    from flows.pipeline import set_excludes
    from stages.exclude import parse_rules

    rules = parse_rules(exclude or [])
    set_excludes(rules)  # process-local: private text never becomes a Prefect parameter
    est: dict[str, Any] | None = None
    if estimate or max_cost is not None:
        est = _estimate(source, export, llm)
        cost = "unknown (unpriced model)" if est["cost_usd"] is None else f"${est['cost_usd']:.2f}"
        err_console.print(
            f"estimate for {est['model']}: {est['conversations_to_draft']} conversations in "
            f"{est['batches_to_draft']} batches to draft, ~{est['input_tokens']:,} input and "
            f"~{est['output_tokens']:,} output tokens, cost {cost}"
        )
        from flows.consent import drafting_target, preview_lines

        target = drafting_target(est["model"], source)
        if target is not None:
            for line in preview_lines(est, target, est["exclude_rules"]):
                err_console.print(escape(tty(line)))
        elif est["excluded"]:
            err_console.print(f"excluded: {est['excluded']} conversations")
        if estimate:
            if as_json:
                print_json(est)
            return
        if est["cost_usd"] is not None and max_cost is not None and est["cost_usd"] > max_cost:
            raise PmemError(f"the estimated cost ${est['cost_usd']:.2f} is above --max-cost ${max_cost:.2f}",
                            hint="raise --max-cost, or draft a smaller export first")  # fmt: skip
    _consent(source, export, llm, [r.text for r in rules], yes, est)
    again = f"make backfill SOURCE={source}" + (f" EXPORT={export}" if export else "") + (" DRY_RUN=1" if dry_run else "")
    try:
        with _progress_bars():
            summary = _run_backfill(source, export, dry_run, llm, embed=not no_embed)
    except RateLimitStop as err:
        err.hint = f"finished work is saved; resume with `{again}` (same command) after the wait"
        raise
    _print_summary(summary)
    if summary["batches_failed"]:
        err_console.print(f"  → {summary['batches_failed']} batch(es) failed; run the same command again to retry them")
    if as_json:
        print_json(summary)
    if summary["status"] != "complete":
        raise typer.Exit(EXIT_ERROR)


EXIT_QUARANTINED = 3  # `pmem import`: some records were quarantined, the rest imported
_ERROR_LINES = 20  # error lines printed on the terminal; --json and `pmem ledger quarantine` have all


@app.command(name="import")
@handle_errors
def import_(
    path: Annotated[str, typer.Argument(help="An export: zip, folder or file (ChatGPT, Claude.ai, Codex, Claude Code).")],
    source: Annotated[str | None, typer.Option("--source", help="chatgpt, claude, codex or claude-code; detected when omitted.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="End with one JSON object: conversations, messages, skipped, errors.")] = False,
    no_embed: Annotated[bool, typer.Option("--no-embed", help="Index new messages for recall but do not embed them (`pmem reindex` does later).")] = False,
) -> None:
    """Import an export into the source ledger (no drafting), then index its new messages for
    `pmem recall` and embed them with the local embedder (`--no-embed` skips the vectors).
    Re-importing changes nothing.

    Exit codes: 0 everything imported; 3 some records were quarantined and the rest imported
    (`pmem ledger quarantine` lists them); 1 the input could not be read (what was read before
    the damage is kept). Each problem is an `error:` line on stderr naming the file and record."""
    from flows.importing import error_entry, run_import
    from flows.pipeline import Pipeline, index_for_search
    from importers import IMPORTERS, sniff

    target = Path(path).expanduser()
    src = source or (sniff(target) if target.exists() else None)
    problem = None
    if not target.exists():
        problem = ("file or folder not found", "not-found")
    elif src is None:
        problem = ("cannot tell the format (pass --source chatgpt, claude, codex or claude-code)", "unknown-format")
    elif src not in IMPORTERS:
        problem = (f"unknown source {src!r} (known: {', '.join(sorted(IMPORTERS))})", "unknown-source")
    if problem is not None:
        stats = _empty_import_stats(problem[0])
        stats["errors"].append(error_entry(str(target), None, None, problem[1], "input"))
        _finish_import(src, stats, None, as_json)
        return
    assert src is not None
    p = Pipeline.open(settings())
    try:
        with _import_bar() as on_progress:
            stats = run_import(p.ledger, src, str(target.resolve()), on_progress=on_progress,
                               index_messages=True)  # the recall index is built alongside
        with _progress_bars("indexing messages for recall"):
            indexed = index_for_search(p, embed=not no_embed, memories=False)
        indexed["indexed_messages"] += stats.pop("indexed_messages", 0)
    finally:
        p.close()
    _finish_import(src, stats, indexed, as_json)


def _empty_import_stats(input_error: str) -> dict[str, Any]:
    return {
        "conversations": 0, "conversations_new": 0, "conversations_changed": 0,
        "conversations_unchanged": 0, "messages_new": 0, "quarantined": 0, "kept": 0, "dropped": 0,
        "drop_reasons": {}, "unknown_types": {}, "skipped": {}, "errors": [], "errors_total": 1,
        "input_error": input_error, "bytes_read": 0, "bytes_total": 0, "elapsed_seconds": 0.0,
    }  # fmt: skip


def import_summary(src: str | None, stats: dict[str, Any], indexed: dict[str, Any] | None) -> dict[str, Any]:
    """The `pmem import --json` object: the contract's nested counts, then the flat keys."""
    flat = {k: v for k, v in stats.items() if k not in ("conversations", "errors", "skipped")}
    out: dict[str, Any] = {
        "source": src,
        "conversations": {"new": stats["conversations_new"], "changed": stats["conversations_changed"],
                          "unchanged": stats["conversations_unchanged"], "quarantined": stats["quarantined"]},
        "messages": {"new": stats["messages_new"]},
        "skipped": stats["skipped"],
        "errors": stats["errors"],
        "conversations_total": stats["conversations"],
        **flat,
    }  # fmt: skip
    if indexed is not None:
        out.update({
            "indexed_messages": indexed["indexed_messages"], "embedded_messages": indexed["messages"],
            "messages_without_vectors": indexed["messages_without_vectors"], "vectors": indexed["vectors"],
            "indexed": indexed,
        })  # fmt: skip
    return out


def _finish_import(src: str | None, stats: dict[str, Any], indexed: dict[str, Any] | None, as_json: bool) -> None:
    """Error lines, the summary in words, the JSON object, the exit code (0, 3 or 1)."""
    for e in stats["errors"][:_ERROR_LINES]:
        record = "" if e["record"] is None else f" record {e['record']}"
        message = e["reason"] if e["kind"] != "input" else (stats["input_error"] or e["reason"])
        err_console.print(f"[red]error:[/] {escape(tty(_base_name(e['file'])))}{record}: {escape(tty(message))}",
                          highlight=False)  # fmt: skip
    hidden = stats["errors_total"] - min(len(stats["errors"]), _ERROR_LINES)
    if hidden > 0:
        err_console.print(f"[red]error:[/] … and {hidden} more (`pmem ledger quarantine` lists every quarantined record)")
    err_console.print(_import_words(stats), highlight=False)
    _print_indexed(indexed)
    if as_json:
        print_json(import_summary(src, stats, indexed))
    if stats["input_error"]:
        raise typer.Exit(EXIT_ERROR)
    if stats["quarantined"]:
        raise typer.Exit(EXIT_QUARANTINED)


def _base_name(label: str) -> str:
    """``/a/b/export.zip!dir/conversations.json`` → ``export.zip!conversations.json``."""
    file, _, member = label.partition("!")
    base = Path(file).name or file
    return f"{base}!{PurePosixPath(member).name}" if member else base


def _import_words(stats: dict[str, Any]) -> str:
    n = stats["conversations"]
    words = (f"imported {n} conversation{'s' if n != 1 else ''}: {stats['conversations_new']} new, "
             f"{stats['conversations_changed']} changed, {stats['conversations_unchanged']} unchanged; "
             f"{stats['messages_new']} new messages; {stats['quarantined']} quarantined")  # fmt: skip
    if stats["skipped"]:
        parts = ", ".join(f"{count} {reason}" for reason, count in sorted(stats["skipped"].items()))
        words += f"; skipped {parts}"
    if stats["bytes_read"]:
        words += f"; {stats['bytes_read'] / 1e6:.1f} MB in {stats['elapsed_seconds']:.1f}s"
    if stats["input_error"]:
        words += "; the input could not be read" + (" to the end (what was read before is kept)" if n else "")
    return words


@contextmanager
def _import_bar() -> Iterator[Any]:
    """A progress bar on stderr while importing: bytes read of the total, conversations so far
    (nothing is drawn when stderr is not a terminal)."""
    import time

    from rich.progress import (
        BarColumn,
        DownloadColumn,
        Progress,
        SpinnerColumn,
        TextColumn,
        TimeElapsedColumn,
        TransferSpeedColumn,
    )

    bar = Progress(SpinnerColumn(), TextColumn("importing"), BarColumn(), DownloadColumn(),
                   TransferSpeedColumn(), TextColumn("{task.fields[conversations]} conversations"),
                   TimeElapsedColumn(), console=err_console, transient=True,
                   disable=not err_console.is_terminal)  # fmt: skip
    task = bar.add_task("importing", total=None, conversations=0)
    last = [0.0]

    def update(progress: Any) -> None:
        now = time.monotonic()
        if now - last[0] < 0.1 and progress.bytes_read < progress.bytes_total:
            return
        last[0] = now
        bar.update(task, completed=progress.bytes_read, total=progress.bytes_total or None,
                   conversations=progress.conversations)  # fmt: skip

    with bar:
        yield update
