"""`refresh` of many changed files at once (an archive copied without its times): every
file's chunks replaced in one pass per array, the files scanned again together."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import netCDF4
import numpy as np
import pytest
import xarray as xr

import refzarr
from refzarr import IncompatibleError, parallel
from refzarr.sources import refresh as refresh_module
from sourceskit import touch_later, write_day


@pytest.fixture
def days(tmp_path: Path) -> list[Path]:
    folder = tmp_path / "data"
    folder.mkdir()
    return [write_day(folder / f"day{k}.nc", k) for k in range(5)]


def _combined(days: list[Path]) -> refzarr.RefGroup:
    return refzarr.combine([refzarr.scan(p) for p in days], concat_dims="time")


def _expected(days: list[Path]) -> xr.Dataset:
    with xr.open_mfdataset(days, combine="nested", concat_dim="time") as ds:
        return ds.load()


@pytest.mark.parametrize("name", ["refs.json", "refs.parq"])
def test_refresh_of_every_file_rewritten(
    tmp_path: Path, days: list[Path], name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / name
    refzarr.write(_combined(days), target)
    for k, path in enumerate(days):
        write_day(path, k, scale=1.5 + k)  # other bytes, other offsets
        touch_later(path)
    passes: list[str] = []
    each_array = refresh_module._replace_array

    def counted(path: str, *args: Any) -> Any:
        passes.append(path)
        return each_array(path, *args)

    monkeypatch.setattr(refresh_module, "_replace_array", counted)
    changes = refzarr.refresh(target)
    assert sorted(c.url for c in changes) == sorted(str(p.resolve()) for p in days)
    arrays = [path for path, _ in refzarr.read(target).arrays()]
    assert sorted(passes) == sorted(arrays)  # once per array, not once per array and file
    after = refzarr.read(target)
    assert refzarr.check_sources(after) == []
    xr.testing.assert_equal(refzarr.open_dataset(after).load(), _expected(days))


def test_files_of_one_format_and_options_are_scanned_again_together(
    tmp_path: Path, days: list[Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "refs.json"
    refzarr.write(_combined(days), target)
    for path in days[1:4]:
        touch_later(path)
    calls: list[list[str]] = []
    scan_many = parallel.scan_many

    def recorded(urls: list[str], **options: Any) -> Any:
        calls.append(list(urls))
        return scan_many(urls, **options)

    monkeypatch.setattr(parallel, "scan_many", recorded)
    assert len(refzarr.refresh(target)) == 3
    # the first in-process (its format's libraries then imported once, before workers fork)
    assert calls == [[str(p.resolve()) for p in days[2:4]]]
    xr.testing.assert_equal(refzarr.open_dataset(refzarr.read(target)).load(), _expected(days))


def test_a_file_that_moved_among_several_changed_is_refused(
    tmp_path: Path, days: list[Path]
) -> None:
    target = tmp_path / "refs.parq"
    refzarr.write(_combined(days), target)
    old = {p: p.read_bytes() for p in target.rglob("*") if p.is_file()}
    write_day(days[0], 0, scale=2.0)
    with netCDF4.Dataset(days[3], "w") as ds:  # 8 times now: its grid reaches day 4's place
        ds.createDimension("time", None)
        ds.createDimension("x", 8)
        ds.createVariable("time", "f8", ("time",))[:] = np.arange(8) + 12
        ds.createVariable("v", "f4", ("time", "x"), chunksizes=(2, 4))[:] = 1
    for path in (days[0], days[3]):
        touch_later(path)
    with pytest.raises(IncompatibleError, match=r"day3\.nc: array '\w+' (has|moved)"):
        refzarr.refresh(target)
    assert {p: p.read_bytes() for p in target.rglob("*") if p.is_file()} == old
