"""HDF-EOS2 grids: 1-D coordinates computed from ``StructMetadata.0``.

An HDF-EOS2 grid is regular in its projection's plane: ``XDim`` x ``YDim`` cells between the
corners ``UpperLeftPointMtrs`` and ``LowerRightMtrs`` (metres, or packed degrees
``DDDMMMSSS.SS`` for ``GCTP_GEO``). Its SDS name their dimensions ``XDim:<grid>`` and
``YDim:<grid>``; the coordinates get those names, cell centres (or corners, with
``PixelRegistration=HDFE_CORNER``), in the row and column order ``GridOrigin`` gives.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from refzarr.model import ArrayMeta, ChunkManifest, RefArray, RefGroup

__all__ = ["EosGrid", "grid_coordinates", "parse_grids"]

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
            )
        )
    return grids


def packed_degrees(value: float) -> float:
    """Decimal degrees of a GCTP packed ``DDDMMMSSS.SS`` angle."""
    sign = -1.0 if value < 0 else 1.0
    value = abs(value)
    degrees = int(value // 1_000_000)
    minutes = int((value - degrees * 1_000_000) // 1_000)
    seconds = value - degrees * 1_000_000 - minutes * 1_000
    return sign * (degrees + minutes / 60 + seconds / 3600)


def _axis(start: float, stop: float, count: int, centre: bool) -> np.ndarray[Any, Any]:
    step = (stop - start) / count
    return start + (np.arange(count, dtype="f8") + (0.5 if centre else 0.0)) * step


def axes(grid: EosGrid) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]:
    """The x and y coordinates of a grid's columns and rows."""
    (left, top), (right, bottom) = grid.upper_left, grid.lower_right
    if grid.projection == "GCTP_GEO":
        left, top, right, bottom = (packed_degrees(v) for v in (left, top, right, bottom))
    centre = grid.registration != "HDFE_CORNER"
    origin = grid.origin.upper()
    x_from, x_to = (right, left) if origin.endswith(("UR", "LR")) else (left, right)
    y_from, y_to = (bottom, top) if origin.endswith(("LL", "LR")) else (top, bottom)
    return _axis(x_from, x_to, grid.xdim, centre), _axis(y_from, y_to, grid.ydim, centre)


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
