"""``drop_variables``: members left out of every scan (as xarray's ``drop_variables``), kept out
by `refzarr refresh`; what lets files whose per-file scalars differ (a granule id) combine."""

from __future__ import annotations

import os
from pathlib import Path

import netCDF4
import numpy as np
import pytest
import xarray as xr

import refzarr
from refzarr.cli import main
from refzarr.scan.result import ScannedGroup


def _granule(path: Path, day: int) -> Path:
    """A daily file with a scalar ``granule_id`` that differs per file and a ``geo`` group."""
    with netCDF4.Dataset(path, "w") as nc:
        nc.createDimension("time", None)
        nc.createDimension("x", 3)
        time = nc.createVariable("time", "f8", ("time",))
        time.units = "days since 2000-01-01"
        time[:] = [day]
        nc.createVariable("sst", "f4", ("time", "x"))[:] = np.full((1, 3), day, "f4")
        nc.createVariable("granule_id", "i4")[:] = 1000 + day
        geo = nc.createGroup("geo")
        geo.createDimension("x", 3)
        geo.createVariable("lat", "f4", ("x",))[:] = [1, 2, 3]
        geo.createVariable("lon", "f4", ("x",))[:] = [4, 5, 6]
    return path


@pytest.fixture
def days(tmp_path: Path) -> list[Path]:
    return [_granule(tmp_path / f"g{d}.nc", d) for d in range(3)]


def test_members_left_out_by_path(days: list[Path]) -> None:
    group = refzarr.scan(str(days[0]), drop_variables=["granule_id", "geo/lat", "absent"])
    assert isinstance(group, ScannedGroup)
    assert "granule_id" not in group
    assert "geo/lat" not in group
    assert "geo/lon" in group
    assert "sst" in group
    assert list(refzarr.scan(str(days[0]), drop_variables="geo").members) == [
        "time",
        "sst",
        "granule_id",
    ]


def test_bad_drop_variables(days: list[Path]) -> None:
    with pytest.raises(TypeError, match="drop_variables must be a name or a sequence"):
        refzarr.scan(str(days[0]), drop_variables=[1])


def test_combining_granules_with_differing_scalars(days: list[Path], tmp_path: Path) -> None:
    with pytest.raises(refzarr.IncompatibleError, match="granule_id"):
        refzarr.combine(refzarr.scan_many([str(p) for p in days]), concat_dims="time")
    out = tmp_path / "days.json"
    args = ["scan", str(tmp_path / "g*.nc"), "--concat-dim", "time", "-o", str(out)]
    assert main([*args, "--drop-variables", "granule_id"]) == 0
    with (
        xr.open_mfdataset(sorted(days), drop_variables=["granule_id"]) as truth,
        refzarr.open_dataset(out) as ours,
    ):
        xr.testing.assert_identical(ours.load(), truth.load())


def test_refresh_leaves_them_out_again(days: list[Path], tmp_path: Path) -> None:
    out = tmp_path / "days.json"
    args = ["scan", str(tmp_path / "g*.nc"), "--concat-dim", "time", "-o", str(out)]
    assert main([*args, "--drop-variables", "granule_id,geo/lat"]) == 0
    _granule(days[1], 1)  # written again: a new modification time
    stat = days[1].stat()
    os.utime(days[1], ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))
    assert main(["refresh", str(out)]) == 0
    refreshed = refzarr.read(str(out))
    assert "granule_id" not in refreshed
    assert "geo/lat" not in refreshed
    assert refzarr.open_dataset(out)["sst"].shape == (3, 3)
