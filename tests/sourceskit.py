"""Test kit for sources that change: a small netCDF4 file of 4 times per "day", and moving a
file's modification time on without sleeping."""

from __future__ import annotations

import os
from pathlib import Path

import netCDF4
import numpy as np

SOURCES_ATTR = "_nc_refzarr_sources"
"""The root attribute the sources record travels in."""


def write_day(
    path: Path,
    day: int,
    *,
    scale: float = 1.0,
    chunks: tuple[int, int] = (2, 4),
    units: str | None = "days since 2000-01-01",
) -> Path:
    """A small netCDF4 file: ``v(time, x)`` of 4 times from ``4 * day`` (times ``units``,
    none when None), values scaled by ``scale``."""
    with netCDF4.Dataset(path, "w") as ds:
        ds.createDimension("time", None)
        ds.createDimension("x", 8)
        time = ds.createVariable("time", "f8", ("time",))
        if units is not None:
            time.units = units
        time[:] = np.arange(4) + 4 * day
        v = ds.createVariable("v", "f4", ("time", "x"), chunksizes=chunks, zlib=True)
        v[:] = (np.arange(32).reshape(4, 8) + 4 * day) * scale
    return path


def touch_later(path: Path, seconds: int = 5) -> None:
    """Move a file's modification time on (a rewrite within the same second as its scan is
    what file systems cannot tell apart: tests make the change visible without sleeping)."""
    stat = os.stat(path)
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + seconds * 1_000_000_000))
