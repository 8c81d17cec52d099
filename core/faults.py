"""Named fault points for crash tests: ``PMEM_FAULT=name`` (or ``name@N`` for the N-th time the
point is reached, several separated by commas) kills the process right there with SIGKILL, as a
power cut or `kill -9` would. Unset in normal use: a fault point is then one dict lookup."""

from __future__ import annotations

import os
import signal
import threading
from collections import Counter

_hits: Counter[str] = Counter()
_lock = threading.Lock()

POINTS = (
    "import:after-conversation",
    "plan:after-batch",
    "draft:before-call",
    "draft:after-call",
    "write:result.json:before-rename",
    "draft:after-result",
    "commit:before-propose",
    "commit:after-propose",
    "store:commit-before-tx-end",
    "commit:after-commit-before-bookkeeping",
    "commit:after-bookkeeping",
    "commit:after-batch",
)


def fault_point(name: str) -> None:
    spec = os.environ.get("PMEM_FAULT")
    if not spec:
        return
    for item in spec.split(","):
        target, _, nth = item.strip().partition("@")
        if target != name:
            continue
        with _lock:
            _hits[name] += 1
            count = _hits[name]
        if count == int(nth or 1):
            os.kill(os.getpid(), signal.SIGKILL)
