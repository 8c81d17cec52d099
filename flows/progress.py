"""What a run has done and has left: batches by stage, drafts, commits, conflicts, the budget
used in the current window, and an ETA from the budget (an HTTP committer's only: commits in
process are not throttled by it, ``budget_applies`` false). A read: no Prefect here."""

from __future__ import annotations

import math
from typing import Any

from core.display import plural
from core.settings import Settings
from state.files import batch_dir, read_checked, read_result, runs_root
from store.budget import PgWindow
from store.db import Database
from store.runs import RunStore


def run_progress(db: Database, settings: Settings, run: dict[str, Any]) -> dict[str, Any]:
    runs = RunStore(db)
    run_id = run["run_id"]
    drafts = commits_done = conflicts = committable = 0
    for b in runs.batches_of_run(run_id):
        folder = batch_dir(runs_root(settings), run_id, b["batch_id"])  # PMEM_RUNS_URL too
        result = read_result(folder / "result.json", b["batch_id"])
        if result is None:
            continue
        drafts += len(result["drafts"])
        committable += sum(1 for d in result["drafts"] if d["committable"])
        try:
            state = read_checked(folder / "run-state.json", "pmem.batch-state/1")
        except Exception:  # noqa: BLE001 - no state yet
            continue
        for c in state.get("commits", {}).values():
            if "conflict" in c:
                conflicts += 1
            else:
                commits_done += 1
    left = max(committable - commits_done - conflicts, 0)
    stages = runs.stage_counts(run_id)
    limit, window = settings.budget
    used = PgWindow(db, f"client:{settings.client_name}", limit, window).in_window()
    # requests still needed: propose + commit per draft left, one context lookup per batch to draft
    needed = 2 * left + stages.get("planned", 0) + stages.get("failed", 0)
    free = max(limit - used, 0)
    applies = bool(settings.memory_url)  # the budget paces HTTP clients only
    eta = 0.0 if needed <= free or not applies else math.ceil((needed - free) / limit) * window
    return {
        "run_id": run_id,
        "source": run["source"],
        "status": run["status"],
        "dry_run": run["dry_run"],
        "started_at": run["started_at"],
        "batches": stages,
        "drafts": drafts,
        "commits_done": commits_done,
        "commits_left": 0 if run["dry_run"] else left,
        "conflicts": conflicts,
        "budget_in_window": used,
        "budget_limit": limit,
        "budget_window_s": window,
        "budget_applies": applies,
        "eta_seconds": eta,
        "summary": run["summary"],
    }


def kept_words(settings: Settings, run_id: str) -> str:
    """What a stopped run keeps, in words: ``run R keeps 3 of 12 batches drafted and 14 commits``."""
    db = Database.open(settings)
    try:
        run = RunStore(db).get_run(run_id)
        if run is None:
            return f"run {run_id}: the imported conversations are kept"
        prog = run_progress(db, settings, run)
    finally:
        db.close()
    stages = prog["batches"]
    total = sum(v for k, v in stages.items() if k != "superseded")
    drafted = stages.get("drafted", 0) + stages.get("committed", 0)
    batches = f"{total} batch{'' if total == 1 else 'es'}"
    words = f"run {run_id} keeps {drafted} of {batches} drafted"
    if not prog["dry_run"]:
        words += f" and {plural(prog['commits_done'], 'commit')}"
    return words
