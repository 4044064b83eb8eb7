"""combine on real netCDF4 files equals ``xr.open_mfdataset`` on the same files: 1-D concat,
stacking along a new dimension, a 2-D grid of files, merges of variables, nested groups, and
tree reductions (partial results combined again), read through refzarr and kerchunk JSON."""

from __future__ import annotations

from pathlib import Path

import netCDF4
import numpy as np
import pytest
import xarray as xr
from kit import assert_same_dataset, daily, open_mf, scan_all, write_nc

import refzarr
from refzarr import RefArray


def _days(tmp_path: Path, count: int, per_file: int = 2, **write: object) -> list[Path]:
    paths = []
    for k in range(count):
        ds = daily(f"2000-01-{1 + k * per_file:02d}", per_file, seed=k)
        paths.append(write_nc(ds, tmp_path / f"day{k}.nc", **write))  # type: ignore[arg-type]
    return paths


@pytest.mark.parametrize(
    "options",
    [{}, {"inline_coordinates": 0}, {"inline_threshold": 10_000}],
    ids=["defaults", "coordinates-referenced", "all-inlined"],
)
def test_concat_along_time_sorts_files(tmp_path: Path, options: dict[str, int]) -> None:
    paths = _days(tmp_path, 4, chunks={"air": (1, 4, 5)})
    shuffled = [paths[2], paths[0], paths[3], paths[1]]
    combined = refzarr.combine(scan_all(shuffled, **options), concat_dims="time")
    assert_same_dataset(combined, open_mf(paths), tmp_path)
    time = combined["time"]
    assert isinstance(time, RefArray)
    assert time.manifest.inlined  # the combined coordinate is a real, inlined array


def test_unlimited_time_and_scan_many_results(tmp_path: Path) -> None:
    paths = _days(tmp_path, 3, per_file=3, unlimited=True)
    groups = refzarr.scan_many([str(p) for p in paths], executor="serial")
    combined = refzarr.combine(groups, concat_dims="time")
    assert_same_dataset(combined, open_mf(paths))


def test_stack_along_new_dimension(tmp_path: Path) -> None:
    paths = []
    for member in range(3):
        ds = daily("2000-01-01", 2, seed=member)
        paths.append(write_nc(ds, tmp_path / f"member{member}.nc", chunks={"air": (1, 4, 5)}))
    combined = refzarr.combine(
        scan_all(paths),
        concat_dims="member",
        coords={"member": ("regex", r"member(\d+)")},
    )
    expected = open_mf(paths, concat_dim="member", data_vars="all", coords="minimal")
    expected = expected.assign_coords(member=np.arange(3))
    assert_same_dataset(combined, expected, tmp_path)
    air = combined["air"]
    assert isinstance(air, RefArray)
    assert air.meta.dimension_names == ("member", "time", "lat", "lon")


def test_stack_without_coordinate_keeps_input_order(tmp_path: Path) -> None:
    paths = [write_nc(daily("2000-01-01", 2, seed=k), tmp_path / f"m{k}.nc") for k in (2, 0, 1)]
    combined = refzarr.combine(scan_all(paths), concat_dims="member")
    expected = open_mf(paths, concat_dim="member", data_vars="all", coords="minimal")
    assert_same_dataset(combined, expected, tmp_path)


def test_grid_of_time_and_member(tmp_path: Path) -> None:
    nested: list[list[Path]] = []
    for member in range(2):
        row = []
        for k in range(3):
            ds = daily(f"2000-01-{1 + 2 * k:02d}", 2, seed=10 * member + k)
            row.append(write_nc(ds, tmp_path / f"m{member}_t{k}.nc", chunks={"air": (1, 4, 5)}))
        nested.append(row)
    flat = [p for row in nested for p in row][::-1]
    combined = refzarr.combine(
        scan_all(flat),
        concat_dims=["member", "time"],
        coords={"member": ("regex", r"m(\d)_")},
    )
    with xr.open_mfdataset(
        nested,
        combine="nested",
        concat_dim=["member", "time"],
        data_vars="all",
        coords="minimal",
        engine="netcdf4",
    ) as ds:
        expected = ds.load()
    expected["air"] = expected["air"].transpose("member", "time", "lat", "lon")
    expected = expected.assign_coords(member=np.arange(2))
    assert_same_dataset(combined, expected, tmp_path)


def test_merge_of_variables_from_separate_file_sets(tmp_path: Path) -> None:
    air, rhum = [], []
    for k in range(3):
        start = f"2000-01-{1 + 2 * k:02d}"
        air.append(write_nc(daily(start, 2, seed=k), tmp_path / f"air{k}.nc"))
        rh = daily(start, 2, seed=100 + k, variables=("rhum",))
        rhum.append(write_nc(rh, tmp_path / f"rhum{k}.nc"))
    expected = xr.merge([open_mf(air), open_mf(rhum)], compat="equals", combine_attrs="override")
    # one call: the two sets of files are found, combined along time, then merged
    together = refzarr.combine(scan_all(rhum[::-1] + air), concat_dims="time")
    assert_same_dataset(together, expected[["air", "rhum"]].pipe(_first_attrs, air[0]))
    # or explicitly: combine each set, then merge
    merged = refzarr.merge(
        [
            refzarr.combine(scan_all(air), concat_dims="time"),
            refzarr.combine(scan_all(rhum), concat_dims="time"),
        ]
    )
    assert_same_dataset(merged, expected, tmp_path)


def _first_attrs(ds: xr.Dataset, path: Path) -> xr.Dataset:
    with xr.open_dataset(path, engine="netcdf4") as first:
        return ds.assign_attrs(first.attrs)


def test_merge_only_with_empty_concat_dims(tmp_path: Path) -> None:
    a = write_nc(daily("2000-01-01", 3, seed=1), tmp_path / "a.nc")
    b = write_nc(daily("2000-01-01", 3, seed=2, variables=("rhum",)), tmp_path / "b.nc")
    combined = refzarr.combine(scan_all([a, b]), concat_dims=[])
    with xr.open_dataset(a) as da, xr.open_dataset(b) as db:
        expected = xr.merge([da.load(), db.load()], combine_attrs="override")
    assert_same_dataset(combined, expected, tmp_path)


def _grouped_file(path: Path, start: int, seed: int) -> Path:
    rng = np.random.default_rng(seed)
    with netCDF4.Dataset(path, "w") as nc:
        nc.title = "grouped"
        nc.createDimension("time", None)
        time = nc.createVariable("time", "i4", ("time",))
        time.units = "hours since 2000-01-01"
        time[:] = np.arange(start, start + 3)
        nc.createVariable("t", "f4", ("time",))[:] = rng.random(3)
        sub = nc.createGroup("inner")
        sub.createDimension("x", 2)
        sub.createVariable("v", "f8", ("time", "x"), chunksizes=(1, 2))[:] = rng.random((3, 2))
        sub.createVariable("x", "i2", ("x",))[:] = [10, 20]
        deeper = sub.createGroup("deeper")
        deeper.createVariable("w", "i8", ("time",))[:] = rng.integers(0, 99, 3)
    return path


def test_nested_groups_combine_group_by_group(tmp_path: Path) -> None:
    paths = [_grouped_file(tmp_path / f"g{k}.nc", 3 * k, k) for k in range(3)]
    combined = refzarr.combine(scan_all(paths[::-1]), concat_dims="time")
    tree = refzarr.open_datatree(combined)
    root = open_mf(paths)
    xr.testing.assert_identical(tree.to_dataset().load(), root)
    for group in ("inner", "inner/deeper"):
        with xr.open_mfdataset(
            paths,
            group=group,
            combine="nested",
            concat_dim="time",
            data_vars="minimal",
            coords="minimal",
            engine="netcdf4",
        ) as ds:
            expected = ds.load()
        got = refzarr.open_dataset(combined, group=group).load()
        for name in expected.data_vars:
            np.testing.assert_array_equal(got[name].values, expected[name].values)
            assert got[name].dtype == expected[name].dtype


def test_tree_reduction_equals_one_combine(tmp_path: Path) -> None:
    paths = _days(tmp_path, 6, per_file=2, chunks={"air": (2, 4, 5)})
    groups = scan_all(paths)
    whole = refzarr.combine(groups, concat_dims="time")
    left = refzarr.combine(groups[3:], concat_dims="time")
    right = refzarr.combine(groups[:3], concat_dims="time")
    assert refzarr.combine([left, right], concat_dims="time") == whole
    nested = refzarr.combine(
        [refzarr.combine([left], concat_dims="time"), right], concat_dims="time"
    )
    assert nested == whole
    assert_same_dataset(whole, open_mf(paths), tmp_path)


def test_tree_reduction_of_stacks(tmp_path: Path) -> None:
    paths = [write_nc(daily("2000-01-01", 2, seed=k), tmp_path / f"m{k}.nc") for k in range(4)]
    coords = {"member": ("regex", r"m(\d)")}
    groups = scan_all(paths)
    whole = refzarr.combine(groups, concat_dims="member", coords=coords)
    halves = [
        refzarr.combine(groups[:2], concat_dims="member", coords=coords),
        refzarr.combine(groups[2:], concat_dims="member", coords=coords),
    ]
    assert refzarr.combine(halves[::-1], concat_dims="member") == whole
