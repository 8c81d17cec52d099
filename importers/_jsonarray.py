"""Stream the items of one big JSON array (ChatGPT and Claude.ai exports) with ijson.

One item at a time is in memory, whatever the file's size. A file that is not a JSON array, or
is cut off, raises :class:`~core.errors.InputError` naming the file and the array position, after
every complete item before the damage was yielded.

Backend note: ijson's fastest backend (``yajl2_c``) silently turns a lone surrogate escape
(``"\\ud800"``) into ``"?"`` and crashes on some others. Seekable inputs are pre-scanned for lone
surrogate escapes (a cheap regex pass); only files that hold one are parsed with ijson's pure Python
backend, which keeps them exactly. Non-seekable streams always use the pure Python backend.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from types import ModuleType
from typing import IO, Any

import ijson

from importers._common import ReadError, where

_CHUNK = 1 << 20  # bytes per read while pre-scanning
_HEAD = 1 << 16  # bytes peeked to check the file is a JSON array


def iter_array_items(
    fp: IO[bytes], file_label: str, member: str | None = None, *, use_float: bool = False
) -> Iterator[tuple[int, Any]]:
    """``(array index, item)`` for every item of the JSON array in ``fp``."""
    label = where(file_label, member)
    backend = choose_backend(fp, label)
    reader = HeadReader(fp)
    check_is_array(reader.head, label)
    done = 0  # complete items read so far = array index of the one being read
    try:
        for item in backend.items(reader, "item", use_float=use_float):
            yield done, item
            done += 1
    except (ijson.JSONError, UnicodeDecodeError) as exc:
        # ijson's message quotes the surrounding JSON text (private): report the class only.
        raise ReadError(
            f"invalid or truncated JSON at array position {done} ({type(exc).__name__})",
            file=label,
            record=str(done),
            reason="invalid-json",
        ) from None


class HeadReader:
    """A read-only binary stream that peeks the first bytes (minus a UTF-8 BOM) and replays them."""

    def __init__(self, fp: IO[bytes]) -> None:
        self._fp = fp
        head = fp.read(_HEAD)
        if not isinstance(head, bytes):
            raise TypeError("the stream must be opened in binary mode")
        self.head = head.removeprefix(b"\xef\xbb\xbf")
        self._pending = self.head

    def read(self, size: int = -1) -> bytes:
        if self._pending:
            if size is None or size < 0:
                data, self._pending = self._pending + self._fp.read(), b""
                return data
            data, self._pending = self._pending[:size], self._pending[size:]
            return data
        return self._fp.read(size)


def check_is_array(head: bytes, label: str) -> None:
    stripped = head.lstrip()
    if not stripped.startswith(b"["):
        what, reason = (
            ("empty file", "empty-file")
            if not stripped
            else ("not a JSON array", "not-a-json-array")
        )
        raise ReadError(f"{what} at array position 0", file=label, record="0", reason=reason)


# Any escape of a UTF-16 surrogate (U+D800-U+DFFF), and the low half of a pair.
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")
_LOW_ESCAPE = re.compile(rb"\\u[dD][c-fC-F][0-9a-fA-F]{2}")
_BACKSLASH = 0x5C
_GUARD = 16  # bytes kept back at the end of a chunk: a pair escape is 12 bytes


def choose_backend(fp: IO[bytes], label: str) -> ModuleType:
    """ijson's default backend, unless the input holds a lone surrogate escape (or can't be scanned)."""
    try:
        seekable = fp.seekable()
    except (AttributeError, OSError):
        seekable = False
    if not seekable:
        return python_backend()
    try:
        start = fp.tell()
        lone = has_lone_surrogate_escape(fp)
        fp.seek(start)
    except OSError as exc:
        raise ReadError(f"cannot read file ({type(exc).__name__})", file=label) from None
    return python_backend() if lone else ijson


def python_backend() -> ModuleType:
    """ijson's pure Python backend: slower, but keeps lone surrogates exactly."""
    backend: ModuleType = ijson.get_backend("python")
    return backend


def has_lone_surrogate_escape(fp: IO[bytes], chunk_size: int = _CHUNK) -> bool:
    """True when the JSON bytes hold a ``\\uD800``-``\\uDFFF`` escape that is not a valid pair.

    The regex search runs in C over each chunk; only surrogate escapes (emoji, mostly) are looked
    at in Python. A ``\\u`` preceded by an odd run of backslashes is literal text, not an escape.
    When in doubt (a chunk edge inside a run of backslashes) it answers True, which only costs
    speed: the exact, slower backend is then used.
    """
    carry = b""
    while True:
        chunk = fp.read(chunk_size)
        buf = carry + chunk
        final = not chunk
        limit = len(buf) if final else len(buf) - _GUARD
        consumed = 0  # end of the last pair: a low half before it is not lone
        for match in _SURROGATE_ESCAPE.finditer(buf):
            start = match.start()
            if start < consumed or _escaped(buf, start):
                continue
            if not final and start >= limit:
                break
            if buf[start + 3] in b"89abAB" and _LOW_ESCAPE.match(buf, start + 6):
                consumed = start + 12
                continue
            return True
        if final:
            return False
        cut = max(limit, consumed)
        while cut > 0 and buf[cut - 1] == _BACKSLASH:
            cut -= 1  # keep a whole run of backslashes, so its parity is known next time
        carry = buf[cut:]


def _escaped(buf: bytes, index: int) -> bool:
    """True when the backslash at ``index`` is itself escaped (an odd run of backslashes before it)."""
    run = 0
    while index - run - 1 >= 0 and buf[index - run - 1] == _BACKSLASH:
        run += 1
    return run % 2 == 1
