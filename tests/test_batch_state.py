"""One batch-state model (state/batch.py, ADR 0032): the transition table, and the three places
that keep a batch's state (the ledger's batches.status, run-state.json, the run's claims) each
refusing a step the table does not allow, on the real PostgreSQL."""

from __future__ import annotations

import pytest

from state import batch as bs
from state.batch import IllegalTransition, Stage
from store.claims import ClaimStore
from store.runs import RunStore
from tests.test_scaleout_claims import _run_with_batches


def test_the_table_joins_the_life_of_a_batch_and_nothing_else() -> None:
    life = [Stage.PLANNED, Stage.DRAFTING, Stage.DRAFTED, Stage.COMMITTING, Stage.COMMITTED]
    for old, new in zip(life, life[1:], strict=False):
        assert bs.allowed(old, new)
    assert bs.allowed(Stage.DRAFTING, Stage.FAILED) and bs.allowed(Stage.FAILED, Stage.DRAFTING)
    assert not bs.allowed(Stage.PLANNED, Stage.COMMITTED)  # never committed undrafted
    assert not bs.allowed(Stage.COMMITTED, Stage.DRAFTING)
    assert not any(bs.allowed(Stage.SUPERSEDED, s) for s in Stage)
    # a place that does not record the in-flight stages may pass through them, only them
    assert bs.allowed(Stage.PLANNED, Stage.FAILED, skips=bs.LEDGER_SKIPS)
    assert not bs.allowed(Stage.PLANNED, Stage.COMMITTED, skips=bs.LEDGER_SKIPS)
    assert bs.from_file("verified") is Stage.DRAFTED and bs.file_word(Stage.PLANNED) == "pending"


def test_the_ledger_refuses_an_illegal_transition(db) -> None:
    runs = RunStore(db)
    _, ids = _run_with_batches(db, 2)
    runs.set_status(ids[0], "failed", error="TransientDraftError", attempt=True)
    runs.set_status(ids[0], "drafted", checksum="c")
    runs.set_status(ids[0], "committed")
    with pytest.raises(IllegalTransition, match="the ledger.*committed to failed"):
        runs.set_status(ids[0], "failed")
    with pytest.raises(IllegalTransition, match="planned to committed"):
        runs.set_status(ids[1], "committed")  # never drafted
    assert (runs.batch(ids[0]) or {})["status"] == "committed"
    assert (runs.batch(ids[1]) or {})["status"] == "planned"  # the refused step wrote nothing


def test_run_state_json_refuses_an_illegal_transition(tmp_path) -> None:
    path = tmp_path / "run-state.json"
    state = bs.load_state(path, "batch:x", "run-1")
    assert state["stage"] == "pending"
    bs.save_state(path, state, "drafting", attempts=1)
    bs.save_state(path, state, "verified")
    bs.save_state(path, state, "committing")
    bs.save_state(path, state, "committed")
    before = path.read_bytes()
    with pytest.raises(IllegalTransition, match="run-state.json.*committed to drafting"):
        bs.save_state(path, bs.load_state(path, "batch:x", "run-1"), "drafting")
    assert path.read_bytes() == before
    # a state file left behind its complete result.json (a kill between the two) reads as drafted
    behind = tmp_path / "behind.json"
    early = bs.load_state(behind, "batch:y", "run-1")
    bs.save_state(behind, early, "drafting", attempts=1)
    with pytest.raises(IllegalTransition):
        bs.save_state(behind, bs.load_state(behind, "batch:y", "run-1"), "committing")
    caught_up = bs.load_state(behind, "batch:y", "run-1", fresh=Stage.DRAFTED)
    bs.save_state(behind, caught_up, "committing")
    assert bs.load_state(behind, "batch:y", "run-1")["stage"] == "committing"


def test_the_claims_refuse_an_illegal_transition(db) -> None:
    claims = ClaimStore(db)
    run_id, ids = _run_with_batches(db, 2)
    claims.enqueue(run_id, ids)
    assert sorted(claims.claim(run_id, "w1", 60, 2)) == ids
    assert claims.mark_drafted(run_id, ids[0], "w1")
    assert not claims.mark_drafted(run_id, ids[0], "w2")  # not its claim: nothing happens
    assert claims.done(run_id, ids[0], "w1", {"commits": 1})
    assert claims.done(run_id, ids[1], "w1", {"batches_failed": 1}, failed=True)
    with pytest.raises(IllegalTransition, match="the claims.*committed to failed"):
        claims.done(run_id, ids[0], "w1", {}, failed=True)
    with pytest.raises(IllegalTransition, match="committed to drafted"):
        claims.mark_drafted(run_id, ids[0], "w1")
    counts = claims.counts(run_id)
    assert (counts.done, counts.failed, counts.open) == (1, 1, 0)
