"""Where an export's files are: a single file, a folder, or a zip read in place (no extraction).

A *part* is one file of an export (``conversations-003.json`` in a zip, a rollout in a sessions
tree). :func:`iter_parts` reads every part with a per-part reader and keeps going when one part
is damaged: with several parts, a part that raises :class:`InputError` becomes a file-level
:class:`Quarantined` record and the next part is read; with a single part the error is raised,
after everything before the damage was yielded.
"""

from __future__ import annotations

import stat
import zipfile
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path, PurePosixPath
from typing import IO, Any, TypeVar

from core.errors import InputError
from importers._common import Quarantined, ReadError, ReadReport, where

T = TypeVar("T")

# Errors a damaged zip member raises while it is being read.
ZIP_READ_ERRORS = (zipfile.BadZipFile, zlib.error, EOFError, OSError, NotImplementedError)


@dataclass(frozen=True)
class Part:
    """One file of an export. ``label`` is the file on disk (the zip, for a zip member)."""

    label: str
    member: str | None
    name: str  # the base name, used to recognise the part
    opener: Callable[[], IO[bytes]]
    size: int = 0  # bytes to read (uncompressed, for a zip member)
    report: ReadReport | None = None

    @property
    def where(self) -> str:
        return where(self.label, self.member)

    def open(self) -> IO[bytes]:
        try:
            fp = self.opener()
        except ReadError:
            raise
        except (*ZIP_READ_ERRORS, RuntimeError) as exc:
            raise ReadError(f"cannot open file ({type(exc).__name__})", file=self.where) from None
        return self.report.track(fp) if self.report is not None else fp


def is_zip(path: Path) -> bool:
    if path.suffix.lower() == ".zip":
        return True
    try:
        return path.is_file() and zipfile.is_zipfile(path)
    except OSError:
        return False


def unsafe_member_name(name: str) -> bool:
    """A member name that would escape a folder if extracted (we never extract, but we refuse it)."""
    normal = name.replace("\\", "/")
    pure = PurePosixPath(normal)
    return normal.startswith("/") or ".." in pure.parts or (len(normal) > 1 and normal[1] == ":")


def open_zip(path: Path) -> zipfile.ZipFile:
    label = str(path)
    try:
        return zipfile.ZipFile(path)
    except FileNotFoundError:
        raise ReadError("cannot open file (FileNotFoundError)", file=label) from None
    except (zipfile.BadZipFile, OSError, EOFError) as exc:
        raise ReadError(
            f"not a readable zip ({type(exc).__name__})", file=label, reason="bad-zip"
        ) from None


def zip_parts(
    archive: zipfile.ZipFile,
    label: str,
    order: Callable[[str], Any | None],
    report: ReadReport | None = None,
    skip_reason: str = "not-an-export-file",
) -> tuple[list[Part], list[Quarantined]]:
    """Members whose base name ``order`` accepts (returns a sort key), in that order. The others
    are counted in ``report.skipped`` under ``skip_reason``."""
    found: list[tuple[Any, str, Part]] = []
    refused: list[Quarantined] = []
    for info in archive.infolist():
        if info.is_dir():
            continue
        base = PurePosixPath(info.filename.replace("\\", "/")).name
        key = order(base)
        if key is None:
            if report is not None:
                report.skip(skip_reason)
            continue
        if unsafe_member_name(info.filename):
            refused.append(
                Quarantined(
                    file=label,
                    position=0,
                    reason="unsafe-member-name",
                    member=info.filename,
                    kind="file",
                )
            )
            continue
        part = Part(label, info.filename, base, _member_opener(archive, info), info.file_size)
        found.append((key, info.filename, part))
    found.sort(key=lambda item: (item[0], item[1]))
    return [part for _, _, part in found], refused


def _member_opener(archive: zipfile.ZipFile, info: zipfile.ZipInfo) -> Callable[[], IO[bytes]]:
    def opener() -> IO[bytes]:
        return archive.open(info, "r")

    return opener


def file_part(path: Path) -> Part:
    try:
        size = path.stat().st_size
    except OSError:
        size = 0
    return Part(str(path), None, path.name, lambda: open_regular(path), size)


def open_regular(path: Path) -> IO[bytes]:
    """``path`` opened for reading; a named pipe, a socket or a device is refused before it is
    opened (opening a pipe with no writer would wait forever)."""
    label = str(path)
    try:
        mode = path.stat().st_mode
    except OSError as exc:
        raise ReadError(f"cannot open file ({type(exc).__name__})", file=label) from None
    if not stat.S_ISREG(mode):
        raise ReadError(
            "not a regular file (a pipe, socket or device)", file=label, reason="not-a-regular-file"
        )
    try:
        return path.open("rb")
    except OSError as exc:
        raise ReadError(f"cannot open file ({type(exc).__name__})", file=label) from None


def folder_parts(
    folder: Path,
    order: Callable[[str], Any | None],
    report: ReadReport | None = None,
    skip_reason: str = "not-an-export-file",
) -> list[Part]:
    """Files under ``folder`` (any depth) whose base name ``order`` accepts, in that order. The
    other files are counted in ``report.skipped`` under ``skip_reason``."""
    found: list[tuple[Any, str, Path]] = []
    for path in folder.rglob("*"):
        if not path.is_file():
            continue
        key = order(path.name)
        if key is None:
            if report is not None:
                report.skip(skip_reason)
            continue
        found.append((key, str(path.parent), path))
    found.sort(key=lambda item: (item[1], item[0], item[2].name))
    return [file_part(path) for _, _, path in found]


def iter_parts(
    parts: list[Part], read: Callable[[Part], Iterator[T]], report: ReadReport | None = None
) -> Iterator[T | Quarantined]:
    """Everything ``read`` yields for each part; a damaged part of several is quarantined. With a
    ``report``, the parts' sizes and the bytes read are counted into it."""
    if report is not None:
        report.bytes_total += sum(part.size for part in parts)
        parts = [replace(part, report=report) for part in parts]
    for part in parts:
        done = 0
        try:
            for item in read(part):
                yield item
                done += 1
        except InputError as exc:
            if len(parts) == 1:
                raise
            yield _part_quarantine(
                part, exc.record, done, getattr(exc, "reason", "unreadable-file")
            )
        except ZIP_READ_ERRORS as exc:
            if len(parts) == 1:
                raise ReadError(
                    f"cannot read file at record {done} ({type(exc).__name__})",
                    file=part.where,
                    record=str(done),
                ) from None
            yield _part_quarantine(part, None, done, "unreadable-file")


def _part_quarantine(part: Part, record: str | None, done: int, reason: str) -> Quarantined:
    position = int(record) if record is not None and record.isdigit() else done
    return Quarantined(
        file=part.label, position=position, reason=reason, member=part.member, kind="file"
    )
