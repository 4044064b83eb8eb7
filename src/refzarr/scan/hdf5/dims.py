"""Dimension names of HDF5 datasets: attached dimension scales, netCDF dimensions, phony names.

A dimension is named by its scale's own name, never path-qualified (a scale in a parent group
is named by its short name, as netCDF does). A variable netCDF stored as ``_nc4_non_coord_<x>``
(its name is also a dimension's, but it is not that dimension's coordinate) is named ``<x>``.
A scale attached to several axes names each of them (netCDF allows a dimension twice in one
variable). The axes of a netCDF coordinate variable of several dimensions (a scale itself, so
HDF5 attaches nothing to it) are named by its ``_Netcdf4Coordinates`` dimension ids. An axis
without a scale gets a phony name, ``phony_dim_<n>``, like netCDF-C and h5netcdf: within a
group, one per distinct length, but never the same one twice in one dataset; ``n`` counts
across the file.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import h5py
import numpy as np
from h5py import h5ds

from refzarr.scan.hdf5.attrs import AttributeTable
from refzarr.scan.hdf5.names import NotText
from refzarr.scan.hdf5.scale_names import UNKNOWN, ScaleNames

__all__ = [
    "NETCDF_DIMENSION_ONLY",
    "NetcdfDimensionIds",
    "PhonyDimensions",
    "dimension_names",
    "is_dimension_only",
    "variable_name",
]

NETCDF_DIMENSION_ONLY = b"This is a netCDF dimension but not a netCDF variable"
"""Start of the ``NAME`` attribute netCDF-C gives a dimension that has no coordinate variable."""

_NON_COORD_PREFIX = "_nc4_non_coord_"


@dataclass
class PhonyDimensions:
    """Phony dimension names handed out so far in one file, per group."""

    by_group: dict[str, list[tuple[str, int]]] = field(default_factory=dict)
    count: int = 0

    def name(self, group: str, length: int, taken: list[str]) -> str:
        """A phony name for an axis of ``length`` in ``group``, not one of ``taken``."""
        known = self.by_group.setdefault(group, [])
        for name, size in known:
            if size == length and name not in taken:
                return name
        name = f"phony_dim_{self.count}"
        self.count += 1
        known.append((name, length))
        return name


@dataclass
class NetcdfDimensionIds:
    """The netCDF dimensions each group of one file sees (`_netcdf_dimensions`), listed once
    per group: listing a group costs a lookup and an attribute read per member, and a group
    can hold many coordinate variables of several dimensions."""

    by_group: dict[str, dict[int, str | bytes]] = field(default_factory=dict)

    def of(self, ds: h5py.Dataset) -> dict[int, str | bytes]:
        """``{dimension id: name}`` seen from the group of ``ds`` (not to be modified)."""
        path = ds.name.rpartition("/")[0] or "/"  # the name `h5py.Dataset.parent` opens
        known = self.by_group.get(path)
        if known is None:
            known = self.by_group[path] = _netcdf_dimensions(ds.parent)
        return known


def is_dimension_only(ds: h5py.Dataset, attrs: AttributeTable | None = None) -> bool:
    """Whether a dataset is a netCDF dimension without a variable (not an array to show).

    ``attrs``: its attributes, when already read.
    """
    try:
        if attrs is not None and not attrs.is_read("NAME") and _too_short(attrs):
            return False  # the NAME of a coordinate variable, say: no need to read it
        value = (ds.attrs if attrs is None else attrs).get("NAME")
    except (OSError, TypeError):
        return False
    return isinstance(value, bytes) and value.startswith(NETCDF_DIMENSION_ONLY)


def _too_short(attrs: AttributeTable) -> bool:
    """Whether ``NAME`` is absent or too short to be netCDF's text for a dimension only
    (False when unsure: HDF5 reports no size for an empty value)."""
    if "NAME" not in attrs:
        return True
    try:
        return attrs.storage_size("NAME") < len(NETCDF_DIMENSION_ONLY)
    except (OSError, RuntimeError, KeyError):
        return False


def short_name(path: str) -> str:
    """A dataset's name without its group path."""
    return path.rpartition("/")[2]


def variable_name(name: str, group: h5py.Group) -> str:
    """The netCDF variable name of a link: ``_nc4_non_coord_x`` is ``x`` unless ``x`` is a
    variable too (then the link's own name is kept)."""
    stripped = name.removeprefix(_NON_COORD_PREFIX)
    if stripped == name:
        return name
    other = group.get(stripped)
    return stripped if other is None or is_dimension_only(other) else name


def dimension_names(
    ds: h5py.Dataset,
    phony: PhonyDimensions,
    attrs: AttributeTable | None = None,
    scales: ScaleNames | None = None,
    dimids: NetcdfDimensionIds | None = None,
) -> tuple[str, ...]:
    """One name per axis of ``ds`` (empty for a scalar); ``attrs``: its attributes, when
    already read; ``scales``: the file's scale names found without HDF5, when at hand;
    ``dimids``: the netCDF dimension ids of the file's groups listed so far, when kept."""
    names: list[str] = []
    phonies: list[str] = []
    own_scale = h5ds.is_scale(ds.id) if attrs is None else attrs.dimension_scale()
    multi = own_scale and ds.ndim > 1
    netcdf = _netcdf_dimension_names(ds, attrs, dimids) if multi else None
    path = ds.name
    group = path.rpartition("/")[0]
    for axis, length in enumerate(ds.shape):
        if own_scale and axis == 0:
            name: str | None = short_name(path)
        elif netcdf is not None:
            name = netcdf[axis]
        else:
            name = UNKNOWN if scales is None or own_scale else scales.first_scale(ds, axis)
            if name is UNKNOWN:
                name = _scale_name(ds, axis)
        if name is None or name in phonies:
            name = phony.name(group, length, names)
            phonies.append(name)
        names.append(name)
    return tuple(names)


def _scale_name(ds: h5py.Dataset, axis: int) -> str | None:
    if h5ds.get_num_scales(ds.id, axis) == 0:
        return None
    found: list[bytes] = []

    def first(scale: h5py.h5d.DatasetID) -> int:
        found.append(h5py.h5i.get_name(scale))  # decoded outside: h5py's callback hides errors
        return 1  # stop at the first scale, as netCDF does

    h5ds.iterate(ds.id, axis, first)
    if not found:
        return None
    name = found[0].rpartition(b"/")[2]
    try:
        return name.decode("utf-8")
    except UnicodeDecodeError:
        raise NotText("dimension scale", name) from None


def _netcdf_dimension_names(
    ds: h5py.Dataset, attrs: AttributeTable | None, dimids: NetcdfDimensionIds | None
) -> list[str | None] | None:
    """The names of the dimensions netCDF's ``_Netcdf4Coordinates`` lists for ``ds`` (None
    where an id is not a dimension of its group or an enclosing one), or None without them."""
    try:
        ids = (ds.attrs if attrs is None else attrs).get("_Netcdf4Coordinates")
    except (OSError, TypeError):
        return None
    if ids is None or np.size(ids) != ds.ndim:
        return None
    known = _netcdf_dimensions(ds.parent) if dimids is None else dimids.of(ds)
    names: list[str | None] = []
    for dimid in np.ravel(ids):
        name = known.get(int(dimid))
        if isinstance(name, bytes):  # h5py lists a name that is not UTF-8 as bytes
            raise NotText("dimension scale", name)
        names.append(name)
    return names


def _netcdf_dimensions(group: h5py.Group) -> dict[int, str | bytes]:
    """``{dimension id: name}`` of the dimension scales in ``group`` and the groups above it
    (an inner group's dimension hides an outer one of the same id; a name that is not UTF-8
    as bytes)."""
    found: dict[int, str | bytes] = {}
    while True:
        for name in group:
            dimid = _dimension_id(group, name)
            if dimid is not None:
                found.setdefault(dimid, name)
        if group.name == "/":
            return found
        group = group.parent


def _dimension_id(group: h5py.Group, name: str) -> int | None:
    """The ``_Netcdf4Dimid`` of a dimension scale, or None (not a scale, no id, unreadable)."""
    try:
        item = group.get(name)
        if not isinstance(item, h5py.Dataset) or not h5ds.is_scale(item.id):
            return None
        dimid = item.attrs.get("_Netcdf4Dimid")
    except (KeyError, OSError, TypeError):  # a broken link, an unreadable attribute
        return None
    return None if dimid is None else int(dimid)
