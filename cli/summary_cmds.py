"""Seed 001's summaries: `pmem summarize` (the flow), `pmem summary list|show`, `pmem profile`,
`pmem timeline`.

Exit codes: 0 done; 1 an error (a month without a summary, a bad --month, the database); 75 a
vendor model's rate limit stopped the run (run the same command again later: it resumes); 77 a
vendor model was asked for and the owner's consent to send the months is not recorded.
Reading commands never import Prefect.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape

from cli.app import NounGroup, app, err_console, handle_errors, print_json, settings
from core.display import for_terminal, plural
from core.errors import ConfigError, PmemError

summary_app = typer.Typer(
    cls=NounGroup,
    help="Monthly summaries (one per month of your calendar, PMEM_TZ), each with the memories and "
    "messages it rests on. Made by `pmem summarize`.",
    no_args_is_help=True,
)
app.add_typer(summary_app, name="summary")

#: what a month's sentiment number is, said once where it is printed
SENTIMENT = "the tone of the month's sentences, −1 sad … 0 neutral … +1 glad"

_MONTH = re.compile(r"^[0-9]{4}-(0[1-9]|1[0-2])$")


def _store() -> Any:
    from store.db import Database
    from store.summaries import SummaryStore

    return SummaryStore(Database.open(settings()))


def _check_months(months: list[str]) -> None:
    bad = [m for m in months if not _MONTH.match(m)]
    if bad:
        raise ConfigError(f"--month takes YYYY-MM, got {bad[0]!r}", hint="e.g. --month 2024-07")


@summary_app.command("update")
@handle_errors
def summarize(
    llm: Annotated[
        str | None,
        typer.Option(
            "--llm",
            metavar="PROVIDER:MODEL",
            help="Who writes the summaries: extractive (offline, the default) or e.g. openai:<model>.",
        ),
    ] = None,
    month: Annotated[
        list[str] | None,
        typer.Option(
            "--month",
            metavar="YYYY-MM",
            help="Only these months (repeat the option); the profile is rebuilt from every month.",
        ),
    ] = None,
    yes: Annotated[
        bool,
        typer.Option(
            "--yes",
            help="Consent to sending the months to a vendor model "
            "without asking (remembered for this data dir).",
        ),
    ] = False,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print one JSON object (the run summary) last on stdout.")
    ] = False,
) -> None:
    """Summarize each month, then the whole: who you are and how that changed (seed 001).

    Months are done in order. A month whose memories and messages did not change since its last
    summary is skipped, so running it again after nothing new makes no model call; a month that
    received new material gets a new version (the old one is kept: `pmem summary show M --version N`).
    Interrupted, the same command resumes."""
    months = list(month or [])
    _check_months(months)
    from cli.prefect_env import _prefect_env, quiet_prefect_console

    cfg = settings()
    from flows.summarize import consent_target, preview

    target = consent_target(llm)
    if (
        target is not None
    ):  # the months would leave the machine: show what, and ask (exit 77 if not)
        from cli.backfill_cmds import confirm_send

        confirm_send(target, preview(cfg), [], yes)
    _prefect_env(cfg)
    from flows.summary_flow import summarize as summarize_flow

    quiet_prefect_console()
    from flows.summarize import set_progress

    with _month_bar() as listener:
        set_progress(listener)
        try:
            summary = summarize_flow(llm=llm, months=months or None)
        finally:
            set_progress(None)
    if as_json:
        print_json(summary)
        return
    drafted, skipped = summary["months_drafted"], summary["months_skipped"]
    line = (
        f"{plural(summary['months_total'], 'month')}: {drafted} summarized, {skipped} unchanged "
        f"(skipped); {plural(summary['drafter_calls'], 'drafter call')}; "
        f"profile {'updated (version ' + str(summary['profile_version']) + ')' if summary['profile_updated'] else 'unchanged'}"
    )
    err_console.print(line)
    if summary["unknown_months"]:
        err_console.print(f"[yellow]no material for:[/] {', '.join(summary['unknown_months'])}")
    err_console.print(
        "next: `pmem summary list`, `pmem profile`, `pmem timeline --out timeline.html`"
    )


@contextmanager
def _month_bar() -> Iterator[Any]:
    """A bar over the months on a terminal; with stderr piped, one line per month redone."""
    if not err_console.is_terminal:

        def line(kind: str, data: dict[str, Any]) -> None:
            if kind == "month" and data["status"] != "skipped":
                err_console.print(f"{data['month']}: {data['status']} (version {data['version']})")

        yield line
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

    with Progress(
        TextColumn("summarizing months"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.description}"),
        console=err_console,
        transient=True,
    ) as bar:
        task = bar.add_task("", total=None)

        def update(kind: str, data: dict[str, Any]) -> None:
            if kind == "months":
                bar.update(task, total=data["total"])
            elif kind == "month":
                bar.update(task, advance=1, description=data["month"])

        yield update


@summary_app.command("list")
@handle_errors
def summary_list(
    as_json: Annotated[
        bool, typer.Option("--json", help="Print one JSON object last on stdout.")
    ] = False,
) -> None:
    """Every month with a summary: its sentiment (−1 … 1), keywords and newest version."""
    items = [
        {
            "month": m.month,
            "sentiment": round(m.sentiment, 3),
            "keywords": list(m.keywords),
            "version": m.version,
        }
        for m in _store().latest_all()
    ]
    if as_json:
        print_json({"items": items})
        return
    if not items:
        err_console.print("no monthly summaries yet: run `pmem summarize`")
        return
    err_console.print(f"month  sentiment ({SENTIMENT})  version  keywords", highlight=False)
    for it in items:
        kw = ", ".join(it["keywords"][:6])
        sys.stdout.write(
            for_terminal(f"{it['month']}  {it['sentiment']:+.2f}  v{it['version']}  {kw}") + "\n"
        )


@summary_app.command("show")
@handle_errors
def summary_show(
    month: Annotated[
        str, typer.Argument(metavar="YYYY-MM", help="The month, in your calendar (PMEM_TZ).")
    ],
    version: Annotated[
        int | None, typer.Option("--version", help="An older version (default: the newest).")
    ] = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print one JSON object last on stdout.")
    ] = False,
) -> None:
    """One month's summary with the memories and messages it cites."""
    _check_months([month])
    store = _store()
    m = store.version(month, version) if version else store.latest(month)
    if m is None:
        what = f"version {version} of {month}" if version else month
        raise PmemError(
            f"no summary for {what}",
            hint="`pmem summary list` shows the months; `pmem summarize` makes them",
        )
    if as_json:
        print_json(m.to_json())
        return
    out = sys.stdout
    out.write(
        for_terminal(
            f"{m.month} (version {m.version}, sentiment {m.sentiment:+.2f}: {SENTIMENT}; {m.model})"
        )
        + "\n"
    )
    out.write(for_terminal("keywords: " + ", ".join(m.keywords)) + "\n\n")
    for line in m.to_json()["sentences"]:  # each line with what it is drawn from
        refs = [*line["memory_ids"], *line["message_keys"]]
        out.write(for_terminal(line["text"] + (f"  [{', '.join(refs)}]" if refs else "")) + "\n")
    out.write("\n")
    if m.memory_ids:
        out.write("memories: " + " ".join(m.memory_ids) + "  (pmem show ID)\n")
    if m.message_keys:
        out.write("messages: " + " ".join(m.message_keys) + "\n")


@summary_app.command()
@handle_errors
def profile(
    version: Annotated[
        int | None, typer.Option("--version", help="An older version (default: the newest).")
    ] = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print one JSON object last on stdout.")
    ] = False,
) -> None:
    """The global profile built from the monthly summaries (seed 001's level 3)."""
    p = _store().profile(version)
    if p is None:
        raise PmemError(
            "no profile yet" if version is None else f"no profile version {version}",
            hint="`pmem summarize` builds it from the monthly summaries",
        )
    if as_json:
        print_json(p.to_json())
        return
    sys.stdout.write("".join(for_terminal(line) + "\n" for line in p.profile.splitlines()))
    err_console.print(escape(f"version {p.version}, {len(p.months)} months, {p.model}"))


@summary_app.command()
@handle_errors
def timeline(
    out: Annotated[
        Path, typer.Option("--out", help="Where to write the page (one self-contained HTML file).")
    ] = Path("timeline.html"),
    as_json: Annotated[
        bool, typer.Option("--json", help="Print one JSON object last on stdout.")
    ] = False,
) -> None:
    """A page of your months: sentiment by month, each month's top keywords, and each month's
    summary with the memories it cites. No network needed to open it (the chart library is inside)."""
    from reports.timeline import write_timeline

    store = _store()
    try:
        n = write_timeline(store.latest_all(), store.profile(), out)
    except OSError as err:  # a folder that does not exist, a read-only place
        raise ConfigError(
            f"cannot write {out}: {err.strerror or type(err).__name__}",
            hint="give --out a file in a folder that exists and that you can write",
        ) from None
    if as_json:
        print_json({"out": str(out), "months": n, "bytes": out.stat().st_size})
        return
    err_console.print(f"wrote {escape(str(out))}: {plural(n, 'month')}")
