"""The old spellings of the commands that moved under a noun (ADR 0033): each keeps working as a
hidden command, the same function with the same options, output and exit codes, which first
says on stderr where it moved (stdout untouched: its `--json` is byte-identical).

``MOVED`` is the whole list of moves (docs/cli.md prints it as the aliases table); ``KEPT`` the
old verbs kept hidden in their noun where one verb now does their job. ``pmem api`` became an
option (`pmem serve --api`): its alias is registered in cli/serve_cmds.py.
"""

from __future__ import annotations

from typing import Any

import typer
from typer.models import CommandInfo

from cli.app import app, moved

# old spelling → where the command is now
MOVED: dict[str, str] = {
    "edit": "memory edit",
    "delete": "memory delete",
    "merge": "memory merge",
    "restore": "memory restore",
    "forget": "memory forget",
    "publish": "memory publish",
    "mark": "memory mark",
    "marks": "memory marks",
    "confirm": "proposals accept",
    "review": "runs review",
    "apply": "runs apply",
    "prices": "runs prices",
    "gc": "runs gc",
    "demo": "runs demo",
    "export": "backup export",
    "import-backup": "backup restore",
    "summarize": "summary update",
    "profile": "summary profile",
    "timeline": "summary timeline",
    "graph": "concepts graph",
    "reindex": "db reindex",
    "schedule": "prefect schedule",
    "reimport": "prefect reimport",
    "deploy": "prefect deploy",
    "worker": "prefect worker",
    "owner set-password": "auth set-password",
    "token create": "auth api-token create",
    "token list": "auth api-token list",
    "token revoke": "auth api-token revoke",
    "consent list": "auth consent list",
    "consent revoke": "auth consent revoke",
}
# old verbs of a noun that now does their job with one verb: kept in their group, hidden, with
# their options and output (so their --json), saying where the job is now
KEPT: dict[str, str] = {
    "auth api-token list": "auth tokens --kind api",
    "backup load": "backup restore --merge",
}
# the old groups that held moved commands (hidden too)
_OLD_GROUPS = {
    "owner": "Moved: `pmem auth set-password`.",
    "token": "Moved: `pmem auth api-token create|list|revoke`.",
    "consent": "Moved: `pmem auth consent list|revoke`.",
}


def _name(info: CommandInfo) -> str:
    assert info.callback is not None
    return info.name or info.callback.__name__.lower().replace("_", "-")


def _group(parent: typer.Typer, name: str) -> typer.Typer:
    for info in parent.registered_groups:
        if info.name == name and info.typer_instance is not None:
            return info.typer_instance
    raise LookupError(name)


def command_info(path: str) -> CommandInfo:
    """The registration of ``pmem PATH`` (e.g. ``memory edit``)."""
    *groups, last = path.split()
    node = app
    for g in groups:
        node = _group(node, g)
    for info in node.registered_commands:
        if info.callback is not None and _name(info) == last:
            return info
    raise LookupError(path)


def _install() -> None:
    import importlib

    from cli.main import COMMAND_MODULES

    for module in COMMAND_MODULES:  # the commands the aliases name are registered first
        if module != "aliases":
            importlib.import_module(f"cli.{module}")
    olds: dict[str, typer.Typer] = {}
    for old, new in MOVED.items():
        *group, name = old.split()
        target = command_info(new)
        new = KEPT.get(new, new)  # `token list` says where the job is, not its kept spelling
        parent = app
        if group:
            if group[0] not in olds:
                olds[group[0]] = typer.Typer(help=_OLD_GROUPS[group[0]], no_args_is_help=True)
                app.add_typer(olds[group[0]], name=group[0], hidden=True)
            parent = olds[group[0]]
        fields: dict[str, Any] = dict(vars(target))
        assert target.callback is not None
        # hidden at the top; inside an old (hidden) group its commands are listed
        fields.update(name=name, hidden=not group, callback=moved(target.callback, new, old))
        fields["help"] = None  # the docstring, which `moved` begins with the new spelling
        parent.registered_commands.append(CommandInfo(**fields))
    for old, new in KEPT.items():
        kept = command_info(old)
        assert kept.callback is not None and kept.hidden, old
        kept.callback = moved(kept.callback, new, old)


_install()
