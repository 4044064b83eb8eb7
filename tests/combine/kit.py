"""Test kit for combine: tiny netCDF4 files written by xarray (netCDF4 engine), their scans, and
the comparison of a combined group with ``xr.open_mfdataset`` through refzarr's reader and,
for regular grids, through kerchunk JSON + fsspec + xarray's zarr engine."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import xarray as xr

import refzarr
from refzarr import RefGroup
from roundtrip import reference_options

__all__ = [
    "assert_same_dataset",
    "daily",
    "open_kerchunk",
    "open_mf",
    "scan_all",
    "write_nc",
]

LAT, LON = 4, 5


def daily(
    start: str,
    days: int,
    *,
    seed: int = 0,
    variables: Sequence[str] = ("air",),
    dtype: str = "float32",
) -> xr.Dataset:
    """A dataset of ``days`` daily steps from ``start``: variables (time, lat, lon), coords."""
    rng = np.random.default_rng(seed)
    data = {
        name: (("time", "lat", "lon"), rng.normal(280, 10, (days, LAT, LON)).astype(dtype))
        for name in variables
    }
    coords = {
        "time": pd.date_range(start, periods=days, freq="D"),
        "lat": np.linspace(-60, 60, LAT),
        "lon": np.linspace(0, 300, LON),
    }
    ds = xr.Dataset(data, coords=coords)
    for name in variables:
        ds[name].attrs = {"units": "K", "long_name": f"{name} temperature"}
    ds.attrs = {"title": "combine test", "source": start}
    return ds


def write_nc(
    ds: xr.Dataset,
    path: Path,
    *,
    chunks: dict[str, tuple[int, ...]] | None = None,
    time_units: str | None = None,
    unlimited: bool = False,
    encoding: dict[str, dict[str, Any]] | None = None,
) -> Path:
    """Write ``ds`` as netCDF4 (netCDF4-python) with the given chunking and time units."""
    enc: dict[str, dict[str, Any]] = {name: {} for name in ds.variables}
    for name, shape in (chunks or {}).items():
        enc[name]["chunksizes"] = shape
    if time_units is not None and "time" in ds.variables:
        enc["time"]["units"] = time_units
    for name, extra in (encoding or {}).items():
        enc[name].update(extra)
    unlimited_dims = ["time"] if unlimited else None
    ds.to_netcdf(path, engine="netcdf4", encoding=enc, unlimited_dims=unlimited_dims)
    return path


def scan_all(paths: Sequence[Path], **options: Any) -> list[RefGroup]:
    """``refzarr.scan`` of every file."""
    return [refzarr.scan(str(p), **options) for p in paths]


def open_mf(paths: Sequence[Path], **kwargs: Any) -> xr.Dataset:
    """``xr.open_mfdataset`` of ``paths`` concatenated along ``time`` as refzarr combines them
    (nested, minimal data variables and coordinates, ``compat="equals"``, netCDF4), loaded;
    ``kwargs`` override those options."""
    options: dict[str, Any] = {
        "combine": "nested",
        "concat_dim": "time",
        "data_vars": "minimal",
        "coords": "minimal",
        "compat": "equals",
        "engine": "netcdf4",
    }
    options.update(kwargs)
    with xr.open_mfdataset(paths, **options) as ds:
        return ds.load()


def open_kerchunk(group: RefGroup, path: Path) -> xr.Dataset:
    """``group`` written as kerchunk JSON and read by xarray's zarr engine through fsspec."""
    refzarr.write(group, path)
    options = {"consolidated": False, "storage_options": reference_options(path)}
    return xr.open_dataset("reference://", engine="zarr", backend_kwargs=options).load()


def assert_same_dataset(
    group: RefGroup,
    expected: xr.Dataset,
    tmp_path: Path | None = None,
    *,
    group_path: str | None = None,
) -> None:
    """The combined group reads as ``expected``: values (NaN-aware), dtypes, dims, coords,
    attributes; through refzarr and, when ``tmp_path`` is given, through kerchunk JSON."""
    expected = expected.load()
    got = refzarr.open_dataset(group, group=group_path).load()
    _identical(got, expected)
    if tmp_path is not None:
        assert group_path is None
        _identical(open_kerchunk(group, tmp_path / "combined.json"), expected)


def _identical(got: xr.Dataset, expected: xr.Dataset) -> None:
    xr.testing.assert_identical(got, expected)
    for name, variable in expected.variables.items():
        assert got[name].dtype == variable.dtype, (name, got[name].dtype, variable.dtype)
