"""Where a dataset's bytes are: contiguous, chunked (any chunk index) or compact, as a manifest.

Chunk locations come from h5py's ``DatasetID.chunk_iter`` straight into preallocated numpy
columns; a chunk the file never allocated is MISSING (it reads as the fill value).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import h5py
import numpy as np
from h5py import h5d

from refzarr.errors import ScanError, UnsupportedFeatureError
from refzarr.model import INLINED, ChunkManifest

__all__ = ["ChunkColumns", "chunk_shape", "manifest_for"]

ReadRange = Callable[[int, int], bytes]


def chunk_shape(ds: h5py.Dataset) -> tuple[int, ...]:
    """The Zarr chunk shape: HDF5's for chunked datasets, else the whole array (at least 1)."""
    if ds.chunks is not None:
        return tuple(int(c) for c in ds.chunks)
    return tuple(max(int(s), 1) for s in ds.shape)


def manifest_for(
    ds: h5py.Dataset,
    dtype: np.dtype[Any],
    *,
    url: str,
    read_range: ReadRange,
    inline_threshold: int,
    where: str,
) -> ChunkManifest:
    """The chunk manifest of a dataset (chunks smaller than ``inline_threshold`` inlined)."""
    layout = ds.id.get_create_plist().get_layout()
    grid = _grid(ds.shape, chunk_shape(ds))
    if layout == h5d.COMPACT:
        return _compact(ds, dtype, grid)
    if layout == h5d.CONTIGUOUS:
        return _contiguous(ds, dtype, grid, url, read_range, inline_threshold, where)
    if layout == h5d.CHUNKED:
        columns = ChunkColumns.collect(ds, where)
        return columns.manifest(grid, url, read_range, inline_threshold)
    if layout == h5d.VIRTUAL:
        raise UnsupportedFeatureError(f"{where}: virtual datasets (VDS) are not supported yet")
    raise UnsupportedFeatureError(f"{where}: unknown storage layout {layout}")


def _grid(shape: tuple[int, ...], chunks: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(math.ceil(s / c) for s, c in zip(shape, chunks, strict=True))


def _compact(ds: h5py.Dataset, dtype: np.dtype[Any], grid: tuple[int, ...]) -> ChunkManifest:
    """Compact data lives in the object header: inline it (it is at most 64 KiB)."""
    if math.prod(grid) == 0:
        return ChunkManifest.missing(grid)
    data = np.asarray(ds[()], dtype=dtype).tobytes()
    zeros = np.zeros(grid, dtype=np.uint64)
    ids = np.full(grid, INLINED, dtype=np.int32)
    return ChunkManifest.from_arrays((), ids, zeros, zeros, {(0,) * len(grid): data})


def _contiguous(
    ds: h5py.Dataset,
    dtype: np.dtype[Any],
    grid: tuple[int, ...],
    url: str,
    read_range: ReadRange,
    inline_threshold: int,
    where: str,
) -> ChunkManifest:
    """One chunk: the dataset's whole byte range (missing when never allocated)."""
    if ds.id.get_create_plist().get_external_count() > 0:
        raise UnsupportedFeatureError(f"{where}: external raw data files are not supported yet")
    offset, size = ds.id.get_offset(), ds.id.get_storage_size()
    if math.prod(grid) == 0 or offset is None or size == 0:
        return ChunkManifest.missing(grid)
    expected = dtype.itemsize * math.prod(ds.shape)
    if size != expected:
        raise ScanError(f"{where}: contiguous storage of {size} bytes, expected {expected}")
    columns = ChunkColumns.single(int(offset), int(size), len(grid))
    return columns.manifest(grid, url, read_range, inline_threshold)


class ChunkColumns:
    """Chunk coordinates, offsets, sizes and filter masks of one dataset, column-wise."""

    __slots__ = ("coords", "count", "masks", "offsets", "sizes")

    def __init__(
        self,
        coords: np.ndarray[Any, np.dtype[np.int64]],
        offsets: np.ndarray[Any, np.dtype[np.uint64]],
        sizes: np.ndarray[Any, np.dtype[np.uint64]],
        masks: np.ndarray[Any, np.dtype[np.uint32]],
    ) -> None:
        self.coords, self.offsets, self.sizes, self.masks = coords, offsets, sizes, masks
        self.count = len(offsets)

    @classmethod
    def single(cls, offset: int, size: int, ndim: int) -> ChunkColumns:
        """The one chunk of a contiguous dataset."""
        return cls(
            np.zeros((1, ndim), dtype=np.int64),
            np.array([offset], dtype=np.uint64),
            np.array([size], dtype=np.uint64),
            np.zeros(1, dtype=np.uint32),
        )

    @classmethod
    def collect(cls, ds: h5py.Dataset, where: str) -> ChunkColumns:
        """Every allocated chunk of a chunked dataset, in chunk-index order.

        Raises `UnsupportedFeatureError` when a chunk skipped filters of the pipeline.
        """
        # The callback only appends ints to flat lists: ints are not tracked by the garbage
        # collector, so a million chunks cost no collections (tuples would, and double the time).
        coords: list[int] = []
        offsets: list[int] = []
        sizes: list[int] = []
        masks: list[int] = []
        add_coords, add_offset, add_size, add_mask = (
            coords.extend,
            offsets.append,
            sizes.append,
            masks.append,
        )

        def add(info: Any) -> None:
            add_coords(info.chunk_offset)
            add_offset(info.byte_offset)
            add_size(info.size)
            add_mask(info.filter_mask)

        if hasattr(ds.id, "chunk_iter"):
            if ds.id.get_num_chunks():
                ds.id.chunk_iter(add)
        else:  # h5py built on HDF5 < 1.12.3 / 1.10.10: one call per chunk, slower
            for index in range(ds.id.get_num_chunks()):
                add(ds.id.get_chunk_info(index))
        columns = cls(
            np.array(coords, dtype=np.int64).reshape(len(offsets), ds.ndim),
            np.array(offsets, dtype=np.uint64),
            np.array(sizes, dtype=np.uint64),
            np.array(masks, dtype=np.uint32),
        )
        columns.coords //= np.asarray(ds.chunks, dtype=np.int64)
        columns._check_masks(where)
        return columns

    def _check_masks(self, where: str) -> None:
        skipped = np.flatnonzero(self.masks)
        if skipped.size:
            first = tuple(int(c) for c in self.coords[skipped[0]])
            raise UnsupportedFeatureError(
                f"{where}: {skipped.size} chunks skipped some of their filters (chunk {first}: "
                f"filter mask {int(self.masks[skipped[0]]):#x}); not supported yet"
            )

    def manifest(
        self, grid: tuple[int, ...], url: str, read_range: ReadRange, inline_threshold: int
    ) -> ChunkManifest:
        """The manifest, chunks of fewer than ``inline_threshold`` bytes read and inlined."""
        n = self.count
        small = self.sizes[:n] < np.uint64(inline_threshold)
        keep = ~small
        inlined = {
            tuple(int(c) for c in self.coords[k]): read_range(
                int(self.offsets[k]), int(self.sizes[k])
            )
            for k in np.flatnonzero(small)
        }
        return ChunkManifest.from_entries(
            grid,
            self.coords[:n][keep],
            [url],
            np.zeros(int(keep.sum()), dtype=np.int64),
            self.offsets[:n][keep],
            self.sizes[:n][keep],
            inlined,
            where=url,
        )
