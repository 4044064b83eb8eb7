"""Many sidecars: `scan_many` and `combine` take them like any file, and give the dataset the
data files themselves give."""

from __future__ import annotations

from pathlib import Path

import netCDF4
import numpy as np
import pytest
from dmrppkit import write_sidecar

import refzarr


def _day(path: Path, day: int) -> None:
    with netCDF4.Dataset(path, "w") as nc:
        nc.createDimension("time", 1)
        nc.createDimension("x", 6)
        t = nc.createVariable("time", "f8", ("time",))
        t[:] = [day]
        t.units = "days since 2000-01-01"
        v = nc.createVariable("air", "f4", ("time", "x"), zlib=True, chunksizes=(1, 3))
        v[:] = np.arange(6, dtype="f4") + 10 * day
        v.units = "K"


@pytest.fixture(scope="module")
def days(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    folder = tmp_path_factory.mktemp("days")
    paths = []
    for day in (2, 0, 1):
        path = folder / f"day{day}.nc"
        _day(path, day)
        write_sidecar(path)
        paths.append(path)
    return paths


@pytest.mark.parametrize("executor", ["serial", "threads"])
def test_scan_many_and_combine(days: list[Path], executor: str) -> None:
    sidecars = [f"{p}.dmrpp" for p in days]
    scanned = refzarr.scan_many(sidecars, executor=executor, progress=False)
    combined = refzarr.combine(list(scanned), concat_dims="time")
    direct = refzarr.combine([refzarr.scan(str(p)) for p in days], concat_dims="time")
    assert combined == direct
    ds = refzarr.open_dataset(combined)
    days_since = ds["time"].values - np.datetime64("2000-01-01")
    np.testing.assert_array_equal(days_since.astype("timedelta64[D]").astype(int), [0, 1, 2])
    np.testing.assert_array_equal(ds["air"].values[:, 0], [0, 10, 20])
