"""Datasets of an HDF5 array type (e.g. ``(f4, (3,))``) as arrays with trailing axes.

An element of array type ``(T, (3,))`` is three ``T`` stored one after the other, so the bytes
of a dataset of shape ``(n,)`` are exactly those of a ``T`` array of shape ``(n, 3)``: the
array type's axes become trailing axes, each chunk covers them whole (one chunk along each),
and they get phony dimension names. Filters see the whole element (a shuffle's element size is
the array type's size), which the codecs built from the file already say.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import h5py
import numpy as np
from h5py import h5d

from refzarr.errors import UnsupportedFeatureError
from refzarr.model import ArrayMeta, ChunkManifest, RefArray
from refzarr.scan.hdf5.dims import PhonyDimensions

__all__ = ["unfold_array_type"]


def unfold_array_type(
    ds: h5py.Dataset,
    dtype: np.dtype[Any],
    codecs: Sequence[Mapping[str, Any]],
    chunks: tuple[int, ...],
    manifest: ChunkManifest,
    *,
    attributes: Mapping[str, Any],
    dimension_names: tuple[str, ...],
    phony: PhonyDimensions,
    where: str,
) -> RefArray:
    """The dataset (of sub-array ``dtype``; Zarr ``chunks`` in ``manifest``) with trailing axes.

    Raises `UnsupportedFeatureError` when the fill value differs between the elements of the
    array type (a Zarr fill value is one scalar).
    """
    base, extra = dtype.subdtype  # type: ignore[misc]
    group = ds.name.rpartition("/")[0]
    names = list(dimension_names)
    for length in extra:
        names.append(phony.name(group, length, names))
    meta = ArrayMeta(
        shape=ds.shape + extra,
        chunks=chunks + extra,
        dtype=base,
        fill_value=_fill_value(ds, base, where),
        codecs=codecs,
        attributes=attributes,
        dimension_names=tuple(names),
    )
    return RefArray(meta, _with_trailing_axes(ds, base, manifest, len(extra)))


def _with_trailing_axes(
    ds: h5py.Dataset, base: np.dtype[Any], manifest: ChunkManifest, count: int
) -> ChunkManifest:
    """``manifest`` with ``count`` more axes of one chunk each (chunk numbering unchanged)."""
    grid = manifest.grid_shape + (1,) * count
    if ds.id.get_create_plist().get_layout() == h5d.COMPACT:
        # the whole element's bytes, as h5py reads them (compact data is at most 64 KiB)
        data = np.ascontiguousarray(ds[()], dtype=base).tobytes()
        inlined = {(0,) * len(grid): data} if ds.size else {}
    else:
        tail = (0,) * count
        inlined = {index + tail: data for index, data in manifest.inlined.items()}
    return ChunkManifest.from_arrays(
        manifest.paths,
        manifest.path_id.reshape(grid),
        manifest.offset.reshape(grid),
        manifest.length.reshape(grid),
        inlined,
    )


def _fill_value(ds: h5py.Dataset, base: np.dtype[Any], where: str) -> Any:
    """The one value every element of the array type is filled with, or None (none defined)."""
    if ds.id.get_create_plist().fill_value_defined() != h5d.FILL_VALUE_USER_DEFINED:
        return None
    values = np.asarray(ds.fillvalue).astype(base).ravel()
    if any(v.tobytes() != values[0].tobytes() for v in values):  # bytes: NaN equals NaN
        raise UnsupportedFeatureError(
            f"{where}: the fill value {values.tolist()} differs between the elements of the "
            "array type; Zarr has one scalar fill value"
        )
    return values[0]
