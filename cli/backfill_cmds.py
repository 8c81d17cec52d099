"""Write paths: `pmem backfill` (`pmem import` is in cli/import_cmds.py, `status` and `runs demo`
in cli/status_cmds.py, what a run says in words in cli/run_words.py). Prefect is imported
lazily."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape

from cli.app import (
    EXIT_ERROR,
    EXIT_TEMPFAIL,
    app,
    err_console,
    error_fields,
    handle_errors,
    print_json,
    settings,
)
from cli.prefect_env import (
    _prefect_env,
    flow_parameters,
    quiet_prefect_console,
    run_options,
    run_request,
)
from cli.run_words import (
    _CONTRACT_KEYS,
    _print_summary,
    _progress_bars,
    estimate_words,
    summary_words,
)
from core.display import for_terminal as tty
from core.display import plural
from core.errors import ConfigError, ConsentRequired, CostLimitStop, PmemError, RateLimitStop
from state.consent import Target

# ---------------------------------------------------------------- write paths


def _run_backfill(a: dict[str, Any]) -> dict[str, Any]:
    """The backfill flow over one export (a resolved path; None: --pending), the run's options
    its parameters: plain values, and the id of the run request that holds what names
    conversations (--redraft keys, --exclude rules: state/requests.py), removed once the flow
    has returned."""
    from cli.foreground import foreground_run
    from state import requests

    cfg = settings()
    # one run at a time per data dir; waits said out loud; Ctrl-C as one line (cli/foreground.py)
    with foreground_run(cfg):
        _prefect_env(cfg)
        from flows.backfill import backfill as backfill_flow
        from flows.prefect_server import sweep_crashed_runs, tracked_runs

        quiet_prefect_console()
        sweep_crashed_runs(cfg)  # runs a kill left RUNNING become Crashed
        request = requests.put(cfg.data_dir, run_request(a))
        try:
            with tracked_runs(cfg):  # tags: this data dir and this process, for the next sweep
                return backfill_flow(
                    source=a["source"],
                    export_path=a["export"] or "",
                    dry_run=a["dry_run"],
                    llm=a["llm"],
                    embed=not a["no_embed"],
                    **flow_parameters(a),
                    request=request,
                )
        finally:
            requests.drop(cfg.data_dir, request)


def plain_args(source: str, export: str | None, llm: str) -> dict[str, Any]:
    """A backfill's arguments with no options (the demo's run)."""
    return {
        "source": source,
        "export": export,
        "llm": llm,
        "dry_run": False,
        "max_cost": None,
        "price": None,
        "parsed_price": None,
        "max_wait": None,
        "redraft": None,
        "no_embed": False,
        "exclude": [],
    }


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


def _estimate(a: dict[str, Any]) -> dict[str, Any]:
    """What the run would draft and cost; reads the export, writes nothing, needs no API key."""
    from flows.consent import drafting_target
    from flows.pipeline import Pipeline, estimate_run
    from stages.exclude import parse_rules

    cfg = settings()
    source, export, llm = a["source"], a["export"], a["llm"]
    spec = llm or cfg.llm
    options, excludes = run_options(a), parse_rules(a["exclude"])
    try:
        p = Pipeline.open(cfg, llm, options=options, excludes=excludes)
    except ConfigError:  # no API key or SDK: the estimate still works, the run would not
        if drafting_target(spec, source) is None or not spec.partition(":")[2].strip():
            raise
        p = Pipeline.open(cfg, "extractive", options=options, excludes=excludes)
        p.drafter = _EstimateOnly(spec)
    try:
        return estimate_run(p, source, export)
    finally:
        p.close()


def _interactive() -> bool:
    return sys.stdin.isatty()


def _consent(a: dict[str, Any], yes: bool, est: dict[str, Any] | None) -> None:
    """Before text leaves the machine: show what would be sent to each remote model that has no
    remembered consent for this data dir and scope, and ask (or take --yes). Without a terminal
    and without --yes: refuse (ConsentRequired, exit 77). Nothing has been sent at this point."""
    from flows import consent as cs
    from stages.exclude import parse_rules

    cfg = settings()
    source, llm = a["source"], a["llm"]
    rules = [r.text for r in parse_rules(a["exclude"])]
    scope = cs.drafting_scope(source, a.get("include_others", False))
    targets = [
        t
        for t in (cs.drafting_target(llm or cfg.llm, scope), cs.embedding_target())
        if t is not None
    ]
    for target in targets:
        if target.kind == "drafting" and cs.find(cfg, target) is None:
            est = est or _estimate(a)
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
        lines = [
            f"would send to {target.describe()} for embedding: the text of the memories (titles, "
            "summaries, aliases, tags) and your search queries; never raw messages"
        ]
        preview = {}
    for line in lines:
        err_console.print(escape(tty(line)))
    if not yes:
        if not _interactive():
            raise ConsentRequired(
                f"consent to send to {target.describe()} is needed and there is no terminal to ask",
                hint="run it in a terminal to answer, or add --yes to consent (it is remembered for this "
                "data dir)"
                + ("; --estimate shows what would be sent" if target.kind == "drafting" else ""),
            )
        what = "these conversations" if target.kind == "drafting" else "memory texts and queries"
        try:
            ok = typer.confirm(
                f"send {what} to {target.describe()}? (remembered for this data dir)",
                default=False,
                err=True,
            )
        except typer.Abort:  # Ctrl-D at the question
            ok = False
        if not ok:
            raise ConsentRequired(f"the owner declined sending to {target.describe()}")
    cs.grant(cfg, target, rules if target.kind == "drafting" else [], preview)
    err_console.print(f"consent recorded in {cfg.data_dir / 'consent.json'}")


EXIT_COST_LIMIT = 4  # `pmem backfill`: --max-cost reached; raise it and run the same command


def resume_commands(a: dict[str, Any]) -> tuple[str, str]:
    """The command that runs this backfill again (resumes it), with every option it was started
    with: as `pmem backfill …` and as `make backfill …`."""
    import shlex

    q = shlex.quote
    cli = ["pmem", "backfill", "--source", a["source"]]
    mk = ["make", "backfill", f"SOURCE={a['source']}"]
    if a["export"]:
        cli += ["--export", q(a["export"])]
        mk.append(f"EXPORT={q(a['export'])}")
    else:
        cli.append("--pending")
        mk.append("PENDING=1")
    cli += ["--llm", q(a["llm"])]
    mk.append(f"LLM={q(a['llm'])}")
    if a["dry_run"]:
        cli.append("--dry-run")
        mk.append("DRY_RUN=1")
    for flag, var, value in (
        ("--max-cost", "MAX_COST", a["max_cost"]),
        ("--price", "PRICE", a["price"]),
        ("--max-wait", "MAX_WAIT", a["max_wait"]),
    ):
        if value is not None:
            text = f"{value:g}" if isinstance(value, float) else str(value)
            cli += [flag, q(text)]
            mk.append(f"{var}={q(text)}")
    if a["redraft"] is not None:
        cli += ["--redraft", *map(q, a["redraft"])]
        mk.append(f"REDRAFT={q(' '.join(a['redraft']) or 'all')}")
    if a["no_embed"]:
        cli.append("--no-embed")
        mk.append("NO_EMBED=1")
    if a.get("include_others"):
        cli.append("--include-others")
        mk.append("INCLUDE_OTHERS=1")
    for rule in a["exclude"]:
        cli += ["--exclude", q(rule)]
    if a["exclude"]:
        mk.append(f"EXCLUDE={q(' '.join(a['exclude']))}")
    return " ".join(cli), " ".join(mk)


def _check_source(path: Path, source: str | None) -> str:
    """The export's format, sniffed before anything starts (importers.check_source)."""
    from importers import check_source

    return check_source(path, source)


def _failed_summary(err: PmemError, args: dict[str, Any] | None) -> dict[str, Any]:
    """The --json object of a backfill that ended before (or outside) a run: the contract's
    keys, and the error's (error, message, hint, exit_code: cli.app.error_fields)."""
    out: dict[str, Any] = dict.fromkeys(_CONTRACT_KEYS, 0)
    out.update(
        run_id=getattr(err, "run_id", None),
        status="failed",
        resume_command=None,
        cost_usd=0.0,
        error_type=type(err).__name__,
        **error_fields(err),
    )
    if args is not None and args.get("source"):
        out["resume_command"], out["make_command"] = resume_commands(args)
    return out


def _stopped_summary(err: RateLimitStop | CostLimitStop) -> dict[str, Any]:
    summary = getattr(err, "summary", None)
    if summary is None:  # Prefect did not hand the exception back as raised: the stored one
        from store.db import Database
        from store.runs import RunStore

        row = RunStore(Database.open(settings())).get_run(err.run_id)
        summary = dict((row or {}).get("summary") or {})
    summary.setdefault("run_id", err.run_id)
    summary["status"] = "cost_limit" if isinstance(err, CostLimitStop) else "stopped"
    summary["stop_reason"] = str(err)
    if isinstance(err, RateLimitStop):
        summary["retry_after"] = err.retry_after
    for key in _CONTRACT_KEYS:
        summary.setdefault(key, 0)
    return summary


@app.command(short_help="Import, draft case records and commit them; resumable.")
@handle_errors
def backfill(
    keys: Annotated[
        list[str] | None,
        typer.Argument(
            metavar="[CONVERSATION_KEY…]",
            show_default=False,
            help="With --redraft: the conversations to draft again (default: every conversation of the export).",
        ),
    ] = None,
    source: Annotated[
        str | None,
        typer.Option(
            "--source",
            "-s",
            show_default=False,
            help="chatgpt, claude, codex, claude-code, jsonl-log, line or telegram. Default: detected from the export (a --source that contradicts the file is refused); chatgpt for the inbox.",
        ),
    ] = None,
    export: Annotated[
        str | None,
        typer.Option(
            "--export",
            "-e",
            metavar="PATH",
            help="The export (zip, folder or file); its new and changed conversations are drafted. Default: the newest file in <data dir>/exports/<source>/ (named when used).",
        ),
    ] = None,
    pending: Annotated[
        bool,
        typer.Option(
            "--pending",
            help="Draft everything pending in the ledger for the source (no export read).",
        ),
    ] = False,
    dry_run: Annotated[
        bool,
        typer.Option(
            "--dry-run",
            help="Draft and verify, commit nothing (then `pmem review RUN`, `pmem apply RUN`).",
        ),
    ] = False,
    llm: Annotated[
        str | None,
        typer.Option(
            "--llm",
            metavar="PROVIDER:MODEL",
            help="The drafter; default PMEM_LLM or the offline extractive drafter.",
        ),
    ] = None,
    as_json: Annotated[
        bool,
        typer.Option(
            "--json", help="End with one JSON object summarising the run (on every exit)."
        ),
    ] = False,
    estimate: Annotated[
        bool,
        typer.Option(
            "--estimate",
            help="Only estimate: tokens, cost, batches, commits. Reads the export, writes nothing, needs no API key.",
        ),
    ] = False,
    max_cost: Annotated[
        float | None,
        typer.Option(
            "--max-cost",
            metavar="USD",
            help="Stop (exit 4) before a batch whose estimate would take the run's model spending, over all its resumes, past this; raise it and run the same command to go on.",
        ),
    ] = None,
    price: Annotated[
        str | None,
        typer.Option(
            "--price",
            metavar="IN/OUT",
            help="USD per million input / output tokens, for a model the price table does not list (`pmem prices`).",
        ),
    ] = None,
    max_wait: Annotated[
        float | None,
        typer.Option(
            "--max-wait",
            metavar="SECONDS",
            help="Wait at most this long for a rate limit (Retry-After), then stop with exit 75 (default PMEM_MAX_WAIT_SECONDS, 600).",
        ),
    ] = None,
    redraft: Annotated[
        bool,
        typer.Option(
            "--redraft",
            help="Start a new run that drafts the given conversations (or the export's) again under the current prompt and model; earlier drafts stay for review.",
        ),
    ] = False,
    no_embed: Annotated[
        bool,
        typer.Option(
            "--no-embed",
            help="Index new messages for recall but do not embed them (`pmem reindex` does later).",
        ),
    ] = False,
    exclude: Annotated[
        list[str] | None,
        typer.Option(
            "--exclude",
            "-x",
            metavar="RULE",
            help=(
                "Leave conversations out: never drafted, never sent (repeatable). RULE is key:KEY "
                "(or a glob: key:'claude:*'), title:GLOB (case-insensitive: title:'*病院*'), "
                "before:YYYY-MM-DD, after:YYYY-MM-DD or range:YYYY-MM-DD..YYYY-MM-DD (inclusive; one "
                "side may be empty), by creation date (UTC days; an ISO time with offset is exact). "
                "With a remote model the rules are remembered with the consent and apply to later runs "
                "(the monthly re-import too)."
            ),
        ),
    ] = None,
    yes: Annotated[
        bool,
        typer.Option(
            "--yes",
            "-y",
            help="Consent to sending to the remote model without being asked (remembered for this data dir).",
        ),
    ] = False,
    me: Annotated[
        str | None,
        typer.Option(
            "--me",
            metavar="NAMES",
            help="Your names in a chat history or log, comma-separated (default PMEM_ME); other speakers are kept as `other`.",
        ),
    ] = None,
    include_others: Annotated[
        bool,
        typer.Option(
            "--include-others",
            help="Also give other speakers' messages of your chat histories (LINE, Telegram, JSONL logs) to the drafter; a remote model needs its own consent for them. Default: only your words and the assistant's.",
        ),
    ] = False,
    pool: Annotated[
        str | None,
        typer.Option(
            "--pool",
            metavar="POOL",
            help="Import and plan here, then submit the run to this Prefect work pool (`pmem deploy`, `pmem worker`): its workers draft and commit. Prints the flow run's URL.",
        ),
    ] = None,
    wait: Annotated[
        bool,
        typer.Option(
            "--wait",
            help="With --pool: follow the run to its end with the progress bars; --json then prints the run's summary over all workers.",
        ),
    ] = False,
) -> None:
    """Import an export, draft case records of its new and changed conversations and commit
    them. A run is its export: the same command (source, export content or --pending, model,
    prompt version, dry run) resumes it, and a run with nothing new says "nothing to do".
    Every run prints its estimate before drafting.

    With a remote drafter (--llm openai:…, anthropic:…, gemini:…) or a remote embedder
    (PMEM_EMBEDDER=openai:…), the first run shows what would be sent (conversations, characters,
    sources, dates, exclusions) and asks; the answer is remembered per data dir, provider and
    source in <data dir>/consent.json. --estimate shows it without sending (no API key needed).

    Exit codes: 0 complete (or nothing to do); 1 an error, 0 conversations in the export, or
    failed batches (run again to retry them); 4 stopped at --max-cost (raise it, run again);
    75 stopped by a rate limit longer than --max-wait (run the same command again later:
    finished work is kept); 77 not sent: consent to a remote model was declined, or is needed
    and there is no terminal to ask (add --yes).

    With --pool the run goes to a Prefect work pool (docs/scale-out.md): this process imports
    the export into the ledger and plans the batches, submits the run and prints its flow run's
    URL (exit 0; --json: the summary so far, status "submitted"); with --wait it follows the
    run to its end and exits as an in-process run would."""
    args: dict[str, Any] | None = None
    if me is not None:
        os.environ["PMEM_ME"] = me  # the settings of this process (the importer reads it)
    try:
        if wait and not pool:
            raise ConfigError(
                "--wait goes with --pool", hint="an in-process run always runs to its end"
            )
        if pool and (max_cost is not None or include_others):
            raise ConfigError(
                f"--pool does not take {'--max-cost' if max_cost is not None else '--include-others'} yet",
                hint="run it in process (without --pool); docs/scale-out.md",
            )
        args = _backfill_args(
            keys,
            source,
            export,
            pending,
            dry_run,
            llm,
            max_cost,
            price,
            max_wait,
            redraft,
            no_embed,
            exclude,
        )
        args["include_others"] = include_others
        args["pool"], args["wait"] = pool, wait
        _backfill(args, as_json=as_json, estimate=estimate, yes=yes)
    except (RateLimitStop, CostLimitStop) as err:
        summary = _stopped_summary(err)
        if args is not None:
            summary["resume_command"], summary["make_command"] = resume_commands(args)
        for line in summary_words(summary):
            err_console.print(escape(line), highlight=False)
        what = "a rate limit" if isinstance(err, RateLimitStop) else "--max-cost"
        err_console.print(f"[yellow]stopped by {what}:[/] {escape(tty(str(err)))}")
        if isinstance(err, CostLimitStop):
            err_console.print(
                "  → finished work is kept; raise --max-cost and run the same command to resume:"
            )
        else:
            err_console.print(
                "  → finished work is kept; run the same command again after the wait to resume:"
            )
        err_console.print(f"    {escape(summary.get('resume_command') or '')}", highlight=False)
        err_console.print(f"    (or: {escape(summary.get('make_command') or '')})", highlight=False)
        code = EXIT_COST_LIMIT if isinstance(err, CostLimitStop) else EXIT_TEMPFAIL
        if as_json:  # the error keys too (cli.app.error_fields' four)
            again = (
                "raise --max-cost and run"
                if isinstance(err, CostLimitStop)
                else "after the wait, run"
            )
            hint = (
                f"finished work is kept; {again} the same command: {summary.get('resume_command')}"
            )
            summary |= {"error": summary["status"].replace("_", "-"), "message": str(err)}
            print_json(summary | {"hint": hint, "exit_code": code})
        raise typer.Exit(code) from None
    except PmemError as err:
        if as_json:
            print_json(_failed_summary(err, args))
        raise


def _backfill_args(
    keys: list[str] | None,
    source: str | None,
    export: str | None,
    pending: bool,
    dry_run: bool,
    llm: str | None,
    max_cost: float | None,
    price: str | None,
    max_wait: float | None,
    redraft: bool,
    no_embed: bool,
    exclude: list[str] | None,
) -> dict[str, Any]:
    """Check the options and the input before anything starts (no database, no Prefect)."""
    from flows.pipeline import resolve_export
    from providers.pricing import parse_price, price_for
    from stages.exclude import parse_rules

    if redraft and keys == ["all"]:  # `--redraft all`, as `make backfill REDRAFT=all` reads
        keys = []
    if keys and not redraft:
        raise ConfigError(
            f"unexpected argument {keys[0]!r}", hint="conversation keys go with --redraft KEY…"
        )
    if pending and export:
        raise ConfigError(
            "--pending and --export exclude each other",
            hint="--export drafts one export's conversations, --pending everything pending",
        )
    if max_cost is not None and max_cost < 0:
        raise ConfigError("--max-cost must not be negative")
    if max_wait is not None and max_wait < 0:
        raise ConfigError("--max-wait must not be negative")
    try:
        parsed_price = parse_price(price) if price else None
    except ValueError as err:
        raise ConfigError(str(err)) from None
    parse_rules(exclude or [])  # a wrong rule is a clear error here
    cfg = settings()
    spec = (llm or cfg.llm).strip()
    path: Path | None = None
    if keys and not export:  # chosen conversations: from the ledger, no export read
        pending = True
        source = source or keys[0].partition(":")[0]
    if not pending:
        path = resolve_export(cfg, source or "chatgpt", export)
        if not export:
            err_console.print(
                f"using the newest export in the inbox: {escape(tty(path.name))}", highlight=False
            )
        source = _check_source(path, source)
    source = source or "chatgpt"
    if max_cost is not None and parsed_price is None and price_for(spec) is None:
        raise ConfigError(
            f"no known price for {spec}: --max-cost cannot be held to",
            hint="give its price with --price IN/OUT (USD per million input / output tokens); "
            "`pmem prices` lists the known ones",
        )
    return {
        "source": source,
        "export": str(path) if path else None,
        "llm": spec,
        "dry_run": dry_run,
        "max_cost": max_cost,
        "price": price,
        "parsed_price": parsed_price,
        "max_wait": max_wait,
        "redraft": list(keys or []) if redraft else None,
        "no_embed": no_embed,
        "exclude": list(exclude or []),
    }


def _backfill(a: dict[str, Any], *, as_json: bool, estimate: bool, yes: bool) -> None:
    from flows.pipeline import set_announce

    source, export = a["source"], a["export"]
    est: dict[str, Any] | None = None
    if estimate:
        est = _estimate(a)
        err_console.print(escape(estimate_words(est)), highlight=False)
        from flows.consent import drafting_scope, drafting_target, preview_lines

        target = drafting_target(
            est["model"], drafting_scope(source, a.get("include_others", False))
        )
        if target is not None:
            for line in preview_lines(est, target, est["exclude_rules"]):
                err_console.print(escape(tty(line)))
        elif est["excluded"]:
            err_console.print(f"excluded: {plural(est['excluded'], 'conversation')}")
        if as_json:
            print_json(est)
        return
    _consent(a, yes, est)
    resume, make = resume_commands(a)

    def said(kind: str, data: dict[str, Any]) -> None:
        if kind == "estimate":
            err_console.print(escape(estimate_words(data)), highlight=False)
            if (
                data.get("max_cost") is not None
                and data["estimated_cost_usd"] is not None
                and data["estimated_cost_usd"] + (data.get("spent_usd") or 0) > data["max_cost"]
            ):
                err_console.print(
                    "  the estimate is above --max-cost: the run stops before it would pass it"
                )

    set_announce(said)
    try:
        if a.get("pool"):
            from cli.deploy_cmds import pool_stopped, run_on_pool

            summary = run_on_pool(a)
            if summary["status"] == "submitted":
                summary["resume_command"], summary["make_command"] = resume, make
                if as_json:
                    print_json(summary)
                return
            if summary["status"] in ("stopped", "cost_limit"):
                pool_stopped(summary)
        else:
            with _progress_bars():
                summary = _run_backfill(a)
    finally:
        set_announce(None)
    summary["resume_command"], summary["make_command"] = resume, make
    empty = export is not None and summary["conversations"] == 0
    if empty:
        from importers import SOURCE_NAMES

        summary["status"] = "failed"
        summary |= {
            "error": "error",
            "message": f"no {source} conversations found in {Path(export).name}",
            "hint": "check the file, or pass the --source it was exported from",
        }
    elif summary["status"] != "complete":
        summary |= {
            "error": "error",
            "message": f"{plural(summary['batches_failed'], 'batch')} failed",
            "hint": f"run the same command again to retry: {resume}",
        }
    if summary["status"] != "complete":
        summary["exit_code"] = EXIT_ERROR
    _print_summary(summary)
    if empty:
        err_console.print(
            f"[red]error:[/] no conversations in {escape(tty(Path(export).name))} matched the "
            f"{SOURCE_NAMES.get(source, source)} importer",
            highlight=False,
        )
        err_console.print("  → check the file, or pass the --source it was exported from")
    elif summary.get("nothing_to_do"):
        err_console.print(
            "nothing to do: every conversation of this run is drafted already"
            + ("" if summary["batches_total"] else " (no drafts: nothing to review or apply)")
        )
    if summary["batches_failed"]:
        err_console.print(
            f"  → {plural(summary['batches_failed'], 'batch')} failed; run the same command again "
            f"to retry: {escape(resume)}",
            highlight=False,
        )
    if a["dry_run"] and summary["status"] == "complete" and not empty and summary["batches_total"]:
        run_id = summary["run_id"]  # a run that made no drafts has nothing to review
        err_console.print(
            f"review the drafts: make review RUN={run_id}   (or: pmem runs review {run_id})",
            highlight=False,
        )
        err_console.print(
            f"then commit them:  make apply RUN={run_id}   (or: pmem runs apply {run_id})",
            highlight=False,
        )
    if as_json:
        print_json(summary)
    if summary["status"] != "complete":
        raise typer.Exit(EXIT_ERROR)
