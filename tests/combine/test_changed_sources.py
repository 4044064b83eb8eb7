"""combine reads source files (coordinate values, identity checks): a file rewritten since its
scan is refused by name (`SourceChangedError`), never read as other coordinate values."""

from __future__ import annotations

import os
from pathlib import Path

import netCDF4
import numpy as np
import pytest

import refzarr
from refzarr.errors import SourceChangedError


def _day(path: Path, day: float) -> None:
    with netCDF4.Dataset(path, "w") as nc:
        nc.createDimension("time", None)
        nc.createDimension("x", 4)
        time = nc.createVariable("time", "f8", ("time",))
        time.units = "days since 2000-01-01"
        time[:] = [day]
        nc.createVariable("air", "f4", ("time", "x"))[:] = np.full((1, 4), day, "f4")


def _scanned(tmp_path: Path) -> tuple[list[refzarr.RefGroup], Path]:
    """Two daily files scanned with their time coordinates referenced, not inlined."""
    paths = [tmp_path / "d0.nc", tmp_path / "d1.nc"]
    for day, path in enumerate(paths):
        _day(path, float(day))
    groups = [refzarr.scan(str(p), inline_threshold=0, inline_coordinates=0) for p in paths]
    return groups, paths[1]


def test_a_rewritten_coordinate_file_is_refused(tmp_path: Path) -> None:
    groups, second = _scanned(tmp_path)
    _day(second, 5.0)  # reprocessed in place: other time value, same layout
    stat = second.stat()
    os.utime(second, ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))
    with pytest.raises(SourceChangedError, match=r"d1\.nc") as caught:
        refzarr.combine(groups, concat_dims=["time"])
    assert "refresh" in str(caught.value)


def test_unchanged_files_combine(tmp_path: Path) -> None:
    groups, _ = _scanned(tmp_path)
    combined = refzarr.combine(groups, concat_dims=["time"])
    ds = refzarr.open_dataset(combined, decode_times=False)
    assert ds["time"].values.tolist() == [0.0, 1.0]


def test_groups_without_records_combine_as_before(tmp_path: Path) -> None:
    groups, second = _scanned(tmp_path)
    bare = [refzarr.RefGroup(g.attributes, g.members) for g in groups]
    assert all(g.sources is None for g in bare)
    os.utime(second, ns=(second.stat().st_atime_ns, second.stat().st_mtime_ns + 10**9))
    combined = refzarr.combine(bare, concat_dims=["time"])
    assert combined.array_at("time") is not None
