"""A TIFF pyramid through xarray: every level with its own coordinates from `refzarr.open_groups`
(and ``xr.open_groups(engine="refzarr")``) on the scan, JSON and Parquet, equal to tifffile's
levels and rioxarray's ``overview_level`` coordinates; `open_datatree` refuses the unaligned
levels with advice; the levels side by side make a DataTree; a stack of pyramids too."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import tifffile
import xarray as xr
from tiffkit import write_geotiff

import refzarr
from corpus import corpus_files
from refzarr import RefGroup

LEVELS = 3


@pytest.fixture(scope="module")
def cog(tmp_path_factory: pytest.TempPathFactory) -> Path:
    rng = np.random.default_rng(3)
    data = rng.integers(0, 60_000, (72, 88), dtype=np.uint16)
    folder = tmp_path_factory.mktemp("pyramid")
    return write_geotiff(folder / "scene.tif", data, overviews=LEVELS, nodata="0")


@pytest.fixture(scope="module")
def sources(cog: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The scan, and the scan written as JSON and as Parquet."""
    group = refzarr.scan(cog)
    folder = tmp_path_factory.mktemp("pyramid_refs")
    found: dict[str, Any] = {"scan": group}
    for name in ("refs.json", "refs.parq"):
        refzarr.write(group, folder / name)
        found[name] = str(folder / name)
    return found


def _tifffile_levels(path: Path) -> list[np.ndarray]:
    with tifffile.TiffFile(path) as tif:
        return [level.asarray() for level in tif.series[0].levels]


def _rioxarray(path: Path, level: int) -> xr.DataArray:
    import rioxarray

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        kwargs = {} if level == 0 else {"overview_level": level - 1}
        opened = rioxarray.open_rasterio(path, **kwargs)
    assert isinstance(opened, xr.DataArray)
    return opened


def _level_path(level: int) -> str:
    return "/" if level == 0 else f"/overview_{level}"


@pytest.mark.parametrize("source", ["scan", "refs.json", "refs.parq"])
def test_open_groups_gives_every_level(sources: dict[str, Any], cog: Path, source: str) -> None:
    groups = refzarr.open_groups(sources[source], mask_and_scale=False)
    assert sorted(groups) == ["/", *(f"/overview_{k}" for k in range(1, LEVELS + 1))]
    for level, expected in enumerate(_tifffile_levels(cog)):
        ds = groups[_level_path(level)]
        np.testing.assert_array_equal(ds["band_data"].values, expected, strict=True)
        reference = _rioxarray(cog, level)
        for axis in ("x", "y"):
            np.testing.assert_array_equal(ds[axis].values, reference[axis].values, strict=True)
        got = ds["spatial_ref"].attrs["GeoTransform"].split()
        assert got == reference.coords["spatial_ref"].attrs["GeoTransform"].split()


def test_xarray_open_groups_with_the_engine(sources: dict[str, Any]) -> None:
    groups = xr.open_groups(sources["refs.json"], engine="refzarr")
    assert dict(groups["/overview_2"].sizes) == {"y": 18, "x": 22}


def test_open_datatree_refuses_unaligned_levels_with_advice(sources: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match=r"not aligned(.|\n)*refzarr\.open_groups"):
        refzarr.open_datatree(sources["scan"])
    with pytest.raises(ValueError, match=r"refzarr\.open_groups"):
        xr.open_datatree(sources["refs.json"], engine="refzarr")


def _pyramid(groups: dict[str, xr.Dataset]) -> xr.DataTree:
    """The levels side by side, named by level number as multiscale conventions name them
    (the recipe of docs/formats/tiff.md)."""
    overviews = sorted(
        (p for p in groups if p.startswith("/overview_")), key=lambda p: int(p.rsplit("_")[-1])
    )
    levels = {"0": groups["/"]} | {str(k): groups[p] for k, p in enumerate(overviews, 1)}
    return xr.DataTree.from_dict(levels)


def test_levels_side_by_side_make_a_datatree(sources: dict[str, Any], cog: Path) -> None:
    tree = _pyramid(refzarr.open_groups(sources["scan"], mask_and_scale=False))
    assert list(tree.children) == [str(k) for k in range(LEVELS + 1)]
    for level, expected in enumerate(_tifffile_levels(cog)):
        np.testing.assert_array_equal(tree[f"{level}/band_data"].values, expected, strict=True)


CORPUS = [p for p in corpus_files("tiff") if p.name == "cogeo.tif"]


@pytest.mark.skipif(not CORPUS, reason="the shared corpus is absent")
def test_corpus_cog_and_its_mask_pyramid() -> None:
    """cogeo.tif: six overviews of the image and of its GDAL mask (series_1), every group."""
    path = CORPUS[0]
    group: RefGroup = refzarr.scan(path)
    groups = refzarr.open_groups(group)
    assert len(groups) == 14
    with tifffile.TiffFile(path) as tif:
        for level, reduced in enumerate(tif.series[1].levels):
            name = "/series_1" + ("" if level == 0 else f"/overview_{level}")
            np.testing.assert_array_equal(groups[name]["band_data"].values, reduced.asarray())
    overview = groups["/overview_6"]
    reference = _rioxarray(path, 6)
    np.testing.assert_array_equal(overview["x"].values, reference["x"].values, strict=True)


def test_a_stack_of_pyramids_opens_level_by_level(cog: Path, tmp_path: Path) -> None:
    rng = np.random.default_rng(5)
    paths = [
        write_geotiff(
            tmp_path / f"scene_{m}.tif",
            rng.integers(0, 60_000, (72, 88), dtype=np.uint16),
            overviews=LEVELS,
            nodata="0",
        )
        for m in (1, 2, 3)
    ]
    cube = refzarr.combine(
        [refzarr.scan(p) for p in paths],
        concat_dims="time",
        coords={"time": refzarr.FromRegex(r"scene_(\d)\.tif$")},
        identical_dims=["spatial_ref"],
        urls=[str(p) for p in paths],
    )
    groups = refzarr.open_groups(cube, mask_and_scale=False)
    for level in range(LEVELS + 1):
        got = groups[_level_path(level)]["band_data"]
        assert got.dims == ("time", "y", "x")
        expected = np.stack([_tifffile_levels(p)[level] for p in paths])
        np.testing.assert_array_equal(got.values, expected, strict=True)
