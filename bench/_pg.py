"""A scratch PostgreSQL for the benchmarks: `DATABASE_URL` when set, otherwise the embedded
server in a temporary folder that is stopped and removed afterwards (`keep` leaves it)."""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from store import embedded  # noqa: E402
from store.db import ensure_database  # noqa: E402


@dataclass
class Scratch:
    base: Path  # the temporary (or kept) folder: put exports and data dirs here
    admin: str | None  # the server's admin URL; None when DATABASE_URL was given
    urls: dict[str, str] = field(default_factory=dict)

    def database(self, name: str) -> str:
        """The URL of database `name`, created on first use (DATABASE_URL itself when given)."""
        if self.admin is None:
            return os.environ["DATABASE_URL"]
        if name not in self.urls:
            ensure_database(self.admin, name)
            self.urls[name] = self.admin.replace("/postgres?", f"/{name}?")
        return self.urls[name]


def remove_data_dir(data_dir: Path) -> None:
    """Delete a benchmark's data dir together with its cluster: run as root, the embedded
    server's cluster lives under ``embedded.pg_home()`` (``/var/lib/pmem``), linked from the
    data dir (``pgdata``), and the orphan sweep leaves a cluster whose data dir's parent folder
    is gone too (an unmounted disk looks the same): a temporary folder removed whole would
    leave its cluster behind (up to ~3 GB per 500 MB import). The server must be stopped."""
    link = data_dir / "pgdata"
    if link.is_symlink():
        side = Path(os.readlink(link)).parent
        if side.parent == embedded.pg_home() and (side / embedded.DATA_DIR_NOTE).exists():
            shutil.rmtree(side, ignore_errors=True)
    shutil.rmtree(data_dir, ignore_errors=True)


@contextmanager
def scratch(prefix: str, keep: Path | None = None, *, own_ok: bool = True) -> Iterator[Scratch]:
    """Yields a `Scratch`; with `own_ok` a set `DATABASE_URL` is used instead of a server."""
    base = keep or Path(tempfile.mkdtemp(prefix=prefix))
    base.mkdir(parents=True, exist_ok=True)
    os.chmod(base, 0o755)  # as root the server runs as another user that must traverse it
    own = own_ok and bool(os.environ.get("DATABASE_URL"))
    pgdata = base / "pgdata"
    try:
        admin = None if own else embedded.start(pgdata).uri("postgres")
        yield Scratch(base, admin)
    finally:
        if not own:
            embedded.stop(pgdata)
        if keep is None:
            remove_data_dir(base)
