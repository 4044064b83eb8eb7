"""Stacking monthly GeoTIFFs into one (time, y, x) datacube with refzarr.combine, compared with
``xr.concat`` of rioxarray's reading of each file; ``spatial_ref`` kept once; files on different
grids or in another CRS are refused; every overview level stacked with its ``time``."""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pytest
import xarray as xr
from tiffkit import write_geotiff

import refzarr
from refzarr import IncompatibleError

MONTHS = [f"2021-{m:02d}" for m in range(1, 13)]
TIME = refzarr.FromRegex(r"_(\d{4}-\d{2})\.tif$", parse=lambda s: np.datetime64(f"{s}-01", "ns"))


@pytest.fixture(scope="module")
def cogs(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    folder = tmp_path_factory.mktemp("cogs")
    rng = np.random.default_rng(12)
    return [
        write_geotiff(
            folder / f"scene_{month}.tif",
            rng.integers(0, 10_000, (40, 56), dtype=np.uint16),
            nodata="0",
        )
        for month in MONTHS
    ]


def _rioxarray_stack(paths: list[Path]) -> xr.DataArray:
    import rioxarray

    arrays = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for path in paths:
            opened = rioxarray.open_rasterio(path)
            assert isinstance(opened, xr.DataArray)
            arrays.append(opened.load())
    times = [np.datetime64(f"{m}-01", "ns") for m in MONTHS[: len(paths)]]
    return xr.concat(arrays, dim=xr.DataArray(times, dims="time", name="time"))


def test_twelve_cogs_stack_along_time(cogs: list[Path]) -> None:
    groups = [refzarr.scan(path) for path in reversed(cogs)]  # input order does not matter
    cube = refzarr.combine(
        groups,
        concat_dims="time",
        coords={"time": TIME},
        identical_dims=["spatial_ref"],
        urls=[str(p) for p in reversed(cogs)],
    )
    ds = refzarr.open_dataset(cube, mask_and_scale=False)
    expected = _rioxarray_stack(cogs)
    data = ds["band_data"]
    assert data.dims == ("time", "y", "x")
    np.testing.assert_array_equal(data.values, expected.isel(band=0).values, strict=True)
    np.testing.assert_array_equal(ds["x"].values, expected["x"].values, strict=True)
    np.testing.assert_array_equal(ds["y"].values, expected["y"].values, strict=True)
    np.testing.assert_array_equal(ds["time"].values, expected["time"].values)
    assert ds["spatial_ref"].dims == ()
    assert data.attrs["grid_mapping"] == "spatial_ref"
    assert cube["overview_1/band_data"].meta.shape == (12, 20, 28)


def test_files_on_different_grids_are_named(cogs: list[Path], tmp_path: Path) -> None:
    shifted = write_geotiff(
        tmp_path / "scene_2022-01.tif",
        np.zeros((40, 56), dtype=np.uint16),
        origin=(500_010.0, 4_600_000.0),
        nodata="0",
    )
    paths = [*cogs[:2], shifted]
    groups = [refzarr.scan(path) for path in paths]
    with pytest.raises(IncompatibleError, match=r"scene_2022-01\.tif") as info:
        refzarr.combine(
            groups,
            concat_dims="time",
            coords={"time": TIME},
            identical_dims=["spatial_ref"],
            urls=[str(p) for p in paths],
        )
    assert "scene_2021-01.tif" in str(info.value) or "scene_2021-02.tif" in str(info.value)


def test_stack_by_datetime_tag(tmp_path: Path) -> None:
    """The time of each file from its DateTime tag (``TIFFTAG_DATETIME`` of ``band_data``)."""
    stamps = ["2021:03:01 10:00:00", "2021:01:01 10:00:00", "2021:02:01 10:00:00"]
    paths = [
        write_geotiff(tmp_path / f"f{k}.tif", np.full((20, 24), k, np.uint8), datetime=stamp)
        for k, stamp in enumerate(stamps)
    ]

    def parse(text: str) -> np.datetime64:
        return np.datetime64(text[:10].replace(":", "-") + "T" + text[11:], "ns")

    cube = refzarr.combine(
        [refzarr.scan(p) for p in paths],
        concat_dims="time",
        coords={"time": refzarr.FromAttribute("TIFFTAG_DATETIME", "band_data", parse=parse)},
        identical_dims=["spatial_ref"],
    )
    ds = refzarr.open_dataset(cube)
    assert ds["band_data"].values[:, 0, 0].tolist() == [1, 2, 0]
    assert str(ds["time"].values[0])[:10] == "2021-01-01"


def _stack(paths: list[Path], **options: object) -> refzarr.RefGroup:
    return refzarr.combine(
        [refzarr.scan(p) for p in paths],
        concat_dims="time",
        coords={"time": TIME},
        urls=[str(p) for p in paths],
        **options,  # type: ignore[arg-type]
    )


def test_spatial_ref_is_kept_once_without_being_listed(cogs: list[Path]) -> None:
    """The grid-mapping variable (named by ``band_data``'s ``grid_mapping``) is not stacked
    along the new dimension: one scalar ``spatial_ref`` per level, as rioxarray has."""
    cube = _stack(cogs[:4])
    for prefix in ("", "overview_1/"):
        assert cube[f"{prefix}spatial_ref"].meta.shape == ()
        assert cube[f"{prefix}band_data"].meta.shape[0] == 4
    ds = refzarr.open_dataset(cube, decode_coords="all")
    assert ds["spatial_ref"].dims == ()
    assert "spatial_ref" in ds.coords
    assert ds["spatial_ref"].attrs["crs_wkt"].startswith('PROJCS["WGS 84 / UTM zone 33N"')


@pytest.mark.parametrize("listed", [False, True])
def test_another_crs_is_refused_naming_both(cogs: list[Path], tmp_path: Path, listed: bool) -> None:
    """Same grid numbers, another EPSG code: before, ``identical_dims=["spatial_ref"]``
    compared only the scalar's value (0) and kept the first file's CRS for all."""
    other = write_geotiff(
        tmp_path / "scene_2022-01.tif", np.zeros((40, 56), np.uint16), epsg=32634, nodata="0"
    )
    options = {"identical_dims": ["spatial_ref"]} if listed else {}
    with pytest.raises(IncompatibleError, match=r"grid mapping 'spatial_ref' differs") as info:
        _stack([*cogs[:2], other], **options)
    message = str(info.value)
    assert "scene_2021-01.tif" in message
    assert "scene_2022-01.tif" in message
    assert "UTM zone 33N" in message
    assert "UTM zone 34N" in message


def test_a_shifted_grid_names_the_geotransform(cogs: list[Path], tmp_path: Path) -> None:
    shifted = write_geotiff(
        tmp_path / "scene_2022-01.tif",
        np.zeros((40, 56), np.uint16),
        origin=(500_010.0, 4_600_000.0),
        nodata="0",
    )
    with pytest.raises(IncompatibleError, match=r"'GeoTransform' is '500000\.0 10\.0") as info:
        _stack([cogs[0], shifted])
    assert "'500010.0 10.0" in str(info.value)


def test_every_overview_level_opens_with_its_time(cogs: list[Path]) -> None:
    """``overview_1`` of the stack opened alone is a (time, y, x) cube with ``time``: the
    coordinate combine writes is in every group using the new dimension."""
    import tifffile

    cube = _stack(cogs[:3])
    level = refzarr.open_dataset(cube, group="overview_1", mask_and_scale=False)
    full = refzarr.open_dataset(cube)
    np.testing.assert_array_equal(level["time"].values, full["time"].values)
    assert level["band_data"].dims == ("time", "y", "x")
    expected = []
    for path in cogs[:3]:
        with tifffile.TiffFile(path) as tif:
            expected.append(tif.series[0].levels[1].asarray())
    np.testing.assert_array_equal(level["band_data"].values, np.stack(expected), strict=True)


def test_another_tile_size_is_named_as_such(tmp_path: Path) -> None:
    """With the horizontal predictor the codecs name the tile shape too: the message names
    the tiles (it said "codecs differs ... files compressed differently")."""
    data = np.zeros((40, 56), np.uint16)
    paths = [
        write_geotiff(tmp_path / f"scene_2021-0{k + 1}.tif", data, tile=tile, predictor=True)
        for k, tile in enumerate([(16, 16), (32, 32)])
    ]
    with pytest.raises(IncompatibleError, match=r"chunks along \(y, x\) differs"):
        _stack(paths)


def test_a_stack_appends_to_parquet_with_every_level_s_time(
    cogs: list[Path], tmp_path: Path
) -> None:
    """Each stack's ``time`` is in its own CF units (days since its first month), and the
    copy in ``overview_1`` is combined like the root coordinate (re-encoded), not refused as
    a variable whose ``units`` differ."""
    target = tmp_path / "cube.parq"
    refzarr.write(_stack(cogs[:3]), target)
    refzarr.write(_stack(cogs[3:5]), target, append_dim="time")
    full = xr.open_dataset(target, engine="refzarr")
    level = xr.open_dataset(target, engine="refzarr", group="overview_1")
    expected = [np.datetime64(f"{m}-01", "ns") for m in MONTHS[:5]]
    np.testing.assert_array_equal(full["time"].values, expected)
    np.testing.assert_array_equal(level["time"].values, expected)
    assert level["band_data"].shape == (5, 20, 28)


def test_multiband_cogs_keep_band_once(tmp_path: Path) -> None:
    """Three-band scenes stacked along ``time``: ``band`` (1..3, as rioxarray numbers it) is
    a dimension coordinate, kept once in every level, not stacked; the written set opened
    with ``engine="refzarr"`` has rioxarray's coordinates plus ``time``."""
    rng = np.random.default_rng(3)
    paths = [
        write_geotiff(
            tmp_path / f"scene_{month}.tif", rng.integers(0, 10_000, (3, 40, 56), np.uint16)
        )
        for month in MONTHS[:4]
    ]
    cube = _stack(paths)
    for prefix in ("", "overview_1/"):
        assert cube[f"{prefix}band"].meta.shape == (3,)
        assert cube[f"{prefix}band_data"].meta.dimension_names == ("time", "band", "y", "x")
    target = tmp_path / "cube.json"
    refzarr.write(cube, target)
    ds = xr.open_dataset(target, engine="refzarr", mask_and_scale=False)
    expected = _rioxarray_stack(paths)
    assert set(ds["band_data"].coords) == set(expected.coords)
    for name in ("time", "band", "x", "y"):
        np.testing.assert_array_equal(ds[name].values, expected[name].values, strict=True)
    np.testing.assert_array_equal(ds["band_data"].values, expected.values, strict=True)


DAYS = ["20240130", "20240131", "20240201", "20240202"]


@pytest.fixture(scope="module")
def daily_cogs(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    folder = tmp_path_factory.mktemp("daily")
    rng = np.random.default_rng(8)
    return [
        write_geotiff(folder / f"cog_{day}.tif", rng.integers(0, 99, (3, 24, 32), np.uint16))
        for day in DAYS
    ]


def _open_cube(target: Path, output: str, sources: Path) -> xr.Dataset:
    if output == "json":
        return xr.open_dataset(target, engine="refzarr", mask_and_scale=False)
    from refzarr.formats.icechunk.repository import open_repository

    prefixes = [sources.resolve().as_uri() + "/"]
    repository = open_repository(str(target), None, prefixes=prefixes)
    store = repository.readonly_session("main").store
    return xr.open_zarr(store, consolidated=False, mask_and_scale=False)


@pytest.mark.parametrize("output", ["json", "icechunk"])
def test_daily_cogs_by_name_on_the_command_line(
    daily_cogs: list[Path], tmp_path: Path, output: str
) -> None:
    """``--coord-regex`` with ``--coord-format %Y%m%d``: a CF time axis (dates, not
    20240131), and tomorrow's one file appended with its own date; ``band`` kept once."""
    from refzarr.cli import main

    if output == "icechunk":
        pytest.importorskip("icechunk")
    target = tmp_path / ("cube.json" if output == "json" else "repo")
    by_name = ["--coord-regex", r"time=_(?P<time>\d{8})\.tif$", "--coord-format", "time=%Y%m%d"]
    common = ["--concat-dim", "time", *by_name, "-o", str(target), "--format", output]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # Icechunk's local-storage warning
        assert main(["scan", *map(str, daily_cogs[:3]), *common]) == 0
        assert main(["scan", str(daily_cogs[3]), *common, "--append-dim", "time"]) == 0
    with _open_cube(target, output, daily_cogs[0].parent) as ds:
        expected = np.array(["2024-01-30", "2024-01-31", "2024-02-01", "2024-02-02"], "M8[ns]")
        np.testing.assert_array_equal(ds["time"].values, expected, strict=True)
        assert ds["time"].encoding["calendar"] == "proleptic_gregorian"
        assert ds["time"].encoding["units"].startswith("days since 2024-01-30")
        assert ds["band_data"].dims == ("time", "band", "y", "x")
        np.testing.assert_array_equal(ds["band"].values, [1, 2, 3], strict=True)
        import tifffile

        stacked = np.stack([tifffile.imread(p) for p in daily_cogs])
        np.testing.assert_array_equal(ds["band_data"].values, stacked, strict=True)
