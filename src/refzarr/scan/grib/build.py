"""A hypercube of GRIB fields as a group: the data array (one chunk per field, decoded by
the ``refzarr.grib`` codec) and its coordinates, CF-encoded as cfgrib names them."""

from __future__ import annotations

from typing import Any

import numpy as np
from numcodecs import Shuffle, Zstd

from refzarr.model import ArrayMeta, ChunkManifest, RefArray, RefGroup
from refzarr.scan.grib.cube import Cube
from refzarr.scan.grib.grid import LATITUDE, LONGITUDE, Grid

__all__ = ["cube_group", "grid_coordinates"]

TIME_UNITS = "seconds since 1970-01-01T00:00:00"

LEVEL_ATTRIBUTES: dict[str, dict[str, str]] = {
    "depthBelowLand": {"units": "m", "positive": "down", "long_name": "soil depth",
                       "standard_name": "depth"},
    "depthBelowLandLayer": {"units": "m", "positive": "down", "long_name": "soil depth",
                            "standard_name": "depth"},
    "hybrid": {"units": "1", "positive": "down", "long_name": "hybrid level",
               "standard_name": "atmosphere_hybrid_sigma_pressure_coordinate"},
    "heightAboveGround": {"units": "m", "positive": "up", "long_name": "height above the surface",
                          "standard_name": "height"},
    "isobaricInhPa": {"units": "hPa", "positive": "down", "stored_direction": "decreasing",
                      "standard_name": "air_pressure", "long_name": "pressure"},
    "isobaricInPa": {"units": "Pa", "positive": "down", "stored_direction": "decreasing",
                     "standard_name": "air_pressure", "long_name": "pressure"},
    "isobaricLayer": {"units": "Pa", "positive": "down", "standard_name": "air_pressure",
                      "long_name": "pressure"},
}  # fmt: skip
"""CF attributes of the level coordinates cfgrib describes (others get a generic name)."""

COMPRESS_ABOVE = 1 << 16
"""Inlined latitude / longitude of more bytes than this are stored compressed."""


def cube_group(
    cube: Cube, grid: Grid, url: str, codec: dict[str, Any], coordinates: dict[str, RefArray]
) -> RefGroup:
    """The group of one hypercube: its data array and coordinate arrays (``coordinates``:
    the grid's, from `grid_coordinates`, made once per grid)."""
    numbers = sorted({c[0] for c in cube.cells}, key=lambda n: -1 if n is None else n)
    times = sorted({c[1] for c in cube.cells})
    steps = sorted({c[2] for c in cube.cells})
    levels = sorted({c[3] for c in cube.cells})
    if LEVEL_ATTRIBUTES.get(cube.level_type, {}).get("stored_direction") == "decreasing":
        levels = levels[::-1]
    header: list[tuple[str, list[Any]]] = []
    if len(numbers) > 1:
        header.append(("number", numbers))
    header += [("time", times), ("step", steps)]
    if len(levels) > 1:
        header.append((cube.level_type, levels))
    members: dict[str, RefArray] = {}
    members[cube.name] = _data_array(cube, grid, url, codec, header)
    members.update(_header_coordinates(cube, numbers, times, steps, levels))
    members.update(coordinates)
    return RefGroup(cube.group_attributes, members)


def _data_array(
    cube: Cube, grid: Grid, url: str, codec: dict[str, Any], header: list[tuple[str, list[Any]]]
) -> RefArray:
    positions = [{value: k for k, value in enumerate(values)} for _, values in header]
    slots = {"number": 0, "time": 1, "step": 2}
    axes = [slots.get(name, 3) for name, _ in header]
    cells = list(cube.cells)
    coords = np.array(
        [[positions[a][cell[axes[a]]] for a in range(len(header))] for cell in cells],
        dtype=np.int64,
    ).reshape(len(cells), len(header))
    order = [cube.cells[cell] for cell in cells]
    offsets = np.asarray(cube.offsets, dtype=np.uint64)[order]
    lengths = np.asarray(cube.lengths, dtype=np.uint64)[order]
    grid_axes = (1,) * len(grid.shape)
    shape = tuple(len(values) for _, values in header)
    inlined = {
        tuple(coords[row].tolist()) + (0,) * len(grid.shape): cube.inlined[field]
        for row, field in enumerate(order)
        if field in cube.inlined
    }
    keep = np.array([field not in cube.inlined for field in order], dtype=bool)
    manifest = ChunkManifest.from_entries(
        shape + grid_axes,
        np.hstack([coords, np.zeros((len(cells), len(grid.shape)), np.int64)])[keep],
        [url],
        np.zeros(int(keep.sum()), np.int64),
        offsets[keep],
        lengths[keep],
        inlined,
        where=f"{url}: {cube.name}",
    )
    dims = tuple(name for name, _ in header) + grid.dims
    attributes = dict(cube.attributes)
    attributes.update(grid.attributes)
    attributes["coordinates"] = " ".join(_coordinate_names(cube, header, grid))
    meta = ArrayMeta(
        shape=shape + grid.shape,
        chunks=(1,) * len(shape) + grid.shape,
        dtype=np.dtype("float32"),
        fill_value=np.float32("nan"),
        codecs=(codec,),
        attributes=attributes,
        dimension_names=dims,
    )
    return RefArray(meta, manifest)


def _coordinate_names(cube: Cube, header: list[tuple[str, list[Any]]], grid: Grid) -> list[str]:
    names = [] if cube.cells and next(iter(cube.cells))[0] is None else ["number"]
    names += ["time", "step", cube.level_type]
    if grid.latitude is not None:
        names += ["latitude", "longitude"]
    return [*names, "valid_time"]


def _header_coordinates(
    cube: Cube, numbers: list[Any], times: list[int], steps: list[int], levels: list[float]
) -> dict[str, RefArray]:
    out: dict[str, RefArray] = {}
    if numbers[0] is not None:
        out["number"] = _inline(
            np.asarray(numbers, dtype=np.int64),
            ("number",),
            {"units": "1", "standard_name": "realization",
             "long_name": "ensemble member numerical id"},
        )  # fmt: skip
    out["time"] = _inline(
        np.asarray(times, dtype=np.int64),
        ("time",),
        {"units": TIME_UNITS, "calendar": "proleptic_gregorian",
         "standard_name": "forecast_reference_time", "long_name": "initial time of forecast"},
        force_dim=True,
    )  # fmt: skip
    out["step"] = _inline(
        np.asarray(steps, dtype=np.int64),
        ("step",),
        {"units": "seconds", "standard_name": "forecast_period",
         "long_name": "time since forecast_reference_time", "dtype": "timedelta64[ns]"},
        force_dim=True,
    )  # fmt: skip
    valid = np.add.outer(np.asarray(times, np.int64), np.asarray(steps, np.int64))
    out["valid_time"] = _inline(
        valid,
        ("time", "step"),
        {"units": TIME_UNITS, "calendar": "proleptic_gregorian", "standard_name": "time",
         "long_name": "time"},
    )  # fmt: skip
    level_attrs = {
        "long_name": f"original GRIB coordinate for key: level({cube.level_type})",
        "units": "1",
        **LEVEL_ATTRIBUTES.get(cube.level_type, {}),
    }
    bounds = [cube.bounds.get(level) for level in levels]
    if all(b is not None for b in bounds):
        level_attrs["bounds"] = f"{cube.level_type}_bounds"
    out[cube.level_type] = _inline(
        np.asarray(levels, dtype=np.float64), (cube.level_type,), level_attrs
    )
    if "bounds" in level_attrs:
        array = np.asarray(bounds, dtype=np.float64)
        dims = (cube.level_type, "bounds") if len(levels) > 1 else ("bounds",)
        out[f"{cube.level_type}_bounds"] = _inline(array.reshape(-1, 2).squeeze(), dims, {})
    return out


def grid_coordinates(grid: Grid) -> dict[str, RefArray]:
    """``latitude`` and ``longitude`` of a grid, held in the reference set (none when ecCodes
    cannot compute them)."""
    if grid.latitude is None or grid.longitude is None:
        return {}
    regular = grid.dims == ("latitude", "longitude")
    lat_dims = grid.dims[:1] if regular else grid.dims
    lon_dims = grid.dims[1:] if regular else grid.dims
    lat_attrs = dict(LATITUDE)
    if regular and grid.latitude[0] > grid.latitude[-1]:
        lat_attrs["stored_direction"] = "decreasing"
    # dimension coordinates even for a one-point grid: the data array keeps its grid dims
    return {
        "latitude": _inline(grid.latitude, lat_dims, lat_attrs, force_dim=True),
        "longitude": _inline(grid.longitude, lon_dims, dict(LONGITUDE), force_dim=True),
    }


def _inline(
    values: np.ndarray[Any, Any],
    dims: tuple[str, ...],
    attributes: dict[str, Any],
    *,
    force_dim: bool = False,
) -> RefArray:
    """An array whose one chunk is held in the reference set (a scalar when it has a single
    value, unless ``force_dim``)."""
    if values.size == 1 and not force_dim and values.ndim <= 1:
        values, dims = values.reshape(()), ()
    data = values.tobytes()
    codecs: tuple[dict[str, Any], ...] = ()
    if len(data) > COMPRESS_ABOVE:  # shuffled float64 coordinates: ~0.65 of their size, fast
        shuffle = Shuffle(values.dtype.itemsize)
        data = bytes(Zstd(level=1).encode(shuffle.encode(np.ascontiguousarray(values))))
        codecs = (shuffle.get_config(), {"id": "zstd", "level": 1})
    meta = ArrayMeta(
        shape=values.shape,
        chunks=values.shape if values.ndim else (),
        dtype=values.dtype,
        fill_value=None,
        codecs=codecs,
        attributes=attributes,
        dimension_names=dims,
    )
    return RefArray(meta, ChunkManifest.one_inlined(data, values.ndim))
