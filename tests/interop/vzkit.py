"""Shared pieces of the VirtualiZarr interop tests: a netCDF4 file exercising fill values, scale
attributes and several codecs, a local obstore registry, and value-by-value comparisons."""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import xarray as xr

__all__ = ["assert_same_values", "local_registry", "write_netcdf4"]


def write_netcdf4(path: Path, *, lzf: bool = True) -> Path:
    """A netCDF4 file: coordinates (a time axis with units, a 2-D auxiliary one), float and
    integer fill values, a packed variable (scale_factor/add_offset), and the codecs shuffle +
    zlib, fletcher32, LZF (a codec zarr-python has no ``numcodecs.*`` name for, which
    VirtualiZarr 2.5's HDFParser fails on: ``lzf=False`` leaves that variable out), and none."""
    rng = np.random.default_rng(18)
    temp = rng.normal(size=(4, 5, 6)).astype("f4")
    temp[0, 0, 0] = np.nan
    ds = xr.Dataset(
        {
            "temp": (("time", "y", "x"), temp, {"units": "K", "long_name": "temperature"}),
            "packed": (("time", "y", "x"), np.arange(120, dtype="f8").reshape(4, 5, 6)),
            "count": (("y", "x"), np.arange(30, dtype="i4").reshape(5, 6)),
            "lzf": (("y", "x"), rng.integers(0, 1000, size=(5, 6)).astype("u2")),
        },
        coords={
            "time": ("time", np.arange(4.0), {"units": "days since 2000-01-01"}),
            "y": np.arange(5.0),
            "x": np.arange(6.0),
            "lat": (("y", "x"), np.linspace(-60, 60, 30).reshape(5, 6)),
        },
        attrs={"title": "interop", "history": "written by vzkit"},
    )
    encoding = {
        "temp": {
            "compression": "gzip",
            "shuffle": True,
            "chunksizes": (2, 5, 3),
            "_FillValue": -999.0,
        },
        "packed": {
            "dtype": "i2",
            "scale_factor": 0.5,
            "add_offset": 1.0,
            "_FillValue": -1,
            "chunksizes": (1, 5, 6),
            "fletcher32": True,
        },
        "count": {"compression": "gzip", "chunksizes": (5, 6)},
        "lzf": {"compression": "lzf", "chunksizes": (5, 3)},
        "time": {"dtype": "f8"},
    }
    if not lzf:
        ds = ds.drop_vars("lzf")
        del encoding["lzf"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ds.to_netcdf(path, engine="h5netcdf", encoding=encoding)
    return path


def local_registry() -> object:
    """An obspec-utils ObjectStoreRegistry reading ``file://`` URLs from the local disk."""
    from obspec_utils.registry import ObjectStoreRegistry
    from obstore.store import LocalStore

    return ObjectStoreRegistry({"file://": LocalStore()})


def assert_same_values(actual: xr.Dataset, expected: xr.Dataset, names: object = None) -> None:
    """Every variable of ``expected`` (or ``names``) equal in ``actual``: dtype and values,
    NaN equal to NaN."""
    for name in names or list(expected.variables):
        got, want = actual[name].variable, expected[name].variable
        assert got.dtype == want.dtype, f"{name}: dtype {got.dtype} != {want.dtype}"
        assert got.dims == want.dims, f"{name}: dims {got.dims} != {want.dims}"
        np.testing.assert_array_equal(got.values, want.values, strict=True, err_msg=str(name))
