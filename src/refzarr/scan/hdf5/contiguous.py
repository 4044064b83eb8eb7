"""Contiguous, unfiltered data (in the HDF5 file or in external raw files) as a grid of chunks.

The data is one C-order byte stream, held by one or more segments (byte ranges of files). It
is cut into chunks that each cover one unbroken byte range: a chunk is 1 along the leading
axes, ``c`` along one axis and full along the rest. Zarr v2 wants a regular grid of full-size
chunks, so ``c`` divides that axis where possible; when it does not (and would be much too
small otherwise) the last chunk of the whole array, whose range would run past the data, is
read, padded with zeros and inlined. Every other chunk's range lies inside the data, and the
bytes it holds past an axis end fall outside the array: Zarr never shows them.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from refzarr.errors import ScanError, UnsupportedFeatureError
from refzarr.model import ChunkManifest

__all__ = ["ReadAt", "Segment", "check_chunk_bytes", "contiguous_manifest"]

ReadAt = Callable[[str, int, int], bytes]
"""``(url, offset, length) -> bytes``: read a byte range of a file."""


@dataclass(frozen=True, slots=True)
class Segment:
    """``size`` bytes of the data stream, stored at ``offset`` of the file ``url``."""

    url: str
    offset: int
    size: int


def check_chunk_bytes(value: int | None) -> None:
    """Raise unless ``value`` is a valid ``contiguous_chunk_bytes`` option (None or >= 1)."""
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"contiguous_chunk_bytes must be an int or None, got {value!r}")
    if value < 1:
        raise ValueError(f"contiguous_chunk_bytes must be >= 1, got {value}")


def contiguous_manifest(
    shape: tuple[int, ...],
    itemsize: int,
    segments: Sequence[Segment],
    *,
    chunk_bytes: int | None,
    read_at: ReadAt,
    inline_threshold: int,
    where: str,
) -> tuple[tuple[int, ...], ChunkManifest]:
    """The chunk shape and manifest of contiguous data held by ``segments``, in order.

    ``chunk_bytes`` (None: as few chunks as the segments allow) bounds the size of a chunk.
    Raises `UnsupportedFeatureError` when several segments do not split on whole rows.
    """
    total = itemsize * math.prod(shape)
    if len(segments) == 1:
        chunks = _split(shape, itemsize, chunk_bytes)
        if chunks == shape and total > 0 and inline_threshold <= total <= segments[0].size:
            return chunks, _one_chunk(len(shape), segments[0], total)
    else:
        chunks = _row_split(shape, itemsize, segments, chunk_bytes, where)
    grid = tuple(math.ceil(s / c) for s, c in zip(shape, chunks, strict=True))
    coords = np.indices(grid, dtype=np.int64).reshape(len(grid), math.prod(grid)).T
    strides = [itemsize * math.prod(shape[i + 1 :]) for i in range(len(shape))]
    starts = coords @ np.asarray([c * s for c, s in zip(chunks, strides, strict=True)], np.int64)
    length = itemsize * math.prod(chunks)
    return chunks, _manifest(
        grid, coords, starts, length, total, segments, read_at, inline_threshold, where
    )


def _one_chunk(ndim: int, segment: Segment, total: int) -> ChunkManifest:
    """The manifest of data that is one chunk referenced where it lies (the usual case: what
    `_manifest` gives for it, without its general machinery)."""
    grid = (1,) * ndim
    return ChunkManifest.from_arrays(
        [segment.url],
        np.zeros(grid, dtype=np.int32),
        np.full(grid, segment.offset, dtype=np.uint64),
        np.full(grid, total, dtype=np.uint64),
    )


def _split(shape: tuple[int, ...], itemsize: int, limit: int | None) -> tuple[int, ...]:
    """Chunks of at most ``limit`` bytes (whole array when None), each one byte range."""
    if limit is None or not shape:
        return shape
    axis = next(
        (k for k in range(len(shape)) if itemsize * math.prod(shape[k + 1 :]) <= limit),
        len(shape) - 1,
    )
    inner = itemsize * math.prod(shape[axis + 1 :])
    most = max(1, min(shape[axis], limit // inner))
    count = _largest_divisor(shape[axis], most)
    if 2 * count < most:  # no divisor near the limit: a partial last chunk, padded and inlined
        count = most
    return (1,) * axis + (count,) + shape[axis + 1 :]


def _row_split(
    shape: tuple[int, ...],
    itemsize: int,
    segments: Sequence[Segment],
    limit: int | None,
    where: str,
) -> tuple[int, ...]:
    """Chunks of whole rows (leading axis) such that no chunk spans two segments."""
    row = itemsize * math.prod(shape[1:])
    bounds = np.cumsum([s.size for s in segments[:-1]]).tolist()
    if not shape or any(b % row for b in bounds):
        raise UnsupportedFeatureError(
            f"{where}: the data is spread over {len(segments)} external file segments whose "
            f"boundaries ({bounds} bytes) do not fall on whole rows of {row} bytes, so they "
            "cannot be referenced as chunks; copy the dataset into the HDF5 file (h5repack)"
        )
    rows = math.gcd(shape[0], *(b // row for b in bounds))
    if limit is not None:
        rows = _largest_divisor(rows, max(1, limit // row))
    return (rows, *shape[1:])


def _largest_divisor(n: int, most: int) -> int:
    """The largest divisor of ``n`` that is at most ``most``."""
    best = 1
    for small in range(1, math.isqrt(n) + 1):
        if n % small == 0:
            for d in (small, n // small):
                if best < d <= most:
                    best = d
    return best


def _manifest(
    grid: tuple[int, ...],
    coords: np.ndarray[Any, np.dtype[np.int64]],
    starts: np.ndarray[Any, np.dtype[np.int64]],
    length: int,
    total: int,
    segments: Sequence[Segment],
    read_at: ReadAt,
    inline_threshold: int,
    where: str,
) -> ChunkManifest:
    ends = np.cumsum([s.size for s in segments], dtype=np.int64)
    found = np.searchsorted(ends, starts, side="right")
    seg_start = np.concatenate([[0], ends[:-1]])[found]
    over = starts + length > ends[found]
    urls = list(dict.fromkeys(s.url for s in segments))
    url_of = np.asarray([urls.index(s.url) for s in segments], dtype=np.int64)[found]
    offsets = np.asarray([s.offset for s in segments], dtype=np.int64)[found] + starts - seg_start
    inline = over | (length < inline_threshold)
    inlined = {}
    for k in np.flatnonzero(inline):
        index = tuple(int(c) for c in coords[k])
        start, segment = int(starts[k]), segments[int(found[k])]
        size = min(length, total - start)
        if bool(over[k]) and start + length <= total:
            raise ScanError(f"{where}: chunk {index} spans two storage segments (internal error)")
        data = read_at(segment.url, int(offsets[k]), size)
        inlined[index] = data + bytes(length - size)
    keep = ~inline
    return ChunkManifest.from_entries(
        grid,
        coords[keep],
        urls,
        url_of[keep],
        offsets[keep].astype(np.uint64),
        np.full(int(keep.sum()), length, dtype=np.uint64),
        inlined,
        where=where,
    )
