"""Files holding different variables along a concatenation dimension: sets that line up (the
same coordinate values) merge and equal ``xr.open_mfdataset`` on the same files; sets that do
not (other values, no values, unrelated files) raise `IncompatibleError` naming the files,
the variables and the dimension, where xarray would pad with NaN. No silent length-1 axis."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import xarray as xr
from kit import assert_same_dataset, daily, scan_all, write_nc

import refzarr
from corpus import CORPUS

GOES = CORPUS / "netcdf4" / "20171025_2056.Cloud_Top_Height.nc"
ASCAT = CORPUS / "netcdf4" / "issue671.nc"
AIR = CORPUS / "netcdf4" / "kerchunk_air.nc"

_MISALIGNED = r"sets holding different variables, .* along 'time' the sets do not line up"


def _sets(tmp_path: Path, air_start: int, rhum_start: int, count: int = 2) -> list[Path]:
    """``count`` air files of 2 days from day ``air_start``, the same for rhum."""
    paths = []
    for name, start, seed in (("air", air_start, 0), ("rhum", rhum_start, 100)):
        for k in range(count):
            day = f"2000-01-{start + 2 * k:02d}"
            ds = daily(day, 2, seed=seed + k, variables=(name,))
            paths.append(write_nc(ds, tmp_path / f"{name}{k}.nc"))
    return paths


def _mf(paths: list[Path], **options: object) -> xr.Dataset:
    with xr.open_mfdataset(paths, engine="netcdf4", **options) as ds:  # type: ignore[arg-type]
        return ds.load()


@pytest.mark.parametrize("pair", [(GOES, ASCAT), (GOES, AIR)], ids=["ascat", "air"])
def test_unrelated_corpus_files_are_refused_not_stacked(pair: tuple[Path, Path]) -> None:
    groups = scan_all(list(pair))
    with pytest.raises(refzarr.IncompatibleError, match=_MISALIGNED) as info:
        refzarr.combine(groups, concat_dims="time")
    message = str(info.value)
    assert str(pair[0]) in message
    assert str(pair[1]) in message
    assert "HT" in message  # the variables each set holds
    assert "soil_moisture" in message or "air" in message
    assert "no coordinate values along 'time'" in message
    assert "combine each set separately" in message
    assert "refzarr.merge" in message


def test_each_unrelated_file_alone_stacks_like_xarray() -> None:
    """What the message suggests: each set combined alone, where xarray's values are defined
    (xarray stacks both along time with NaN where a file lacks a variable)."""
    with xr.open_mfdataset([GOES, ASCAT], combine="nested", concat_dim="time") as theirs:
        assert theirs.sizes["time"] == 2
        soil = theirs["soil_moisture"].isel(time=1).reset_coords(drop=True).load()
    ours = refzarr.open_dataset(refzarr.combine(scan_all([ASCAT]), concat_dims="time"))
    xr.testing.assert_identical(ours["soil_moisture"].isel(time=0).load(), soil)


@pytest.mark.parametrize("compat", ["equals", "override"])
def test_sets_on_other_dates_are_refused(tmp_path: Path, compat: str) -> None:
    """air on days 1-4, rhum on days 5-8: xarray pads each with NaN; merging them side by
    side would put rhum's days under air's (even unchecked, with compat="override")."""
    paths = _sets(tmp_path, 1, 5)
    with pytest.raises(refzarr.IncompatibleError, match=_MISALIGNED) as info:
        refzarr.combine(scan_all(paths), concat_dims="time", compat=compat)  # type: ignore[arg-type]
    message = str(info.value)
    assert "time=0..3 (4 values, days since 2000-01-01" in message
    assert "time=0..3 (4 values, days since 2000-01-05" in message
    assert all(str(p) in message for p in paths)
    theirs = _mf(paths, combine="by_coords", join="outer")
    assert theirs.sizes["time"] == 8
    assert bool(theirs["air"].isel(time=-1).isnull().all())
    air = refzarr.combine(scan_all(paths[:2]), concat_dims="time")  # each set alone
    assert_same_dataset(air, theirs[["air"]].isel(time=slice(0, 4)).assign_attrs(air.attributes))


def test_one_mislabelled_file_is_named(tmp_path: Path) -> None:
    paths = [write_nc(daily(f"2000-01-{d:02d}", 1, seed=d), tmp_path / f"d{d}.nc") for d in (1, 2)]
    odd = write_nc(daily("2000-01-03", 1, variables=("rhum",)), tmp_path / "d3.nc")
    with pytest.raises(refzarr.IncompatibleError, match=_MISALIGNED) as info:
        refzarr.combine(scan_all([*paths, odd]), concat_dims="time")
    message = str(info.value)
    assert f"1 file ({odd}) holding rhum with time=0 (1 value" in message
    assert "2 files (" in message
    assert "holding air with time=0..1 (2 values" in message
    assert "misnamed or mislabelled files" in message


def test_sets_on_the_same_dates_merge_like_xarray(tmp_path: Path) -> None:
    paths = _sets(tmp_path, 1, 1)
    combined = refzarr.combine(scan_all(paths[::-1]), concat_dims="time")
    theirs = _mf(paths, combine="by_coords")
    assert_same_dataset(combined, theirs[["air", "rhum"]], tmp_path)


def test_sets_stacked_with_coordinates_merge_like_xarray(tmp_path: Path) -> None:
    paths = []
    for name, seed in (("air", 0), ("rhum", 100)):
        for m in range(2):
            ds = daily("2000-01-01", 2, seed=seed + m, variables=(name,))
            paths.append(write_nc(ds, tmp_path / f"{name}_m{m}.nc"))
    coords = {"member": refzarr.FromRegex(r"_m(\d)")}
    combined = refzarr.combine(scan_all(paths), concat_dims="member", coords=coords)
    nested = [[paths[0], paths[2]], [paths[1], paths[3]]]  # member x variable set
    theirs = _mf(nested, combine="nested", concat_dim=["member", None], data_vars="all")  # type: ignore[arg-type]
    theirs = theirs.assign_coords(member=np.arange(2))
    theirs["air"].attrs = {"units": "K", "long_name": "air temperature"}
    assert_same_dataset(combined, theirs, tmp_path)


def test_sets_stacked_by_input_order_are_refused(tmp_path: Path) -> None:
    paths = _sets(tmp_path, 1, 1)
    with pytest.raises(refzarr.IncompatibleError, match=r"along 'member' the sets do not") as info:
        refzarr.combine(scan_all(paths), concat_dims="member")
    assert "no coordinate values along 'member' (placed by input order)" in str(info.value)
    assert "coords=, --coord-regex" in str(info.value)


def test_many_sets_are_summarised(tmp_path: Path) -> None:
    paths = [
        write_nc(daily("2000-01-01", 1, variables=(f"v{k}",)), tmp_path / f"v{k}.nc")
        for k in range(6)
    ]
    with pytest.raises(refzarr.IncompatibleError, match=r"fall into 6 sets") as info:
        refzarr.combine(scan_all(paths), concat_dims="member")
    message = str(info.value)
    assert message.count("placed by input order") == 4
    assert "and 2 more sets" in message
    assert "holding v0 with" in message
