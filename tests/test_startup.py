"""A fresh `pmem search` starts light (issue 9 item 7, ADR 0027): it registers only the read
commands and imports none of the heavy modules the other commands need; every other command
still finds the whole app."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys

import pytest

from cli.main import COMMAND_MODULES, FAST_COMMANDS, ONE_MODULE_COMMANDS, command_of
from tests.conftest import PROJECT

# packages (or modules) a search has no use for: the flows' orchestrator, the terminal renderer,
# pydantic-settings' sources, the write side of the store, the other command modules; the secret
# scanner's library (its plugins run only on a text their patterns could match) and the stop
# lists' package (its data file is read directly); the connection pool (one connection answers);
# SudachiPy (the embedder's second process analyses the Japanese question)
HEAVY = (
    "prefect",
    "flows",
    "rich",
    "typer.rich_utils",
    "markdown_it",
    "pygments",
    "pydantic_settings",
    "store.records",
    "state.budget",
    "store.budget",
    "memory_api",
    "detect_secrets",
    "stopwordsiso",
    "psycopg_pool",
    "sudachipy",
)


def _loaded(names: list[str], heavy: tuple[str, ...]) -> list[str]:
    return sorted(n for n in names if any(n == h or n.startswith(h + ".") for h in heavy))


def test_fast_commands_name_the_module_that_registers_them():
    from cli.app import app

    for command, module in (FAST_COMMANDS | ONE_MODULE_COMMANDS).items():
        assert module in COMMAND_MODULES
        importlib.import_module(f"cli.{module}")
        names = {c.name or c.callback.__name__ for c in app.registered_commands if c.callback}
        assert command in names, f"{command} is not registered by cli.{module}"


def test_every_module_that_registers_commands_is_listed():
    """A command module missing from COMMAND_MODULES would lose its commands from the app."""
    import re

    found = sorted(
        p.stem
        for p in (PROJECT / "cli").glob("*.py")
        if p.stem not in ("app", "main")
        and re.search(r"@\w*app\.command\(|\.add_typer\(", p.read_text())
    )
    assert found and [m for m in found if m not in COMMAND_MODULES] == []


def test_command_of_finds_the_command_after_root_flags_only():
    assert command_of(["search", "x", "--json"]) == "search"
    assert command_of(["-v", "recall", "q"]) == "recall"
    assert command_of(["--help"]) is None
    assert command_of(["--version", "search"]) is None  # anything else first: the whole app
    assert command_of([]) is None


@pytest.mark.parametrize("shape", [["--json"], []], ids=["json", "words"])
def test_a_search_process_imports_nothing_heavy(pmem_env: dict[str, str], shape: list[str]):
    """Neither the JSON answer nor the answer in words (its notes on stderr styled by Click, not
    Rich) imports a heavy module."""
    code = (
        "import gc, json, os, sys\n"
        f"sys.argv = ['pmem', 'search', 'データベースの移行で何を決めた？', *{shape!r}]\n"
        "leave = os._exit\n"  # what was imported, told as the process leaves (without teardown)
        "os._exit = lambda status: (print(json.dumps(sorted(sys.modules) + (['gc enabled'] if gc.isenabled()\n"
        "                           else [])), flush=True), leave(status + 40))\n"
        "from cli.main import main\n"
        "main()\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], env=pmem_env, capture_output=True, text=True, cwd=PROJECT
    )
    assert out.returncode == 40, out.stderr  # exit status 0, through os._exit
    lines = out.stdout.strip().splitlines()
    if shape:
        assert json.loads(lines[0])["hits"] == []  # the search answered (an empty memory)
    else:
        assert "no memories found" in out.stderr
    modules = json.loads(lines[-1])
    assert _loaded(modules, HEAVY) == []
    assert "gc enabled" not in modules  # a one-question process does without the cyclic collector
    others = [m for m in COMMAND_MODULES if m not in set(FAST_COMMANDS.values())]
    assert _loaded(modules, tuple(f"cli.{m}" for m in others)) == []
    # the check can fail: the whole app loads them
    assert "cli.backfill_cmds" in _loaded(modules + ["cli.backfill_cmds"], ("cli.backfill_cmds",))


def test_an_import_registers_only_its_own_module_and_runs_as_a_write(
    pmem_env: dict[str, str], tmp_path
):
    """`pmem import` (issue 31: an unchanged file's re-import is mostly the process's start)
    builds only its own command's parameters, and keeps the cyclic collector and the normal
    exit (it writes, and runs worker processes)."""
    code = (
        "import atexit, gc, json, sys\n"
        f"sys.argv = ['pmem', 'import', {str(tmp_path / 'missing.json')!r}, '--json']\n"
        "atexit.register(lambda: print(json.dumps(sorted(sys.modules) + (['gc enabled'] if gc.isenabled()\n"
        "                else [])), flush=True))\n"
        "from cli.main import main\n"
        "main()\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], env=pmem_env, capture_output=True, text=True, cwd=PROJECT
    )
    assert out.returncode == 1, out.stderr  # the file is missing: an error, through SystemExit
    lines = out.stdout.strip().splitlines()
    assert json.loads(lines[-2])["exit_code"] == 1
    modules = json.loads(lines[-1])
    assert "cli.import_cmds" in modules and "gc enabled" in modules
    others = [m for m in COMMAND_MODULES if m != "import_cmds"]
    assert _loaded(modules, tuple(f"cli.{m}" for m in others)) == []


def test_an_import_does_not_load_the_drafting_path(pmem_env: dict[str, str], tmp_path):
    """A real `pmem import` (issue 31: a 50 MB message's import is mostly the process's start)
    loads neither the drafting nor the committing flow, nor what only they need (rapidfuzz)."""
    from tests.test_ledger_cmds import chatgpt_export, one_conversation

    path = chatgpt_export(
        tmp_path / "conversations.json",
        [one_conversation("c-1", "t", [("user", "hello there"), ("assistant", "hi")])],
    )
    code = (
        "import atexit, json, sys\n"
        f"sys.argv = ['pmem', 'import', {str(path)!r}, '--source', 'chatgpt', '--json', '--no-embed']\n"
        "atexit.register(lambda: print(json.dumps(sorted(sys.modules)), flush=True))\n"
        "from cli.main import main\n"
        "main()\n"
    )
    env = dict(pmem_env, PMEM_EMBEDDER="none")
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, cwd=PROJECT
    )
    assert out.returncode == 0, out.stderr
    lines = out.stdout.strip().splitlines()
    assert json.loads(lines[-2])["conversations"]["new"] == 1  # it imported
    modules = json.loads(lines[-1])
    heavy = ("flows.pipeline", "flows.drafting", "flows.committing", "rapidfuzz")
    assert _loaded(modules, heavy) == []
    assert "flows.importing" in modules  # the check can fail: the import's own flow is there


def test_a_read_command_leaves_without_teardown_and_keeps_its_exit_status(pmem_env: dict[str, str]):
    """A fresh search ends through os._exit once it has answered (the interpreter's teardown
    cost ~0.1-0.25 s): its whole answer is on stdout, and its exit status is the command's."""

    def pmem(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "cli.main", *args],
            env=pmem_env,
            capture_output=True,
            text=True,
            cwd=PROJECT,
        )

    ok = pmem("search", "データベース", "--json")
    assert ok.returncode == 0, ok.stderr
    assert json.loads(ok.stdout.strip().splitlines()[-1]) == {
        "hits": [],
        "range": None,
        "answerable": False,
        "confidence": 0.0,
    }
    bad = pmem("search", "データベース", "--since", "not a time at all", "--json")
    assert bad.returncode == 1 and "error:" in bad.stderr
    assert json.loads(bad.stdout.strip().splitlines()[-1])["error"]
    usage = pmem("recall", "x", "--no-such-option")
    assert usage.returncode == 2 and "--no-such-option" in usage.stderr


def test_help_screens_still_list_every_command_and_plain_placeholders():
    from typer.testing import CliRunner

    from cli.main import app

    runner = CliRunner()
    top = runner.invoke(app, ["--help"], terminal_width=200)
    assert top.exit_code == 0, top.output
    for name in ("backfill", "import", "search", "recall", "serve", "memory", "summary"):
        assert f" {name} " in top.output, name
    one = runner.invoke(app, ["search", "--help"], terminal_width=200)
    assert one.exit_code == 0, one.output
    assert "--limit" in one.output and "INTEGER" in one.output and "<int>" not in one.output
