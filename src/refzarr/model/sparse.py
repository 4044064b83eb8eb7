"""Manifests of mostly unwritten chunk grids: only the written entries are held.

A reference set of a few hundred bytes can declare an array of 2**40 one-element chunks, and
an HDF5 file can declare 2**32 chunks and write none. Holding one entry per chunk of such a
grid would cost gigabytes that the input does not contain, so a grid of more than
`SPARSE_FROM` chunks of which few are written keeps its written entries, sorted by chunk
number, and builds a block of `SPARSE_BLOCK` entries only when a reader asks for it.

Materialising the whole grid at once (the whole-grid columns ``ChunkManifest.path_id`` etc.)
is refused above `max_dense_entries` entries (`set_max_dense_entries` raises it).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from refzarr.errors import RefFormatError

__all__ = [
    "MAX_DENSE_ENTRIES",
    "SPARSE_BLOCK",
    "SPARSE_FROM",
    "SparseEntries",
    "check_dense",
    "max_dense_entries",
    "set_max_dense_entries",
]

SPARSE_FROM = 1 << 20
"""Grids of more chunks than this are held sparse when at most 1/16 of them are written."""
SPARSE_BLOCK = 1 << 16
"""Entries per block built from a sparse manifest (1.3 MB of columns)."""
MAX_DENSE_ENTRIES = 1 << 24
"""Most entries (16,777,216, about 320 MB of columns) built for a grid or record that its input
does not hold: a sparse grid's whole columns, a Parquet set's ``record_size``."""

_limits = {"dense": MAX_DENSE_ENTRIES}


def set_max_dense_entries(count: int) -> None:
    """Allow up to ``count`` manifest entries to be built for unwritten chunks (trusted sets).

    Raises
    ------
    ValueError
        When ``count`` is not a positive integer.
    """
    if isinstance(count, bool) or not isinstance(count, int) or count < 1:
        raise ValueError(f"the limit must be a positive integer, got {count!r}")
    _limits["dense"] = count


def max_dense_entries() -> int:
    """The current limit (`MAX_DENSE_ENTRIES` unless `set_max_dense_entries` changed it)."""
    return _limits["dense"]


def check_dense(count: int, what: str) -> None:
    """Raise RefFormatError when building ``count`` entries for ``what`` exceeds the limit."""
    limit = _limits["dense"]
    if count > limit:
        raise RefFormatError(
            f"{what} would need {count:,} manifest entries in memory, over the limit of "
            f"{limit:,} (raise it with refzarr.model.sparse.set_max_dense_entries for a "
            "trusted reference set)"
        )


def wants_sparse(nchunks: int, written: int) -> bool:
    """Whether a grid of ``nchunks`` chunks with ``written`` entries is held sparse."""
    return nchunks > SPARSE_FROM and written * 16 <= nchunks


class SparseEntries:
    """A `ManifestSource` holding only written entries, sorted by C-order chunk number.

    ``path_id`` indexes ``paths`` (every path is used) or is ``INLINED`` with the bytes in
    ``inlined`` (chunk number -> bytes). Blocks are built on demand and not cached.
    """

    block_size = SPARSE_BLOCK

    def __init__(
        self,
        nchunks: int,
        numbers: npt.NDArray[np.int64],
        paths: Sequence[str],
        path_id: npt.NDArray[np.int32],
        offset: npt.NDArray[np.uint64],
        length: npt.NDArray[np.uint64],
        inlined: Mapping[int, bytes],
    ) -> None:
        from refzarr.model.manifest import ManifestBlock  # the manifest module imports this one

        order = np.argsort(numbers, kind="stable")
        self.nchunks = nchunks
        self.numbers = np.ascontiguousarray(numbers[order], dtype=np.int64)
        if self.numbers.size and (self.numbers[0] < 0 or self.numbers[-1] >= nchunks):
            raise RefFormatError(f"sparse manifest numbers must lie in [0, {nchunks})")
        if self.numbers.size > 1 and not (self.numbers[1:] > self.numbers[:-1]).all():
            raise RefFormatError("sparse manifest holds a chunk twice")
        self.numbers.flags.writeable = False
        rows = {int(np.searchsorted(self.numbers, n)): data for n, data in inlined.items()}
        # validated as one block whose rows are the written entries
        self.entries = ManifestBlock(
            0, tuple(paths), path_id[order], offset[order], length[order], rows
        )
        self.inlined = dict(inlined)
        if set(self.inlined) != set(self.numbers[self.entries.path_id == _INLINED].tolist()):
            raise RefFormatError("inlined chunk bytes do not match the entries marked INLINED")

    def __reduce__(self) -> tuple[Any, ...]:
        e = self.entries
        columns = (e.paths, e.path_id, e.offset, e.length)
        return (SparseEntries, (self.nchunks, self.numbers, *columns, self.inlined))

    @property
    def written(self) -> int:
        """Number of written (referenced or inlined) chunks."""
        return int(self.numbers.shape[0])

    def rows(self, start: int, stop: int) -> slice:
        """The entries of chunk numbers ``start .. stop - 1``."""
        low, high = np.searchsorted(self.numbers, [start, stop])
        return slice(int(low), int(high))

    def entry(self, number: int) -> int | None:
        """The row of chunk ``number``, None when it was never written."""
        row = int(np.searchsorted(self.numbers, number))
        if row < self.numbers.shape[0] and int(self.numbers[row]) == number:
            return row
        return None

    def load_block(self, number: int) -> Any:
        """Block ``number``, every chunk not written in it missing."""
        from refzarr.model.manifest import MISSING, ManifestBlock

        start = number * SPARSE_BLOCK
        size = max(0, min(SPARSE_BLOCK, self.nchunks - start))
        rows = self.rows(start, start + size)
        local = self.numbers[rows] - start
        ids = self.entries.path_id[rows]
        used, remapped = np.unique(ids[ids >= 0], return_inverse=True)
        path_id = np.full(size, MISSING, np.int32)
        offset = np.zeros(size, np.uint64)
        length = np.zeros(size, np.uint64)
        mapped = ids.copy()
        mapped[ids >= 0] = remapped.astype(np.int32)
        path_id[local] = mapped
        offset[local] = self.entries.offset[rows]
        length[local] = self.entries.length[rows]
        numbers = self.numbers[rows][ids == _INLINED].tolist()
        inlined = {n: self.inlined[n] for n in numbers}
        paths = tuple(self.entries.paths[int(i)] for i in used)
        return ManifestBlock(start, paths, path_id, offset, length, inlined)

    def written_blocks(self) -> Iterator[int]:
        """Numbers of the blocks holding at least one written chunk, in order."""
        yield from np.unique(self.numbers // SPARSE_BLOCK).tolist()


_INLINED = -2  # refzarr.model.manifest.INLINED (not imported: that module imports this one)
