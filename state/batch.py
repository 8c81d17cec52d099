"""One batch's state: one model, one transition table (ADR 0032).

A batch's state is kept in three places, each for its own reader: the ledger's ``batches.status``
(store/runs.py: what is left to do, across runs), the batch's ``run-state.json`` (here: where its
drafting and committing stand, with attempts, the last error and per-draft commit results), and
the run's claim on it (store/claims.py: which worker holds it in this invocation). All three name
a ``Stage`` of the one table below, each in the words it has always stored, and each refuses a
step the table does not allow (``IllegalTransition``):

    planned ──► drafting ──► drafted ──► committing ──► committed
                   │  ▲         │
                   ▼  │         └── (a dry run ends here)
                 failed ──► (drafting again)
    planned | drafted | failed ──► superseded   (its members changed, or the owner excluded one)

``drafting`` and ``committing`` are in flight: only run-state.json records them; the ledger and
the claims store the settled stages, so for them a step may pass through the stages they do not
record (the ledger's planned → failed is planned → drafting → failed; a claim's drafted mark is
only a count, so its open → done passes drafted too). A step to the same stage is a retry or a
resume (a batch drafted again after its result.json was lost, committed again by `pmem apply`).
"""

from __future__ import annotations

from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path
from typing import Any

from core.errors import PmemError
from state.files import STATE_SCHEMA, read_checked, write_atomic


class Stage(StrEnum):
    PLANNED = "planned"
    DRAFTING = "drafting"
    DRAFTED = "drafted"
    COMMITTING = "committing"
    COMMITTED = "committed"
    FAILED = "failed"
    SUPERSEDED = "superseded"


IN_FLIGHT = frozenset({Stage.DRAFTING, Stage.COMMITTING})

TRANSITIONS: dict[Stage, frozenset[Stage]] = {
    Stage.PLANNED: frozenset({Stage.DRAFTING, Stage.DRAFTED, Stage.SUPERSEDED}),
    Stage.DRAFTING: frozenset({Stage.DRAFTING, Stage.DRAFTED, Stage.FAILED}),
    Stage.DRAFTED: frozenset({Stage.DRAFTING, Stage.DRAFTED, Stage.COMMITTING, Stage.SUPERSEDED}),
    Stage.FAILED: frozenset({Stage.DRAFTING, Stage.DRAFTED, Stage.SUPERSEDED}),
    Stage.COMMITTING: frozenset({Stage.COMMITTING, Stage.COMMITTED}),
    Stage.COMMITTED: frozenset({Stage.COMMITTING, Stage.COMMITTED}),
    Stage.SUPERSEDED: frozenset(),
}


class IllegalTransition(PmemError):
    """A batch asked to move between two stages the table does not join (a bug, or two writers
    disagreeing about one batch). Carries ids and stage names only."""

    def __init__(self, where: str, batch_id: str, old: Stage, new: Stage) -> None:
        super().__init__(f"{where}: batch {batch_id} cannot go from {old} to {new}")
        self.where, self.batch_id, self.old, self.new = where, batch_id, old, new


# what each place does not record, so a step there may pass through it unseen
LEDGER_SKIPS = IN_FLIGHT
CLAIM_SKIPS = IN_FLIGHT | {Stage.DRAFTED}  # a claim's drafted mark is a count, set or not


def allowed(old: Stage, new: Stage, *, skips: frozenset[Stage] = frozenset()) -> bool:
    """Whether the table joins ``old`` to ``new``, directly or through stages in ``skips`` (the
    stages the place asking does not record)."""
    seen, todo = {old}, [old]
    while todo:
        for nxt in TRANSITIONS[todo.pop()]:
            if nxt == new:
                return True
            if nxt in skips and nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    return False


def check(
    where: str, batch_id: str, old: Stage, new: Stage, *, skips: frozenset[Stage] = frozenset()
) -> None:
    """Raise ``IllegalTransition`` unless the table allows ``old`` → ``new``."""
    if not allowed(old, new, skips=skips):
        raise IllegalTransition(where, batch_id, old, new)


# ---------------------------------------------------------------- the words each place stores

# run-state.json's ``stage`` (schema pmem.batch-state/1): "pending" before anything, "verified"
# once drafted (its drafts checked against the sources)
_FILE_WORD = {Stage.PLANNED: "pending", Stage.DRAFTED: "verified"}
_FROM_FILE = {w: s for s, w in _FILE_WORD.items()}


def file_word(stage: Stage) -> str:
    return _FILE_WORD.get(stage, stage.value)


def from_file(word: str) -> Stage:
    return _FROM_FILE.get(word) or Stage(word)


def from_claim(state: str, drafted: bool) -> Stage:
    """A claim's (state, drafted) as a stage: an open claim is planned or drafted, ``done`` is
    the run's end for the batch (committed; drafted for a dry run, which the table lets pass to
    committed), ``failed`` failed to draft."""
    if state == "open":
        return Stage.DRAFTED if drafted else Stage.PLANNED
    return Stage.COMMITTED if state == "done" else Stage.FAILED


# ---------------------------------------------------------------- run-state.json


_BEFORE_DRAFTED = frozenset({Stage.PLANNED, Stage.DRAFTING, Stage.FAILED})


def load_state(
    path: Path, batch_id: str, run_id: str, *, fresh: Stage = Stage.PLANNED
) -> dict[str, Any]:
    """A batch's run-state.json; missing or damaged, a fresh state at ``fresh``. result.json is
    the truth: given ``fresh=Stage.DRAFTED`` (its result is complete), a state file left behind
    it (a kill after result.json was written, before run-state.json was) is read as drafted."""
    try:
        state = read_checked(path, STATE_SCHEMA)
    except Exception:  # missing or damaged: start a fresh state; result.json is the truth
        return {
            "batch_id": batch_id,
            "run_id": run_id,
            "stage": file_word(fresh),
            "attempts": 0,
            "last_error": None,
            "times": {},
            "commits": {},
        }
    if fresh is Stage.DRAFTED and from_file(str(state.get("stage"))) in _BEFORE_DRAFTED:
        state["stage"] = file_word(Stage.DRAFTED)
    return state


def save_state(path: Path, state: dict[str, Any], stage: str, **changes: Any) -> None:
    """Move the batch's run-state.json to ``stage`` (checked against the table) and write it
    atomically, with the time it got there."""
    check(
        "run-state.json",
        str(state.get("batch_id")),
        from_file(str(state.get("stage", "pending"))),
        from_file(stage),
    )
    state.update(changes, stage=stage)
    state.setdefault("times", {})[stage] = datetime.now(UTC).isoformat()
    write_atomic(
        path,
        {k: v for k, v in state.items() if k not in ("checksum", "schema_version")},
        STATE_SCHEMA,
    )
