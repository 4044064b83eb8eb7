"""Files whose length along the concat dimension is not a multiple of the chunk length, or whose
chunk lengths differ: the combined grid is rectilinear there, refzarr reads exactly what
``xr.open_mfdataset`` reads, and kerchunk writers refuse it naming the files."""

from __future__ import annotations

from pathlib import Path

import pytest
import xarray as xr
from kit import assert_same_dataset, daily, open_kerchunk, scan_all, write_nc

import refzarr
from refzarr import RefArray, UnsupportedFeatureError


def _files(
    tmp_path: Path, lengths: list[int], chunks: list[int], *, unlimited: bool = False
) -> list[Path]:
    paths, start = [], 1
    for k, (n, c) in enumerate(zip(lengths, chunks, strict=True)):
        ds = daily(f"2000-01-{start:02d}", n, seed=k)
        path = tmp_path / f"u{k}.nc"
        paths.append(write_nc(ds, path, chunks={"air": (c, 2, 5)}, unlimited=unlimited))
        start += n
    return paths


def _mf(paths: list[Path]) -> xr.Dataset:
    with xr.open_mfdataset(
        paths, combine="nested", concat_dim="time", data_vars="minimal", coords="minimal"
    ) as ds:
        return ds.load()


@pytest.mark.parametrize(
    ("lengths", "chunks"),
    [
        ([3, 2, 4], [2, 2, 2]),  # lengths not multiples of the chunk length
        ([4, 3, 5], [2, 3, 4]),  # chunk lengths differ
        ([1, 5, 2], [1, 5, 2]),  # one chunk per file, each its own length
    ],
)
def test_uneven_files_read_exactly(tmp_path: Path, lengths: list[int], chunks: list[int]) -> None:
    paths = _files(tmp_path, lengths, chunks)
    combined = refzarr.combine(scan_all(paths[::-1]), concat_dims="time")
    air = combined["air"]
    assert isinstance(air, RefArray)
    assert not air.meta.is_regular
    rect = air.meta.rectilinear
    assert rect is not None
    assert rect[0] is not None
    assert rect[1:] == (None, None)
    assert air.meta.chunks[0] == max(rect[0].stored)
    assert_same_dataset(combined, _mf(paths))
    with refzarr.open_dataset(combined, chunks={}) as lazy:
        xr.testing.assert_identical(lazy.load(), _mf(paths))


@pytest.mark.parametrize("suffix", ["refs.json", "refs.parq"])
def test_kerchunk_formats_refuse_uneven_grids(tmp_path: Path, suffix: str) -> None:
    paths = _files(tmp_path, [3, 2], [2, 2])
    combined = refzarr.combine(scan_all(paths), concat_dims="time")
    with pytest.raises(UnsupportedFeatureError, match=r"'air'") as raised:
        refzarr.write(combined, tmp_path / suffix)
    assert str(paths[0]) in str(raised.value)
    assert not (tmp_path / suffix).exists()


def test_short_last_file_stays_regular(tmp_path: Path) -> None:
    paths = _files(tmp_path, [4, 2, 1], [2, 2, 2], unlimited=True)  # the last is 1 of 2
    combined = refzarr.combine(scan_all(paths), concat_dims="time")
    air = combined["air"]
    assert isinstance(air, RefArray)
    assert air.meta.is_regular
    assert air.meta.chunks == (2, 2, 5)
    assert_same_dataset(combined, _mf(paths), tmp_path)


def test_uneven_partial_results_combine_again(tmp_path: Path) -> None:
    paths = _files(tmp_path, [3, 2, 4, 1], [2, 2, 3, 1])
    groups = scan_all(paths)
    whole = refzarr.combine(groups, concat_dims="time")
    parts = [
        refzarr.combine(groups[2:], concat_dims="time"),
        refzarr.combine(groups[:2], concat_dims="time"),
    ]
    assert refzarr.combine(parts, concat_dims="time") == whole
    assert_same_dataset(whole, _mf(paths))


def test_regular_result_opens_through_kerchunk(tmp_path: Path) -> None:
    paths = _files(tmp_path, [2, 2, 2], [2, 2, 2])
    combined = refzarr.combine(scan_all(paths), concat_dims="time")
    xr.testing.assert_identical(open_kerchunk(combined, tmp_path / "c.json"), _mf(paths))


def _with_flags(tmp_path: Path, lengths: list[int]) -> list[Path]:
    """Files of ``lengths`` days whose ``air`` is chunked one day each (so it joins
    regularly) and whose small ``flag (time, lat)`` is one contiguous block (inlined)."""
    paths, start = [], 1
    for k, n in enumerate(lengths):
        ds = daily(f"2000-01-{start:02d}", n, seed=k)
        ds["flag"] = (("time", "lat"), (ds["air"].values[:, :, 0] > 280).astype("i1"))
        ds["flag"].attrs = {"flag_meanings": "cold warm"}
        path = tmp_path / f"f{k}.nc"
        paths.append(write_nc(ds, path, chunks={"air": (1, 4, 5)}))
        start += n
    return paths


def test_uneven_inlined_variables_join_into_one_chunk(tmp_path: Path) -> None:
    """A small variable every file holds inlined (GRIB's ``valid_time``, what
    ``inline_threshold`` loads) would join irregularly: its values are already in the
    references, so it becomes one regular inlined array, writable as kerchunk."""
    paths = _with_flags(tmp_path, [3, 4, 2])
    groups = scan_all(paths, inline_threshold=1000)
    assert all(not g["flag"].manifest.paths for g in groups)  # type: ignore[union-attr]
    combined = refzarr.combine(groups, concat_dims="time")
    flag = combined["flag"]
    assert isinstance(flag, RefArray)
    assert flag.meta.is_regular
    assert flag.meta.shape == (9, 4)
    assert combined["air"].meta.is_regular  # type: ignore[union-attr]
    assert_same_dataset(combined, _mf(paths), tmp_path)
    refzarr.write(combined, tmp_path / "refs.parq")
    xr.testing.assert_identical(refzarr.open_dataset(tmp_path / "refs.parq").load(), _mf(paths))


def test_uneven_referenced_variables_stay_irregular(tmp_path: Path) -> None:
    """The same variable referenced in the files (not inlined) keeps its irregular grid:
    joining it would read every file; kerchunk writers refuse it, naming it."""
    paths = _with_flags(tmp_path, [3, 4])
    combined = refzarr.combine(scan_all(paths, inline_threshold=0), concat_dims="time")
    assert not combined["flag"].meta.is_regular  # type: ignore[union-attr]
    assert_same_dataset(combined, _mf(paths))
    with pytest.raises(UnsupportedFeatureError, match=r"'flag'"):
        refzarr.write(combined, tmp_path / "refs.json")


def test_append_of_an_uneven_inlined_variable(tmp_path: Path) -> None:
    """Appending files whose inlined variable would join irregularly gives what combining all
    of them at once gives (JSON and Parquet)."""
    paths = _with_flags(tmp_path, [3, 4, 2])
    groups = scan_all(paths, inline_threshold=1000)
    whole = refzarr.combine(groups, concat_dims="time")
    for suffix in ("refs.json", "refs.parq"):
        target = tmp_path / suffix
        refzarr.write(groups[0], target)
        refzarr.write(refzarr.combine(groups[1:], concat_dims="time"), target, append_dim="time")
        xr.testing.assert_identical(
            refzarr.open_dataset(target).load(), refzarr.open_dataset(whole).load()
        )
