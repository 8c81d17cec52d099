"""Stream the items of one big JSON array (ChatGPT and Claude.ai exports).

The array is read in chunks. The whole items a chunk holds are parsed by orjson in one call
(the text up to the last ``}, {`` of its next 256K characters, as an array): a cut there parses only when it
falls between two items, so a success is exactly those items; anything orjson refuses (a lone
surrogate escape, ``NaN``, a number beyond a double, bad bytes, a cut inside a string or an
item) and a chunk holding a run of 19 digits (orjson reads an integer beyond 64 bits as a
float) are read item by item by the standard library's C JSON scanner
(``json.JSONDecoder.raw_decode``), which keeps every value exactly and finds what is wrong.
Memory holds one chunk and the items being parsed, whatever the file's size, and the time is
linear in the size of the file and of any one item (a 50 MB message costs about what
``json.load`` costs for it: when an item is longer than the buffer, the buffer grows
geometrically).

Bad bytes stay local: an item holding invalid UTF-8 (a stray byte, an encoded lone surrogate), a
raw NUL or another control character in a string, nesting deeper than the parser's recursion
limit, an integer with more digits than Python converts, or any other syntax error is yielded as
a :class:`BadItem` (the importer quarantines that record, the reason names the byte offset in the
file) and reading goes on with the next item: the item's end is found by a scan that only tracks
strings and brackets. A file that is not a JSON array, or that ends inside an item, raises
:class:`~core.errors.InputError` naming the file and the array position, after every complete
item before it was yielded. Escaped text (``\\u0000``, a lone ``\\ud800``) is valid JSON and
kept exactly.
"""

from __future__ import annotations

import bisect
import codecs
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from types import ModuleType
from typing import IO, Any

import ijson
import orjson

from importers._common import ReadError, where

_CHUNK = 1 << 20  # bytes per read while pre-scanning
_HEAD = 1 << 16  # bytes peeked to check the file is a JSON array
_READ = 1 << 20  # bytes per read of the array
_NEAR_END = 64  # a syntax error this close to the end of the buffer may be a cut: read more
_WS = re.compile(r"[ \t\n\r]*")
# characters of the decoded buffer that stand for bytes that were not UTF-8 (surrogateescape)
_UNDECODABLE = re.compile("[\udc80-\udcff]")
_STRUCTURE = re.compile(r'["\\{}\[\],]')
_DECODER = json.JSONDecoder()
# a cut between two array items is at one of these (orjson's parse decides whether it is one)
# (a quote after the "{": a key opens the next item; inside a string that quote would be escaped)
_BOUNDARY = re.compile(r'\}[ \t\n\r]*,[ \t\n\r]*\{[ \t\n\r]*"')
_DUMPS_CUT = '}, {"'  # the same, as json.dumps writes it (the exports' usual form)
_TRIES = 3  # cuts tried, last first, before the span is read one by one (a nested "}, {")
_SPAN = 1 << 18  # characters parsed by orjson at most at once (the items' objects held at once)
_TAIL = 1 << 15  # characters at the end of the span looked at first for its last cut
_LONG_RUN = 19  # digits: orjson reads an integer from 2**63 (19 digits) on as a float
_DIGITS = bytes(0x30 if 0x30 <= i <= 0x39 else 0x20 for i in range(256))  # digits -> "0"


@dataclass(frozen=True)
class BadItem:
    """An array item that could not be read; ``reason`` names what and the byte offset."""

    reason: str


def iter_array_items(
    fp: IO[bytes], file_label: str, member: str | None = None, *, use_float: bool = False
) -> Iterator[tuple[int, Any]]:
    """``(array index, item)`` for every item of the JSON array in ``fp``; an item that cannot
    be read is a :class:`BadItem`. Numbers with a fraction are floats (``use_float`` is kept for
    callers; it no longer changes anything)."""
    label = where(file_label, member)
    reader = HeadReader(fp)
    check_is_array(reader.head, label)
    yield from _ArrayScanner(reader, label).items()


class _ArrayScanner:
    def __init__(self, reader: HeadReader, label: str) -> None:
        self.reader = reader
        self.label = label
        self.decode = codecs.getincrementaldecoder("utf-8")("surrogateescape").decode
        self.buf = ""
        self.pos = 0  # index in buf of the next character to read
        self.base = reader.bom  # file byte offset of buf[0]
        self.eof = False
        self.chars = 0  # characters dropped from the front of buf so far
        self.undecodable: list[int] = []  # stream character indices of bytes that were not UTF-8
        # stream character index before which items are read one by one (orjson refused there)
        self.one_by_one_until = 0
        self.digit_tail = b""  # the last bytes read, for a run of digits cut by a read

    # ------------------------------------------------------------ buffer

    def fill(self, at_least: int = _READ) -> bool:
        """Read more (at least ``at_least`` bytes); drop what is consumed. False at the end."""
        if self.eof:
            return False
        self.drop_consumed()
        self.buf += self.more(at_least, self.chars + len(self.buf))
        return not self.eof

    def drop_consumed(self) -> None:
        if self.pos:
            done = self.buf[: self.pos]
            self.base += (
                len(done) if done.isascii() else len(done.encode("utf-8", "surrogateescape"))
            )
            self.chars += self.pos
            self.buf = self.buf[self.pos :]
            self.pos = 0

    def more(self, at_least: int, at: int, one_by_one: bool = False) -> str:
        """The next text read (at least ``at_least`` bytes), whose first character is the
        stream's character ``at``; sets ``eof`` when nothing is left. ``one_by_one``: what it
        holds is read item by item (a long item's text: not looked at for digits)."""
        data = self.reader.read(max(at_least, _READ))
        self.eof = not data
        text = self.decode(data, final=self.eof)
        # a run of _LONG_RUN digits (C speed: digits to "0", then one find): what holds it is
        # read one by one, so that an integer beyond 64 bits stays exact
        if one_by_one or b"0" * _LONG_RUN in (self.digit_tail + data).translate(_DIGITS):
            self.one_by_one_until = max(self.one_by_one_until, at + len(text))
        self.digit_tail = data[-_LONG_RUN:]
        if not text.isascii():  # O(1); then one strict encode (C speed) finds undecodable bytes
            try:
                text.encode("utf-8")
            except UnicodeEncodeError:
                self.undecodable += [at + m.start() for m in _UNDECODABLE.finditer(text)]
        return text

    def offset(self, index: int) -> int:
        """File byte offset of ``buf[index]``."""
        head = self.buf[:index]
        return self.base + (
            len(head) if head.isascii() else len(head.encode("utf-8", "surrogateescape"))
        )

    def skip_ws(self) -> bool:
        """Move past white space; False when the input ends first."""
        while True:
            self.pos = _WS.match(self.buf, self.pos).end()  # type: ignore[union-attr]
            if self.pos < len(self.buf):
                return True
            if not self.fill():
                return False

    # ------------------------------------------------------------ items

    def items(self) -> Iterator[tuple[int, Any]]:
        self.skip_ws()
        self.pos += 1  # the "[" (checked by check_is_array)
        index = 0
        if not self.skip_ws():
            raise self.truncated(index)
        if self.buf[self.pos] == "]":
            return
        while True:
            if not self.skip_ws():
                raise self.truncated(index)
            many = self.whole_items()
            if many:
                for value in many[:-1]:
                    yield index, value
                    index += 1
                yield index, many[-1]
            else:
                yield index, self.item(index)
            if not self.skip_ws():
                raise self.truncated(index + 1)
            sep = self.buf[self.pos]
            if sep == "]":
                return
            if sep != ",":
                raise ReadError(
                    f"invalid JSON after array position {index}: expected ',' or ']' "
                    f"at byte {self.offset(self.pos)}",
                    file=self.label,
                    record=str(index + 1),
                    reason="invalid-json",
                )
            self.pos += 1
            index += 1

    def whole_items(self) -> list[Any] | None:
        """The whole items from ``pos`` to the last cut between items of the next ``_SPAN``
        characters, parsed by orjson at once (``pos`` ends after them; the last ``_TRIES``
        possible cuts are tried). None when there is none, when orjson refuses the text (then
        items are read one by one past the last cut) and for the text up to the end of a read
        that held a run of ``_LONG_RUN`` digits (an integer stays exact)."""
        if self.chars + self.pos < self.one_by_one_until:
            return None
        if len(self.buf) - self.pos < _READ // 2 and not self.eof:
            self.fill()  # a fuller buffer: fewer items left to the one-by-one reader
            if self.chars + self.pos < self.one_by_one_until:
                return None
        cuts = self.last_cuts()
        for cut in cuts:
            try:
                values: list[Any] = orjson.loads("[" + self.buf[self.pos : cut] + "]")
            except orjson.JSONDecodeError:
                continue
            self.pos = cut
            return values
        if cuts:
            self.one_by_one_until = self.chars + cuts[0]
        return None

    def last_cuts(self) -> list[int]:
        """Indices just past the ``}`` of the last ``_TRIES`` ``}, {"`` in the ``_SPAN``
        characters after ``pos`` (possible cuts between two items), the last first: looked for
        by ``str.rfind`` as ``json.dumps`` separates items (C speed), else by a pattern that
        allows any white space."""
        end = min(len(self.buf), self.pos + _SPAN)
        found: list[int] = []
        at = end
        while len(found) < _TRIES:
            at = self.buf.rfind(_DUMPS_CUT, self.pos, at)
            if at == -1:
                break
            found.append(at + 1)
        if found:
            return found
        for start in (max(self.pos, end - _TAIL), self.pos):
            found = [m.start() + 1 for m in _BOUNDARY.finditer(self.buf, start, end)]
            if len(found) >= _TRIES or start == self.pos:
                return found[: -_TRIES - 1 : -1]
        return []

    def item(self, index: int) -> Any:
        """The item at ``pos`` (or a BadItem); ``pos`` ends after it."""
        while True:
            start = self.pos
            try:
                value, end = _DECODER.raw_decode(self.buf, start)
            except json.JSONDecodeError as exc:
                open_string = exc.msg.startswith("Unterminated string")
                if open_string and not self.eof:
                    self.read_past_string(exc.pos)  # then parse once more (geometric: linear)
                    continue
                if exc.pos >= len(self.buf) - _NEAR_END and not self.eof:
                    self.fill(len(self.buf) - start)  # the item goes on: grow 2x (linear)
                    continue
                if exc.msg.startswith("Invalid control character"):
                    what = "nul-byte" if self.buf[exc.pos] == "\x00" else "control-character"
                    return self.bad(index, f"{what} at byte {self.offset(exc.pos)}")
                return self.bad(index, f"invalid-json at byte {self.offset(exc.pos)}: {exc.msg}")
            except RecursionError:
                return self.bad(index, f"too-deep at byte {self.offset(start)}")
            except ValueError:  # an integer with more digits than int() converts
                return self.bad(index, f"number-too-long at byte {self.offset(start)}")
            if end >= len(self.buf) and not self.eof:  # a number cut by the buffer's end?
                self.fill()
                continue
            if self.undecodable:
                first = bisect.bisect_left(self.undecodable, self.chars + start)
                if first < len(self.undecodable) and self.undecodable[first] < self.chars + end:
                    return self.bad(index, self.bytes_reason(self.undecodable[first] - self.chars))
            self.pos = end
            return value

    def read_past_string(self, quote: int) -> None:
        """Read until the buffer holds the end of the string whose opening quote is at ``quote``
        (or the input ends), then half as much again as the item so far. The string's end is
        looked for by ``str.find`` in the new text only, and the pieces read are joined once:
        a 50 MB message is parsed twice (the first, cut try and the whole), not once per read,
        and copied a bounded number of times."""
        inside = quote + 1 - self.pos  # the string's first character, from the item's start
        self.drop_consumed()
        tail = self.buf[inside:]
        pieces: list[str] = []
        size = len(self.buf)  # chars held; each read doubles it
        while not _closing_quote(tail) and not self.eof:
            piece = self.more(size, self.chars + size, one_by_one=True)
            pieces.append(piece)
            size += len(piece)
            if tail.endswith("\\"):  # a backslash run goes on into the piece: judge it whole
                run = len(tail) - len(tail.rstrip("\\"))
                piece = tail[len(tail) - run :] + piece
            tail = piece
        if not self.eof:
            piece = self.more(max(_READ, size // 2), self.chars + size, one_by_one=True)
            pieces.append(piece)
        self.buf = "".join([self.buf, *pieces])

    def bytes_reason(self, index: int) -> str:
        at = self.offset(index)
        pair = self.buf[index : index + 2]
        if len(pair) == 2 and pair[0] == "\udced" and "\udca0" <= pair[1] <= "\udcbf":
            return f"lone-surrogate at byte {at}"  # U+D800-U+DFFF encoded as UTF-8 bytes
        return f"invalid-utf8 at byte {at}"

    def bad(self, index: int, reason: str) -> BadItem:
        """Skip the item at ``pos`` without parsing it (strings and brackets only)."""
        while True:
            end = _item_end(self.buf, self.pos)
            if end is not None:
                self.pos = end
                return BadItem(reason)
            if not self.fill(3 * (len(self.buf) - self.pos)):
                raise ReadError(
                    f"array position {index} never ends ({reason})",
                    file=self.label,
                    record=str(index),
                    reason="truncated",
                )

    def truncated(self, index: int) -> ReadError:
        return ReadError(
            f"the file ends inside array position {index} (truncated)",
            file=self.label,
            record=str(index),
            reason="truncated",
        )


def _closing_quote(text: str) -> bool:
    """Whether ``text`` (inside a string) holds an unescaped ``"``. A text that starts with a
    backslash run carried over from the previous piece is judged with it. Counted at C speed:
    only a quote after two or more backslashes is looked at one by one."""
    first = text.find('"')
    if first == -1:
        return False
    if first == 0 or text[first - 1] != "\\" or text.count('"') > text.count('\\"'):
        return True  # a quote with no backslash before it
    at = text.find('\\\\"')  # the others follow one backslash (escaped) or a run
    while at != -1:
        quote = at + 2
        run = quote
        while run > 0 and text[run - 1] == "\\":
            run -= 1
        if (quote - run) % 2 == 0:
            return True
        at = text.find('\\\\"', quote + 1)
    return False


def _item_end(buf: str, start: int) -> int | None:
    """Index just past the array item starting at ``start`` (before its ',' or the array's ']'),
    tracking only strings and brackets; None when ``buf`` ends first."""
    depth = 0
    in_string = False
    escaped_until = -1
    for m in _STRUCTURE.finditer(buf, start):
        i = m.start()
        if i < escaped_until:
            continue
        c = m.group()
        if in_string:
            if c == "\\":
                escaped_until = i + 2
            elif c == '"':
                in_string = False
            continue
        if c == '"':
            in_string = True
        elif c in "{[":
            depth += 1
        elif c in "}]":
            if depth == 0:
                return i  # the array's own "]": the item ended before it
            depth -= 1
            if depth == 0:
                return i + 1
        elif c == "," and depth == 0:
            return i
    return None


class HeadReader:
    """A read-only binary stream that peeks the first bytes (minus a UTF-8 BOM) and replays them."""

    def __init__(self, fp: IO[bytes]) -> None:
        self._fp = fp
        head = fp.read(_HEAD)
        if not isinstance(head, bytes):
            raise TypeError("the stream must be opened in binary mode")
        self.head = head.removeprefix(b"\xef\xbb\xbf")
        self.bom = len(head) - len(self.head)
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
