"""The owner's verbs on the memory: `pmem memory edit`, `memory delete`, `memory merge`, and
`pmem backup restore` (the old `import-backup`); `status`, `stop`, `runs gc` and `runs demo` are
in cli/status_cmds.py.

Every change is confirmed first (a question on the terminal; ``--yes`` skips it) and is a new
revision or a tombstone, never a rewrite: `edit` commits a correction, `delete` marks the memory
deleted and leaves a tombstone (`pmem restore ID REV` brings it back; irreversible erasure is
`pmem forget`), `merge KEEP OTHER` folds OTHER into KEEP (a new revision of KEEP, a tombstone
for OTHER). `delete` and `merge` go through the owner's queue (the ``proposals`` table, where
AI clients' requests wait: `pmem proposals list --all` shows them, decided by the owner).

Exit codes (every verb; with ``--json`` one object is printed, last on stdout):

    0  done (also: nothing to do, e.g. an edit that changed nothing)
    1  error (unknown id, a record that does not parse, a store that is not empty), or the
       question was not confirmed: nothing changed
    3  conflict: the memory moved on meanwhile (another revision) or was deleted
"""

from __future__ import annotations

import difflib
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any

import click
import typer

from cli.app import (
    EXIT_ERROR,
    NotConfirmed,
    ask,
    backup_app,
    err_console,
    memory_app,
    print_json,
    settings,
)
from core.display import for_terminal as tty
from core.display import plural
from core.errors import ConfigError, PmemError, StaleRevision, TombstonedMemory

EXIT_CONFLICT = 3
OWNER_CLIENT = "pmem-cli"


@contextmanager
def _outcome(as_json: bool, **ids: Any) -> Iterator[None]:
    """Errors become one `error:` line (and, with --json, one object) and the exit code."""
    try:
        yield
    except PmemError as err:
        conflict = isinstance(err, StaleRevision | TombstonedMemory)
        code = (
            "conflict"
            if conflict
            else "not-confirmed"
            if isinstance(err, NotConfirmed)
            else "error"
        )
        exit_code = EXIT_CONFLICT if conflict else EXIT_ERROR
        if as_json:
            body: dict[str, Any] = {"error": code, "message": str(err), "hint": err.hint or None}
            body |= ids | {"exit_code": exit_code}
            if isinstance(err, StaleRevision):
                body |= {"expected": err.expected, "current": err.current}
            print_json(body)
        err_console.print(f"[red]{code}:[/] {tty(str(err))}", highlight=False)
        if err.hint:
            err_console.print(f"  → {tty(err.hint)}", highlight=False)
        raise typer.Exit(exit_code) from None


_confirm = ask  # asks, or NotConfirmed (no terminal included)


def _store() -> Any:
    from store.db import Database
    from store.records import MemoryStore

    return MemoryStore(Database.open(settings()))


def _active(store: Any, memory_id: str) -> Any:
    view = store.get(memory_id)
    if view.status == "deleted":
        raise TombstonedMemory(memory_id)
    return view


# ---------------------------------------------------------------- edit

_EDIT_HEAD = (
    "# pmem edit {id} (revision {rev}). Change what is wrong, save and close: the record becomes\n"
    "# revision {next} as a correction (old revisions stay; `pmem restore {id} {rev}` brings this\n"
    "# one back). Fields above the --- line, the canonical summary below it. Close without\n"
    "# saving (or change nothing) to cancel.\n"
)
_EDITABLE = ("title", "kind", "index_summary", "aliases", "tags", "occurred_at", "valid_from")


def record_text(view: Any) -> str:
    """A memory as the text `pmem edit` opens: YAML fields, ``---``, the canonical summary."""
    import yaml

    head = {k: getattr(view, k) for k in _EDITABLE}
    for k in ("occurred_at", "valid_from"):
        head[k] = head[k].isoformat() if head[k] else None
    fields = yaml.safe_dump(
        head, allow_unicode=True, sort_keys=False, width=10_000, default_flow_style=False
    )
    intro = _EDIT_HEAD.format(id=view.id, rev=view.current_revision, next=view.current_revision + 1)
    return f"{intro}{fields}---\n{view.canonical_summary.rstrip()}\n"


def parse_record(text: str) -> dict[str, Any]:
    """The edited text back into record fields; ConfigError names the problem."""
    import yaml

    lines = text.splitlines()
    try:
        cut = lines.index("---")
    except ValueError:
        raise ConfigError(
            "the edited record has no line `---` between the fields and the summary"
        ) from None
    try:
        head = yaml.safe_load("\n".join(lines[:cut])) or {}
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f" (line {mark.line + 1})" if mark is not None else ""
        raise ConfigError(f"the edited fields are not valid YAML{where}") from None
    if not isinstance(head, dict):
        raise ConfigError("the edited fields must be `name: value` lines")
    unknown = sorted(set(head) - set(_EDITABLE))
    if unknown:
        raise ConfigError(
            f"the edited record has unknown fields {unknown} (known: {', '.join(_EDITABLE)})"
        )
    out: dict[str, Any] = {}
    for k in ("title", "kind", "index_summary"):
        value = head.get(k)
        out[k] = "" if value is None else str(value).strip()
    for k in ("title", "kind"):
        if not out[k]:
            raise ConfigError(f"the edited record needs a {k}")
    for k in ("aliases", "tags"):
        value = head.get(k) or []
        if isinstance(value, str):
            value = [value]
        if not isinstance(value, list):
            raise ConfigError(f"{k} must be a list (`- item` lines, or [])")
        out[k] = [str(v).strip() for v in value if str(v).strip()]
    for k in ("occurred_at", "valid_from"):
        value = head.get(k)
        if value in (None, ""):
            out[k] = None
        elif isinstance(value, datetime):
            out[k] = value
        else:
            try:
                out[k] = datetime.fromisoformat(str(value))
            except ValueError:
                raise ConfigError(
                    f"{k} must be an ISO 8601 time such as 2024-05-01T10:00:00+09:00"
                ) from None
    out["canonical_summary"] = "\n".join(lines[cut + 1 :]).strip()
    if not out["canonical_summary"]:
        raise ConfigError("the edited record needs a canonical summary below the --- line")
    return out


def _shown(v: Any) -> str:
    return ", ".join(v) if isinstance(v, list) else "-" if v is None else str(v)


def _changes(view: Any, new: dict[str, Any]) -> list[str]:
    lines: list[str] = []
    for k in _EDITABLE:
        old = getattr(view, k)
        if old != new[k]:
            lines.append(f"{k}: {_shown(old)} → {_shown(new[k])}")
    if view.canonical_summary.strip() != new["canonical_summary"]:
        diff = difflib.unified_diff(
            view.canonical_summary.strip().splitlines(),
            new["canonical_summary"].splitlines(),
            lineterm="",
            n=1,
        )
        lines.append("canonical_summary:")
        lines.extend(f"  {d}" for d in list(diff)[2:])
    return lines


@memory_app.command()
def edit(
    memory_id: Annotated[str, typer.Argument(help="A memory id (`pmem search`, `pmem show`).")],
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Commit without asking.")] = False,
    as_json: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """Correct a memory in your editor; commits a new revision (a correction).

    Opens $VISUAL / $EDITOR on its record (fields, then the summary), shows what changed, asks, and commits it as a new revision (reason `correction`) through the
    store's guard. Exit 0 committed or nothing changed, 1 error / not confirmed, 3 the memory
    moved on while you edited (run it again)."""
    from hashlib import sha256

    from core.models import CommitRequest

    with _outcome(as_json, memory_id=memory_id):
        store = _store()
        view = _active(store, memory_id)
        before = record_text(view)
        edited = click.edit(before, extension=".md", require_save=True)
        if edited is None or edited == before:
            err_console.print(f"{memory_id}: nothing changed, nothing committed")
            if as_json:
                print_json(
                    {"memory_id": memory_id, "changed": False, "revision": view.current_revision}
                )
            return
        new = parse_record(edited)
        changes = _changes(view, new)
        if not changes:
            err_console.print(f"{memory_id}: nothing changed, nothing committed")
            if as_json:
                print_json(
                    {"memory_id": memory_id, "changed": False, "revision": view.current_revision}
                )
            return
        for line in changes:
            err_console.print(tty(line), highlight=False, markup=False)
        _confirm(
            f"commit this correction to {memory_id} as revision {view.current_revision + 1}?", yes
        )
        digest = sha256(repr(sorted(new.items())).encode()).hexdigest()[:16]
        result = store.commit(
            CommitRequest(
                memory_id=memory_id,
                expected_revision=view.current_revision,
                reason="correction",
                stated_facts=view.stated_facts,
                client=f"owner:{OWNER_CLIENT}",
                idempotency_key=f"edit:{memory_id}:{view.current_revision}:{digest}",
                **new,
            )
        )
        redacted = (
            f" ({', '.join(result.redacted_fields)} redacted by the guard)"
            if result.redacted_fields
            else ""
        )
        err_console.print(
            f"{memory_id}: correction committed as revision {result.revision}{redacted}; "
            f"`pmem restore {memory_id} {view.current_revision}` undoes it"
        )
        if as_json:
            print_json(
                {
                    "memory_id": memory_id,
                    "changed": True,
                    "revision": result.revision,
                    "previous_revision": view.current_revision,
                    "fields": [c.split(":")[0] for c in changes if not c.startswith("  ")],
                    "redacted_fields": result.redacted_fields,
                }
            )


# ---------------------------------------------------------------- delete and merge (the queue)


def _through_queue(store: Any, request: Any) -> dict[str, Any]:
    """Queue the owner's own request and accept it at once (one trail for every confirmed action)."""
    proposal_id = store.queue(request)
    out = store.decide(proposal_id, accept=True, by="owner")
    return {"proposal_id": proposal_id, **(out.get("result") or {})}


@memory_app.command()
def delete(
    memory_id: Annotated[str, typer.Argument(help="A memory id.")],
    reason: Annotated[
        str | None, typer.Option("--reason", help="Why (kept with the tombstone).")
    ] = None,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Delete without asking.")] = False,
    as_json: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """Delete a memory (reversible with `pmem restore`; `pmem forget` erases for good).

    The memory is marked deleted and leaves search, a tombstone keeps later drafts
    from re-creating it; its revisions stay, so `pmem restore ID REV` brings it back. To erase
    it irreversibly use `pmem forget --memory ID`. Exit 0 deleted, 1 error / not confirmed,
    3 already deleted or moved on."""
    from core.models import ActionRequest

    with _outcome(as_json, memory_id=memory_id):
        store = _store()
        view = _active(store, memory_id)
        err_console.print(
            tty(f"{memory_id}: {view.title} ({view.kind}, revision {view.current_revision})"),
            highlight=False,
            markup=False,
        )
        _confirm(f"delete {memory_id}? (reversible with `pmem restore`)", yes)
        out = _through_queue(
            store,
            ActionRequest(
                action="delete",
                memory_id=memory_id,
                expected_revision=view.current_revision,
                note=reason,
                client=OWNER_CLIENT,
            ),
        )
        err_console.print(
            f"{memory_id} deleted (tombstone kept); undo with "
            f"`pmem restore {memory_id} {view.current_revision}`"
        )
        if as_json:
            print_json(
                {
                    "memory_id": memory_id,
                    "deleted": True,
                    "revision": view.current_revision,
                    "proposal_id": out["proposal_id"],
                    "restore_command": f"pmem restore {memory_id} {view.current_revision}",
                }
            )


@memory_app.command()
def merge(
    keep: Annotated[str, typer.Argument(help="The memory that stays and absorbs the other.")],
    other: Annotated[
        str, typer.Argument(help="The memory folded into KEEP, then deleted (tombstone).")
    ],
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Merge without asking.")] = False,
    as_json: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """Merge two memories about the same thing: OTHER is folded into KEEP.

    KEEP gets a new revision
    with the union of both records and OTHER's evidence, then OTHER is deleted with a tombstone.
    Both keep their revisions (`pmem restore` undoes either side). Exit 0 merged, 1 error / not
    confirmed, 3 either memory was deleted or moved on."""
    from core.models import ActionRequest

    with _outcome(as_json, keep=keep, other=other):
        if keep == other:
            raise ConfigError("merge needs two different memories")
        store = _store()
        a, b = _active(store, keep), _active(store, other)
        err_console.print(
            tty(
                f"keep:  {keep}  {a.title} (revision {a.current_revision}, {len(a.evidence)} evidence)"
            ),
            highlight=False,
            markup=False,
        )
        err_console.print(
            tty(
                f"merge: {other}  {b.title} (revision {b.current_revision}, {len(b.evidence)} evidence)"
            ),
            highlight=False,
            markup=False,
        )
        _confirm(f"fold {other} into {keep} and delete {other}?", yes)
        out = _through_queue(
            store,
            ActionRequest(
                action="merge",
                memory_id=other,
                expected_revision=b.current_revision,
                merge_into=keep,
                client=OWNER_CLIENT,
            ),
        )
        err_console.print(
            f"merged {other} into {keep}: revision {out['revision']}, "
            f"{plural(out.get('evidence_added', 0), 'evidence excerpt')} added; {other} deleted "
            f"(`pmem restore {other} {b.current_revision}` brings it back)"
        )
        if as_json:
            print_json(
                {
                    "memory_id": keep,
                    "merged_from": other,
                    "revision": out["revision"],
                    "evidence_added": out.get("evidence_added", 0),
                    "proposal_id": out["proposal_id"],
                    "redacted_fields": out.get("redacted_fields", []),
                }
            )


# ---------------------------------------------------------------- backup restore


@backup_app.command("restore")
def import_backup(
    file: Annotated[
        Path, typer.Argument(help="A file written by `pmem backup export --out FILE`.")
    ],
    merge: Annotated[
        bool,
        typer.Option(
            "--merge",
            help="Into a store that already holds memories: add those of the backup it lacks (the ones it has are skipped, never overwritten).",
        ),
    ] = False,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Restore without asking.")] = False,
    as_json: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """Restore a `pmem backup export` file into an empty memory store, or with --merge into one
    that already holds memories.

    Memories, every revision, evidence and tombstones, through the store's write guard (secrets
    redacted, evidence that is not verbatim in a message this store's ledger holds left out).
    What `pmem forget` erased in this store stays erased. Into an empty store, `pmem backup
    export` afterwards writes the same bytes as the backup (for a store with the same ledger,
    or none); a store that is not empty is refused without --merge. Exit 0 restored, 1 error
    (the file, or a store that is not empty: nothing written) or not confirmed."""
    from store.backup import import_backup as restore_rows
    from store.backup import memory_rows
    from store.db import Database
    from store.export import read_export
    from store.records import MemoryStore

    with _outcome(as_json, file=str(file)):
        if not file.is_file():
            raise ConfigError(f"{file}: no such file")
        rows = list(read_export(file))
        n = sum(1 for r in rows if r.get("type") == "memory")
        db = Database.open(settings())
        if merge:
            _confirm(
                f"add the {plural(n, 'memory', 'memories')} of {file.name} this store lacks?", yes
            )
            _merged(file, MemoryStore(db).load_backup(rows), as_json)
            return
        held = memory_rows(db)
        if any(held.values()):
            raise ConfigError(
                f"the memory store is not empty ({plural(held['memories'], 'memory', 'memories')}); "
                "without --merge a backup is restored into an empty store only",
                hint=f"`pmem backup restore {file} --merge` adds the memories this store lacks; or "
                "use another data dir (PMEM_DATA_DIR) or database (PMEM_DB_NAME)",
            )
        _confirm(
            f"restore {plural(n, 'memory', 'memories')} from {file.name} into the empty store?", yes
        )
        counts = restore_rows(db, rows)
        words = (
            f"restored {plural(counts['memories'], 'memory', 'memories')} "
            f"({plural(counts['revisions'], 'revision')}, {plural(counts['evidence'], 'evidence excerpt')}, "
            f"{plural(counts['tombstones'], 'tombstone')}) from {file.name}"
        )
        made = [
            plural(counts[key], word, many)
            for key, word, many in (
                ("month_summaries", "month summary", "month summaries"),
                ("profiles", "profile version", None),
                ("concepts", "concept name", None),
                ("markers", "marker", None),
            )
            if counts.get(key)
        ]
        if made:
            words += "; with " + ", ".join(made)
        notes = []
        if counts["erased_skipped"]:
            notes.append(
                f"{plural(counts['erased_skipped'], 'memory', 'memories')} you erased left out"
            )
        if counts["evidence_refused"]:
            notes.append(
                f"{plural(counts['evidence_refused'], 'evidence excerpt')} refused by the guard"
            )
        if counts["redacted_fields"]:
            notes.append(f"{plural(counts['redacted_fields'], 'field')} redacted")
        if counts.get("derived_refused"):
            notes.append(
                f"{plural(counts['derived_refused'], 'concept row')} holding a secret left out"
            )
        err_console.print(
            tty(words + ("; " + ", ".join(notes) if notes else "")), highlight=False, markup=False
        )
        if as_json:
            print_json({"file": str(file), **counts})


def _merged(file: Path, counts: dict[str, int], as_json: bool) -> None:
    err_console.print(
        tty(
            f"loaded {plural(counts['memories'], 'memory', 'memories')} "
            f"({plural(counts['revisions'], 'revision')}, {plural(counts['evidence'], 'evidence excerpt')}, "
            f"{plural(counts['tombstones'], 'tombstone')}) from {file.name}; "
            f"{counts['skipped_existing']} already here skipped; "
            f"{plural(counts['evidence_refused'], 'evidence excerpt')} left out, "
            f"{plural(counts['redacted_fields'], 'field')} redacted"
        ),
        highlight=False,
        markup=False,
    )
    if as_json:
        print_json({"file": str(file), "merged": True, **counts})
