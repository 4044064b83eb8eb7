"""The chunk index of one array, column-wise: path ids into a URL table, offsets, lengths.

A manifest is a grid (the array's chunk grid) of chunk entries. Each entry is one of:

- a reference: ``path_id >= 0`` indexes ``paths``; ``offset``/``length`` give the byte range
  (``length == WHOLE_FILE`` means the whole file, the JSON ``[url]`` form);
- inlined data: ``path_id == INLINED`` and the bytes are in ``inlined``;
- missing: ``path_id == MISSING``, a chunk the source never wrote (reads as fill value).

Entries are stored in blocks of consecutive C-order chunk numbers so that a reader can load
one block (a Parquet record file, say) without loading the rest; an in-memory manifest is
a single loaded block.
"""

from __future__ import annotations

import math
import operator
import threading
from collections import OrderedDict
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, NamedTuple, Protocol

import numpy as np
import numpy.typing as npt

from refzarr.errors import RefFormatError
from refzarr.model.sparse import SparseEntries, check_dense, wants_sparse

__all__ = [
    "INLINED",
    "MAX_OFFSET",
    "MISSING",
    "WHOLE_FILE",
    "ChunkManifest",
    "ChunkRef",
    "ManifestBlock",
    "ManifestSource",
    "WrittenEntries",
    "share_bytes",
    "trusted_pickling",
]

MISSING = -1
"""``path_id`` of a chunk the source never wrote."""
INLINED = -2
"""``path_id`` of a chunk whose bytes are held in the manifest."""
WHOLE_FILE = np.uint64(2**64 - 1)
"""``length`` of a reference to a whole file (JSON ``[url]``)."""
MAX_OFFSET = 2**63 - 1
"""Largest offset or length any reference format can hold (Parquet int64)."""

IntArray = npt.NDArray[np.int32]
UIntArray = npt.NDArray[np.uint64]


class WrittenEntries(NamedTuple):
    """The written (referenced or inlined) chunks of a manifest, by C-order chunk number."""

    numbers: npt.NDArray[np.int64]
    paths: tuple[str, ...]
    path_id: IntArray
    offset: UIntArray
    length: UIntArray


class ChunkRef(NamedTuple):
    """Where one chunk's bytes live; ``length is None`` means the whole file."""

    url: str
    offset: int
    length: int | None


@dataclass(frozen=True, slots=True, eq=False)
class ManifestBlock:
    """Entries for chunk numbers ``start .. start + len(path_id)`` (C order), flat columns.

    ``inlined`` maps a chunk number (global, not block-relative) to its bytes. The block owns
    its columns once checked: they are made read-only, and one that views memory another
    array or buffer can still write (a slice of a caller's array) is copied first.
    """

    start: int
    paths: tuple[str, ...]
    path_id: IntArray
    offset: UIntArray
    length: UIntArray
    inlined: Mapping[int, bytes]

    def __post_init__(self) -> None:
        _validate_block(self)
        object.__setattr__(self, "inlined", MappingProxyType(dict(self.inlined)))

    def __reduce__(self) -> tuple[Any, ...]:
        # rebuilt through the constructor: validated, columns read-only again, inlined a proxy;
        # within `trusted_pickling`, rebuilt as it was (it was valid when pickled)
        columns = (self.path_id, self.offset, self.length)
        rebuild = _trusted_block if _TRUSTED.active else _unpickled_block
        return (rebuild, (self.start, self.paths, *columns, dict(self.inlined)))


def _unpickled_block(
    start: int,
    paths: tuple[str, ...],
    path_id: IntArray,
    offset: UIntArray,
    length: UIntArray,
    inlined: dict[int, bytes],
) -> ManifestBlock:
    """A block from a pickle, its larger inlined chunks shared with equal ones unpickled
    recently: the ``lat`` / ``lon`` every file of a scan_many holds are kept once."""
    shared = {number: share_bytes(data) for number, data in inlined.items()}
    return ManifestBlock(start, paths, path_id, offset, length, shared)


class _Trusted(threading.local):
    active = False


_TRUSTED = _Trusted()


@contextmanager
def trusted_pickling() -> Iterator[None]:
    """Within the block, manifests pickled in this thread unpickle without being checked
    again: for results a process of ours sends to another of ours (`refzarr.scan_many`'s
    workers), made of manifests that were checked when they were built. Any other pickle of
    a manifest is checked as it is unpickled."""
    before = _TRUSTED.active
    _TRUSTED.active = True
    try:
        yield
    finally:
        _TRUSTED.active = before


def _trusted_block(
    start: int,
    paths: tuple[str, ...],
    path_id: IntArray,
    offset: UIntArray,
    length: UIntArray,
    inlined: dict[int, bytes],
) -> ManifestBlock:
    """`_unpickled_block` of a block pickled within `trusted_pickling`: made as it was, without
    the checks it passed when it was built (its columns read-only again, inlined a proxy)."""
    block = object.__new__(ManifestBlock)
    for column in (path_id, offset, length):
        column.flags.writeable = False
    shared = {number: share_bytes(data) for number, data in inlined.items()}
    for name, value in (
        ("start", start),
        ("paths", paths),
        ("path_id", path_id),
        ("offset", offset),
        ("length", length),
        ("inlined", MappingProxyType(shared)),
    ):
        object.__setattr__(block, name, value)
    return block


def _trusted_manifest(grid: tuple[int, ...], block: ManifestBlock) -> ChunkManifest:
    """A manifest of one in-memory block pickled within `trusted_pickling`."""
    return ChunkManifest._of_block(grid, block)


SHARED_MIN_BYTES = 1024
"""Inlined chunks of at least this many bytes are shared (`share_bytes`)."""

_SHARED_COUNT = 64
_recent: OrderedDict[bytes, bytes] = OrderedDict()
_recent_lock = threading.Lock()


def share_bytes(data: bytes) -> bytes:
    """``data``, or an equal bytes object met recently (kept once in memory: the loaded
    ``lat`` of every file of an archive, unpickled or scanned in this process)."""
    if len(data) < SHARED_MIN_BYTES or type(data) is not bytes:
        return data
    with _recent_lock:
        found = _recent.get(data)
        if found is not None:
            _recent.move_to_end(found)
            return found
        _recent[data] = data
        if len(_recent) > _SHARED_COUNT:
            _recent.popitem(last=False)
    return data


class ManifestSource(Protocol):
    """What a lazily loaded manifest needs: the block size and a way to load one block."""

    @property
    def block_size(self) -> int:
        """Number of chunk entries per block (the last block may be shorter)."""
        ...

    def load_block(self, number: int) -> ManifestBlock:
        """Load block ``number``; raise RefFormatError naming the file when it is malformed."""
        ...


SMALL_BLOCK = 64
"""Blocks of at most this many entries have their entries checked in plain Python: the same
checks in the same order, without numpy's overhead of about 1 µs per call (a block of a small
file's array took ~25 numpy calls to check)."""


def _validate_block(block: ManifestBlock) -> None:
    n = block.path_id.shape[0]
    for name, column, dtype in (
        ("path_id", block.path_id, np.int32),
        ("offset", block.offset, np.uint64),
        ("length", block.length, np.uint64),
    ):
        if column.dtype != dtype or column.ndim != 1 or column.shape[0] != n:
            raise RefFormatError(
                f"manifest column {name!r} must be 1-D {np.dtype(dtype)} of length {n}, "
                f"got {column.dtype} with shape {column.shape}"
            )
        if not _owned(column):
            column = column.copy()
            object.__setattr__(block, name, column)
        column.flags.writeable = False
    if n <= SMALL_BLOCK:
        inlined_numbers = _check_entries_small(block)
    else:
        inlined_numbers = _check_entries(block)
    if inlined_numbers != set(block.inlined):
        raise RefFormatError("inlined chunk bytes do not match the entries marked INLINED")
    for number, data in block.inlined.items():
        if not isinstance(data, bytes):
            raise RefFormatError(f"inlined chunk {number} must be bytes, got {type(data).__name__}")
    if len(set(block.paths)) != len(block.paths):
        raise RefFormatError("manifest path table holds a URL twice")
    for path in block.paths:
        if not isinstance(path, str) or not path:
            raise RefFormatError(f"manifest paths must be non-empty str, got {path!r}")


def _owned(column: npt.NDArray[Any]) -> bool:
    """Whether nothing but ``column`` can write its memory once it is made read-only: it owns
    its memory, or views memory no other array or buffer can write (a read-only array, bytes,
    an Arrow buffer). A view of a writeable array (a caller's) is not: a later change through
    that array would bypass the block's checks, so the block takes a copy."""
    base: Any = column.base
    while isinstance(base, np.ndarray):
        if base.flags.writeable:
            return False
        base = base.base
    if base is None:
        return True
    try:
        return memoryview(base).readonly
    except TypeError:  # memory of an object without the buffer protocol: unknown
        return False


def _check_entries(block: ManifestBlock) -> set[int]:
    """Check path ids, offsets and lengths (numpy); the chunk numbers marked INLINED.

    A few whole-column reductions prove the usual block valid (every offset and length
    within range, no whole-file entry); the masked checks run only when they cannot.
    """
    ids = block.path_id
    if not ids.shape[0]:
        return set()
    low, high = ids.min(), ids.max()
    if low < INLINED or high >= len(block.paths):
        _bad_path_ids(low, high, len(block.paths))
    if block.offset.max() > MAX_OFFSET or block.length.max() > MAX_OFFSET:
        _check_ranges(block, ids >= 0)
    if low >= 0:
        return set()
    absent = ids < 0
    if block.offset[absent].any() or block.length[absent].any():
        _not_empty()
    if low > INLINED:
        return set()
    return set((np.flatnonzero(ids == INLINED) + block.start).tolist())


def _check_ranges(block: ManifestBlock, present: npt.NDArray[np.bool_]) -> None:
    """Offsets and lengths of the present entries within range; whole files at offset 0."""
    if (block.offset[present] > MAX_OFFSET).any():
        raise RefFormatError(f"manifest offsets must be at most {MAX_OFFSET}")
    lengths = block.length[present]
    if ((lengths > MAX_OFFSET) & (lengths != WHOLE_FILE)).any():
        raise RefFormatError(f"manifest lengths must be at most {MAX_OFFSET}")
    whole = present & (block.length == WHOLE_FILE)
    if whole.any() and block.offset[whole].any():
        _whole_file_offset()


def _check_entries_small(block: ManifestBlock) -> set[int]:
    """`_check_entries` in plain Python, for blocks of at most `SMALL_BLOCK` entries."""
    ids, offsets = block.path_id.tolist(), block.offset.tolist()
    lengths = block.length.tolist()
    if ids and (min(ids) < INLINED or max(ids) >= len(block.paths)):
        _bad_path_ids(min(ids), max(ids), len(block.paths))
    entries = list(zip(ids, offsets, lengths, strict=True))
    whole_file = int(WHOLE_FILE)
    if any(offset > MAX_OFFSET for pid, offset, _ in entries if pid >= 0):
        raise RefFormatError(f"manifest offsets must be at most {MAX_OFFSET}")
    if any(MAX_OFFSET < length != whole_file for pid, _, length in entries if pid >= 0):
        raise RefFormatError(f"manifest lengths must be at most {MAX_OFFSET}")
    if any(offset for pid, offset, length in entries if pid >= 0 and length == whole_file):
        _whole_file_offset()
    if any(offset or length for pid, offset, length in entries if pid < 0):
        _not_empty()
    return {k + block.start for k, pid in enumerate(ids) if pid == INLINED}


def _bad_path_ids(low: Any, high: Any, count: int) -> None:
    raise RefFormatError(f"manifest path ids must lie in [{INLINED}, {count}), got {low} .. {high}")


def _whole_file_offset() -> None:
    raise RefFormatError("a whole-file reference must have offset 0")


def _not_empty() -> None:
    raise RefFormatError("missing and inlined chunks must have offset 0 and length 0")


class _InMemory:
    """A manifest source that is one already-built block."""

    def __init__(self, block: ManifestBlock) -> None:
        self.block = block
        self.block_size = max(block.path_id.shape[0], 1)

    def load_block(self, number: int) -> ManifestBlock:
        return self.block


class ChunkManifest:
    """The chunk index of one array, shaped like its chunk grid; immutable.

    Build one with `from_arrays` (grid-shaped columns), `from_entries` (scattered chunk
    coordinates, as a reference-set reader produces them), `missing` (nothing written) or
    `lazy` (blocks loaded on first use).
    """

    __slots__ = ("_block_size", "_blocks", "_full", "_grid_shape", "_lock", "_source")

    def __init__(self, grid_shape: Sequence[int], source: ManifestSource) -> None:
        self._grid_shape = _parse_grid(grid_shape)
        self._source = source
        self._block_size = int(source.block_size)
        if self._block_size < 1:
            raise RefFormatError(f"manifest block size must be positive, got {self._block_size}")
        self._blocks: dict[int, ManifestBlock] = {}
        self._full: ManifestBlock | None = None
        self._lock = threading.Lock()
        if isinstance(source, _InMemory):
            self._check_block(0, source.block)
            self._blocks[0] = source.block

    # -- construction -------------------------------------------------------------------------

    @classmethod
    def from_arrays(
        cls,
        paths: Sequence[str],
        path_id: npt.ArrayLike,
        offset: npt.ArrayLike,
        length: npt.ArrayLike,
        inlined: Mapping[tuple[int, ...], bytes] | None = None,
    ) -> ChunkManifest:
        """Build a manifest from grid-shaped columns.

        Parameters
        ----------
        paths
            Unique URLs; ``path_id`` indexes into it.
        path_id, offset, length
            Arrays shaped like the chunk grid. ``path_id`` is ``MISSING`` (-1) for an unwritten
            chunk and ``INLINED`` (-2) for one whose bytes are in ``inlined``.
        inlined
            Chunk index (a tuple, one int per dimension) -> bytes.

        Notes
        -----
        The columns are copied (once, converted if need be): the caller's arrays stay the
        caller's, writeable, and changing them later does not change the manifest.
        """
        ids = np.asarray(path_id)
        grid = ids.shape
        if not np.issubdtype(ids.dtype, np.integer):
            raise RefFormatError(f"path_id must be integers, got {ids.dtype}")
        offsets, lengths = np.asarray(offset), np.asarray(length)
        if offsets.shape != grid or lengths.shape != grid:
            raise RefFormatError(
                f"path_id, offset and length must share one shape, got "
                f"{grid}, {offsets.shape}, {lengths.shape}"
            )
        numbers = {}
        for index, data in (inlined or {}).items():
            if len(index) != len(grid) or not all(
                0 <= i < s for i, s in zip(index, grid, strict=True)
            ):
                raise RefFormatError(f"inlined chunk index {index} is outside the grid {grid}")
            numbers[int(np.ravel_multi_index(index, grid)) if grid else 0] = data
        block = ManifestBlock(
            start=0,
            paths=tuple(paths),
            path_id=_as_column(ids, np.int32, "path_id"),
            offset=_as_column(offsets, np.uint64, "offset"),
            length=_as_column(lengths, np.uint64, "length"),
            inlined=numbers,
        )
        return cls(grid, _InMemory(block))

    @classmethod
    def from_block(cls, grid_shape: Sequence[int], block: ManifestBlock) -> ChunkManifest:
        """A manifest holding one block of every entry, its columns used as they are.

        ``block`` (checked when it was built; its columns are now read-only) must start at
        chunk 0 and hold one entry per chunk of ``grid_shape``, in C order. Unlike
        `from_arrays`, nothing is copied: for columns the caller has just built.
        """
        return cls(grid_shape, _InMemory(block))

    @classmethod
    def from_entries(
        cls,
        grid_shape: Sequence[int],
        coords: npt.ArrayLike,
        urls: Sequence[str],
        url_ids: npt.ArrayLike,
        offsets: npt.ArrayLike,
        lengths: npt.ArrayLike,
        inlined: Mapping[tuple[int, ...], bytes] | None = None,
        *,
        where: str = "array",
    ) -> ChunkManifest:
        """Build a manifest from scattered entries: ``coords[k]`` is the chunk index of entry k.

        ``url_ids`` index ``urls`` (which may hold URLs other arrays use too). Chunks named by
        no entry are missing. Raises RefFormatError naming ``where`` when an entry lies outside
        the grid or a chunk is given twice.
        """
        grid = _parse_grid(grid_shape)
        ids = np.asarray(url_ids, dtype=np.int64).ravel()
        coord_arr = np.asarray(coords, dtype=np.int64).reshape(ids.shape[0], len(grid))
        flat = _flat_numbers(grid, coord_arr, where)
        inline_flat = {}
        for index, data in (inlined or {}).items():
            number = _flat_numbers(grid, np.asarray([index], dtype=np.int64), where)[0]
            inline_flat[int(number)] = data
        _reject_duplicates(grid, flat, np.fromiter(inline_flat, np.int64), where)
        n = math.prod(grid)
        used, local_ids = np.unique(ids, return_inverse=True)
        paths = [urls[int(i)] for i in used]
        if wants_sparse(n, flat.shape[0] + len(inline_flat)):
            return cls._sparse(grid, flat, paths, local_ids, offsets, lengths, inline_flat)
        path_id = np.full(n, MISSING, dtype=np.int32)
        offset = np.zeros(n, dtype=np.uint64)
        length = np.zeros(n, dtype=np.uint64)
        path_id[flat] = local_ids
        offset[flat] = offsets
        length[flat] = lengths
        path_id[list(inline_flat)] = INLINED
        block = ManifestBlock(0, tuple(paths), path_id, offset, length, inline_flat)
        return cls(grid, _InMemory(block))

    @classmethod
    def from_written(
        cls,
        grid_shape: Sequence[int],
        numbers: npt.NDArray[np.int64],
        paths: Sequence[str],
        path_id: npt.ArrayLike,
        offsets: npt.ArrayLike,
        lengths: npt.ArrayLike,
        inlined: Mapping[int, bytes],
    ) -> ChunkManifest:
        """A manifest from the written chunks only: references to ``paths[path_id[k]]`` at
        C-order chunk numbers ``numbers`` (each in the grid, none twice), and ``inlined``
        (chunk number -> bytes). Held sparse when the grid is large and mostly unwritten."""
        grid = _parse_grid(grid_shape)
        n = math.prod(grid)
        if wants_sparse(n, numbers.shape[0] + len(inlined)):
            return cls._sparse(grid, numbers, paths, path_id, offsets, lengths, inlined)
        ids = np.full(n, MISSING, np.int32)
        offset = np.zeros(n, np.uint64)
        length = np.zeros(n, np.uint64)
        ids[numbers] = np.asarray(path_id, np.int64)
        offset[numbers] = offsets
        length[numbers] = lengths
        ids[list(inlined)] = INLINED
        return cls(grid, _InMemory(ManifestBlock(0, tuple(paths), ids, offset, length, inlined)))

    @classmethod
    def _sparse(
        cls,
        grid: tuple[int, ...],
        flat: npt.NDArray[np.int64],
        paths: Sequence[str],
        local_ids: npt.ArrayLike,
        offsets: npt.ArrayLike,
        lengths: npt.ArrayLike,
        inline_flat: Mapping[int, bytes],
    ) -> ChunkManifest:
        """A manifest holding only its written entries (`refzarr.model.sparse`)."""
        inline = np.fromiter(inline_flat, np.int64, len(inline_flat))
        count = flat.shape[0]
        columns = [
            np.concatenate(
                [np.asarray(local_ids, np.int64).ravel(), np.full(inline.size, INLINED)]
            ),
            np.concatenate([_column(offsets, count, "offset"), np.zeros(inline.size, np.uint64)]),
            np.concatenate([_column(lengths, count, "length"), np.zeros(inline.size, np.uint64)]),
        ]
        source = SparseEntries(
            math.prod(grid),
            np.concatenate([flat, inline]),
            tuple(paths),
            columns[0].astype(np.int32),
            columns[1],
            columns[2],
            inline_flat,
        )
        return cls(grid, source)

    @classmethod
    def missing(cls, grid_shape: Sequence[int]) -> ChunkManifest:
        """A manifest in which no chunk was ever written."""
        grid = _parse_grid(grid_shape)
        n = math.prod(grid)
        if wants_sparse(n, 0):
            empty = np.zeros(0, np.int64)
            return cls._sparse(grid, empty, (), empty, empty, empty, {})
        zeros = np.zeros(n, dtype=np.uint64)
        block = ManifestBlock(0, (), np.full(n, MISSING, np.int32), zeros, zeros.copy(), {})
        return cls(grid, _InMemory(block))

    @classmethod
    def one_inlined(cls, data: bytes, ndim: int = 1) -> ChunkManifest:
        """A manifest of one chunk (a grid of one in ``ndim`` dimensions) held inline."""
        if not isinstance(data, bytes):
            raise RefFormatError(f"inlined chunk 0 must be bytes, got {type(data).__name__}")
        # valid by construction: the block is made without the checks a block from outside gets
        block = object.__new__(ManifestBlock)
        for name, value in (
            ("start", 0),
            ("paths", ()),
            ("path_id", _ONE_INLINED),
            ("offset", _ONE_ZERO),
            ("length", _ONE_ZERO),
            ("inlined", MappingProxyType({0: data})),
        ):
            object.__setattr__(block, name, value)
        return cls._of_block((1,) * ndim, block)

    @classmethod
    def _of_block(cls, grid: tuple[int, ...], block: ManifestBlock) -> ChunkManifest:
        """A manifest of one block the model itself made valid for ``grid`` (a tuple of
        ints): the constructor's checks left out, as the block's were."""
        manifest = object.__new__(cls)
        manifest._grid_shape = grid
        manifest._source = source = _InMemory(block)
        manifest._block_size = source.block_size
        manifest._blocks = {0: block}
        manifest._full = None
        manifest._lock = threading.Lock()
        return manifest

    @classmethod
    def in_one_file(cls, url: str, offsets: npt.NDArray[np.uint64], length: int) -> ChunkManifest:
        """A manifest whose every chunk is ``length`` bytes of ``url`` at ``offsets`` (uint64,
        shaped like the chunk grid), made without `from_arrays`' checks: for a scanner that
        computed the offsets itself and checked that every chunk lies inside the file."""
        if offsets.dtype != np.uint64 or not 0 < length <= MAX_OFFSET or not url:
            raise RefFormatError(
                f"in_one_file needs uint64 offsets, a positive length and a URL, got "
                f"{offsets.dtype}, {length}, {url!r}"
            )
        flat = offsets.flatten()  # a copy: the caller's array stays the caller's
        flat.flags.writeable = False
        n = flat.shape[0]
        if n == 1:
            ids, lengths = _ONE_ZERO_ID, np.full(1, length, dtype=np.uint64)
        else:
            ids, lengths = np.zeros(n, dtype=np.int32), np.full(n, length, dtype=np.uint64)
            ids.flags.writeable = False
        lengths.flags.writeable = False
        block = object.__new__(ManifestBlock)  # valid by construction (see one_inlined)
        for name, value in (
            ("start", 0),
            ("paths", (url,)),
            ("path_id", ids),
            ("offset", flat),
            ("length", lengths),
            ("inlined", _NOTHING_INLINED),
        ):
            object.__setattr__(block, name, value)
        return cls._of_block(tuple(offsets.shape), block)

    @classmethod
    def lazy(cls, grid_shape: Sequence[int], source: ManifestSource) -> ChunkManifest:
        """A manifest whose blocks ``source`` loads on first use (e.g. Parquet record files)."""
        return cls(grid_shape, source)

    # -- shape ------------------------------------------------------------------------------

    @property
    def grid_shape(self) -> tuple[int, ...]:
        """Number of chunks along each dimension."""
        return self._grid_shape

    @property
    def nchunks(self) -> int:
        """Total number of chunk entries (present or not)."""
        return math.prod(self._grid_shape)

    @property
    def nblocks(self) -> int:
        """Number of blocks the entries are stored in."""
        return max(1, -(-self.nchunks // self._block_size))

    @property
    def block_size(self) -> int:
        """Number of chunk entries per block."""
        return self._block_size

    # -- lookup -----------------------------------------------------------------------------

    def __getitem__(self, index: Sequence[int] | int) -> ChunkRef | bytes | None:
        """The entry of one chunk: a `ChunkRef`, inlined bytes, or None when missing."""
        number = self._number(index)
        if isinstance(self._source, SparseEntries):
            found = self._source.entry(number)
            if found is None:
                return None
            return _entry(self._source.entries, found, found)  # its inlined: by row
        block = self.block(number // self._block_size)
        return _entry(block, number - block.start, number)

    def block(self, number: int) -> ManifestBlock:
        """Block ``number`` (loaded and validated on first use, then cached)."""
        found = self._blocks.get(number)
        if found is not None:
            return found
        if not 0 <= number < self.nblocks:
            raise IndexError(f"block {number} outside 0..{self.nblocks - 1}")
        loaded = self._source.load_block(number)
        self._check_block(number, loaded)
        if not isinstance(self._source, SparseEntries):  # built again when asked: cheap
            with self._lock:
                self._blocks[number] = loaded
        return loaded

    def loaded_block(self, number: int) -> ManifestBlock | None:
        """Block ``number`` when it is in memory already (built, or loaded before), else
        None: nothing is loaded."""
        return self._blocks.get(number)

    def _check_block(self, number: int, block: ManifestBlock) -> None:
        start = number * self._block_size
        expected = min(self._block_size, self.nchunks - start) if self.nchunks else 0
        if block.start != start or block.path_id.shape[0] != expected:
            raise RefFormatError(
                f"manifest block {number} must hold entries {start}..{start + expected - 1}, "
                f"got {block.path_id.shape[0]} entries from {block.start}"
            )

    def _number(self, index: Sequence[int] | int) -> int:
        idx = (index,) if isinstance(index, int | np.integer) else tuple(index)
        if len(idx) != len(self._grid_shape) or not all(
            0 <= i < s for i, s in zip(idx, self._grid_shape, strict=True)
        ):
            raise IndexError(f"chunk index {idx} outside grid {self._grid_shape}")
        number = 0
        for i, s in zip(idx, self._grid_shape, strict=True):  # C order, in Python ints
            number = number * s + operator.index(i)
        return number

    # -- whole columns ----------------------------------------------------------------------

    def _all(self) -> ManifestBlock:
        if self._full is None:
            if isinstance(self._source, SparseEntries):
                check_dense(self.nchunks, f"a chunk grid of {self._grid_shape} (whole columns)")
            blocks = [self.block(k) for k in range(self.nblocks)]
            full = blocks[0] if len(blocks) == 1 else _concat_blocks(blocks)
            with self._lock:
                self._full = full
        return self._full

    @property
    def paths(self) -> tuple[str, ...]:
        """The table of unique URLs that ``path_id`` indexes (loads every block)."""
        if isinstance(self._source, SparseEntries):  # the URLs of written chunks: the same
            return self._source.entries.paths
        return self._all().paths

    @property
    def path_id(self) -> IntArray:
        """Grid-shaped int32 path ids (read-only; loads every block)."""
        return self._all().path_id.reshape(self._grid_shape)

    @property
    def offset(self) -> UIntArray:
        """Grid-shaped uint64 byte offsets (read-only; loads every block)."""
        return self._all().offset.reshape(self._grid_shape)

    @property
    def length(self) -> UIntArray:
        """Grid-shaped uint64 byte lengths; ``WHOLE_FILE`` for whole files (loads every block)."""
        return self._all().length.reshape(self._grid_shape)

    @property
    def inlined(self) -> dict[tuple[int, ...], bytes]:
        """Chunk index -> inlined bytes (loads every block)."""
        grid = self._grid_shape
        numbers = (
            self._source.inlined if isinstance(self._source, SparseEntries) else self._all().inlined
        )
        return {
            tuple(int(i) for i in np.unravel_index(n, grid)) if grid else (): data
            for n, data in sorted(numbers.items())
        }

    def iter_blocks(self) -> Iterator[ManifestBlock]:
        """Every block in order (loading each as it is reached)."""
        only = self._blocks.get(0) if self.nblocks == 1 else None
        if only is not None:  # the usual in-memory manifest, without a generator's cost
            return iter((only,))
        return (self.block(k) for k in range(self.nblocks))

    def iter_written_blocks(self) -> Iterator[ManifestBlock]:
        """The blocks that may hold written chunks, in order: every block, except that a
        sparse manifest (a mostly unwritten grid) skips blocks in which nothing was written."""
        if isinstance(self._source, SparseEntries):
            return (self.block(k) for k in self._source.written_blocks())
        return self.iter_blocks()

    def written_entries(self) -> WrittenEntries:
        """The written chunks' columns (bounded by what is written for a sparse manifest)."""
        if isinstance(self._source, SparseEntries):
            e = self._source.entries
            return WrittenEntries(self._source.numbers, e.paths, e.path_id, e.offset, e.length)
        full = self._all()
        rows = np.flatnonzero(full.path_id != MISSING)
        columns = (full.path_id[rows], full.offset[rows], full.length[rows])
        return WrittenEntries(rows.astype(np.int64), full.paths, *columns)

    def count_written(self) -> int:
        """Number of chunks written (referenced or inlined), without whole-grid columns."""
        if isinstance(self._source, SparseEntries):
            return self._source.written
        return sum(int((b.path_id != MISSING).sum()) for b in self.iter_blocks())

    @property
    def sparse(self) -> bool:
        """Whether only the written entries are held (a grid of mostly unwritten chunks)."""
        return isinstance(self._source, SparseEntries)

    # -- comparison -------------------------------------------------------------------------

    def _canonical(self) -> tuple[Any, ...]:
        """Grid, then the written entries: numbers, kinds, URLs, offsets, lengths, inlined."""
        parts = [_written(block) for block in self.iter_written_blocks()]
        inlined: dict[int, bytes] = {}
        for block in self.iter_written_blocks():
            inlined.update(block.inlined)
        columns = [np.concatenate([p[k] for p in parts]) for k in range(5)] if parts else []
        return (self._grid_shape, *columns, inlined)

    def __eq__(self, other: object) -> bool:
        """Equal when every chunk resolves to the same URL, range or bytes."""
        if not isinstance(other, ChunkManifest):
            return NotImplemented
        if other is self:
            return True
        a, b = self._canonical(), other._canonical()
        return (
            a[0] == b[0]
            and len(a) == len(b)
            and all(bool(np.array_equal(x, y)) for x, y in zip(a[1:-1], b[1:-1], strict=True))
            and a[-1] == b[-1]
        )

    __hash__ = None  # type: ignore[assignment]

    def __reduce__(self) -> tuple[Any, ...]:
        # the lock and the cache of loaded blocks stay behind; a lazy source must pickle
        if _TRUSTED.active and isinstance(self._source, _InMemory):
            return (_trusted_manifest, (self._grid_shape, self._source.block))
        return (ChunkManifest, (self._grid_shape, self._source))

    def __repr__(self) -> str:
        loaded = f"{len(self._blocks)}/{self.nblocks} blocks loaded"
        return f"ChunkManifest(grid_shape={self._grid_shape}, {loaded})"


def _entry(block: ManifestBlock, row: int, number: int) -> ChunkRef | bytes | None:
    """Row ``row`` of ``block`` (chunk ``number``) as `ChunkManifest.__getitem__` gives it."""
    pid = int(block.path_id[row])
    if pid == MISSING:
        return None
    if pid == INLINED:
        return block.inlined[number]
    length = block.length[row]
    return ChunkRef(
        block.paths[pid], int(block.offset[row]), None if length == WHOLE_FILE else int(length)
    )


def _written(block: ManifestBlock) -> tuple[Any, ...]:
    """The written rows of ``block``: chunk numbers, kinds (0 or INLINED), URLs, ranges."""
    rows = np.flatnonzero(block.path_id != MISSING)
    ids = block.path_id[rows]
    urls = np.array([*block.paths, ""], dtype=object)[np.where(ids >= 0, ids, len(block.paths))]
    return (rows + block.start, ids.clip(max=0), urls, block.offset[rows], block.length[rows])


MAX_CHUNKS = 2**62
"""Most chunks a grid may declare (chunk numbers are int64)."""


def _parse_grid(grid_shape: Sequence[int]) -> tuple[int, ...]:
    grid = tuple(int(s) for s in grid_shape)
    if any(s < 0 for s in grid):
        raise RefFormatError(f"chunk grid shape must be non-negative, got {grid}")
    if math.prod(grid) > MAX_CHUNKS:
        raise RefFormatError(
            f"chunk grid {grid} declares {math.prod(grid):,} chunks, more than any reference "
            f"format can number ({MAX_CHUNKS:,})"
        )
    return grid


def _column(values: npt.ArrayLike, count: int, name: str) -> npt.NDArray[np.uint64]:
    column = np.asarray(values)
    if column.size and not np.issubdtype(column.dtype, np.integer):
        raise RefFormatError(f"{name} must be integers, got {column.dtype}")
    if column.size and np.issubdtype(column.dtype, np.signedinteger) and (column < 0).any():
        raise RefFormatError(f"{name} must be non-negative, got {column.min()}")
    return np.broadcast_to(column.astype(np.uint64).ravel(), (count,)).copy()


def _as_column(values: npt.NDArray[Any], dtype: type[np.generic], name: str) -> Any:
    """``values`` as a 1-D column of ``dtype`` in C order: a new array owning its memory (the
    caller's arrays stay the caller's), made with one copy."""
    if values.dtype == dtype:  # no conversion: none of the range checks below can fail
        return values.flatten()
    if values.size and not np.issubdtype(values.dtype, np.integer):
        raise RefFormatError(f"{name} must be integers, got {values.dtype}")
    signed = np.issubdtype(values.dtype, np.signedinteger)
    if values.size and signed and dtype is np.uint64 and (values < 0).any():
        raise RefFormatError(f"{name} must be non-negative, got {values.min()}")
    if dtype is np.int32 and values.size and (values.max() > np.iinfo(np.int32).max):
        raise RefFormatError(f"{name} exceeds the int32 range")
    return np.asarray(values.ravel(), dtype=dtype)  # another dtype: a new array


def _flat_numbers(grid: tuple[int, ...], coords: npt.NDArray[np.int64], where: str) -> Any:
    if coords.shape[0] == 0:
        return np.zeros(0, dtype=np.int64)
    bad = ((coords < 0) | (coords >= np.asarray(grid, dtype=np.int64))).any(axis=1)
    if bad.any():
        first = tuple(int(c) for c in coords[np.flatnonzero(bad)[0]])
        raise RefFormatError(
            f"{where}: chunk {'.'.join(map(str, first)) or '0'} lies outside the chunk grid {grid}"
        )
    if not grid:
        return np.zeros(coords.shape[0], dtype=np.int64)
    return np.ravel_multi_index(tuple(coords.T), grid).astype(np.int64)


def _reject_duplicates(
    grid: tuple[int, ...],
    flat: npt.NDArray[np.int64],
    inline_flat: npt.NDArray[np.int64],
    where: str,
) -> None:
    every = np.concatenate([flat, inline_flat])
    if every.size == 0:
        return
    ordered = np.sort(every)  # not bincount: its cost is the largest chunk number's
    repeated = np.flatnonzero(ordered[1:] == ordered[:-1])
    if repeated.size:
        number = int(ordered[repeated[0]])
        index = np.unravel_index(number, grid) if grid else ()
        key = ".".join(str(int(i)) for i in index) or "0"
        raise RefFormatError(f"{where}: chunk {key} is given more than once")


def _concat_blocks(blocks: list[ManifestBlock]) -> ManifestBlock:
    table: dict[str, int] = {}
    ids = []
    for block in blocks:
        remap = np.array([table.setdefault(p, len(table)) for p in block.paths] + [0, 0], np.int32)
        # remap[-1] / remap[-2] are placeholders: negative ids keep their meaning below
        mapped = np.where(block.path_id >= 0, remap[block.path_id], block.path_id)
        ids.append(mapped.astype(np.int32))
    inlined: dict[int, bytes] = {}
    for block in blocks:
        inlined.update(block.inlined)
    return ManifestBlock(
        start=0,
        paths=tuple(table),
        path_id=np.concatenate(ids),
        offset=np.concatenate([b.offset for b in blocks]),
        length=np.concatenate([b.length for b in blocks]),
        inlined=inlined,
    )


_ONE_INLINED = np.full(1, INLINED, np.int32)
_ONE_INLINED.flags.writeable = False
_ONE_ZERO = np.zeros(1, dtype=np.uint64)
_ONE_ZERO.flags.writeable = False
_ONE_ZERO_ID = np.zeros(1, np.int32)
_ONE_ZERO_ID.flags.writeable = False
_NOTHING_INLINED: Mapping[int, bytes] = MappingProxyType({})
