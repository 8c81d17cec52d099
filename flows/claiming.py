"""The run's batches taken through claims with a lease (store/claims.py), wave by wave:
drafted, verified and committed, each batch's counts recorded with its claim. The in-process
run is one worker of the same claims as a pool run's workers.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

from core.errors import CostLimitStop, RateLimitStop
from flows.resources import Pipeline, Steps, tick
from state.summary import collect_commits, collect_drafts
from store.claims import ClaimCounts, ClaimStore, gone

_log = logging.getLogger("pmem.backfill")


def wave_size(p: Pipeline) -> int:
    """How many batches a worker takes at once (a wave: drafted, then committed): as many as
    drafts may run at once for a remote drafter, one at a time for the local offline one."""
    return 1 if p.drafter.model.startswith("extractive") else max(1, p.settings.max_concurrency)


# ---------------------------------------------------------------- fan-out: claims with a lease

# the counts a batch adds to its run's summary (stored with its claim, summed over every worker)
SUMMED = (
    "batches_skipped_complete",
    "batches_drafted",
    "batches_failed",
    "drafter_calls",
    "rejected_evidence",
    "target_not_offered",
    "appends_proposed",
    "commits",
    "commits_replayed",
    "noops",
    "conflicts",
    "memories_created",
    "memory_api_requests",
    "rate_limited",
    "input_tokens",
    "output_tokens",
)


def new_part() -> dict[str, Any]:
    return dict.fromkeys(SUMMED, 0) | {"batches_left": 0, "conflict_drafts": []}


def merge_counts(summary: dict[str, Any], part: dict[str, Any]) -> None:
    for k in SUMMED:
        summary[k] = summary.get(k, 0) + int(part.get(k, 0) or 0)
    summary["conflict_drafts"] = list(summary.get("conflict_drafts", [])) + list(
        part.get("conflict_drafts", [])
    )


class _Lease:
    """Keeps this worker's leases on the batches of a wave alive while it works on them: a
    thread renews them every third of the lease. A worker killed stops renewing, and the
    batches become another worker's once the lease runs out."""

    def __init__(
        self, claims: ClaimStore, run_id: str, worker: str, batch_ids: list[str], seconds: float
    ) -> None:
        self.claims, self.run_id, self.worker, self.seconds = claims, run_id, worker, seconds
        self.batch_ids = list(batch_ids)
        self.lost: set[str] = set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._renew, name="pmem-lease", daemon=True)

    def _renew(self) -> None:
        while not self._stop.wait(self.seconds / 3):
            try:
                held = set(
                    self.claims.renew(self.run_id, self.batch_ids, self.worker, self.seconds)
                )
            except Exception as err:  # noqa: BLE001 - a missed renewal: the next one tries again
                _log.warning("lease renewal failed (%s)", type(err).__name__)
                continue
            lost = set(self.batch_ids) - held - self.lost
            if lost:
                self.lost |= lost
                _log.warning("lost the lease on %d batches of run %s", len(lost), self.run_id)

    def __enter__(self) -> _Lease:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5)


def drain(
    p: Pipeline,
    steps: Steps,
    summary: dict[str, Any],
    *,
    dry_run: bool,
    worker: str,
    pool: bool = False,
) -> RateLimitStop | CostLimitStop | None:
    """Take the run's open batches wave by wave (``ClaimStore.claim``: the oldest nobody holds),
    draft, verify and commit them, and record each one's counts with its claim; until none is
    left. Batches another worker holds are waited for: done by it, or taken over once its lease
    runs out. Returns the stop (a rate limit, --max-cost) that ended it early; the batches it
    held then are given back. ``pool``: also stop when the run was stopped elsewhere."""
    claims = ClaimStore(p.db)
    size, lease = wave_size(p), p.settings.lease_seconds
    while True:
        if pool and not _still_open(p):
            return None
        wave = claims.claim(p.run_id, worker, lease, size)
        if not wave:
            counts = claims.counts(p.run_id)
            if not counts.open:
                return None
            # in process: a killed earlier process of this run on this machine (the run lock was
            # taken over from it) leaves its batches at once; pool workers wait for the lease
            dead = [] if pool else [w for w in claims.live_holders(p.run_id) if gone(w)]
            if dead:
                for w in dead:
                    claims.expire(p.run_id, w)
                continue
            # another worker holds them: wait until it is done or its lease runs out
            time.sleep(
                min(1.0, max(0.05, counts.next_free if counts.next_free is not None else 0.2))
            )
            continue
        stop = _work_wave(
            p, steps, summary, claims, wave, dry_run=dry_run, worker=worker, lease=lease
        )
        if stop is not None:
            return stop


def _still_open(p: Pipeline) -> bool:
    run = p.runs.get_run(p.run_id)
    return run is not None and run["status"] == "open"


def _work_wave(
    p: Pipeline,
    steps: Steps,
    summary: dict[str, Any],
    claims: ClaimStore,
    wave: list[str],
    *,
    dry_run: bool,
    worker: str,
    lease: float,
) -> RateLimitStop | CostLimitStop | None:
    parts = {b: new_part() for b in wave}
    requests, limited = p.limiter.requests, p.commit_cc.rate_limited + p.draft_cc.rate_limited
    finished: list[str] = []
    stop: RateLimitStop | CostLimitStop | None = None

    def done(batch_id: str, *, failed: bool = False) -> None:
        part = parts[batch_id]
        if not finished:  # the wave's memory-API requests and 429s, counted once
            part["memory_api_requests"] += p.limiter.requests - requests
            part["rate_limited"] += p.commit_cc.rate_limited + p.draft_cc.rate_limited - limited
        finished.append(batch_id)
        if not claims.done(p.run_id, batch_id, worker, part, failed=failed):
            _log.warning("batch %s of run %s was taken over by another worker", batch_id, p.run_id)

    try:
        with _Lease(claims, p.run_id, worker, wave, lease):
            drafted: list[str] = []
            for batch_id, out in zip(wave, steps.draft_all(p.run_id, wave), strict=True):
                ok, why = collect_drafts(parts[batch_id], [batch_id], [out])
                stop = stop or why
                if ok:
                    drafted.append(batch_id)
                    claims.mark_drafted(p.run_id, batch_id, worker)
                elif parts[batch_id]["batches_failed"]:
                    done(batch_id, failed=True)
            if dry_run:
                for batch_id in drafted:
                    done(batch_id)
            elif drafted:  # what was drafted before a stop is committed too
                for batch_id, out in zip(drafted, steps.commit_all(p.run_id, drafted), strict=True):
                    try:
                        collect_commits(parts[batch_id], [out])
                    except RateLimitStop as err:
                        stop = stop or err
                        continue
                    done(batch_id)
    finally:
        claims.release(p.run_id, [b for b in wave if b not in finished], worker)
        for part in parts.values():
            merge_counts(summary, part)
    return stop


def tick_claims(claims: ClaimStore, run_id: str, seen: dict[str, int]) -> ClaimCounts:
    """Advance this process's progress bars by what every worker did since the last look."""
    counts = claims.counts(run_id)
    for stage, n in (("draft", counts.drafted + counts.failed), ("commit", counts.done)):
        if n > seen.get(stage, 0):
            tick(stage, -(n - seen.get(stage, 0)))
            seen[stage] = n
    return counts
