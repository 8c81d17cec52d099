"""`pmem backup load FILE`, the old spelling of `pmem backup restore FILE --merge` (hidden, kept
with its output: cli/aliases.py ``KEPT``): bring a `pmem backup export` file back into a memory
store that may already hold memories.

The backup goes through the store's write boundary like any other write (docs/security.md,
"Drafts, tombstones and confirmed actions"): secrets redacted from every field and revision,
evidence holding a secret or not verbatim in the ledger left out (counted). Memories the store
already has are skipped, never overwritten. Exit 0 loaded, 1 error (nothing loaded).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from cli.app import backup_app, err_console, handle_errors, print_json, settings


@backup_app.command("load", hidden=True)
@handle_errors
def backup_load(
    file: Annotated[
        Path,
        typer.Argument(help="A file written by `pmem export --out`.", exists=True, dir_okay=False),
    ],
    as_json: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """Load the memories, revisions, evidence and tombstones of an export (one transaction)."""
    from store.db import Database
    from store.export import read_export
    from store.records import MemoryStore

    counts = MemoryStore(Database.open(settings())).load_backup(read_export(file))
    if as_json:
        print_json(counts)
        return
    err_console.print(
        f"loaded {counts['memories']} memories ({counts['revisions']} revisions, {counts['evidence']} "
        f"evidence, {counts['tombstones']} tombstones); skipped {counts['skipped_existing']} already "
        f"present; {counts['evidence_refused']} evidence left out, {counts['redacted_fields']} fields redacted"
    )
