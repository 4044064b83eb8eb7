"""Opening a dataset reads what its metadata needs: no data variable's chunk references
beyond a small array's (to name its one file), and no record of sources."""

from __future__ import annotations

from pathlib import Path

import pytest

import refzarr
from refzarr.reader import netcdf_view
from sourceskit import write_day


@pytest.fixture
def parquet_set(tmp_path: Path) -> Path:
    folder = tmp_path / "data"
    folder.mkdir()
    days = [write_day(folder / f"day{k}.nc", k, chunks=(1, 4)) for k in range(3)]
    target = tmp_path / "refs.parq"
    refzarr.write(refzarr.combine([refzarr.scan(p) for p in days], concat_dims="time"), target)
    return target


def test_opening_loads_no_references_of_many_chunks(
    parquet_set: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(netcdf_view, "SOURCE_LOAD_CHUNKS", 4)  # "v" has 24 chunks
    group = refzarr.read(parquet_set)
    ds = refzarr.open_dataset(group)
    manifest = group["v"].manifest  # type: ignore[union-attr]
    assert manifest.loaded_block(0) is None
    assert "source" not in ds["v"].encoding
    assert not group.sources.loaded  # type: ignore[union-attr]
    assert float(ds["v"].isel(time=5, x=1)) == 13.0
    assert manifest.loaded_block(0) is not None
    # the source check read the scan of day 1 from the record file, not the whole record
    assert not group.sources.loaded  # type: ignore[union-attr]


def test_a_small_array_still_names_its_one_file(tmp_path: Path) -> None:
    path = write_day(tmp_path / "day.nc", 0)
    target = tmp_path / "one.parq"
    refzarr.write(refzarr.scan(path), target)
    ds = refzarr.open_dataset(target)
    assert ds["v"].encoding["source"] == str(path)
