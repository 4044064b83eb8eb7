"""netCDF unlimited dimensions: a variable is as long as its dimension, even where HDF5 stored
fewer records.

netCDF-4 gives every variable along an unlimited dimension that dimension's length, the
longest extent of any variable using it; records a variable never wrote read as its fill
value. HDF5 keeps each dataset's own, shorter extent, so references built from it would give
xarray variables of conflicting lengths. `NetcdfExtents` finds the netCDF length and
`extend_to` pads a manifest with missing chunks (which read as the fill value).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import h5py
import numpy as np
from h5py import h5d, h5ds

from refzarr.errors import UnsupportedFeatureError
from refzarr.model import MISSING, ChunkManifest

__all__ = ["NetcdfExtents", "extend_to"]


@dataclass
class NetcdfExtents:
    """Lengths of the unlimited netCDF dimensions of one file, computed once per dimension."""

    _lengths: dict[Any, int | None] = field(default_factory=dict)

    def shape(self, ds: h5py.Dataset) -> tuple[int, ...]:
        """The dataset's shape as netCDF sees it (unlimited axes at their dimension's length)."""
        maxshape = ds.maxshape or ()
        if None not in maxshape:
            return tuple(ds.shape)
        shape = list(ds.shape)
        for axis, limit in enumerate(maxshape):
            if limit is None:
                length = self._dimension_length(ds, axis)
                if length is not None:
                    shape[axis] = max(shape[axis], length)
        return tuple(shape)

    def _dimension_length(self, ds: h5py.Dataset, axis: int) -> int | None:
        scale = _scale(ds, axis)
        if scale is None:
            return None
        key = scale.id
        if key not in self._lengths:
            self._lengths[key] = _longest_user(scale)
        return self._lengths[key]


def _scale(ds: h5py.Dataset, axis: int) -> h5py.Dataset | None:
    """The netCDF dimension scale of ``ds``'s axis (the dataset itself for a coordinate)."""
    if h5ds.is_scale(ds.id):
        candidate: h5py.Dataset | None = ds if axis == 0 else None
    else:
        scales = ds.dims[axis].values()
        candidate = scales[0] if len(scales) == 1 else None
    if candidate is None or "_Netcdf4Dimid" not in candidate.attrs:
        return None
    return candidate


def _longest_user(scale: h5py.Dataset) -> int | None:
    """The longest extent, along the attached axis, of the scale and the datasets using it."""
    longest = int(scale.shape[0]) if scale.shape else 0
    references = scale.attrs.get("REFERENCE_LIST")
    if references is None:
        return longest
    for entry in np.asarray(references).ravel():
        ref, axis = entry[0], int(entry[1])
        user = scale.file[ref]
        if isinstance(user, h5py.Dataset) and user.shape is not None and axis < len(user.shape):
            longest = max(longest, int(user.shape[axis]))
    return longest


def extend_to(
    ds: h5py.Dataset,
    shape: tuple[int, ...],
    chunks: tuple[int, ...],
    manifest: ChunkManifest,
    where: str,
) -> ChunkManifest:
    """``manifest`` padded with missing chunks to cover ``shape`` (at least ``ds.shape``).

    Raises
    ------
    UnsupportedFeatureError
        When a stored edge chunk would show bytes HDF5 never initialised: the dataset was
        written without fill (``NC_NOFILL``) and its last stored records end inside a chunk.
    """
    old = tuple(ds.shape)
    if shape == old:
        return manifest
    grid = tuple(math.ceil(s / c) for s, c in zip(shape, chunks, strict=True))
    _check_edge_chunks(ds, old, shape, chunks, manifest, where)
    pad = [(0, new - cur) for new, cur in zip(grid, manifest.grid_shape, strict=True)]
    inlined = manifest.inlined
    return ChunkManifest.from_arrays(
        manifest.paths,
        np.pad(manifest.path_id, pad, constant_values=MISSING),
        np.pad(manifest.offset, pad),
        np.pad(manifest.length, pad),
        inlined,
    )


def _check_edge_chunks(
    ds: h5py.Dataset,
    old: tuple[int, ...],
    shape: tuple[int, ...],
    chunks: tuple[int, ...],
    manifest: ChunkManifest,
    where: str,
) -> None:
    if ds.id.get_create_plist().get_fill_time() != h5d.FILL_TIME_NEVER:
        return  # HDF5 filled every chunk with the fill value before writing into it
    for axis, (cur, new, size) in enumerate(zip(old, shape, chunks, strict=True)):
        if new == cur or cur % size == 0:
            continue
        edge = np.take(manifest.path_id, cur // size, axis=axis)
        if (edge != MISSING).any():
            raise UnsupportedFeatureError(
                f"{where}: written without fill values and shorter ({cur}) than its unlimited "
                f"dimension ({new}) inside a chunk: the records between cannot be read as "
                "netCDF reads them (its fill value)"
            )
