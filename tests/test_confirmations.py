"""Issue 28, item 2: every command that can ask keeps the `--json` contract when nothing can
answer (no terminal, no `--yes`: stdin is empty): one object, last on stdout, with `error`,
`message`, `hint` and `exit_code`, the exit code it names, and nothing changed. The commands are
found in the app itself (every command with a `--yes`), under their new names and their old
spellings (cli/aliases.py): an asking command added without a case here fails the walk."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import typer.main

from cli.aliases import MOVED
from cli.main import app
from tests.test_owner_cmds import editor, runner, world  # noqa: F401  (world: a fixture)

EXIT_NO_CONSENT = 77


def _commands_that_ask() -> dict[str, bool]:
    """Every `pmem` command with a --yes option → whether it is hidden (an old spelling)."""
    out: dict[str, bool] = {}

    def walk(cmd: Any, path: list[str]) -> None:
        subs = getattr(cmd, "commands", None)
        if subs:
            for name, sub in subs.items():
                walk(sub, [*path, name])
        elif any("--yes" in getattr(p, "opts", ()) for p in cmd.params):
            out[" ".join(path)] = bool(cmd.hidden)

    walk(typer.main.get_command(app), [])
    return out


def _export(tmp_path: Path) -> Path:
    code = runner.invoke(app, ["backup", "export", "--out", str(tmp_path / "b.jsonl")]).exit_code
    assert code == 0
    return tmp_path / "b.jsonl"


def _stray_run(tmp_path: Path) -> None:
    stray = Path(os.environ["PMEM_DATA_DIR"]) / "runs" / "not-a-run-of-this-database"
    stray.mkdir(parents=True, exist_ok=True)
    (stray / "x.json").write_text("{}")


# the new name → (the arguments that reach its question, the exit code of a refusal)
Case = Callable[[Any, Path], tuple[list[str], dict[str, str] | None]]
CASES: dict[str, tuple[Case, int]] = {
    "memory edit": (lambda w, t: ([w[1]], editor(t, "車を手放した。", "持つ")), 1),
    "memory delete": (lambda w, t: ([w[1]], None), 1),
    "memory merge": (lambda w, t: ([w[2], w[1]], None), 1),
    "memory restore": (lambda w, t: ([w[1], "1"], None), 1),
    "memory forget": (lambda w, t: (["--memory", w[1]], None), 1),
    "memory publish": (lambda w, t: ([w[1]], None), 1),
    "runs gc": (lambda w, t: (_stray_run(t) or [], None), 1),
    "backup restore": (lambda w, t: ([str(_export(t)), "--merge"], None), 1),
    "db restore": (lambda w, t: ([str(_export(t))], None), 1),
    "backfill": (
        lambda w, t: (["--export", str(_export_file(t)), "--llm", "openai:gpt-4.1-mini"], None),
        EXIT_NO_CONSENT,
    ),
    "summary update": (lambda w, t: (["--llm", "openai:gpt-4.1-mini"], None), EXIT_NO_CONSENT),
    "db reindex": (
        lambda w, t: (["--embedder", "openai:text-embedding-3-small"], None),
        EXIT_NO_CONSENT,
    ),
    "concepts rebuild": (lambda w, t: (["--llm", "openai:gpt-4.1-mini"], None), EXIT_NO_CONSENT),
}


def _export_file(tmp_path: Path) -> Path:
    from tests.test_ledger_cmds import chatgpt_export, one_conversation

    conv = one_conversation("c0ffee00-0000-4000-8000-000000000001", "t", [("user", "決めた。")])
    return chatgpt_export(tmp_path / "conversations.json", [conv])


def _new_name(path: str) -> str:
    return MOVED.get(path, path)


def test_the_walk_covers_every_command_that_asks() -> None:
    asking = _commands_that_ask()
    assert {_new_name(p) for p in asking} == set(CASES)
    assert any(hidden for hidden in asking.values())  # the old spellings are walked too


def test_a_question_nothing_answers_prints_one_json_object(
    world,  # noqa: F811
    tmp_path: Path,
) -> None:
    """Each asking command, new name and old spelling, in one store (a refusal changes
    nothing, which is checked after each): the object, its four keys, its exit code."""
    store, a, b, _keys = world
    runner.invoke(  # a second revision, so that `restore A 1` reaches its question
        app,
        ["memory", "edit", a, "--yes"],
        env=editor(tmp_path, "車を手放すことにした。", "車を手放した。"),
    )
    assert store.get(a).current_revision == 2
    wrong: dict[str, Any] = {}
    for path in sorted(_commands_that_ask()):
        case, exit_code = CASES[_new_name(path)]
        where = tmp_path / path.replace(" ", "-")
        where.mkdir()
        args, env = case(world, where)
        before = {m: (store.get(m).current_revision, store.get(m).status) for m in (a, b)}
        out = runner.invoke(app, [*path.split(), *args, "--json"], input="", env=env)
        lines = out.stdout.strip().splitlines()
        body = json.loads(lines[-1]) if lines else {}
        after = {m: (store.get(m).current_revision, store.get(m).status) for m in (a, b)}
        if not (
            {"error", "message", "hint", "exit_code"} <= set(body)
            and out.exit_code == body["exit_code"] == exit_code
            and body["hint"]
            and "--yes" in body["hint"]
            and "Aborted" not in out.stdout + out.stderr
            and after == before
        ):
            wrong[path] = (out.exit_code, body, out.stderr[-300:])
    assert wrong == {}
