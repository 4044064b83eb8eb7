"""Random archives appended in random steps (files of several days, each file with its own CF
time units, steps of one or many files) to JSON v0/v1, Parquet (any record size) and Icechunk:
the set equals combining every file at once, and reads as ``xr.open_mfdataset`` reads the
files, through refzarr and through fsspec + zarr (Icechunk: its own store)."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import netCDF4
import numpy as np
import pytest
import xarray as xr
from hypothesis import given
from hypothesis import strategies as st

import refzarr
from fuzzkit import fuzz_settings
from roundtrip import reference_options

GRID = (3, 4)


def _write(path: Path, first: int, days: int, units: str, offset: int, time_dtype: str) -> None:
    """``days`` daily steps from day ``first`` (days since 2020-01-01) with time ``units``
    counting from day ``offset``."""
    with netCDF4.Dataset(path, "w", format="NETCDF4") as nc:
        nc.createDimension("time", None)
        nc.createDimension("y", GRID[0])
        nc.createDimension("x", GRID[1])
        time = nc.createVariable("time", time_dtype, ("time",))
        time.units = units
        time.calendar = "standard"
        scale = 24 if units.startswith("hours") else 1
        time[:] = (np.arange(first, first + days) - offset) * scale
        air = nc.createVariable("air", "f4", ("time", "y", "x"), zlib=True, chunksizes=(1, *GRID))
        air.units = "K"
        values = np.random.default_rng(first).normal(280, 5, (days, *GRID)).astype("f4")
        values[0, 0, 0] = np.nan
        air[:] = values
        nc.title = "append fuzz"


@st.composite
def archives(draw: st.DrawFn) -> dict[str, Any]:
    lengths = draw(st.lists(st.integers(1, 3), min_size=2, max_size=6))
    firsts = np.cumsum([0, *lengths[:-1]]).tolist()
    files = [
        {
            "first": first,
            "days": days,
            "hours": draw(st.booleans()),
            "offset": draw(st.sampled_from([0, first])),
        }
        for first, days in zip(firsts, lengths, strict=True)
    ]
    cuts = sorted(draw(st.sets(st.integers(1, len(files) - 1), max_size=len(files) - 1)))
    return {
        "files": files,
        "steps": [b - a for a, b in zip([0, *cuts], [*cuts, len(files)], strict=True)],
        "time_dtype": draw(st.sampled_from(["f8", "i4"])),
        "target": draw(st.sampled_from(["json0", "json1", "parquet", "json.zst"])),
        "record_size": draw(st.sampled_from([1, 2, 3, 100])),
    }


def _files(folder: Path, case: dict[str, Any]) -> list[Path]:
    paths = []
    for k, file in enumerate(case["files"]):
        since = (np.datetime64("2020-01-01") + np.timedelta64(file["offset"], "D")).astype(str)
        units = f"{'hours' if file['hours'] else 'days'} since {since}"
        path = folder / f"f{k}.nc"
        _write(path, file["first"], file["days"], units, file["offset"], case["time_dtype"])
        paths.append(path)
    return paths


def _steps(groups: list[refzarr.RefGroup], steps: list[int]) -> list[refzarr.RefGroup]:
    out, start = [], 0
    for size in steps:
        part = groups[start : start + size]
        out.append(part[0] if size == 1 else refzarr.combine(part, concat_dims="time"))
        start += size
    return out


def _expected(paths: list[Path]) -> xr.Dataset:
    with xr.open_mfdataset(
        paths, combine="nested", concat_dim="time", data_vars="minimal", coords="minimal"
    ) as ds:
        return ds.load()


# pandas 3 deprecates the fastparquet engine fsspec's LazyReferenceMapper uses for Parquet sets
@pytest.mark.filterwarnings("ignore:The 'fastparquet' engine is deprecated")
@fuzz_settings(ci_examples=4)
@given(archives())
def test_appends_in_random_steps_equal_one_combine(case: dict[str, Any]) -> None:
    with tempfile.TemporaryDirectory(prefix="refzarr-append-fuzz-") as tmp:
        folder = Path(tmp)
        paths = _files(folder, case)
        groups = [refzarr.scan(str(p)) for p in paths]
        kind = case["target"]
        target = folder / ("refs.parq" if kind == "parquet" else f"refs.{kind[:4]}")
        if kind == "json.zst":
            target = folder / "refs.json.zst"
        options: dict[str, Any] = {"version": 1} if kind == "json1" else {}
        if kind == "parquet":
            options["record_size"] = case["record_size"]
        for step in _steps(groups, case["steps"]):
            refzarr.write(step, target, append_dim="time", **options)
        everything = refzarr.combine(groups, concat_dims="time")
        assert refzarr.read(target) == everything
        expected = _expected(paths)
        xr.testing.assert_identical(refzarr.open_dataset(target).load(), expected)
        through_fsspec = xr.open_dataset(
            "reference://",
            engine="zarr",
            backend_kwargs={"consolidated": False, "storage_options": reference_options(target)},
        ).load()
        xr.testing.assert_identical(through_fsspec, expected)


@fuzz_settings(ci_examples=3)
@given(archives())
def test_icechunk_appends_in_random_steps_read_as_the_files(case: dict[str, Any]) -> None:
    icechunk = pytest.importorskip("icechunk")
    from refzarr.formats.icechunk.repository import container_credentials

    with tempfile.TemporaryDirectory(prefix="refzarr-append-fuzz-") as tmp:
        folder = Path(tmp)
        paths = _files(folder, case)
        groups = [refzarr.scan(str(p)) for p in paths]
        repo = folder / "repo"
        for step in _steps(groups, case["steps"]):
            refzarr.commit_icechunk(step, repo, append_dim="time")
        credentials = container_credentials([folder.resolve().as_uri() + "/"])
        storage = icechunk.local_filesystem_storage(str(repo))
        opened = icechunk.Repository.open(storage, authorize_virtual_chunk_access=credentials)
        store = opened.readonly_session("main").store
        got = xr.open_zarr(store, consolidated=False).load()
        xr.testing.assert_identical(got, _expected(paths))
