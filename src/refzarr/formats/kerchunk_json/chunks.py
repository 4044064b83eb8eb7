"""The manifest columns of one array, filled batch by batch while a JSON reference set is read."""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt

from refzarr.formats.kerchunk_json.byte_words import I64, U64, Unhandled
from refzarr.model.manifest import INLINED, MISSING, ChunkManifest, ManifestBlock
from refzarr.model.sparse import SPARSE_FROM, wants_sparse

__all__ = ["ArrayColumns"]

I32 = npt.NDArray[np.int32]


class ArrayColumns:
    """Path ids (URL-table ids), offsets, lengths and inlined bytes by flat C-order chunk number.

    A chunk given twice is never resolved here: it raises `Unhandled`, so that the per-key
    reader reports it exactly as it does.

    A grid of more than `SPARSE_FROM` chunks is not given one entry per chunk while reading:
    its references are collected as given and the manifest holds only them when few are
    written (a few hundred bytes can declare 2**40 chunks).
    """

    def __init__(self, grid: tuple[int, ...]) -> None:
        self.grid = grid
        self.size = math.prod(grid)
        self.path_id: I32 | None = None
        self.offset: U64 = np.zeros(0, np.uint64)
        self.length: U64 = np.zeros(0, np.uint64)
        self.inlined: dict[int, bytes] = {}
        self._used = np.zeros(0, np.bool_)
        self.large = self.size > SPARSE_FROM
        self._given: list[tuple[I64, I64, U64, U64]] = []
        self._count = 0

    def _columns(self) -> I32:
        if self.path_id is None:
            self.path_id = np.full(self.size, MISSING, np.int32)
            self.offset = np.zeros(self.size, np.uint64)
            self.length = np.zeros(self.size, np.uint64)
        return self.path_id

    def put(self, flat: I64, ids: I64, offset: U64, length: U64) -> None:
        """Add references: chunk numbers ``flat`` (each in the grid), URL ids, byte ranges."""
        self._mark_used(ids)
        if self.large:
            columns = (flat, ids, offset, length)
            self._given.append(tuple(np.array(c, copy=True) for c in columns))  # type: ignore[arg-type]
            self._count += flat.shape[0]
            self._densify_if_full()
            return
        path_id = self._columns()
        if (path_id[flat] != MISSING).any():
            raise Unhandled("a chunk is given more than once")
        if flat.shape[0] > 1 and not (flat[1:] > flat[:-1]).all():
            marks = -3 - np.arange(flat.shape[0], dtype=np.int32)  # distinct, below INLINED
            path_id[flat] = marks
            if not np.array_equal(path_id[flat], marks):
                raise Unhandled("a chunk is given more than once")
        path_id[flat] = ids
        self.offset[flat] = offset
        self.length[flat] = length

    def _densify_if_full(self) -> None:
        """Switch a large grid to one entry per chunk once 1/16 of it is given (a large set
        that is mostly written, as scans make them): bounded by what was read."""
        if not wants_sparse(self.size, self._count):
            self.large = False
            path_id = self._columns()
            path_id[np.fromiter(self.inlined, np.int64, len(self.inlined))] = INLINED
            given, self._given = self._given, []
            for flat, ids, offset, length in given:
                self.put(flat, ids, offset, length)

    def _mark_used(self, ids: I64) -> None:
        if ids.shape[0]:
            counts = np.bincount(ids)
            if counts.shape[0] > self._used.shape[0]:
                self._used = np.concatenate(
                    [self._used, np.zeros(counts.shape[0] - self._used.shape[0], np.bool_)]
                )
            self._used[: counts.shape[0]] |= counts > 0

    def put_inline(self, flat: int, data: bytes) -> None:
        """Add one inlined chunk."""
        if self.large:
            if flat in self.inlined:
                raise Unhandled("a chunk is given more than once")
            self.inlined[flat] = data
            self._count += 1
            self._densify_if_full()
            return
        path_id = self._columns()
        if path_id[flat] != MISSING:
            raise Unhandled("a chunk is given more than once")
        path_id[flat] = INLINED
        self.inlined[flat] = data

    def manifest(self, urls: list[str], final_id: npt.NDArray[np.int64]) -> ChunkManifest | None:
        """The manifest (None when nothing was written); the columns are consumed.

        ``final_id`` maps URL-table ids to indices of ``urls``.
        """
        if self.large:
            return self._large_manifest(urls, final_id)
        path_id = self.path_id
        if path_id is None:
            return None
        finals, table = self._url_table(final_id)
        path_id = table[path_id + 2]  # path_id + 2 >= 0: MISSING and INLINED map to themselves
        block = ManifestBlock(
            start=0,
            paths=tuple(urls[int(i)] for i in finals),
            path_id=path_id,
            offset=self.offset,
            length=self.length,
            inlined=dict(self.inlined),
        )
        self.path_id = None
        self.offset = self.length = np.zeros(0, np.uint64)
        manifest = ChunkManifest.lazy(self.grid, _Loaded(block))
        manifest.block(0)  # check the block against the grid now, as an in-memory manifest is
        return manifest

    def _url_table(self, final_id: npt.NDArray[np.int64]) -> tuple[I64, I32]:
        """The URLs used (indices of the final table) and a map of URL-table id + 2 to the
        manifest's path id (``MISSING`` and ``INLINED`` map to themselves)."""
        used = np.flatnonzero(self._used)
        finals, local = np.unique(final_id[used], return_inverse=True)
        table = np.empty(self._used.shape[0] + 2, np.int32)
        table[:2] = (INLINED, MISSING)
        table[used + 2] = local
        return finals, table

    def _large_manifest(
        self, urls: list[str], final_id: npt.NDArray[np.int64]
    ) -> ChunkManifest | None:
        """The manifest of a large grid from the references collected as given."""
        if not self._given and not self.inlined:
            return None
        given = self._given or [(np.zeros(0, np.int64),) * 2 + (np.zeros(0, np.uint64),) * 2]
        flat, ids, offset, length = (np.concatenate(c) for c in zip(*given, strict=True))
        every = np.concatenate([flat, np.fromiter(self.inlined, np.int64, len(self.inlined))])
        if np.unique(every).shape[0] != every.shape[0]:
            raise Unhandled("a chunk is given more than once")
        finals, table = self._url_table(final_id)
        self._given = []
        return ChunkManifest.from_written(
            self.grid,
            flat.astype(np.int64),
            tuple(urls[int(i)] for i in finals),
            table[ids + 2],
            offset,
            length,
            self.inlined,
        )


class _Loaded:
    """A manifest source that is one block already in memory."""

    def __init__(self, block: ManifestBlock) -> None:
        self.block = block
        self.block_size = max(block.path_id.shape[0], 1)

    def load_block(self, number: int) -> ManifestBlock:
        return self.block
