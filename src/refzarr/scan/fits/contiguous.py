"""Chunks of data stored contiguously (images, table rows, random groups): whole rows of the
slowest axis, each chunk one byte range of the file."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np

from refzarr.model import INLINED, ChunkManifest

__all__ = ["DEFAULT_CHUNK_BYTES", "contiguous_chunks"]

DEFAULT_CHUNK_BYTES = 2**24
"""Largest chunk cut from contiguous data by default (16 MiB)."""


def rows_per_chunk(rows: int, row_bytes: int, target: int) -> int:
    """Rows of the slowest axis per chunk: all when they fit ``target`` bytes, else about
    ``target`` bytes' worth, a divisor of ``rows`` when one lies within a factor 2."""
    if rows * row_bytes <= target or rows <= 1:
        return max(rows, 1)
    wanted = max(1, target // max(row_bytes, 1))
    for count in range(wanted, max(wanted // 2, 1) - 1, -1):
        if rows % count == 0:
            return count
    return wanted


def contiguous_chunks(
    url: str,
    offset: int,
    shape: Sequence[int],
    itemsize: int,
    *,
    target: int,
    size: int,
    read_range: Callable[[int, int], bytes],
    inline_threshold: int,
    pad: bytes = b"\0",
) -> tuple[tuple[int, ...], ChunkManifest]:
    """The chunk shape and manifest of ``shape`` items of ``itemsize`` bytes at ``offset``.

    A last chunk cut short by the end of the data is referenced whole when the first ``size``
    bytes of the file hold it (what follows the data is ignored), else its bytes are read,
    padded with ``pad`` and inlined;
    chunks stored in fewer than ``inline_threshold`` bytes are inlined.
    """
    row_bytes = math.prod(shape[1:]) * itemsize
    rows = rows_per_chunk(shape[0], row_bytes, target)
    chunks = (rows, *shape[1:])
    count = math.ceil(shape[0] / rows)
    length = rows * row_bytes
    offsets = offset + np.arange(count, dtype=np.uint64) * np.uint64(length)
    lengths = np.full(count, length, dtype=np.uint64)
    ids = np.zeros(count, dtype=np.int32)
    inlined: dict[tuple[int, ...], bytes] = {}
    data_end = offset + shape[0] * row_bytes
    for k in range(count):
        start = int(offsets[k])
        if start + length > size or length < inline_threshold:
            stored = read_range(start, min(length, data_end - start))
            inlined[(k, *(0,) * (len(shape) - 1))] = stored.ljust(length, pad)
            ids[k], offsets[k], lengths[k] = INLINED, 0, 0
    grid = (count, *(1,) * (len(shape) - 1))
    manifest = ChunkManifest.from_arrays(
        [url], ids.reshape(grid), offsets.reshape(grid), lengths.reshape(grid), inlined
    )
    return chunks, manifest
