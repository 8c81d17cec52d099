"""Exercise the embedded PostgreSQL major-version upgrade end to end (issue 11, point 8).

Only one PostgreSQL version ships with the wheel, so the old version is simulated: a real
cluster is started in a temporary data dir, a memory is stored in it, and its PG_VERSION is
made to claim the previous major version while the server runs. Opening the database then
takes the upgrade path of `store.db.check_major_version`: every database dumped into
`<data dir>/backups`, the data folder set aside there, a new one initialised, the dumps
restored. The script checks the memory survived and prints the timings.

    .venv/bin/python bench/pg_major_upgrade.py
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from core.models import CommitRequest  # noqa: E402
from core.settings import Settings  # noqa: E402
from store import embedded  # noqa: E402
from store.db import Database  # noqa: E402
from store.records import MemoryStore  # noqa: E402


def main() -> int:
    base = Path(tempfile.mkdtemp(prefix="pmem-upgrade-"))
    os.chmod(base, 0o755)
    cfg = Settings(data_dir=base / "data", database_url=None)
    try:
        db = Database.open(cfg)
        made = MemoryStore(db).commit(
            CommitRequest(
                kind="note",
                title="引っ越し先",
                canonical_summary="蒲田にする。",
                index_summary="蒲田",
                idempotency_key="bench-upgrade",
            )
        )
        db.close()
        new = embedded.binary_version()
        old = str(int(new) - 1)
        (cfg.pgdata_dir / "PG_VERSION").write_text(
            old + "\n"
        )  # the running server "is" the old version
        t0 = time.monotonic()
        db = Database.open(cfg)  # takes the upgrade path
        elapsed = time.monotonic() - t0
        view = MemoryStore(db).get(made.memory_id)
        db.close()
        backups = sorted(p.name for p in (cfg.data_dir / "backups").iterdir())
        assert embedded.data_version(cfg.pgdata_dir) == new, (
            "the data folder was not re-initialised"
        )
        assert view.title == "引っ越し先", "the memory did not survive the upgrade"
        assert any(n.startswith(f"pg{old}-pmem-") and n.endswith(".dump") for n in backups), backups
        assert any(n.startswith(f"pgdata-pg{old}-") for n in backups), backups
        print(
            f"upgraded {old} -> {new} in {elapsed:.1f}s; backups: {', '.join(backups)}; memory kept"
        )
        return 0
    finally:
        embedded.stop(cfg.pgdata_dir)
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
