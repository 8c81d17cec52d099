"""Issue 18, the pieces under the pool run, on the real PostgreSQL: a run's batches as claims with
a lease (store/claims.py) and the run files at an fsspec URL (state/files.py)."""

from __future__ import annotations

import threading
import time

import pytest

from core.errors import ResultFileError
from store.claims import ClaimStore, gone


def _run_with_batches(db, n: int) -> tuple[str, list[str]]:
    from core.models import Batch, BatchMember
    from store.runs import RunStore

    runs = RunStore(db)
    run_id, _ = runs.open_or_create(
        source="chatgpt",
        export_path=None,
        fingerprint="sha256:x",
        model="m",
        prompt_version="p",
        dry_run=False,
    )
    ids = []
    for i in range(n):
        b = Batch(
            batch_id=f"batch:{i:02d}",
            members=[BatchMember(conversation_key=f"chatgpt:c{i}", content_hash="h", chars=10)],
            prompt_version="p",
            model="m",
        )
        runs.add_batch(b, "chatgpt", run_id)
        ids.append(b.batch_id)
    return run_id, ids


def test_two_workers_never_claim_the_same_batch_and_a_lapsed_lease_is_taken_over(db) -> None:
    claims = ClaimStore(db)
    run_id, ids = _run_with_batches(db, 12)
    claims.enqueue(run_id, ids)
    got: dict[str, list[str]] = {"a": [], "b": []}
    barrier = threading.Barrier(2)

    def take(worker: str) -> None:
        barrier.wait()
        while wave := claims.claim(run_id, worker, 30, 2):
            got[worker] += wave

    threads = [threading.Thread(target=take, args=(w,)) for w in got]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(got["a"] + got["b"]) == ids  # every batch once, none twice
    assert claims.counts(run_id).held == 12 and claims.claim(run_id, "c", 30, 5) == []

    # a's batches: done, except one whose worker "died" with a short lease
    for b in got["a"][1:]:
        assert claims.done(run_id, b, "a", {"batches_drafted": 1, "drafter_calls": 1})
    dead = got["a"][0]
    claims.renew(run_id, [dead], "a", 0.3)
    assert claims.claim(run_id, "b", 30) == []  # still leased
    time.sleep(0.5)
    assert claims.claim(run_id, "b", 30) == [dead]  # taken over once the lease ran out
    assert claims.renew(run_id, [dead], "a", 30) == []  # a lost it
    assert not claims.done(
        run_id, dead, "a", {"drafter_calls": 1}
    )  # a's late result does not count
    for b in [dead, *got["b"]]:
        assert claims.done(run_id, b, "b", {"batches_drafted": 1, "drafter_calls": 1})
    counts = claims.counts(run_id)
    assert (counts.open, counts.done, counts.drafted) == (0, 12, 12)
    assert sum(o["drafter_calls"] for o in claims.outcomes(run_id)) == 12
    assert claims.holders(run_id) == {"a": len(got["a"]) - 1, "b": len(got["b"]) + 1}

    # a released batch is claimable at once; enqueue again reopens the run's list
    claims.enqueue(run_id, ids[:3])
    assert claims.counts(run_id).total == 3
    assert claims.claim(run_id, "c", 30, 5) == ids[:3]
    claims.release(run_id, ids[:3], "c")
    assert claims.claim(run_id, "d", 30, 1) == ids[:1]


def test_a_dead_process_of_this_machine_is_known_gone() -> None:
    import os
    import socket
    import subprocess
    import sys

    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    host = socket.gethostname()
    assert gone(f"{host}:{proc.pid}:abc")
    assert not gone(f"{host}:{os.getpid()}:abc")
    assert not gone(f"another-host:{proc.pid}:abc")  # only its lease tells


def test_run_files_at_an_fsspec_url_are_written_whole_and_checked(
    monkeypatch: pytest.MonkeyPatch, tmp_path
) -> None:
    from core.settings import Settings
    from state.files import (
        RESULT_SCHEMA,
        batch_dir,
        is_local,
        read_checked,
        read_result,
        runs_root,
        write_atomic,
    )

    monkeypatch.setenv("PMEM_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("PMEM_RUNS_URL", "memory://pmem-test-runs")
    root = runs_root(Settings())
    assert not is_local(root)
    path = batch_dir(root, "run1", "batch:1") / "result.json"
    checksum = write_atomic(
        path, {"batch_id": "batch:1", "complete": True, "text": "日本語 \ud800"}, RESULT_SCHEMA
    )
    doc = read_result(path, "batch:1")
    assert doc is not None and doc["checksum"] == checksum and doc["text"] == "日本語 \ud800"
    fs = path.fs  # type: ignore[attr-defined]
    fs.pipe_file(path.path, fs.cat_file(path.path).replace(b"complete", b"komplete"))  # type: ignore[attr-defined]
    with pytest.raises(ResultFileError, match="checksum mismatch"):
        read_checked(path, RESULT_SCHEMA)

    # a folder (plain or file://) is the runs folder itself: written then renamed, as locally
    monkeypatch.setenv("PMEM_RUNS_URL", f"file://{tmp_path / 'shared'}")
    settings = Settings()
    assert runs_root(settings) == settings.runs_dir == tmp_path / "shared"
