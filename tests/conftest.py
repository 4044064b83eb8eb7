"""Shared fixtures: factories writing tiny netCDF4-like files into tmp_path, and their references.

pytest's default ("prepend") import mode puts this directory on ``sys.path`` when it loads this
file, so test modules anywhere below ``tests/`` import the kit as ``from strategies import ...``
and ``from roundtrip import ...`` (there are no ``__init__.py`` files under ``tests/``).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import h5py
import numpy as np
import pytest
from hypothesis import settings

# `make test` (and so CI) runs with --hypothesis-profile=ci: the same examples on every run,
# so a submission cannot fail on a newly drawn example; plain `pytest` explores at random.
settings.register_profile("ci", derandomize=True, database=None)

# Asserts inside the kit report their operands like asserts in test modules do.
pytest.register_assert_rewrite("roundtrip", "strategies")

from roundtrip import KerchunkCase, kerchunk_hdf5_refs  # noqa: E402

# Default fill values of the netCDF-C library, as netCDF4 files carry them.
NC_FILL_FLOAT = np.float32(9.969209968386869e36)
NC_FILL_SHORT = np.int16(-32767)

INLINE_SMALL = 64
"""kerchunk ``inline_threshold`` that inlines the small chunks of `write_netcdf`'s file."""

# The shape of every variable in `write_netcdf`'s file, for tests that need to know.
TIME, LAT, LON, STEP = 6, 4, 5, 3


def _dimension(
    where: h5py.Group, name: str, values: np.ndarray, dimid: int, **attrs: Any
) -> h5py.Dataset:
    """A netCDF4 dimension: a 1-D coordinate variable that is an HDF5 dimension scale."""
    scale = where.create_dataset(name, data=values)
    scale.make_scale(name)
    scale.attrs["_Netcdf4Dimid"] = np.int32(dimid)
    for key, value in attrs.items():
        scale.attrs[key] = value
    return scale


def _attach(variable: h5py.Dataset, *scales: h5py.Dataset) -> None:
    for axis, scale in enumerate(scales):
        variable.dims[axis].attach_scale(scale)


def _temperature(f: h5py.File, dims: tuple[h5py.Dataset, ...]) -> None:
    """float32, NaN fill, gzip + shuffle, chunks that overhang the edge, a few NaNs."""
    values = np.arange(TIME * LAT * LON, dtype="f4").reshape(TIME, LAT, LON) / 4 - 20
    values[1, 2, 3] = np.nan
    values[5, 0, 0] = np.nan
    var = f.create_dataset(
        "temperature",
        data=values,
        chunks=(2, 3, 3),
        compression="gzip",
        compression_opts=4,
        shuffle=True,
        fillvalue=np.float32(np.nan),
    )
    var.attrs["_FillValue"] = np.float32(np.nan)
    var.attrs["long_name"] = "air temperature"
    var.attrs["units"] = "degC"
    _attach(var, *dims)


def _wind_speed(f: h5py.File, dims: tuple[h5py.Dataset, ...]) -> None:
    """int16 packed with scale_factor/add_offset, one fill-valued element."""
    packed = (np.arange(TIME * LAT, dtype="i2").reshape(TIME, LAT) * 37) % 2000
    packed[3, 1] = NC_FILL_SHORT
    var = f.create_dataset("wind_speed", data=packed, chunks=(3, 2), fillvalue=NC_FILL_SHORT)
    var.attrs["_FillValue"] = NC_FILL_SHORT
    # float64 packing attributes: JSON metadata cannot say "float32", so xarray would unpack
    # float32 attributes to float64 through references but to float32 from the file
    var.attrs["scale_factor"] = np.float64(0.01)
    var.attrs["add_offset"] = np.float64(2.5)
    var.attrs["units"] = "m/s"
    _attach(var, *dims)


def _sparse(f: h5py.File, dims: tuple[h5py.Dataset, ...]) -> None:
    """float64 whose middle chunk row is never written: it must read as the fill value."""
    var = f.create_dataset(
        "sparse", shape=(TIME, LON), chunks=(2, LON), dtype="f8", fillvalue=-999.0
    )
    var.attrs["_FillValue"] = np.float64(-999.0)
    var[0:2] = np.arange(2 * LON).reshape(2, LON) + 0.5
    var[4:6] = -np.arange(2 * LON).reshape(2, LON) - 0.25
    _attach(var, *dims)


def _forecast_group(f: h5py.File, lat: h5py.Dataset) -> None:
    """A nested group with its own dimension, a big-endian variable and group attributes."""
    group = f.create_group("forecast")
    group.attrs["institution"] = "Институт прогнозов"
    group.attrs["ensemble_size"] = np.int32(3)
    step = _dimension(group, "step", np.arange(STEP, dtype="i4") * 6, 3, units="hours")
    pressure = np.linspace(990, 1030, STEP * LAT).reshape(STEP, LAT).astype(">f4")
    var = group.create_dataset(
        "pressure", data=pressure, chunks=(1, LAT), fillvalue=NC_FILL_FLOAT.astype(">f4")
    )
    var.attrs["units"] = "hPa"
    _attach(var, step, lat)


def write_netcdf(path: Path) -> Path:
    """Write the standard netCDF4-like test file (made with h5py) at ``path``.

    Root dimensions ``time`` (float64, units/calendar), ``lat``, ``lon``; variables
    ``temperature`` (float32, NaN fill, gzip + shuffle), ``wind_speed`` (packed int16),
    ``sparse`` (chunks never written), ``station_count`` (scalar); group ``forecast`` with
    dimension ``step`` and big-endian ``pressure``; string attributes, some non-ASCII and
    with ``/``.
    """
    with h5py.File(path, "w") as f:
        f.attrs["title"] = "refzarr test file: données, Daten, データ"
        f.attrs["Conventions"] = "CF-1.8"
        f.attrs["source"] = "tests/conftest.py"
        time = _dimension(
            f,
            "time",
            np.arange(TIME, dtype="f8") * 0.5,
            0,
            units="days since 2000-01-01 00:00:00",
            calendar="standard",
        )
        lat = _dimension(f, "lat", np.linspace(-45, 45, LAT, dtype="f4"), 1, units="degrees_north")
        lon = _dimension(f, "lon", np.linspace(0, 288, LON, dtype="f4"), 2, units="degrees_east")
        _temperature(f, (time, lat, lon))
        _wind_speed(f, (time, lat))
        _sparse(f, (time, lon))
        # an explicit _FillValue, as kerchunk's fill value makes xarray mask (and so promote)
        # integer variables read through references either way
        count = f.create_dataset("station_count", data=np.int32(42), fillvalue=np.int32(-1))
        count.attrs["_FillValue"] = np.int32(-1)
        count.attrs["long_name"] = "number of stations"
        _forecast_group(f, lat)
    return path


@pytest.fixture
def make_netcdf(tmp_path: Path) -> Callable[..., Path]:
    """Factory: ``make_netcdf(name="sample.nc")`` writes `write_netcdf`'s file into tmp_path."""

    def make(name: str = "sample.nc") -> Path:
        return write_netcdf(tmp_path / name)

    return make


@pytest.fixture
def netcdf_file(make_netcdf: Callable[..., Path]) -> Path:
    """The standard netCDF4-like test file."""
    return make_netcdf()


@pytest.fixture
def make_data_file(tmp_path: Path) -> Callable[[str, bytes], Path]:
    """Factory: ``make_data_file(name, data)`` writes ``data`` to tmp_path/name."""

    def make(name: str, data: bytes) -> Path:
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        return path

    return make


@pytest.fixture(params=[0, INLINE_SMALL], ids=["refs-only", "small-inlined"])
def kerchunk_case(request: pytest.FixtureRequest, netcdf_file: Path) -> KerchunkCase:
    """The standard file and kerchunk's references for it, without and with inlining."""
    threshold = request.param
    return KerchunkCase(netcdf_file, kerchunk_hdf5_refs(netcdf_file, threshold), threshold)
