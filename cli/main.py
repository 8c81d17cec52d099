"""The `pmem` console script: the Typer app and every command module registered on it.

Heavy modules (Prefect, the flows) are imported inside the commands that need them, so read
paths such as `pmem search` start fast and never import Prefect.
"""

from __future__ import annotations

import os

from cli import (  # noqa: F401  (they register their commands)
    auth_cmds,
    backfill_cmds,
    backup_cmds,
    concept_cmds,
    consent_cmds,
    db_cmds,
    forget_cmds,
    ledger_cmds,
    marker_cmds,
    owner_cmds,
    prefect_cmds,
    proposals_cmds,
    read,
    related_cmds,
    run_cmds,
    serve_cmds,
    summary_cmds,
    token_cmds,
    watch_cmds,
)
from cli.app import app


def main() -> None:
    # first thing: whatever pmem or a library under it creates is private (0700 / 0600)
    from core.private import private_umask

    private_umask()
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    os.environ.setdefault("DO_NOT_TRACK", "1")
    app()


if __name__ == "__main__":
    main()
