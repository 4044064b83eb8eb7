"""Where a dataset's bytes are: contiguous, chunked (any chunk index) or compact, as a manifest.

Chunk locations come from h5py's ``DatasetID.chunk_iter`` straight into preallocated numpy
columns; a chunk the file never allocated is MISSING (it reads as the fill value). A chunk
that skipped filters is re-encoded and inlined (`refzarr.scan.hdf5.masks`); contiguous data,
in the file or in external raw files, may be cut into several chunks
(`refzarr.scan.hdf5.contiguous`); a virtual dataset references its sources' chunks
(`refzarr.scan.hdf5.virtual`).
"""

from __future__ import annotations

import array
import itertools
import math
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from functools import partial
from typing import Any, NamedTuple

import fsspec
import h5py
import numpy as np
from fsspec import AbstractFileSystem
from h5py import h5d

from refzarr.codecs.hdf5.filters import (
    Hdf5Filter,
    filter_stages,
    filters_to_codecs,
    szip_pixel_check,
)
from refzarr.errors import RefFormatError, ScanError, SourceNotFoundError, UnsupportedFeatureError
from refzarr.model import INLINED, ChunkManifest
from refzarr.model.manifest import MAX_CHUNKS
from refzarr.scan.hdf5.btree import read_btree_chunks
from refzarr.scan.hdf5.contiguous import ReadAt, Segment, contiguous_manifest
from refzarr.scan.hdf5.external import external_segments, find_sibling
from refzarr.scan.hdf5.masks import Recoder, recoder
from refzarr.scan.hdf5.source import open_source
from refzarr.scan.hdf5.swizzle import unswizzled
from refzarr.scan.hdf5.types import creation_plist, storage_dtype
from refzarr.scan.hdf5.virtual import SourceFile, SourceLayout, virtual_layout

__all__ = ["ChunkColumns", "Layout", "chunk_shape", "dataset_filters", "manifest_for"]

ReadRange = Callable[[int, int], bytes]

_SMALL_GRID = 64
"""Chunk grids of at most this many chunks are checked for order in plain Python."""


class Layout(NamedTuple):
    """The Zarr chunk shape of a dataset, its chunk manifest and codecs.

    The codecs are the ones passed to `manifest_for`, except for a virtual dataset: there
    they are its sources'.
    """

    chunks: tuple[int, ...]
    manifest: ChunkManifest
    codecs: list[dict[str, Any]]


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
    codecs: Sequence[dict[str, Any]] = (),
    contiguous_chunk_bytes: int | None = None,
    fs: AbstractFileSystem | None = None,
    filters: Sequence[Hdf5Filter] | None = None,
) -> Layout:
    """The chunk shape and manifest of a dataset (chunks under ``inline_threshold`` inlined).

    ``codecs`` (the pipeline, one config per HDF5 filter) re-encode chunks that skipped
    filters; ``contiguous_chunk_bytes`` cuts contiguous data into chunks of at most that many
    bytes; ``fs`` (the file's filesystem, derived from ``url`` when None) finds external files;
    ``filters``: the dataset's filter pipeline (`dataset_filters`), when at hand.
    """
    layout = creation_plist(ds).get_layout()
    chunks = chunk_shape(ds)
    grid = _grid(ds.shape, chunks)
    if math.prod(grid) > MAX_CHUNKS:  # HDF5 allows 2**64 - 1 per dimension
        raise UnsupportedFeatureError(
            f"{where}: a grid of {grid} chunks of {chunks}, more than a reference set can "
            f"number ({MAX_CHUNKS:,} = 2**62)"
        )
    codecs = list(codecs)
    if layout == h5d.COMPACT:
        return Layout(chunks, _compact(ds, dtype, grid), codecs)
    if layout == h5d.CHUNKED:
        columns = ChunkColumns.collect(ds, read_range)
        stages = dataset_filters(ds) if filters is None else filters
        recode = _recoder(ds, dtype, columns, codecs, where, stages)
        try:
            manifest = columns.manifest(grid, url, read_range, inline_threshold, recode)
        except RefFormatError as exc:  # an address or size past 2**63: a damaged index
            raise ScanError(f"{where}: its chunk index is damaged: {exc}") from None
        _check_szip_sizes(manifest, codecs, read_range, where)
        return Layout(chunks, manifest, codecs)
    place = _Place(url, read_range, fs, inline_threshold, where)
    if layout == h5d.CONTIGUOUS:
        return Layout(*_contiguous(ds, dtype, chunks, grid, place, contiguous_chunk_bytes), codecs)
    if layout == h5d.VIRTUAL:
        open_file = partial(_open_file, ds, place)
        layout_of = partial(_source_layout, inline_threshold=inline_threshold)
        chunks, manifest, source_codecs = virtual_layout(ds, dtype, where, open_file, layout_of)
        return Layout(chunks, manifest, list(source_codecs))
    raise UnsupportedFeatureError(f"{where}: unknown storage layout {layout}")


def _check_szip_sizes(
    manifest: ChunkManifest, codecs: Sequence[dict[str, Any]], read_range: ReadRange, where: str
) -> None:
    """Every chunk of a pipeline ending with szip after a stage that may leave a partial pixel
    (scale-offset, deflate, ...) must hold a whole number of pixels: its szip size (the chunk's
    first 4 bytes) says so. A partial last pixel decodes from whatever memory held, in
    imagecodecs and in HDF5 itself: refused, naming the chunk."""
    found = szip_pixel_check(codecs)
    if found is None:
        return
    pixel, before = found
    written = manifest.written_entries()
    inlined = {
        int(np.ravel_multi_index(k, manifest.grid_shape)): v for k, v in manifest.inlined.items()
    }
    for number, pid, offset, length in zip(
        written.numbers.tolist(),
        written.path_id.tolist(),
        written.offset.tolist(),
        written.length.tolist(),
        strict=True,
    ):
        head = inlined[number][:4] if pid < 0 else read_range(offset, min(4, length))
        size = int.from_bytes(head, "little") if len(head) == 4 else None
        if size is None or size % pixel:
            index = np.unravel_index(number, manifest.grid_shape)
            raise UnsupportedFeatureError(
                f"{where}: chunk {tuple(int(i) for i in index)}: szip after {before!r} coded "
                f"{size} bytes, no whole number of {pixel}-byte pixels: the last bytes would "
                "decode as whatever memory held (HDF5 itself reads them so); rewrite the "
                "dataset without szip after that filter (h5repack)"
            )


def dataset_filters(ds: h5py.Dataset) -> list[Hdf5Filter]:
    """The stages of a dataset's filter pipeline, in HDF5's order."""
    dcpl = creation_plist(ds)
    stages = []
    for index in range(dcpl.get_nfilters()):
        code, _flags, values, name = dcpl.get_filter(index)
        stages.append(Hdf5Filter(int(code), name.decode("utf-8", "replace"), tuple(values)))
    return stages


@contextmanager
def _open_file(ds: h5py.Dataset, place: _Place, name: str) -> Iterator[SourceFile]:
    """The file a VDS names as a source (``"."``: its own)."""
    if name == ".":
        yield SourceFile(ds.file, place.url, place.read_range, place.fs)
        return
    url = find_sibling(place.fs, place.url, name, f"{place.where}: virtual source")
    with ExitStack() as stack:
        try:
            opened = stack.enter_context(
                open_source(url, getattr(place.fs, "storage_options", None))
            )
        except SourceNotFoundError as exc:  # removed since find_sibling saw it
            raise UnsupportedFeatureError(f"{place.where}: source {url!r} not found") from exc
        fs = getattr(opened.raw, "fs", place.fs)
        yield SourceFile(opened.h5, opened.url, opened.read_range, fs)


def _source_layout(
    src: h5py.Dataset, source: SourceFile, where: str, *, inline_threshold: int
) -> SourceLayout:
    """Chunk shape, manifest, codecs and dtype of a VDS's source dataset."""
    dtype = storage_dtype(src, where)
    codecs = filters_to_codecs(
        dataset_filters(src),
        dtype,
        where=where,
        type_id=src.id.get_type(),
        szip_sizes_checked=True,  # manifest_for checks them
    )
    layout = manifest_for(
        src,
        dtype,
        url=source.url,
        read_range=source.read_range,
        inline_threshold=inline_threshold,
        where=where,
        codecs=codecs,
        fs=source.fs,
    )
    return layout.chunks, layout.manifest, tuple(layout.codecs), dtype


def _recoder(
    ds: h5py.Dataset,
    dtype: np.dtype[Any],
    columns: ChunkColumns,
    codecs: Sequence[dict[str, Any]],
    where: str,
    filters: Sequence[Hdf5Filter],
) -> Recoder | None:
    """Re-encoding of chunks that skipped filters; None when every chunk applied them all."""
    columns.masks &= np.uint32((1 << len(filters)) - 1)  # HDF5 ignores bits past the pipeline
    if not columns.masks.any():
        return None
    stages = filter_stages(filters, dtype, where=where, szip_sizes_checked=True)
    nbytes = dtype.itemsize * math.prod(chunk_shape(ds))
    return recoder(stages, codecs, nbytes, where)


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


class _Place:
    """Where a contiguous dataset's data is read from: the file, its filesystem, options."""

    __slots__ = ("_fs", "inline_threshold", "read_range", "url", "where")

    def __init__(
        self,
        url: str,
        read_range: ReadRange,
        fs: AbstractFileSystem | None,
        inline_threshold: int,
        where: str,
    ) -> None:
        self.url, self.read_range, self._fs = url, read_range, fs
        self.inline_threshold, self.where = inline_threshold, where

    @property
    def fs(self) -> AbstractFileSystem:
        """The file's filesystem (derived from its URL on first use when not given)."""
        if self._fs is None:
            self._fs = fsspec.core.url_to_fs(self.url)[0]
        return self._fs

    def read_at(self, url: str, offset: int, length: int) -> bytes:
        """``length`` bytes at ``offset`` of this file or of an external one."""
        if url == self.url:
            return self.read_range(offset, length)
        data = bytes(self.fs.cat_file(url, start=offset, end=offset + length))
        if len(data) != length:
            raise ScanError(f"{self.where}: {url} ends before byte {offset + length}")
        return data


def _contiguous(
    ds: h5py.Dataset,
    dtype: np.dtype[Any],
    chunks: tuple[int, ...],
    grid: tuple[int, ...],
    place: _Place,
    chunk_bytes: int | None,
) -> tuple[tuple[int, ...], ChunkManifest]:
    """The dataset's byte range(s): missing when never allocated, else cut into chunks."""
    expected = dtype.itemsize * math.prod(ds.shape)
    if creation_plist(ds).get_external_count() > 0:
        if expected == 0:
            return chunks, ChunkManifest.missing(grid)
        segments = external_segments(ds, expected, place.fs, place.url, place.where)
    else:
        offset, size = ds.id.get_offset(), ds.id.get_storage_size()
        if math.prod(grid) == 0 or offset is None or size == 0:
            return chunks, ChunkManifest.missing(grid)
        if size != expected:
            raise ScanError(
                f"{place.where}: contiguous storage of {size} bytes, expected {expected}"
            )
        segments = [Segment(place.url, int(offset), int(size))]
    read_at: ReadAt = place.read_at
    return contiguous_manifest(
        tuple(int(s) for s in ds.shape),
        dtype.itemsize,
        segments,
        chunk_bytes=chunk_bytes,
        read_at=read_at,
        inline_threshold=place.inline_threshold,
        where=place.where,
    )


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
    def collect(cls, ds: h5py.Dataset, read_range: ReadRange | None = None) -> ChunkColumns:
        """Every allocated chunk of a chunked dataset, in chunk-index order (with filter masks)."""
        # a version 1 B-tree index read directly (remote files through read_range); None: h5py
        fast = read_btree_chunks(ds, read_range)
        if fast is not None:
            return cls(fast.coords, fast.offsets, fast.sizes, fast.masks)
        # The callback appends to typed arrays: no Python int objects are kept (a million
        # chunks cost 20 MB, not 200) and nothing the garbage collector tracks is created.
        coords, offsets, sizes, masks = (
            array.array("q"),
            array.array("Q"),
            array.array("Q"),
            array.array("I"),
        )
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
            try:
                ds.id.chunk_iter(add)
            except (RuntimeError, OSError, ValueError):
                if ds.id.get_num_chunks():  # some HDF5 versions fail on an empty index only
                    raise
        else:  # h5py built on HDF5 < 1.12.3 / 1.10.10: one call per chunk, slower
            for index in range(ds.id.get_num_chunks()):
                add(ds.id.get_chunk_info(index))
        n = len(offsets)
        scaled = np.frombuffer(coords, dtype=np.int64).reshape(n, ds.ndim) // np.asarray(
            ds.chunks, dtype=np.int64
        )
        return cls(
            unswizzled(ds, scaled, read_range),
            np.frombuffer(offsets, dtype=np.uint64),
            np.frombuffer(sizes, dtype=np.uint64),
            np.frombuffer(masks, dtype=np.uint32),
        )

    def manifest(
        self,
        grid: tuple[int, ...],
        url: str,
        read_range: ReadRange,
        inline_threshold: int,
        recode: Recoder | None = None,
    ) -> ChunkManifest:
        """The manifest, chunks of fewer than ``inline_threshold`` bytes read and inlined.

        Chunks with a non-zero filter mask are read, passed through ``recode`` and inlined.
        """
        n = self.count
        masked = self.masks[:n] != 0
        if recode is None and masked.any():  # referenced as stored they would decode wrongly
            raise UnsupportedFeatureError(f"{url}: chunks skipped filters, nothing re-encodes them")
        inline = masked | (self.sizes[:n] < np.uint64(inline_threshold))
        if not inline.any() and _complete_in_order(self.coords[:n], grid):
            shape = grid if grid else ()
            return ChunkManifest.from_arrays(
                [url],
                np.zeros(shape, dtype=np.int32),
                self.offsets[:n].reshape(shape),
                self.sizes[:n].reshape(shape),
            )
        keep = ~inline
        inlined = {}
        for k in np.flatnonzero(inline):
            index = tuple(int(c) for c in self.coords[k])
            data = read_range(int(self.offsets[k]), int(self.sizes[k]))
            mask = int(self.masks[k])
            inlined[index] = recode(index, mask, data) if recode and mask else data
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


def _complete_in_order(coords: np.ndarray[Any, Any], grid: tuple[int, ...]) -> bool:
    """True when ``coords`` lists every chunk of ``grid`` once, in C order (the usual case)."""
    count = math.prod(grid)
    if len(coords) != count or count == 0:
        return False
    if not grid:
        return True
    if count <= _SMALL_GRID:  # plain Python: numpy's overhead per call outweighs the work
        listed: list[list[int]] = coords.tolist()
        return listed == [list(index) for index in itertools.product(*map(range, grid))]
    if (coords < 0).any() or (coords >= np.asarray(grid)).any():
        return False  # a damaged index: from_entries says which chunk
    numbers = np.ravel_multi_index(tuple(coords.T), grid)
    return bool((numbers == np.arange(count)).all())
