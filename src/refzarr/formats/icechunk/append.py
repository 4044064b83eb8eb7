"""Appending a reference group to arrays already in an Icechunk store, along one dimension:
arrays that have it grow (their new chunks are referenced after the existing ones), the others
must be identical to what the store holds; every check runs before anything is written."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from refzarr.errors import IncompatibleError, UnsupportedFeatureError
from refzarr.model import RefArray, RefGroup
from refzarr.model.frozen import json_identity

__all__ = ["IDENTITY_CHECK_BYTES", "Growth", "plan_append"]

_MEANING = ("units", "calendar", "scale_factor", "add_offset")
"""Attributes that change what stored values mean: equal in the store and the appended data."""

IDENTITY_CHECK_BYTES = 2**24
"""Arrays without the append dimension are compared value by value up to this size; larger
ones by their metadata only (their values would be read from both sides)."""


@dataclass(frozen=True, slots=True)
class Growth:
    """An array that grows: its path, the axis, the chunks already there along it; ``values``
    for an array held whole in the references (a loaded coordinate), written natively."""

    path: str
    array: RefArray
    axis: int
    chunk_offset: int
    new_shape: tuple[int, ...]
    values: np.ndarray[Any, Any] | None = None


def plan_append(
    store: Any,
    arrays: Mapping[str, RefArray],
    append_dim: str,
    storage_options: Mapping[str, Any] | None,
) -> list[Growth]:
    """Check every array of the appended group against the store; what to grow.

    Raises
    ------
    IncompatibleError
        Names the array and what differs (dtype, chunks, codecs, other dimensions, values
        of an array without ``append_dim``, coordinate values already present).
    UnsupportedFeatureError
        When an existing array ends inside a chunk along ``append_dim``: that chunk is
        stored padded, which no chunk grid describes (not even Zarr v3's rectilinear ones).
    """
    import zarr

    from refzarr.combine.gridmap import grid_mapping_paths

    growths = []
    appended: dict[str, np.ndarray[Any, Any]] = {}  # loaded coordinates, in the store's units
    grid_mappings = grid_mapping_paths(arrays.items())
    for path, array in arrays.items():
        try:
            existing = zarr.open_array(store, path=path, mode="r")
        except (FileNotFoundError, KeyError, ValueError) as exc:
            raise IncompatibleError(
                f"array {path!r} is not in the Icechunk store appended to: every array of the "
                f"appended data must be there already ({exc})"
            ) from exc
        names = array.meta.dimension_names or ()
        loaded = append_dim in names and _all_inlined(array)
        rebased = loaded and _rebasable(array, existing)
        check_alike(path, array, existing, loaded, times_rebased=rebased)
        if loaded:
            values = _values(array, path, storage_options)
            if rebased:
                values = _rebased(path, values, array, existing)
            appended[path] = values
            axis = names.index(append_dim)
            growths.append(_loaded_growth(path, array, existing, axis, values))
        elif append_dim in names:
            growths.append(_growth(path, array, existing, names.index(append_dim), append_dim))
        else:
            if path in grid_mappings:
                _check_grid_mapping(path, array, existing)
            _check_identical(path, array, existing, storage_options)
    _check_new_coordinates(store, arrays, append_dim, storage_options, appended)
    return growths


def _check_grid_mapping(path: str, array: RefArray, existing: Any) -> None:
    """A grid mapping (``spatial_ref``, ``crs``) must describe the store's CRS and grid: its
    attributes equal (its value, a scalar 0, says nothing)."""
    from refzarr.combine.gridmap import ADVICE, attributes_difference

    stored = {k: v for k, v in dict(existing.attrs).items() if k != "_FillValue"}
    ours = {k: v for k, v in array.meta.attributes.items() if k != "_FillValue"}
    if json_identity(stored) != json_identity(ours):
        raise IncompatibleError(
            f"grid mapping {path!r} differs between the store (the first) and the appended "
            f"data (the second), so they are not on one CRS and grid: "
            f"{attributes_difference(stored, ours)}; {ADVICE}"
        )


def _rebasable(array: RefArray, existing: Any) -> bool:
    """Whether a loaded coordinate holds CF times in other units than the store's (a stack
    of scenes combined with its own epoch): its values are re-encoded in the store's."""
    from refzarr.combine.cftimes import calendar_of, is_cf_time

    stored, ours = dict(existing.attrs), array.meta.attributes
    return (
        is_cf_time(stored)
        and is_cf_time(ours)
        and str(stored["units"]).strip() != str(ours["units"]).strip()
        and calendar_of(stored) == calendar_of(ours)
    )


def _rebased(
    path: str, values: np.ndarray[Any, Any], array: RefArray, existing: Any
) -> np.ndarray[Any, Any]:
    """The appended times encoded in the store's units, as the store's dtype holds them."""
    from refzarr.combine.cftimes import rebase_times

    stored = dict(existing.attrs)
    rebased = rebase_times(values, array.meta.attributes, stored, existing.dtype)
    if rebased.dtype != existing.dtype:
        raise IncompatibleError(
            f"array {path!r}: the appended times in {array.meta.attributes['units']!r} are "
            f"not whole numbers of the store's {stored['units']!r} ({existing.dtype}): "
            "append data whose times fall on the store's units"
        )
    return rebased


def _all_inlined(array: RefArray) -> bool:
    """Whether every chunk of the array is held in the references (a loaded coordinate)."""
    manifest = array.manifest
    return manifest.nchunks > 0 and len(manifest.inlined) == manifest.nchunks


def _loaded_growth(
    path: str, array: RefArray, existing: Any, axis: int, values: np.ndarray[Any, Any]
) -> Growth:
    shape = tuple(existing.shape)
    grown = tuple(s + (values.shape[k] if k == axis else 0) for k, s in enumerate(shape))
    if any(shape[k] != values.shape[k] for k in range(len(shape)) if k != axis):
        raise IncompatibleError(
            f"array {path!r}: shape {values.shape} does not fit the store's {shape}"
        )
    return Growth(path, array, axis, 0, grown, values)


def check_alike(
    path: str, array: RefArray, existing: Any, loaded: bool, *, times_rebased: bool = False
) -> None:
    """IncompatibleError naming what differs between ``array`` and the stored array
    (dtype, dimension names, meaning attributes but CF time ``units`` when ``times_rebased``;
    unless ``loaded``: chunks and codecs)."""
    meta = array.meta
    found = {
        "dtype": (existing.dtype, meta.dtype.newbyteorder("=")),
        "dimension names": (
            tuple(existing.metadata.dimension_names or ()),
            tuple(meta.dimension_names or ()),
        ),
    }
    if loaded:  # its values are written anew: chunks and codecs may differ
        found["dtype"] = (existing.dtype.kind, meta.dtype.kind)
    else:
        found["chunks"] = (tuple(existing.chunks), meta.chunks)
    for what, (there, here) in found.items():
        if there != here:
            raise IncompatibleError(
                f"array {path!r}: the store has {what} {there}, the appended data {here}"
            )
    for key in _MEANING:
        if times_rebased and key == "units":
            continue
        there, here = existing.attrs.get(key), meta.attributes.get(key)
        if there != here:
            raise IncompatibleError(
                f"array {path!r}: attribute {key!r} is {there!r} in the store and {here!r} in "
                "the appended data: the values would mean different things"
            )
    if loaded:
        return
    stages = [c.to_dict() for c in existing.metadata.codecs]
    codecs = [s.get("configuration", {}) for s in stages if s.get("name") == "refzarr.numcodecs"]
    # a codec's tuples (a predictor's chunk shape) come back from the store as lists
    if [json_identity(c) for c in codecs] != [json_identity(c) for c in meta.codecs]:
        raise IncompatibleError(
            f"array {path!r}: the store's codecs {codecs} differ from the appended data's "
            f"{[dict(c) for c in meta.codecs]}"
        )


def _growth(path: str, array: RefArray, existing: Any, axis: int, dim: str) -> Growth:
    shape, new = tuple(existing.shape), array.meta.shape
    others = [k for k in range(len(shape)) if k != axis]
    if any(shape[k] != new[k] for k in others):
        names = array.meta.dimension_names or tuple(f"dim_{k}" for k in range(len(new)))
        differ = ", ".join(repr(names[k]) for k in others if shape[k] != new[k])
        raise IncompatibleError(
            f"array {path!r}: shape {new} does not fit the store's {shape} apart from {dim!r}: "
            f"it differs along {differ} (dimensions {', '.join(names)}); only {dim!r} may "
            "differ between the store and the appended data"
        )
    chunk = array.meta.chunks[axis]
    if shape[axis] % chunk:
        raise UnsupportedFeatureError(
            f"array {path!r}: the store's {shape[axis]} values along {dim!r} end inside a "
            f"chunk of {chunk}, which the source stores padded to {chunk} values: no stored "
            f"chunk grid can say that only {shape[axis] % chunk} of them are data (Zarr v3's "
            "rectilinear grids, Icechunk 2.x's included, give a chunk one length; nor can "
            f"JSON or Parquet references). Rechunk the sources along {dim!r}, or start a new "
            "repository from here"
        )
    grown = tuple(shape[k] + new[k] if k == axis else shape[k] for k in range(len(shape)))
    return Growth(path, array, axis, shape[axis] // chunk, grown)


def _check_identical(
    path: str, array: RefArray, existing: Any, storage_options: Mapping[str, Any] | None
) -> None:
    if tuple(existing.shape) != array.meta.shape:
        raise IncompatibleError(
            f"array {path!r} has no append dimension and must be identical, but its shape "
            f"{array.meta.shape} differs from the store's {tuple(existing.shape)}"
        )
    if array.meta.dtype.itemsize * int(np.prod(array.meta.shape)) > IDENTITY_CHECK_BYTES:
        return
    ours = _values(array, path, storage_options)
    theirs = np.asarray(existing[...])
    if not np.array_equal(ours, theirs, equal_nan=ours.dtype.kind in "fc"):
        raise IncompatibleError(
            f"array {path!r} has no append dimension and must be identical, but its values "
            "differ from the store's"
        )


def _check_new_coordinates(
    store: Any,
    arrays: Mapping[str, RefArray],
    append_dim: str,
    storage_options: Mapping[str, Any] | None,
    appended: Mapping[str, np.ndarray[Any, Any]],
) -> None:
    """The appended coordinate values of ``append_dim`` (``appended``'s when loaded, in the
    store's units) must not repeat stored ones."""
    import zarr

    coordinate = arrays.get(append_dim)
    if coordinate is None or coordinate.meta.ndim != 1:
        return
    stored = np.asarray(zarr.open_array(store, path=append_dim, mode="r")[...])
    new = appended.get(append_dim)
    if new is None:
        new = _values(coordinate, append_dim, storage_options)
    repeated = np.intersect1d(stored, new)
    if repeated.size:
        raise IncompatibleError(
            f"duplicate coordinate values along {append_dim!r}: the store already holds "
            f"{repeated[:3].tolist()} ({repeated.size} in all); leave those files out"
        )


def _values(array: RefArray, path: str, storage_options: Mapping[str, Any] | None) -> Any:
    from refzarr.combine.values import read_values

    return read_values([array], lambda _: path, storage_options)[0]


def flat_arrays(group: RefGroup, prefix: str = "") -> dict[str, RefArray]:
    """Every array of ``group`` by its path below ``prefix``."""
    out: dict[str, RefArray] = {}
    for name, member in group.members.items():
        path = f"{prefix}/{name}" if prefix else name
        if isinstance(member, RefGroup):
            out.update(flat_arrays(member, path))
        else:
            out[path] = member
    return out
