"""The combined coordinate variable, written as a real array whose chunks are inlined."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from refzarr.model import INLINED, ArrayMeta, ChunkManifest, RefArray
from refzarr.model.meta import DIMENSIONS_ATTR

__all__ = ["INLINE_CHUNK_BYTES", "inlined_array"]

INLINE_CHUNK_BYTES = 8 * 2**20
"""Largest inlined chunk of a written coordinate: a coordinate up to this size is one chunk,
a larger one is cut into chunks of about this size (each inlined)."""


def inlined_array(
    values: np.ndarray[Any, Any],
    dim: str,
    attributes: Mapping[str, Any],
    template: ArrayMeta | None = None,
) -> RefArray:
    """A 1-D array along ``dim`` holding ``values``, every chunk inlined, without codecs.

    ``template`` (the first file's coordinate) gives the fill value when its dtype is kept.
    """
    values = np.ascontiguousarray(values.reshape(-1))
    if values.dtype.kind == "O":
        values = values.astype(str)
    if values.dtype.kind == "U" and values.dtype.itemsize == 0:
        values = values.astype("<U1")
    n = values.shape[0]
    chunk = max(1, min(n, INLINE_CHUNK_BYTES // max(values.dtype.itemsize, 1)))
    grid = -(-n // chunk)
    inlined: dict[tuple[int, ...], bytes] = {}
    for k in range(grid):
        part = values[k * chunk : (k + 1) * chunk]
        stored = np.zeros(chunk, dtype=values.dtype)  # the edge chunk is stored whole
        stored[: part.shape[0]] = part
        inlined[(k,)] = stored.tobytes()
    zeros = np.zeros(grid, dtype=np.uint64)
    manifest = ChunkManifest.from_arrays(
        [], np.full(grid, INLINED, np.int32), zeros, zeros, inlined=inlined
    )
    keep_fill = template is not None and template.dtype == values.dtype
    meta = ArrayMeta(
        shape=(n,),
        chunks=(chunk,),
        dtype=values.dtype,
        fill_value=template.fill_value if keep_fill and template is not None else None,
        attributes={k: v for k, v in attributes.items() if k != DIMENSIONS_ATTR},
        dimension_names=(dim,),
    )
    return RefArray(meta, manifest)
