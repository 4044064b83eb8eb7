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
from h5py import h5a, h5d, h5ds, h5i, h5r

from refzarr.model import ChunkManifest
from refzarr.scan.hdf5.attrs import AttributeTable, get_attribute
from refzarr.scan.hdf5.headers import ObjectHeaders
from refzarr.scan.hdf5.scale_names import UNKNOWN, ScaleNames

__all__ = ["NetcdfExtents", "chunk_indices", "extend_to"]


@dataclass
class NetcdfExtents:
    """Lengths of the unlimited netCDF dimensions of one file, computed once per dimension."""

    _lengths: dict[Any, int | None] = field(default_factory=dict)
    headers: ObjectHeaders | None = None
    """The file's object headers, read directly (else h5py reads ``REFERENCE_LIST``)."""
    scale_names: ScaleNames | None = None
    """The file's scales found without HDF5's search (else `h5ds.iterate` finds them)."""

    def shape(self, ds: h5py.Dataset, attrs: AttributeTable | None = None) -> tuple[int, ...]:
        """The dataset's shape as netCDF sees it (unlimited axes at their dimension's length;
        ``attrs``: its attributes, when already read)."""
        maxshape = self._max_shape(ds) or ()
        if None not in maxshape:
            return tuple(ds.shape)
        shape = list(ds.shape)
        for axis, limit in enumerate(maxshape):
            if limit is None:
                length = self._dimension_length(ds, axis, attrs)
                if length is not None:
                    shape[axis] = max(shape[axis], length)
        return tuple(shape)

    def unlimited_axes(self, ds: h5py.Dataset) -> tuple[int, ...]:
        """The axes of the dataset that may grow (netCDF's unlimited dimensions)."""
        return tuple(k for k, limit in enumerate(self._max_shape(ds) or ()) if limit is None)

    def _max_shape(self, ds: h5py.Dataset) -> tuple[int | None, ...] | None:
        """``ds.maxshape``, from its object header when read there."""
        address = getattr(ds, "header_address", None)  # a ScannedDataset knows it
        found = None if self.headers is None else self.headers.max_shape(ds.id, address, ds.shape)
        return ds.maxshape if found is None else found

    def _dimension_length(
        self, ds: h5py.Dataset, axis: int, attrs: AttributeTable | None
    ) -> int | None:
        scale = _scale(ds, axis, self.scale_names, attrs)
        if scale is None:
            return None
        key = scale.id
        if key not in self._lengths:
            self._lengths[key] = _longest_user(scale, self.headers)
        return self._lengths[key]


def _scale(
    ds: h5py.Dataset,
    axis: int,
    names: ScaleNames | None = None,
    attrs: AttributeTable | None = None,
) -> h5py.Dataset | None:
    """The netCDF dimension scale of ``ds``'s axis (the dataset itself for a coordinate;
    ``attrs``: its attributes, when already read)."""
    if h5ds.is_scale(ds.id) if attrs is None else attrs.dimension_scale():
        if axis != 0:
            return None
        has_id = h5a.exists(ds.id, _DIMID) if attrs is None else _DIMID.decode() in attrs
        return ds if has_id else None
    found = UNKNOWN if names is None else names.only_scale(ds, axis)
    if found is UNKNOWN:
        candidate = _only_scale(ds, axis)
    elif found is None:
        candidate = None
    else:
        h5ds.get_scale_name(found)  # as h5py's ``ds.dims[axis].values()``: fails if damaged
        candidate = h5py.Dataset(found, readonly=True)
    if candidate is None or not h5a.exists(candidate.id, _DIMID):
        return None
    return candidate


_DIMID = b"_Netcdf4Dimid"
"""The attribute netCDF-C gives a dimension scale: its dimension id."""


def _only_scale(ds: h5py.Dataset, axis: int) -> h5py.Dataset | None:
    """The dimension scale attached to ``ds``'s axis when there is exactly one."""
    if h5ds.get_num_scales(ds.id, axis) != 1:
        return None
    scales: list[h5d.DatasetID] = []
    h5ds.iterate(ds.id, axis, scales.append, 0)
    for scale in scales:
        h5ds.get_scale_name(scale)  # as h5py's ``ds.dims[axis].values()``: fails when damaged
    return h5py.Dataset(scales[0], readonly=True) if len(scales) == 1 else None


def _longest_user(scale: h5py.Dataset, headers: ObjectHeaders | None = None) -> int | None:
    """The longest extent, along the attached axis, of the scale and the datasets using it."""
    longest = int(scale.shape[0]) if scale.shape else 0
    address = getattr(scale, "header_address", None)  # a ScannedDataset knows it
    users = None if headers is None else headers.scale_users(scale.id, address)
    if users is not None:  # read from the headers: what h5py's path below finds
        for shape, axis in users:
            if shape is not None and axis < len(shape):
                longest = max(longest, int(shape[axis]))
        return longest
    references = get_attribute(scale, "REFERENCE_LIST")
    if references is None:
        return longest
    for entry in np.asarray(references).ravel():
        ref, axis = entry[0], int(entry[1])
        shape = _dataset_shape(scale, ref)
        if shape is not None and axis < len(shape):
            longest = max(longest, int(shape[axis]))
    return longest


def _dataset_shape(scale: h5py.Dataset, ref: h5r.Reference) -> tuple[int, ...] | None:
    """The shape of the dataset ``ref`` points to (None: not a dataset, or no dataspace)."""
    target = h5r.dereference(ref, scale.id)
    if target is None:
        raise ValueError("Invalid HDF5 object reference")  # as h5py's ``file[ref]``
    if h5i.get_type(target) != h5i.DATASET:
        return None
    shape: tuple[int, ...] | None = target.shape
    return shape


def extend_to(
    ds: h5py.Dataset,
    shape: tuple[int, ...],
    chunks: tuple[int, ...],
    manifest: ChunkManifest,
    where: str,
) -> ChunkManifest:
    """``manifest`` padded with missing chunks to cover ``shape`` (at least ``ds.shape``).

    For a dataset HDF5 filled (a dataset written without fill values: `lengthen_unfilled`
    in `refzarr.scan.hdf5.nofill`): its stored edge chunks hold the fill value past its end.
    """
    old = tuple(ds.shape)
    if shape == old:
        return manifest
    grid = tuple(math.ceil(s / c) for s, c in zip(shape, chunks, strict=True))
    written = manifest.written_entries()  # the written chunks only: the grid may be 2**40
    index = chunk_indices(written.numbers, manifest.grid_shape)
    referenced = written.path_id >= 0
    return ChunkManifest.from_entries(
        grid,
        index[referenced],
        written.paths,
        written.path_id[referenced],
        written.offset[referenced],
        written.length[referenced],
        manifest.inlined,
        where=where,
    )


def chunk_indices(numbers: np.ndarray[Any, Any], grid: tuple[int, ...]) -> np.ndarray[Any, Any]:
    """C-order chunk numbers as rows of chunk indices."""
    if not grid:
        return np.zeros((numbers.size, 0), dtype=np.int64)
    return np.stack(np.unravel_index(numbers, grid), axis=1).astype(np.int64)
