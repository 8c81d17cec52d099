"""The `pmem` console script: the Typer app and every command module registered on it.

Heavy modules (Prefect, the flows) are imported inside the commands that need them, so read
paths such as `pmem search` start fast and never import Prefect.

Start-up (ADR 0027): a fresh `pmem search` must answer within a second, so a process that runs
one of the ``FAST_COMMANDS`` imports only the module that registers it; any other command, a
help screen or a mistyped name imports every module of ``COMMAND_MODULES`` (the app as it always
was). ``from cli.main import app`` (tests, other code) also gets the app with every command.

Adding a command: register it with ``@app.command()`` (an everyday verb, also named in
``cli.app.PANELS``) or on its noun (``@memory_app.command()``...; ADR 0033) in a module listed in
``COMMAND_MODULES`` (a new module: add its name there); a command that moves keeps its old
spelling in ``cli.aliases.MOVED``. Nothing else is needed; ``FAST_COMMANDS`` is only a shortcut
for the read paths, and a command missing from it is still found (``tests/test_startup.py``
checks that every shortcut names the module that registers the command).
"""

from __future__ import annotations

import contextlib
import gc
import importlib
import os
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, NoReturn

if TYPE_CHECKING:
    import typer

# every module that registers commands on cli.app.app (they are imported for that)
COMMAND_MODULES = (
    "auth_cmds",
    "backfill_cmds",
    "backup_cmds",
    "concept_cmds",
    "consent_cmds",
    "db_cmds",
    "deploy_cmds",
    "forget_cmds",
    "import_cmds",
    "ledger_cmds",
    "marker_cmds",
    "owner_cmds",
    "prefect_cmds",
    "proposals_cmds",
    "read",
    "related_cmds",
    "run_cmds",
    "serve_cmds",
    "status_cmds",
    "summary_cmds",
    "token_cmds",
    "watch_cmds",
    "aliases",  # last: the old spellings of the commands above (ADR 0033)
)
# commands that must start fast → the one module that registers them
FAST_COMMANDS = {"search": "read", "recall": "read", "show": "read", "related": "related_cmds"}
# commands that register only their own module but run as any other (a write: the cyclic
# collector on, the interpreter's teardown as usual); `pmem import` of an unchanged file is
# mostly its start (issue 31): building every command's parameters cost ~0.4 s of it
ONE_MODULE_COMMANDS = {"import": "import_cmds"}
_ROOT_FLAGS = ("-v", "--verbose")  # the root options that may come before a command


def command_of(argv: Sequence[str]) -> str | None:
    """The command ``argv`` runs when only root flags come before it, else None."""
    for arg in argv:
        if arg in _ROOT_FLAGS:
            continue
        return None if arg.startswith("-") else arg
    return None


def register(command: str | None = None) -> typer.Typer:
    """The app with ``command``'s module registered when it is a fast (or one-module) command,
    else with every command."""
    from cli.app import app

    fast = FAST_COMMANDS.get(command or "") or ONE_MODULE_COMMANDS.get(command or "")
    for name in (fast,) if fast else COMMAND_MODULES:
        importlib.import_module(f"cli.{name}")
    return app


def __getattr__(name: str) -> Any:
    if name == "app":  # `from cli.main import app`: every command
        return register()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def main() -> None:
    # first thing: whatever pmem or a library under it creates is private (0700 / 0600)
    from core.private import private_umask

    private_umask()
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    os.environ.setdefault("DO_NOT_TRACK", "1")
    # pydantic would read every installed package's entry points for plugins on its first model
    # (none are installed; an environment that names some keeps them)
    os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")
    command = command_of(sys.argv[1:])
    if command in FAST_COMMANDS:
        # a read answers one question and ends. What it allocates is mostly what lives as long
        # as the process (modules, classes, tables: the imports), which the cyclic collector
        # would walk ~100 times for nothing (40-60 ms, ~6 % of a fresh search); its garbage is
        # freed by reference counting, and what it holds is bounded by the answer's limit
        gc.disable()
        _answer_and_leave(register(command))
    register(command)()


def _answer_and_leave(app: typer.Typer) -> NoReturn:
    """Run a read command, then end the process without tearing the interpreter down: the
    last collection over every object the imports made and the clearing of every module cost
    ~0.1-0.25 s after the answer is printed, for nothing (a read has closed its connection and
    its second process, and writes no file). What an exit does that matters is done here:
    the exit code (Typer's ``SystemExit``), log handlers and both streams flushed."""
    import logging

    try:
        app()
        code: object = 0
    except SystemExit as stop:
        code = stop.code
    if code is None:
        code = 0
    elif not isinstance(code, int):  # sys.exit("message"): printed, status 1
        with contextlib.suppress(Exception):
            print(code, file=sys.stderr)
        code = 1
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):  # a closed pipe (`pmem search x | head -1`)
            stream.flush()
    os._exit(code)


if __name__ == "__main__":
    main()
