"""The shared pieces of the `pmem` CLI: the Typer app, error handling, JSON output.

The CLI is the only place where errors become messages and exit codes.

Heavy modules (Prefect, the flows) are imported inside the commands that need them, so read
paths such as `pmem search` start fast and never import Prefect. Rich is imported on first use
too: the stderr console (``stderr_console()``; ``from cli.app import err_console`` makes it) and
the help screens (Typer renders them with Rich; our changes to them are made when the first one
is rendered). A `pmem search --json` never imports it (ADR 0027).
"""

from __future__ import annotations

import inspect
import json
import logging
import re
import sys
from collections.abc import Callable
from functools import wraps
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import typer
import typer.core

from core.display import for_terminal
from core.errors import ConsentRequired, PmemError, RateLimitStop
from core.settings import Settings, get_settings

if TYPE_CHECKING:
    from rich.console import Console

EXIT_ERROR = 1
EXIT_TEMPFAIL = 75  # rate-limit stop: run the same command again later
EXIT_NO_CONSENT = 77  # text would leave the machine without the owner's consent: nothing sent
F = TypeVar("F", bound=Callable[..., Any])

_PLAIN_TYPES = {
    "str": "TEXT",
    "int": "INTEGER",
    "float": "NUMBER",
    "path": "PATH",
    "datetime": "TIME",
}


def _plain_type(label: str | None) -> str | None:
    """``<str>`` → ``TEXT``, ``<list[str]>...`` → ``TEXT`` (the help says when an option
    repeats), ``<bool>`` → nothing (a flag takes no value), choices ``a|b`` kept."""
    if label is None:
        return None
    inner = label.removesuffix("...").strip("<>")
    while inner.startswith("list[") and inner.endswith("]"):
        inner = inner[5:-1]
    if inner == "bool":
        return None
    if "|" in inner:
        return inner
    return _PLAIN_TYPES.get(inner.lower(), inner.upper())


def _readable_help() -> None:
    """Typer's help shows Python types (``<bool>``, ``<list[str]>``) and keeps every line break
    of a docstring: show value placeholders as words (a flag shows none) and let paragraphs wrap
    (a line that starts with a space, ``-`` or a digit keeps its own line). The paragraphs are
    Typer's Rich help (``typer.rich_utils``): changed when the first help screen is rendered."""
    from typer import core

    for cls in (core.TyperOption, core.TyperArgument):
        original = cls.display_type_rich
        if getattr(original, "_pmem", False):
            continue

        def display(self: Any, ctx: Any, _original: Any = original) -> str | None:
            if self.metavar is not None:
                return str(self.metavar)
            if getattr(self, "is_flag", False):
                return None
            return _plain_type(_original(self, ctx))

        display._pmem = True  # type: ignore[attr-defined]
        cls.display_type_rich = display  # type: ignore[method-assign]

    for group in (core.TyperCommand, core.TyperGroup):
        format_help = group.format_help
        if getattr(format_help, "_pmem", False):
            continue

        def rendered(self: Any, ctx: Any, formatter: Any, _format_help: Any = format_help) -> None:
            _readable_paragraphs()
            return _format_help(self, ctx, formatter)

        rendered._pmem = True  # type: ignore[attr-defined]
        group.format_help = rendered  # type: ignore[method-assign]


def _readable_paragraphs() -> None:
    from typer import rich_utils

    if getattr(rich_utils._fix_linebreaks, "_pmem", False):
        return

    def fix_linebreaks(paragraphs: list[str], markup_mode: Any) -> str:
        return "\n\n".join(joined_lines(para) for para in paragraphs)

    make_command_help = rich_utils._make_command_help

    def command_help(*, help_text: str, markup_mode: Any) -> Any:
        # a group's list of commands shows each one's first paragraph: Typer's Rich markup mode
        # keeps its line breaks there, so a docstring's wrapped lines broke mid-sentence
        first, *rest = inspect.cleandoc(help_text).split("\n\n")
        text = "\n\n".join([joined_lines(first), *rest])
        return make_command_help(help_text=text, markup_mode=markup_mode)

    fix_linebreaks._pmem = True  # type: ignore[attr-defined]
    rich_utils._fix_linebreaks = fix_linebreaks  # type: ignore[assignment]
    rich_utils._make_command_help = command_help  # type: ignore[assignment]


def joined_lines(paragraph: str) -> str:
    """A docstring paragraph's wrapped lines as one line; a line that starts with a space, ``-``,
    a digit or ``\\b`` (Click's "keep as written") keeps its own line."""
    lines = paragraph.split("\n")
    text = lines[0]
    for line in lines[1:]:
        keep = line[:1] in (" ", "-", "\b") or line[:1].isdigit()
        text += ("\n" if keep else " ") + (line if keep else line.strip())
    return text


_readable_help()

# The top-level names on the one-screen `pmem --help`, by panel (ADR 0033): the everyday verbs
# and the nouns whose verbs are one job each. A command not named here is hidden (an old
# spelling, cli/aliases.py) or lands under "Other" (tests/test_cli_tree.py refuses that).
# The daily ones first: the reads, then bringing an export in, then the memory's nouns; what is
# set up once (serving, credentials) last.
PANELS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("Read", ("search", "recall", "show", "related")),
    ("Bring in", ("import", "backfill", "watch", "runs")),
    ("Memory", ("memory", "proposals", "ledger", "summary", "concepts")),
    ("Keep", ("status", "stop", "backup", "db", "prefect")),
    ("Serve", ("serve", "auth")),
)
# A noun's verbs in the order a person reaches for them (the daily ones first), on `pmem --help`
# and on `pmem NOUN --help`; a verb not named here follows, in the order it was registered.
VERB_ORDER: dict[str, tuple[str, ...]] = {
    "memory": ("mark", "marks", "edit", "delete", "merge", "restore", "forget", "publish"),
    "runs": ("review", "apply", "demo", "prices", "gc"),
    "summary": ("show", "list", "profile", "timeline", "update"),
    "concepts": ("show", "list", "graph", "rebuild"),
    "backup": ("export", "restore"),
    "db": ("status", "start", "stop", "url", "reindex", "init", "restore"),
    "prefect": ("status", "start", "stop", "schedule", "reimport", "deploy", "worker"),
    "auth": ("token", "tokens", "clients", "revoke", "set-password", "api-token", "consent"),
}
HELP_WIDTH = 80


def in_verb_order(noun_name: str, names: list[str]) -> list[str]:
    """``names`` (a noun's verbs) with those ``VERB_ORDER`` names first, in its order."""
    order = VERB_ORDER.get(noun_name, ())
    return sorted(names, key=lambda n: order.index(n) if n in order else len(order))


class NounGroup(typer.core.TyperGroup):
    """A noun's group: ``pmem NOUN --help`` lists its verbs in ``VERB_ORDER``."""

    def list_commands(self, ctx: Any) -> list[str]:
        return in_verb_order(self.name or "", list(super().list_commands(ctx)))


class _RootGroup(typer.core.TyperGroup):
    """`pmem --help` on one 80x24 screen: a line per top-level name, grouped by ``PANELS``; a
    group's line lists its verbs. Every other help screen is Typer's."""

    def format_help(self, ctx: Any, formatter: Any) -> None:
        formatter.write(root_help(self, ctx))


def _one_line(text: str, width: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1].rstrip() + "…"


def root_help(group: Any, ctx: Any) -> str:
    visible = {n: c for n, c in group.commands.items() if not getattr(c, "hidden", False)}
    panels = [(title, [n for n in names if n in visible]) for title, names in PANELS]
    listed = {n for _, names in panels for n in names}
    if rest := [n for n in visible if n not in listed]:
        panels.append(("Other", rest))
    lines = [
        "Usage: pmem [OPTIONS] COMMAND [ARGS]...    (pmem COMMAND --help: what it does)",
        "Your AI conversation exports as a long-term memory. Start: pmem runs demo",
        "",
    ]
    left = max(len(t) for t, _ in panels) + 2
    for title, names in panels:
        for i, name in enumerate(names):
            cmd = visible[name]
            sub = getattr(cmd, "commands", None)
            if sub is not None:
                shown = [n for n, c in sub.items() if not getattr(c, "hidden", False)]
                words = "  ".join(in_verb_order(name, shown))
            else:
                words = cmd.get_short_help_str(limit=200)
            head = f"{title if i == 0 else '':<{left}}{name:<11}"
            lines.append(head + _one_line(words, HELP_WIDTH - 1 - len(head)))
    lines.append("Options: -v/--verbose logs to stderr; --version; --help.    Docs: docs/cli.md")
    return "\n".join(lines) + "\n"


app = typer.Typer(
    cls=_RootGroup,
    help=(
        "personal-memory: turn your AI conversation exports into a long-term, searchable memory.\n\n"
        "Typical use:  pmem backfill --source chatgpt --export conversations.json, "
        "then  pmem search 'データベース'.  Run the same backfill command again to resume."
    ),
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def noun(name: str, help: str) -> typer.Typer:
    """A top-level noun: a group of verbs about one thing, registered on the app."""
    group = typer.Typer(cls=NounGroup, help=help, no_args_is_help=True)
    app.add_typer(group, name=name)
    return group


# nouns whose verbs several command modules register (the others are made in their module)
db_app = noun("db", "The embedded PostgreSQL (or the server DATABASE_URL points at), its indexes.")
memory_app = noun(
    "memory",
    "Change your memories: edit, delete, merge, restore a revision, forget for good, publish; "
    "topic markers.",
)
runs_app = noun(
    "runs",
    "A backfill's runs: review and apply a dry run, the price table, the run files gc removes, "
    "the demo run.",
)
backup_app = noun(
    "backup",
    "A canonical `pmem backup export` file: write it, restore it (into an empty store, or "
    "--merge into one that holds memories).",
)
auth_app = noun(
    "auth",
    "Who may use your memory: OAuth clients and tokens of the remote server (`pmem serve "
    "--http`), the owner passphrase, memory-API tokens (`pmem serve --api`), vendor consents.",
)
prefect_app = noun(
    "prefect",
    "The local Prefect server pmem keeps under the data dir (UI, run history, schedules), the "
    "monthly re-import and the work pool's deployments and workers.",
)
concepts_app = noun(
    "concepts",
    "Concept memory (seed 003): the concepts your experiences show, the relations they state "
    "and how strong each has grown. Made after every backfill; `pmem concepts rebuild` makes it "
    "again.",
)


def moved(fn: F, new: str, old: str) -> F:
    """``fn`` as the hidden old spelling ``pmem OLD``: the same command (options, output, exit
    codes), which first says on stderr where it moved. stdout is untouched, so its `--json`
    output is byte-identical to the new spelling's."""

    @wraps(fn)
    def alias(*args: Any, **kwargs: Any) -> Any:
        typer.echo(f"note: `pmem {old}` is now `pmem {new}` (the old name still works)", err=True)
        return fn(*args, **kwargs)

    alias.__doc__ = f"Moved to `pmem {new}`.\n\n" + inspect.cleandoc(fn.__doc__ or "")
    return alias  # type: ignore[return-value]


_err_console: Console | None = None


def stderr_console() -> Console:
    """The Rich console on stderr (notes, errors, progress), made on first use."""
    global _err_console
    if _err_console is None:
        from rich.console import Console

        _err_console = Console(stderr=True, soft_wrap=True)
    return _err_console


def __getattr__(name: str) -> Any:
    """``from cli.app import err_console`` (the command modules): ``stderr_console()``."""
    if name == "err_console":
        return stderr_console()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def escape(text: str) -> str:
    """Rich's ``escape`` (markup in a message shown as it is), imported when first needed."""
    from rich.markup import escape as rich_escape

    return rich_escape(text)


_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def print_json(obj: Any) -> None:
    """Every --json output is one JSON object, printed last on stdout. A lone surrogate (kept
    byte-exact in the ledger) is written as its ``\\udXXX`` escape: valid JSON and UTF-8 that
    decodes back to the same string."""
    text = json.dumps(obj, ensure_ascii=False, default=str)
    text = _LONE_SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)
    sys.stdout.write(text + "\n")
    sys.stdout.flush()
    _json_printed[0] = True


_json_printed = [False]  # whether this command printed its object already (then an error adds none)


class NotConfirmed(PmemError):
    """A question answered no, or that could not be asked (no terminal, no ``--yes``)."""

    def __init__(self, message: str = "not confirmed: nothing changed") -> None:
        super().__init__(message, hint="add --yes to skip the question")


def ask(question: str, yes: bool) -> None:
    """The one way a command asks before it changes something: nothing with ``--yes``; else the
    question on stderr, and NotConfirmed (exit 1, the `--json` object) on no, on an end of input
    and when nothing can answer (no terminal: typer's Abort)."""
    if yes:
        return
    try:
        ok = typer.confirm(question, default=False, err=True)
    except typer.Abort:
        ok = False
    if not ok:
        raise NotConfirmed


def _error_code(err: PmemError) -> str:
    if isinstance(err, ConsentRequired):
        return "consent-required"
    return "not-confirmed" if isinstance(err, NotConfirmed) else "error"


def exit_code_of(err: PmemError) -> int:
    if isinstance(err, RateLimitStop):
        return EXIT_TEMPFAIL
    return EXIT_NO_CONSENT if isinstance(err, ConsentRequired) else EXIT_ERROR


def error_fields(err: PmemError, exit_code: int | None = None) -> dict[str, Any]:
    """The four keys every `--json` error object carries: ``error`` (a code: error,
    not-confirmed, consent-required), ``message``, ``hint`` (null when none), ``exit_code``."""
    return {
        "error": _error_code(err),
        "message": str(err),
        "hint": err.hint or None,
        "exit_code": exit_code_of(err) if exit_code is None else exit_code,
    }


def _error_json(err: PmemError, exit_code: int) -> dict[str, Any]:
    """What `--json` prints when a command fails: one object, last on stdout, as on success,
    with ``error``, ``message``, ``hint`` (null when there is none) and ``exit_code``.
    A rate-limit stop carries the run's summary so far (``status: stopped``)."""
    if isinstance(err, RateLimitStop):
        return {
            **(getattr(err, "summary", None) or {}),
            "status": "stopped",
            "run_id": err.run_id,
            "stop_reason": str(err),
            "retry_after": err.retry_after,
            **error_fields(err, exit_code),
            "error": "stopped",
            "hint": err.hint or "run the same command again later: finished work is kept",
        }
    return error_fields(err, exit_code)


def handle_errors(fn: F) -> F:
    """Errors become one line on stderr (a hint below it) and an exit code; with ``--json``
    (a parameter named ``as_json``) the command also prints one error object on stdout."""

    @wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        _json_printed[0] = False
        try:
            try:
                return fn(*args, **kwargs)
            except typer.Abort:  # a question nothing answered (Ctrl-D, no terminal)
                raise NotConfirmed from None
        except PmemError as err:
            if isinstance(err, RateLimitStop):
                label, style, exit_code = "stopped", "yellow", EXIT_TEMPFAIL
            elif isinstance(err, ConsentRequired):
                label, style, exit_code = "not sent", "yellow", EXIT_NO_CONSENT
            else:
                label, style, exit_code = "error", "red", EXIT_ERROR
            stderr_console().print(f"[{style}]{label}:[/] {escape(for_terminal(str(err)))}")
            if err.hint:
                stderr_console().print(f"  → {escape(for_terminal(err.hint))}")
            if kwargs.get("as_json") and not _json_printed[0]:
                print_json(_error_json(err, exit_code))
            raise typer.Exit(exit_code) from None

    return wrapper  # type: ignore[return-value]


def step_bars() -> Any:
    """The progress display of a long command on stderr: a spinner, what is being done, a bar,
    done / total and the time elapsed; drawn only on a terminal, gone when finished."""
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        SpinnerColumn,
        TextColumn,
        TimeElapsedColumn,
    )

    console = stderr_console()
    return Progress(
        SpinnerColumn(),
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        transient=True,
        disable=not console.is_terminal,
    )


def settings() -> Settings:
    return get_settings()


def open_store(settings: Settings) -> Any:
    from store.db import Database
    from store.records import MemoryStore

    return MemoryStore(Database.open(settings))


def version_info() -> dict[str, str]:
    """What `pmem --version` prints: the version, the data dir and the time zone in use."""
    from importlib.metadata import PackageNotFoundError, version

    from core.settings import time_zone

    try:
        number = version("personal-memory")
    except PackageNotFoundError:  # run from a checkout without installing
        number = "unknown (not installed)"
    zone, origin = time_zone()
    cfg = get_settings()
    return {
        "version": number,
        "data_dir": str(cfg.data_dir),
        "time_zone": zone,
        "time_zone_from": origin,
        "python": sys.version.split()[0],
    }


def _version(value: bool) -> None:
    if not value:
        return
    try:
        info = version_info()
    except PmemError as err:
        stderr_console().print(f"[red]error:[/] {escape(for_terminal(str(err)))}")
        raise typer.Exit(EXIT_ERROR) from None
    origin = {
        "PMEM_TZ": "from PMEM_TZ",
        "TZ": "from $TZ",
        "system": "the system's",
        "default": "no zone set",
    }
    typer.echo(f"pmem {info['version']} (Python {info['python']})")
    typer.echo(f"data dir: {for_terminal(info['data_dir'])}")
    typer.echo(
        f"time zone: {info['time_zone']} ({origin[info['time_zone_from']]}; PMEM_TZ sets it)"
    )
    raise typer.Exit(0)


class _NoticeHandler(logging.Handler):
    """Lines the store logs on ``pmem.notice`` (an upgrade's backup, how to roll back) are
    printed on stderr as they are, whatever -v says."""

    def emit(self, record: logging.LogRecord) -> None:
        stderr_console().print(for_terminal(self.format(record)), markup=False, highlight=False)


def _install_notices() -> None:
    notice = logging.getLogger("pmem.notice")
    if not any(isinstance(h, _NoticeHandler) for h in notice.handlers):
        notice.addHandler(_NoticeHandler())
    notice.propagate = False
    notice.setLevel(logging.INFO)


def _announce_database(st: Any) -> None:
    stderr_console().print(
        f"started the embedded PostgreSQL (pid {st.pid}) in {escape(for_terminal(st.pgdata))}; "
        "it keeps running for the next commands: `pmem stop` stops it",
        highlight=False,
    )


@app.callback()
def _root(
    verbose: Annotated[
        bool, typer.Option("--verbose", "-v", help="Log progress details to stderr.")
    ] = False,
    version: Annotated[
        bool,
        typer.Option(
            "--version",
            help="Print the version, the data dir and the time zone in use.",
            callback=_version,
            is_eager=True,
        ),
    ] = False,
) -> None:
    from store import embedded

    embedded.on_start = _announce_database
    _install_notices()
    logging.basicConfig(
        level=logging.INFO if verbose else logging.WARNING,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
