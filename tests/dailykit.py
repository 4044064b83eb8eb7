"""Test kit: a small archive of daily netCDF4 files (netCDF4-python), one time step each."""

from __future__ import annotations

from pathlib import Path

import netCDF4
import numpy as np

GRID = (8, 16)
"""(lat, lon) of every daily file: small, so that tests stay fast."""


def write_day(path: Path, day: int, *, units: str = "days since 2020-01-01") -> Path:
    """One daily file: ``air(time, lat, lon)`` float32 zlib-compressed, CF ``time``."""
    ny, nx = GRID
    with netCDF4.Dataset(path, "w", format="NETCDF4") as nc:
        nc.title = "refzarr test archive"
        nc.createDimension("time", None)
        nc.createDimension("lat", ny)
        nc.createDimension("lon", nx)
        time = nc.createVariable("time", "f8", ("time",))
        time.units = units
        time.calendar = "standard"
        time[:] = [day]
        lat = nc.createVariable("lat", "f4", ("lat",))
        lat.units = "degrees_north"
        lat[:] = np.linspace(-80, 80, ny)
        lon = nc.createVariable("lon", "f4", ("lon",))
        lon.units = "degrees_east"
        lon[:] = np.linspace(0, 350, nx)
        air = nc.createVariable(
            "air", "f4", ("time", "lat", "lon"), zlib=True, chunksizes=(1, ny, nx)
        )
        air.units = "K"
        rng = np.random.default_rng(day)
        air[0] = np.round(250 + 50 * rng.random(GRID, dtype=np.float32), 2)
    return path


def write_days(folder: Path, days: int, *, prefix: str = "air") -> list[Path]:
    """``days`` daily files ``{prefix}_YYYYMMDD.nc`` in ``folder`` (made if needed), in order."""
    folder.mkdir(parents=True, exist_ok=True)
    dates = np.datetime64("2020-01-01") + np.arange(days)
    return [
        write_day(folder / f"{prefix}_{str(date).replace('-', '')}.nc", day)
        for day, date in enumerate(dates)
    ]
