"""Read a JSONL file (plain or ``.jsonl.zst``) one line at a time.

A blank line is skipped and counted; a line that is not UTF-8, not JSON or not a JSON object is
yielded as a :class:`BadLine` with a machine-readable reason (the importer quarantines it) and the
file goes on: one bad line never aborts a file. A file we cannot open or decompress raises
:class:`~importers._common.ReadError` naming the file and the line where reading stopped.

Only ``\\n`` ends a line (``str.splitlines`` would also split on U+2028 and friends), and every
line is decoded strictly, so the text reaches the importer exactly as written.
"""

from __future__ import annotations

import hashlib
import io
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from importers._common import ReadError, ReadReport
from importers._containers import open_regular

ZST_SUFFIX = ".zst"


@dataclass(frozen=True)
class Line:
    number: int  # 1-based line number in the (decompressed) file
    record: dict[str, Any]
    digest: str  # sha1 of the line's bytes (16 hex): a stable id for a line that has none


@dataclass(frozen=True)
class BadLine:
    number: int
    reason: str  # invalid-utf8 / invalid-json / not-an-object


def open_jsonl(path: Path, report: ReadReport | None = None) -> IO[bytes]:
    """A binary stream of the file's lines; ``.zst`` files are decompressed on the fly. With a
    ``report``, the bytes read from the file (compressed, for ``.zst``) are counted into it."""
    label = str(path)
    raw = open_regular(path)
    if report is not None:
        raw = report.track(raw)
    if path.name.lower().endswith(ZST_SUFFIX):
        return _zstd_stream(raw, label)
    return raw


def _zstd_stream(raw: IO[bytes], label: str) -> IO[bytes]:
    try:
        import zstandard
    except ImportError:
        raw.close()
        raise ReadError(
            "reading .zst rollouts needs the zstandard package",
            file=label,
            reason="missing-zstandard",
        ) from None
    return io.BufferedReader(_ZstdReader(raw, zstandard), buffer_size=1 << 20)


class TruncatedInput(EOFError):
    """The compressed file ends inside a frame: it was cut off (a partial download or copy)."""


class _ZstdReader(io.RawIOBase):
    """Zstandard frames decompressed as a stream; unlike ``stream_reader`` an input that ends
    inside a frame raises :class:`TruncatedInput` instead of looking like a normal end."""

    def __init__(self, raw: IO[bytes], zstandard: Any) -> None:
        self._raw = raw
        self._zstd = zstandard
        self._obj = zstandard.ZstdDecompressor().decompressobj()
        self._pending = b""
        self._started = False  # the current frame has had input

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        while not self._pending:
            chunk = self._raw.read(1 << 20)
            if not chunk:
                if self._started and not self._obj.eof:
                    raise TruncatedInput("the compressed input ends inside a frame")
                return 0
            self._feed(chunk)
        n = min(len(buffer), len(self._pending))
        buffer[:n] = self._pending[:n]
        self._pending = self._pending[n:]
        return n

    def _feed(self, chunk: bytes) -> None:
        while chunk:
            self._started = True
            self._pending += self._obj.decompress(chunk)
            if not self._obj.eof:
                return
            chunk = self._obj.unused_data  # the next frame
            self._obj = self._zstd.ZstdDecompressor().decompressobj()
            self._started = False

    def close(self) -> None:
        try:
            self._raw.close()
        finally:
            super().close()


class JsonlReader:
    """Iterate ``Line`` / ``BadLine`` items; ``blank`` counts the skipped blank lines. A
    compressed file that was cut off ends the iteration after its last whole line, with
    ``truncated`` set to the number of the line that was cut (the importer keeps what was read
    and quarantines the rest as ``truncated``)."""

    def __init__(self, fp: IO[bytes], file_label: str) -> None:
        self._fp = fp
        self._label = file_label
        self.blank = 0
        self.lines = 0
        self.truncated: int | None = None

    def __iter__(self) -> Iterator[Line | BadLine]:
        number = 0
        try:
            for raw in self._fp:
                number += 1
                item = self._parse(number, raw)
                if item is not None:
                    yield item
        except ReadError:
            raise
        except TruncatedInput:
            self.truncated = number + 1
        except Exception as exc:  # a decompression or I/O error mid-file
            if not _is_read_error(exc):
                raise
            raise ReadError(
                f"cannot read file after line {number} ({type(exc).__name__})",
                file=self._label,
                record=str(number + 1),
            ) from None
        finally:
            self.lines = number

    def _parse(self, number: int, raw: bytes) -> Line | BadLine | None:
        if not raw.strip():
            self.blank += 1
            return None
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            return BadLine(number, "invalid-utf8")
        try:
            record = json.loads(text)
        except (ValueError, RecursionError):
            return BadLine(number, "invalid-json")
        if not isinstance(record, dict):
            return BadLine(number, "not-an-object")
        digest = hashlib.sha1(raw.rstrip(b"\r\n"), usedforsecurity=False).hexdigest()[:16]
        return Line(number, record, digest)


def _is_read_error(exc: Exception) -> bool:
    if isinstance(exc, OSError | EOFError):
        return True
    return type(exc).__module__.startswith("zstandard") or type(exc).__name__ == "ZstdError"
