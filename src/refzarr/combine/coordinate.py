"""The combined coordinate variable (and re-encoded CF time bounds), written as a real array
whose chunks are inlined."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from refzarr.model import INLINED, ArrayMeta, ChunkManifest, RefArray
from refzarr.model.meta import DIMENSIONS_ATTR

__all__ = ["INLINE_CHUNK_BYTES", "inlined_array"]

INLINE_CHUNK_BYTES = 8 * 2**20
"""Largest inlined chunk of a written coordinate: a coordinate up to this size is one chunk,
a larger one is cut into chunks of about this size along its first axis (each inlined)."""


def inlined_array(
    values: np.ndarray[Any, Any],
    dims: str | tuple[str, ...],
    attributes: Mapping[str, Any],
    template: ArrayMeta | None = None,
) -> RefArray:
    """An array holding ``values``, every chunk inlined, without codecs.

    ``dims`` names its dimensions (one name: a 1-D array). ``template`` (the first file's
    variable) gives the fill value when its dtype is kept.
    """
    names = (dims,) if isinstance(dims, str) else tuple(dims)
    values = np.ascontiguousarray(values.reshape(-1) if len(names) == 1 else values)
    if values.dtype.kind == "O":
        values = values.astype(str)
    if values.dtype.kind == "U" and values.dtype.itemsize == 0:
        values = values.astype("<U1")
    n = values.shape[0]
    row = max(1, values[:1].nbytes if n else values.dtype.itemsize)
    chunk = max(1, min(n, INLINE_CHUNK_BYTES // row))
    grid = -(-n // chunk)
    inlined: dict[tuple[int, ...], bytes] = {}
    zeros_index = (0,) * (values.ndim - 1)
    for k in range(grid):
        part = values[k * chunk : (k + 1) * chunk]
        stored = np.zeros((chunk, *values.shape[1:]), dtype=values.dtype)  # edge chunk whole
        stored[: part.shape[0]] = part
        inlined[(k, *zeros_index)] = stored.tobytes()
    grid_shape = (grid, *(1,) * (values.ndim - 1))
    zeros = np.zeros(grid_shape, dtype=np.uint64)
    manifest = ChunkManifest.from_arrays(
        [], np.full(grid_shape, INLINED, np.int32), zeros, zeros, inlined=inlined
    )
    keep_fill = template is not None and template.dtype == values.dtype
    meta = ArrayMeta(
        shape=values.shape,
        chunks=(chunk, *values.shape[1:]),
        dtype=values.dtype,
        fill_value=template.fill_value if keep_fill and template is not None else None,
        attributes={k: v for k, v in attributes.items() if k != DIMENSIONS_ATTR},
        dimension_names=names,
    )
    return RefArray(meta, manifest)
