"""The chunks a selection holds whole, as tiles of the output: a view of the output indexed
(tile numbers..., positions in a chunk...), so a batch of decoded chunks goes in with one numpy
assignment instead of one slicing per chunk.

Only chunks of a regular grid selected whole with step 1 are tiles (`Axis.tiles`); along each
axis they lie side by side in the output, so the view is the output's own memory with each
axis split in two (tile, position) by strides.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.lib.stride_tricks import as_strided

from refzarr.reader.select import Axis

__all__ = ["consecutive_tiles", "tile_numbers", "tiled_view"]

MIN_DIRECT_BYTES = 1 << 16
"""Chunks at least this big decode straight into the output when their tiles are one run of
contiguous memory; smaller ones go through a batch array (a view per chunk costs more)."""


def tiled_view(out: np.ndarray[Any, Any], axes: Sequence[Axis]) -> np.ndarray[Any, Any] | None:
    """A writeable view of ``out`` shaped ``(*tile counts, *chunk shape)`` over the chunks
    selected whole; None when some axis has none (or the array is 0-d)."""
    if not axes or any(axis.tile_count == 0 for axis in axes):
        return None
    region = out[
        tuple(slice(axis.tile_base, axis.tile_base + axis.tile_count * axis.chunk) for axis in axes)
    ]
    shape = [n for axis in axes for n in (axis.tile_count, axis.chunk)]
    strides = [
        n
        for axis, stride in zip(axes, region.strides, strict=True)
        for n in (stride * axis.chunk, stride)
    ]
    split = as_strided(region, shape=shape, strides=strides, writeable=True)
    ndim = len(axes)
    return split.transpose(*range(0, 2 * ndim, 2), *range(1, 2 * ndim, 2))


def tile_numbers(
    axes: Sequence[Axis], coords: np.ndarray[Any, np.dtype[np.int64]]
) -> np.ndarray[Any, np.dtype[np.int64]]:
    """For chunks at ``coords`` (n, ndim): their tile numbers per axis, -1 where not whole."""
    columns = [
        axis.tiles[np.searchsorted(axis.chunk_ids, coords[:, d])] for d, axis in enumerate(axes)
    ]
    return np.stack(columns, axis=1) if columns else np.zeros((len(coords), 0), np.int64)


def consecutive_tiles(
    tiled: np.ndarray[Any, Any], tiles: np.ndarray[Any, np.dtype[np.int64]]
) -> np.ndarray[Any, Any] | None:
    """The output's memory of tiles ``tiles`` (n, ndim) when they are one C-contiguous run
    (consecutive along the first axis, the same on the others, chunks spanning the trailing
    dimensions) and chunks are big, as a ``(n, *chunk)`` view; None otherwise."""
    ndim = tiles.shape[1]
    if not ndim or tiled[(0,) * ndim].nbytes < MIN_DIRECT_BYTES:
        return None
    first = tiles[:, 0]
    if (first != np.arange(first[0], first[0] + len(first))).any():
        return None
    if (tiles[:, 1:] != tiles[0, 1:]).any():
        return None
    run = tiled[(slice(int(first[0]), int(first[-1]) + 1), *tiles[0, 1:].tolist())]
    return run if run.flags.c_contiguous else None
