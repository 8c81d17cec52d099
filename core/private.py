"""Private files: folders 0700, files 0600, whoever's umask is in force.

The data dir holds a person's conversations, drafts and credentials: nothing under it may be
readable by group or others, and neither may the files pmem writes elsewhere on request (an
export, a review page). The CLI sets ``umask 077`` first thing; these helpers make the same
modes explicit for code that runs without the CLI (tests, a library caller) and repair what
third-party code created (PostgreSQL, Prefect).
"""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

DIR_MODE = 0o700
FILE_MODE = 0o600
UMASK = 0o077


def private_umask() -> int:
    """Set umask 077 for this process; returns the previous one."""
    return os.umask(UMASK)


def private_dir(path: Path) -> Path:
    """Create ``path`` and its missing parents as 0700 folders; tighten ``path`` if it exists
    (only when we own it: a folder of someone else's is left alone)."""
    missing: list[Path] = []
    p = path
    while not p.exists():
        missing.append(p)
        p = p.parent
    for d in reversed(missing):
        with contextlib.suppress(FileExistsError):
            d.mkdir(mode=DIR_MODE)
        with contextlib.suppress(PermissionError):
            os.chmod(d, DIR_MODE)
    st = path.stat()
    if (os.name == "nt" or st.st_uid == os.geteuid()) and stat.S_IMODE(st.st_mode) & 0o077:
        os.chmod(path, stat.S_IMODE(st.st_mode) & ~0o077)
    return path


@contextlib.contextmanager
def open_private(path: Path, mode: str = "w", **kw: Any) -> Iterator[IO[Any]]:
    """Open for writing a file created 0600 (an existing file is truncated and made 0600)."""
    flags = os.O_WRONLY | os.O_CREAT | (os.O_APPEND if "a" in mode else os.O_TRUNC)
    fd = os.open(path, flags, FILE_MODE)
    with contextlib.suppress(PermissionError):
        os.fchmod(fd, FILE_MODE)
    with os.fdopen(fd, mode, **kw) as f:
        yield f


def write_private(path: Path, data: str | bytes) -> Path:
    """Write a 0600 file atomically (temp file in the same folder, then rename)."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with open_private(
            tmp,
            "wb" if isinstance(data, bytes) else "w",
            **({} if isinstance(data, bytes) else {"encoding": "utf-8"}),
        ) as f:
            f.write(data)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return path


def make_private(root: Path, *, root_mode: int = DIR_MODE) -> int:
    """Take group and other permissions off everything under ``root`` (symlinks are not
    followed); ``root`` itself gets ``root_mode``. Returns how many modes changed."""
    changed = 0
    if not root.exists():
        return 0
    if stat.S_IMODE(root.lstat().st_mode) != root_mode:
        os.chmod(root, root_mode)
        changed += 1
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            p = os.path.join(dirpath, name)
            try:
                st = os.lstat(p)
            except FileNotFoundError:  # removed meanwhile (a running server's temp files)
                continue
            if stat.S_ISLNK(st.st_mode):
                continue
            mode = stat.S_IMODE(st.st_mode)
            if mode & 0o077:
                with contextlib.suppress(FileNotFoundError):
                    os.chmod(p, mode & ~0o077)
                    changed += 1
    return changed


def loose_paths(root: Path, *, allow_root: int = DIR_MODE) -> list[tuple[str, str]]:
    """Paths under ``root`` (``root`` included) that group or others can access, as
    (path, octal mode): what a test or `pmem db status` reports."""
    out: list[tuple[str, str]] = []
    mode = stat.S_IMODE(root.lstat().st_mode)
    if mode & ~allow_root & 0o077:
        out.append((str(root), oct(mode)))
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            p = os.path.join(dirpath, name)
            try:
                st = os.lstat(p)
            except FileNotFoundError:
                continue
            if not stat.S_ISLNK(st.st_mode) and stat.S_IMODE(st.st_mode) & 0o077:
                out.append((p, oct(stat.S_IMODE(st.st_mode))))
    return out
