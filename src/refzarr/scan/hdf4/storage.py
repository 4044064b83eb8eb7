"""Chunk manifests and codecs of HDF4 data: contiguous, linked-block, external, compressed
and chunked elements as Zarr chunks of the stored bytes."""

from __future__ import annotations

import math
import posixpath
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from refzarr.errors import RefFormatError, ScanError, UnsupportedFeatureError
from refzarr.model import INLINED, MISSING, ChunkManifest
from refzarr.scan.hdf4.dd import DDTable
from refzarr.scan.hdf4.elements import (
    CODERS,
    DFTAG_CHUNK,
    Chunked,
    Compressed,
    Contiguous,
    External,
    Storage,
    read_logical,
    resolve,
)
from refzarr.scan.hdf4.source import Source
from refzarr.scan.hdf4.vsets import Vsets

__all__ = [
    "INLINE_LIMIT",
    "Context",
    "Layout",
    "codecs_for",
    "inlined_manifest",
    "layout_of",
    "missing",
    "one_chunk",
    "whole",
]

INLINE_LIMIT = 2**20
"""Data that cannot be referenced as whole chunks (linked blocks cut inside a row) is decoded
and held in the reference set up to this many bytes; beyond, it is named unsupported."""


@dataclass(frozen=True, slots=True)
class Layout:
    """An array's chunk shape, manifest and codecs."""

    chunks: tuple[int, ...]
    manifest: ChunkManifest
    codecs: list[dict[str, Any]]


@dataclass(frozen=True, slots=True)
class Context:
    """What building a layout needs: the file, its tables and the scan's options."""

    source: Source
    table: DDTable
    vsets: Vsets
    inline_threshold: int


def whole(shape: Sequence[int]) -> tuple[int, ...]:
    """One chunk covering ``shape`` (Zarr chunk lengths are at least 1)."""
    return tuple(max(int(s), 1) for s in shape)


def missing(shape: Sequence[int], chunks: tuple[int, ...] | None = None) -> Layout:
    """Nothing written: every chunk missing."""
    chunks = chunks or whole(shape)
    grid = tuple(math.ceil(s / c) for s, c in zip(shape, chunks, strict=True))
    return Layout(chunks, ChunkManifest.missing(grid), [])


def layout_of(
    ctx: Context, storage: Storage | None, shape: tuple[int, ...], dtype: np.dtype[Any], what: str
) -> Layout:
    """The chunks of data stored as ``storage`` (None: never written) for an array."""
    nbytes = math.prod(shape) * dtype.itemsize
    if storage is None or nbytes == 0:
        return missing(shape)
    if isinstance(storage, Chunked):
        return _chunked(ctx, storage, shape, dtype, what)
    if isinstance(storage, External):
        return _external(ctx, storage, shape, nbytes, what)
    if isinstance(storage, Compressed):
        return _compressed(ctx, storage, shape, dtype, what)
    if storage.length == 0:
        return missing(shape)
    if storage.length < nbytes:
        raise UnsupportedFeatureError(
            f"{ctx.source.url}: {what}: {storage.length} bytes stored, {nbytes} expected "
            "(partly written data is not supported)"
        )
    return _contiguous(ctx, storage, shape, dtype, what)


def one_chunk(ctx: Context, offset: int, length: int, shape: Sequence[int]) -> Layout:
    """One chunk: ``length`` bytes at ``offset`` of this file (inlined when small)."""
    grid = (1,) * len(shape)
    if length < ctx.inline_threshold:
        data = ctx.source.read_range(offset, length, "small chunk")
        return Layout(whole(shape), inlined_manifest(grid, {(0,) * len(shape): data}), [])
    manifest = ChunkManifest.from_arrays(
        [ctx.source.url], np.zeros(grid, np.int32), np.full(grid, offset), np.full(grid, length)
    )
    return Layout(whole(shape), manifest, [])


def inlined_manifest(grid: tuple[int, ...], chunks: dict[tuple[int, ...], bytes]) -> ChunkManifest:
    path_id = np.full(grid, MISSING, np.int32)
    for index in chunks:
        path_id[index] = INLINED
    zeros = np.zeros(grid, np.uint64)
    return ChunkManifest.from_arrays([], path_id, zeros, zeros, chunks)


def _contiguous(
    ctx: Context, storage: Contiguous, shape: tuple[int, ...], dtype: np.dtype[Any], what: str
) -> Layout:
    nbytes = math.prod(shape) * dtype.itemsize
    if len(storage.ranges) == 1 and storage.ranges[0][0] >= 0:
        return one_chunk(ctx, storage.ranges[0][0], nbytes, shape)
    rows = _rows_per_block(storage, shape, dtype)
    if rows:
        return _linked_rows(ctx, storage, shape, dtype, rows)
    return _inline_whole(ctx, read_logical(ctx.source, storage, 0, nbytes), shape, [], what)


def _rows_per_block(storage: Contiguous, shape: tuple[int, ...], dtype: np.dtype[Any]) -> int:
    """Rows (along the first axis) per linked block when every block but the last holds the
    same whole number of rows, else 0."""
    row = math.prod(shape[1:]) * dtype.itemsize
    sizes = [size for _, size in storage.ranges[:-1]]
    if not row or not sizes or any(s != sizes[0] or s % row for s in sizes):
        return 0
    if any(offset < 0 for offset, _ in storage.ranges):
        return 0
    return sizes[0] // row


def _linked_rows(
    ctx: Context, storage: Contiguous, shape: tuple[int, ...], dtype: np.dtype[Any], rows: int
) -> Layout:
    """A chunk per linked block of ``rows`` rows (HDF4 allocates every block whole, so the
    last one holds a whole chunk's bytes even when the records stop inside it)."""
    row = math.prod(shape[1:]) * dtype.itemsize
    chunks = (rows, *whole(shape[1:]))
    grid = (math.ceil(shape[0] / rows),) + (1,) * (len(shape) - 1)
    offsets = np.array([offset for offset, _ in storage.ranges[: grid[0]]], np.uint64)
    held = storage.capacity[: grid[0]]
    if int(offsets[-1]) + rows * row > ctx.source.size or (held and held[-1] < rows * row):
        # the last block ends before a whole chunk's bytes: only what it holds is data
        data = read_logical(ctx.source, storage, 0, shape[0] * row)
        return _inline_whole(ctx, data, shape, [], "linked blocks")
    if rows * row < ctx.inline_threshold:
        chunks_bytes = {
            (k,) + (0,) * (len(shape) - 1): ctx.source.read_range(
                int(o), rows * row, "linked block"
            )
            for k, o in enumerate(offsets.tolist())
        }
        return Layout(chunks, inlined_manifest(grid, chunks_bytes), [])
    lengths = np.full(grid, rows * row, np.uint64)
    ids = np.zeros(grid, np.int32)
    manifest = ChunkManifest.from_arrays([ctx.source.url], ids, offsets.reshape(grid), lengths)
    return Layout(chunks, manifest, [])


def _inline_whole(
    ctx: Context, data: bytes, shape: tuple[int, ...], codecs: list[dict[str, Any]], what: str
) -> Layout:
    if len(data) > INLINE_LIMIT:
        raise UnsupportedFeatureError(
            f"{ctx.source.url}: {what}: data in linked blocks that do not hold whole rows "
            f"({len(data)} bytes, more than the {INLINE_LIMIT} refzarr inlines)"
        )
    grid = (1,) * len(shape)
    return Layout(whole(shape), inlined_manifest(grid, {(0,) * len(shape): data}), codecs)


def _external(
    ctx: Context, storage: External, shape: tuple[int, ...], nbytes: int, what: str
) -> Layout:
    if storage.length < nbytes:
        raise UnsupportedFeatureError(
            f"{ctx.source.url}: {what}: external file {storage.path!r} holds {storage.length} "
            f"bytes, {nbytes} expected"
        )
    url = storage.path
    if not posixpath.isabs(url) and "://" not in url:
        url = posixpath.join(posixpath.dirname(ctx.source.url), url)
    grid = (1,) * len(shape)
    manifest = ChunkManifest.from_arrays(
        [url], np.zeros(grid, np.int32), np.full(grid, storage.offset), np.full(grid, nbytes)
    )
    return Layout(whole(shape), manifest, [])


def _compressed(
    ctx: Context, storage: Compressed, shape: tuple[int, ...], dtype: np.dtype[Any], what: str
) -> Layout:
    nbytes = math.prod(shape) * dtype.itemsize
    codecs = codecs_for(storage.coder, storage.params, nbytes, dtype, ctx.source.url, what)
    data = storage.data
    if data.length == 0:
        return missing(shape)
    if len(data.ranges) == 1 and data.ranges[0][0] >= 0:
        layout = one_chunk(ctx, data.ranges[0][0], data.length, shape)
        return Layout(layout.chunks, layout.manifest, codecs)
    return _inline_whole(ctx, read_logical(ctx.source, data, 0, data.length), shape, codecs, what)


def codecs_for(
    coder: int, params: dict[str, Any], size: int, dtype: np.dtype[Any], url: str, what: str
) -> list[dict[str, Any]]:
    """numcodecs configs decoding one HDF4 compressed element of ``size`` bytes."""
    if coder == 0:
        return []
    if coder == 1:
        return [{"id": "refzarr.hdf4_rle", "size": size}]
    if coder == 2:
        return [
            {
                "id": "refzarr.hdf4_nbit",
                "size": size,
                "nt_size": dtype.itemsize,
                "start_bit": params["start_bit"],
                "bit_len": params["bit_len"],
                "sign_ext": params["sign_ext"],
                "fill_one": params["fill_one"],
            }
        ]
    if coder == 3:
        return [{"id": "refzarr.hdf4_skphuff", "size": size, "skip_size": params["skip_size"]}]
    if coder == 4:
        return [{"id": "zlib", "level": params["level"]}]
    if coder == 5:
        keys = ("options_mask", "pixels_per_block", "bits_per_pixel", "pixels_per_scanline")
        return [{"id": "refzarr.hdf4_szip", "size": size, **{k: params[k] for k in keys}}]
    name = CODERS.get(coder, f"unknown compression (code {coder})")
    raise UnsupportedFeatureError(f"{url}: {what}: compressed with {name}, which no codec reads")


def _chunked(
    ctx: Context, storage: Chunked, shape: tuple[int, ...], dtype: np.dtype[Any], what: str
) -> Layout:
    chunks = storage.chunks
    if len(chunks) != len(shape):
        raise ScanError(
            f"{ctx.source.url}: {what}: chunk header has {len(chunks)} dimensions, the SDS "
            f"{len(shape)}"
        )
    chunk_bytes = math.prod(chunks) * dtype.itemsize
    codecs = codecs_for(storage.coder, storage.params, chunk_bytes, dtype, ctx.source.url, what)
    grid = tuple(math.ceil(s / c) for s, c in zip(shape, chunks, strict=True))
    origins, refs = _chunk_table(ctx, storage, what)
    written: list[tuple[int, ...]] = []  # the written chunks only: the grid may be 2**62
    offsets: list[int] = []
    lengths: list[int] = []
    inlined: dict[tuple[int, ...], bytes] = {}
    for origin, ref in zip(origins, refs, strict=True):
        if any(o >= g or o < 0 for o, g in zip(origin, grid, strict=True)):
            continue  # chunks beyond the visible records (an unlimited dimension)
        found = _chunk_bytes(ctx, ref, what)
        if found is None:
            continue
        if isinstance(found, bytes):  # stored in linked blocks: held in the reference set
            inlined[origin] = found
            continue
        offset, length = found
        if 0 < length < ctx.inline_threshold:
            inlined[origin] = ctx.source.read_range(offset, length, f"{what}: chunk {origin}")
        elif length:
            written.append(origin)
            offsets.append(offset)
            lengths.append(length)
    manifest = _written_manifest(ctx, grid, written, offsets, lengths, inlined, what)
    return Layout(chunks, manifest, codecs)


def _written_manifest(
    ctx: Context,
    grid: tuple[int, ...],
    coords: list[tuple[int, ...]],
    offsets: list[int],
    lengths: list[int],
    inlined: dict[tuple[int, ...], bytes],
    what: str,
) -> ChunkManifest:
    """The manifest of the written chunks (sparse when the grid is large and mostly empty)."""
    where = f"{ctx.source.url}: {what}"
    try:
        return ChunkManifest.from_entries(
            grid,
            np.asarray(coords, np.int64).reshape(len(coords), len(grid)),
            [ctx.source.url],
            np.zeros(len(coords), np.int64),
            np.asarray(offsets, np.uint64),
            np.asarray(lengths, np.uint64),
            inlined,
            where=where,
        )
    except RefFormatError as exc:  # a grid past 2**62 chunks, a chunk listed twice
        said = str(exc) if str(exc).startswith(where) else f"{where}: {exc}"
        raise ScanError(f"{said} (the chunk table or the dimensions are damaged)") from exc


def _chunk_table(
    ctx: Context, storage: Chunked, what: str
) -> tuple[list[tuple[int, ...]], list[int]]:
    vdata = ctx.vsets.vdata(storage.table_ref)
    records = ctx.vsets.records(vdata, f"{what}: chunk table")
    if records.size == 0:
        return [], []
    names: tuple[str, ...] = records.dtype.names or ()
    if len(names) < 3:
        raise ScanError(f"{ctx.source.url}: {what}: chunk table has fields {names}")
    origin_field, ref_field = names[0], names[-1]
    origin = np.asarray(records[origin_field]).reshape(records.size, -1).astype(np.int64)
    refs = np.asarray(records[ref_field]).astype(np.int64)
    return [tuple(o) for o in origin.tolist()], refs.tolist()


def _chunk_bytes(ctx: Context, ref: int, what: str) -> tuple[int, int] | bytes | None:
    """Offset and length of the stored bytes of chunk object ``ref`` (None: not written), or
    the bytes themselves when HDF4 stored them in linked blocks (a compressed chunk written
    again grows into them), up to `INLINE_LIMIT`."""
    dd = ctx.table.get(DFTAG_CHUNK, ref)
    if dd is None:
        raise ScanError(f"{ctx.source.url}: {what}: chunk object {ref} is not in the file")
    storage = resolve(ctx.table, ctx.source, dd, f"{what}: chunk {ref}")
    if isinstance(storage, Compressed):
        storage = storage.data
    if not isinstance(storage, Contiguous):
        raise UnsupportedFeatureError(
            f"{ctx.source.url}: {what}: chunk {ref} stored as {type(storage).__name__.lower()}"
        )
    if storage.length == 0:
        return None
    if len(storage.ranges) == 1 and storage.ranges[0][0] >= 0:
        return storage.ranges[0][0], storage.length
    if storage.length > INLINE_LIMIT:
        raise UnsupportedFeatureError(
            f"{ctx.source.url}: {what}: chunk {ref} is stored in linked blocks "
            f"({storage.length} bytes), more than the {INLINE_LIMIT} bytes refzarr holds "
            "in the reference set"
        )
    return read_logical(ctx.source, storage, 0, storage.length)
