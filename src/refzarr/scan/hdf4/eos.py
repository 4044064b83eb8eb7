"""HDF-EOS2 grids: 1-D coordinates and the grid mapping computed from ``StructMetadata.0``.

An HDF-EOS2 grid is regular in its projection's plane: ``XDim`` x ``YDim`` cells between the
corners ``UpperLeftPointMtrs`` and ``LowerRightMtrs`` (metres, or packed degrees
``DDDMMMSSS.SS`` for ``GCTP_GEO``). Its SDS name their dimensions ``XDim:<grid>`` and
``YDim:<grid>``; the coordinates get those names, cell centres (or corners, with
``PixelRegistration=HDFE_CORNER``), in the row and column order ``GridOrigin`` gives.
Where refzarr can express the grid's projection (`gctp`), a 0-d ``spatial_ref`` array holds
its CRS and ``GeoTransform`` as rioxarray writes them, and the grid's SDS name it in
``grid_mapping``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from refzarr.model import ArrayMeta, ChunkManifest, RefArray, RefGroup
from refzarr.scan.hdf4.gctp import crs_attributes, grid_mapping, packed_degrees

__all__ = [
    "EosGrid",
    "axes",
    "geotransform",
    "grid_coordinates",
    "grid_mappings",
    "packed_degrees",
    "parse_grids",
]

_GRID = re.compile(r"GROUP=GRID_\d+\s*\n(.*?)END_GROUP=GRID_\d+", re.S)
_VALUE = r"^\s*{}=(.*?)\s*$"


@dataclass(frozen=True, slots=True)
class EosGrid:
    """What ``StructMetadata.0`` says of one grid."""

    name: str
    xdim: int
    ydim: int
    upper_left: tuple[float, float]
    lower_right: tuple[float, float]
    projection: str
    origin: str
    registration: str
    params: tuple[float, ...] = ()
    sphere_code: int | None = None
    zone: int | None = None


def _field(block: str, name: str) -> str | None:
    found = re.search(_VALUE.format(re.escape(name)), block, re.M)
    return found.group(1).strip().strip('"') if found else None


def _pair(text: str | None) -> tuple[float, float] | None:
    if text is None:
        return None
    parts = text.strip("()").split(",")
    if len(parts) != 2:
        return None
    try:
        return float(parts[0]), float(parts[1])
    except ValueError:
        return None


def _params(text: str | None) -> tuple[float, ...]:
    """``ProjParams`` padded with zeros to GCTP's 15 values (empty when absent or
    unreadable)."""
    if text is None:
        return ()
    try:
        values = [float(v) for v in text.strip("()").split(",") if v.strip()]
    except ValueError:
        return ()
    return tuple(values + [0.0] * (15 - len(values)))


def _code(text: str | None) -> int | None:
    try:
        return None if text is None else int(text)
    except ValueError:
        return None


def parse_grids(struct_metadata: str) -> list[EosGrid]:
    """The grids of an HDF-EOS2 ``StructMetadata.0`` text (those with usable corners)."""
    grids = []
    for block in _GRID.findall(struct_metadata):
        header = block.split("GROUP=Dimension")[0]
        name, xdim, ydim = (_field(header, k) for k in ("GridName", "XDim", "YDim"))
        upper_left = _pair(_field(header, "UpperLeftPointMtrs"))
        lower_right = _pair(_field(header, "LowerRightMtrs"))
        if not (name and xdim and ydim and upper_left and lower_right):
            continue
        if not (xdim.isdigit() and ydim.isdigit()):
            continue
        grids.append(
            EosGrid(
                name,
                int(xdim),
                int(ydim),
                upper_left,
                lower_right,
                _field(header, "Projection") or "",
                _field(header, "GridOrigin") or "HDFE_GD_UL",
                _field(header, "PixelRegistration") or "HDFE_CENTER",
                _params(_field(header, "ProjParams")),
                _code(_field(header, "SphereCode")),
                _code(_field(header, "ZoneCode")),
            )
        )
    return grids


def _axis(start: float, stop: float, count: int, centre: bool) -> np.ndarray[Any, Any]:
    step = (stop - start) / count
    return start + (np.arange(count, dtype="f8") + (0.5 if centre else 0.0)) * step


def _extent(grid: EosGrid) -> tuple[float, float, float, float]:
    """(x of the first column's edge, x of the last's far edge, the same for rows), in the
    order ``GridOrigin`` gives; degrees for ``GCTP_GEO``."""
    (left, top), (right, bottom) = grid.upper_left, grid.lower_right
    if grid.projection == "GCTP_GEO":
        left, top, right, bottom = (packed_degrees(v) for v in (left, top, right, bottom))
    origin = grid.origin.upper()
    x_from, x_to = (right, left) if origin.endswith(("UR", "LR")) else (left, right)
    y_from, y_to = (bottom, top) if origin.endswith(("LL", "LR")) else (top, bottom)
    return x_from, x_to, y_from, y_to


def axes(grid: EosGrid) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]:
    """The x and y coordinates of a grid's columns and rows."""
    x_from, x_to, y_from, y_to = _extent(grid)
    centre = grid.registration != "HDFE_CORNER"
    return _axis(x_from, x_to, grid.xdim, centre), _axis(y_from, y_to, grid.ydim, centre)


def geotransform(grid: EosGrid) -> tuple[float, float, float, float, float, float]:
    """GDAL's GeoTransform of a grid: the outer corner of its first cell and the cell size
    (negative along y for the usual ``HDFE_GD_UL`` origin). Its cell centres are the `axes`
    values: with ``HDFE_CORNER`` registration, where the values stand, half a cell inside."""
    x_from, x_to, y_from, y_to = _extent(grid)
    dx, dy = (x_to - x_from) / grid.xdim, (y_to - y_from) / grid.ydim
    shift = 0.5 if grid.registration == "HDFE_CORNER" else 0.0
    return (x_from - shift * dx, dx, 0.0, y_from - shift * dy, 0.0, dy)


def _coordinate(values: np.ndarray[Any, Any], dim: str, attrs: dict[str, Any]) -> RefArray:
    meta = ArrayMeta(
        shape=values.shape,
        chunks=values.shape,
        dtype=np.dtype("<f8"),
        attributes=attrs,
        dimension_names=(dim,),
    )
    return RefArray(meta, ChunkManifest.one_inlined(values.astype("<f8").tobytes()))


def grid_coordinates(
    attributes: Mapping[str, Any], members: Mapping[str, RefArray | RefGroup], url: str
) -> dict[str, RefArray]:
    """Coordinate arrays (computed, held in the reference set) for the grid dimensions
    ``XDim:<grid>`` / ``YDim:<grid>`` the file's SDS use."""
    text = attributes.get("StructMetadata.0")
    if not isinstance(text, str):
        return {}
    used = {
        dim
        for member in members.values()
        if isinstance(member, RefArray)
        for dim in member.meta.dimension_names or ()
    }
    out: dict[str, RefArray] = {}
    for grid in parse_grids(text):
        x, y = axes(grid)
        geographic = grid.projection == "GCTP_GEO"
        for axis, values in (("X", x), ("Y", y)):
            dim = f"{axis}Dim:{grid.name}"
            if dim not in used or dim in members:
                continue
            out[dim] = _coordinate(values, dim, _attrs(axis, geographic, grid))
    return out


def _attrs(axis: str, geographic: bool, grid: EosGrid) -> dict[str, Any]:
    if geographic:
        name, units = (
            ("longitude", "degrees_east") if axis == "X" else ("latitude", "degrees_north")
        )
    else:
        name, units = f"projection_{axis.lower()}_coordinate", "m"
    return {
        "standard_name": name,
        "units": units,
        "hdfeos_grid": grid.name,
        "hdfeos_projection": grid.projection,
    }


def grid_mappings(
    attributes: Mapping[str, Any], members: Mapping[str, RefArray | RefGroup]
) -> dict[str, RefArray]:
    """The ``spatial_ref`` arrays of the grids whose projection refzarr can express, and the
    grid's SDS (those with its ``YDim`` and ``XDim``) given ``grid_mapping`` and
    ``coordinates`` naming it, to replace them. One grid used: ``spatial_ref``; several:
    ``spatial_ref:<grid>`` each (every grid has its own GeoTransform)."""
    text = attributes.get("StructMetadata.0")
    if not isinstance(text, str):
        return {}
    found = []
    for grid in parse_grids(text):
        fields = _fields_on(grid, members)
        cf = grid_mapping(grid.projection, grid.params, grid.sphere_code, grid.zone)
        if fields and cf is not None:
            found.append((grid, fields, cf))
    out: dict[str, RefArray] = {}
    for grid, fields, cf in found:
        name = "spatial_ref" if len(found) == 1 else f"spatial_ref:{grid.name}"
        if name in members:
            continue  # an SDS of that name: no mapping rather than a wrong one
        out[name] = _scalar(_spatial_ref(grid, cf))
        out.update({k: _with_mapping(members[k], name) for k in fields})
    return out


def _fields_on(grid: EosGrid, members: Mapping[str, RefArray | RefGroup]) -> list[str]:
    """The SDS on a grid's y and x dimensions, that do not name a grid mapping already."""
    x, y = f"XDim:{grid.name}", f"YDim:{grid.name}"
    return [
        name
        for name, member in members.items()
        if isinstance(member, RefArray)
        and {x, y} <= set(member.meta.dimension_names or ())
        and "grid_mapping" not in member.meta.attributes
    ]


def _spatial_ref(grid: EosGrid, cf: dict[str, Any]) -> dict[str, Any]:
    attrs = crs_attributes(cf)
    attrs["GeoTransform"] = " ".join(str(float(v)) for v in geotransform(grid))
    return attrs


def _with_mapping(array: RefArray | RefGroup, name: str) -> RefArray:
    assert isinstance(array, RefArray)
    attrs = dict(array.meta.attributes)
    attrs["grid_mapping"] = name
    coordinates = attrs.get("coordinates")
    if coordinates is None:  # a coordinate, as rioxarray needs it and writes it
        attrs["coordinates"] = name
    elif isinstance(coordinates, str) and name not in coordinates.split():
        attrs["coordinates"] = f"{coordinates} {name}"
    return RefArray(replace(array.meta, attributes=attrs), array.manifest)


def _scalar(attrs: dict[str, Any]) -> RefArray:
    """A 0-d int64 array held in the reference set (rioxarray's ``spatial_ref`` is 0)."""
    meta = ArrayMeta(
        shape=(), chunks=(), dtype=np.dtype("<i8"), attributes=attrs, dimension_names=()
    )
    return RefArray(meta, ChunkManifest.one_inlined(np.int64(0).tobytes(), ndim=0))
