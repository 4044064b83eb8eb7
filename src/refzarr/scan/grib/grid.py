"""The grid of a GRIB field as cfgrib shapes it: dimension names, shape, latitude/longitude
(computed once per grid by ecCodes) and the grid's keys as attributes."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from refzarr.codecs.grib import row_order
from refzarr.codecs.grib_eccodes import load_eccodes
from refzarr.scan.grib.fields import read_key

__all__ = ["Grid", "grid_of"]

REGULAR = frozenset({"regular_ll", "regular_gg"})
"""Grids with 1-D ``latitude`` / ``longitude`` dimension coordinates."""
PROJECTED = frozenset(
    {
        "rotated_ll",
        "rotated_gg",
        "lambert",
        "lambert_azimuthal_equal_area",
        "albers",
        "polar_stereographic",
    }
)
"""Grids cfgrib shapes ``(y, x)`` with 2-D latitude and longitude."""

GRID_KEYS = {
    "regular_ll": (
        "Nx", "iDirectionIncrementInDegrees", "iScansNegatively",
        "longitudeOfFirstGridPointInDegrees", "longitudeOfLastGridPointInDegrees", "Ny",
        "jDirectionIncrementInDegrees", "jPointsAreConsecutive", "jScansPositively",
        "latitudeOfFirstGridPointInDegrees", "latitudeOfLastGridPointInDegrees",
    ),
    "rotated_ll": (
        "Nx", "Ny", "angleOfRotationInDegrees", "iDirectionIncrementInDegrees",
        "iScansNegatively", "jDirectionIncrementInDegrees", "jPointsAreConsecutive",
        "jScansPositively", "latitudeOfFirstGridPointInDegrees",
        "latitudeOfLastGridPointInDegrees", "latitudeOfSouthernPoleInDegrees",
        "longitudeOfFirstGridPointInDegrees", "longitudeOfLastGridPointInDegrees",
        "longitudeOfSouthernPoleInDegrees",
    ),
    "regular_gg": (
        "N", "Ni", "Nj", "iDirectionIncrementInDegrees", "iScansNegatively",
        "jScansPositively", "jPointsAreConsecutive", "longitudeOfFirstGridPointInDegrees",
        "longitudeOfLastGridPointInDegrees", "latitudeOfFirstGridPointInDegrees",
        "latitudeOfLastGridPointInDegrees",
    ),
    "lambert": (
        "LaDInDegrees", "LoVInDegrees", "iScansNegatively", "jPointsAreConsecutive",
        "jScansPositively", "latitudeOfFirstGridPointInDegrees",
        "latitudeOfSouthernPoleInDegrees", "longitudeOfFirstGridPointInDegrees",
        "longitudeOfSouthernPoleInDegrees", "DyInMetres", "DxInMetres", "Latin2InDegrees",
        "Latin1InDegrees", "Ny", "Nx",
    ),
    "reduced_gg": ("N", "pl"),
    "sh": ("M", "K", "J"),
}  # fmt: skip
"""Keys of each grid type kept as ``GRIB_<key>`` attributes (those cfgrib keeps)."""

LATITUDE = {"units": "degrees_north", "standard_name": "latitude", "long_name": "latitude"}
LONGITUDE = {"units": "degrees_east", "standard_name": "longitude", "long_name": "longitude"}


@dataclass(frozen=True, slots=True)
class Grid:
    """A grid: its type, dimensions, shape, coordinates and attributes.

    ``latitude`` / ``longitude`` are None when ecCodes cannot compute them (spherical
    harmonics, some NCEP grids); ``rows`` is ``(Ny, Nx)`` when alternate rows scan in
    opposite directions, ``columns`` when points are stored column by column (the codec's
    options of the same names).
    """

    grid_type: str
    dims: tuple[str, ...]
    shape: tuple[int, ...]
    latitude: np.ndarray[Any, Any] | None
    longitude: np.ndarray[Any, Any] | None
    attributes: dict[str, Any] = field(default_factory=dict)
    rows: tuple[int, int] | None = None
    columns: tuple[int, int] | None = None


def grid_of(handle: Any) -> Grid:
    """The grid of the field ecCodes opened as ``handle`` (coordinates computed now)."""
    grid_type = read_key(handle, "gridType") or "unknown"
    attributes = _grid_attributes(handle, grid_type)
    if grid_type in REGULAR or grid_type in PROJECTED:
        shape = _ny_nx(handle)
        _check_points(handle, grid_type, *shape)
        rows = shape if read_key(handle, "alternativeRowScanning", int) else None
        columns = shape if read_key(handle, "jPointsAreConsecutive", int) else None
        lat, lon = (_points(handle, key, shape, columns) for key in ("latitudes", "longitudes"))
        if grid_type in PROJECTED:
            return Grid(grid_type, ("y", "x"), shape, lat, lon, attributes, rows, columns)
        # each point's coordinates, not ecCodes' distinctLatitudes / distinctLongitudes: those
        # are sorted, so they are not the order of the points when i scans negatively or the
        # longitudes wrap past 360 (cfgrib labels such fields wrongly)
        lat = None if lat is None else np.ascontiguousarray(lat[:, 0])
        lon = None if lon is None else np.ascontiguousarray(lon[0, :])
        dims = ("latitude", "longitude")
        return Grid(grid_type, dims, shape, lat, lon, attributes, rows, columns)
    points = int(read_key(handle, "numberOfPoints", int))
    lat, lon = _array(handle, "latitudes"), _array(handle, "longitudes")
    if lat is None or lon is None or lat.size != points or lon.size != points:
        lat = lon = None
    return Grid(grid_type, ("values",), (points,), lat, lon, attributes)


def _check_points(handle: Any, grid_type: str, ny: int, nx: int) -> None:
    """Raise ValueError when the grid's shape does not hold its number of points (a corrupt or
    badly written grid: its values could not be shaped, its coordinates not computed)."""
    points = read_key(handle, "numberOfDataPoints", int)
    if points is not None and int(points) != ny * nx:
        raise ValueError(
            f"its {grid_type} grid of Ny x Nx = {ny} x {nx} = {ny * nx} points does not hold "
            f"its numberOfDataPoints {int(points)}: the grid description is inconsistent "
            "(ecCodes and cfgrib cannot shape it either); fix Ni / Nj or leave the message out"
        )


def _points(
    handle: Any, key: str, shape: tuple[int, int], columns: tuple[int, int] | None
) -> np.ndarray[Any, Any] | None:
    """Each point's latitude or longitude in the grid's ``(Ny, Nx)`` order. ecCodes gives
    them in stored order (column by column for ``jPointsAreConsecutive``), and lays
    alternate rows out in one direction, as the codec leaves the values (`row_order`)."""
    values = _array(handle, key)
    if values is None or values.size != shape[0] * shape[1]:
        return None
    return np.asarray(row_order(values, None, columns)).reshape(shape)


def _ny_nx(handle: Any) -> tuple[int, int]:
    return int(read_key(handle, "Ny", int)), int(read_key(handle, "Nx", int))


def _array(handle: Any, key: str) -> np.ndarray[Any, Any] | None:
    eccodes = load_eccodes()
    try:
        return np.asarray(eccodes.codes_get_double_array(handle, key), dtype=np.float64)
    except eccodes.GribInternalError:  # not defined, or not computable for this grid
        return None


def _grid_attributes(handle: Any, grid_type: str) -> dict[str, Any]:
    eccodes = load_eccodes()
    out: dict[str, Any] = {}
    for key in GRID_KEYS.get(grid_type, ()):
        try:
            if eccodes.codes_get_size(handle, key) > 1:
                out[f"GRIB_{key}"] = eccodes.codes_get_array(handle, key).tolist()
            else:
                out[f"GRIB_{key}"] = _plain(eccodes.codes_get(handle, key))
        except eccodes.GribInternalError:
            continue
    return out


def _plain(value: Any) -> Any:
    """A key's value as a JSON value (numpy scalars unwrapped)."""
    return value.item() if isinstance(value, np.generic) else value
