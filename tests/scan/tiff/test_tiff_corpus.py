"""Every TIFF of the shared corpus reads back exactly as tifffile reads every series and level,
through refzarr and through fsspec + zarr on written JSON and Parquet; GeoTIFF coordinates
and CRS equal rioxarray's."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import xarray as xr
from tiffkit import (
    assert_geo_matches_rioxarray,
    assert_matches_tiff,
    assert_reader_matches_tiff,
    assert_written_matches_tiff,
)

import refzarr
from corpus import corpus_files
from refzarr import RefGroup

FILES = corpus_files("tiff")
pytestmark = pytest.mark.skipif(not FILES, reason="the shared corpus is absent")

_scans: dict[Path, RefGroup] = {}


def _scan(path: Path) -> RefGroup:
    if path not in _scans:
        _scans[path] = refzarr.scan(path)
    return _scans[path]


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_corpus_reads_back_through_refzarr(path: Path) -> None:
    assert_matches_tiff(_scan(path), path)  # refzarr's ReferenceStore under zarr-python
    assert_reader_matches_tiff(_scan(path), path)  # refzarr's own reader


# pandas 3 deprecates the fastparquet engine fsspec's LazyReferenceMapper picks first
@pytest.mark.filterwarnings("ignore:The 'fastparquet' engine is deprecated")
@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_corpus_reads_back_through_fsspec_and_zarr(path: Path, tmp_path: Path) -> None:
    assert_written_matches_tiff(_scan(path), path, tmp_path)


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_corpus_georeferencing_as_rioxarray(path: Path) -> None:
    group = _scan(path)
    if "spatial_ref" not in group:
        from tiffkit import _rioxarray

        ref = _rioxarray(path).coords["spatial_ref"].attrs
        assert "crs_wkt" not in ref
        assert "gcps" not in ref
        assert ref["GeoTransform"].split() == ["0.0", "1.0", "0.0", "0.0", "0.0", "1.0"]
        return
    assert_geo_matches_rioxarray(group, path)
    levels = sum(1 for name in group.members if name.startswith("overview_"))
    for level in range(1, levels + 1):
        assert_geo_matches_rioxarray(group, path, level)


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_corpus_text_tags_as_rioxarray(path: Path) -> None:
    from tiffkit import _rioxarray

    expected = {
        k: v
        for k, v in _rioxarray(path).attrs.items()
        if k.startswith("TIFFTAG_") and "RESOLUTION" not in k
    }
    attrs = _scan(path)["band_data"].meta.attributes
    assert {k: v for k, v in attrs.items() if k.startswith("TIFFTAG_")} == expected


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_corpus_band_coordinate_as_rioxarray(path: Path, tmp_path: Path) -> None:
    """``band`` is numbered 1..n (int64) as rioxarray numbers it, in every level of the
    written set opened with ``engine="refzarr"``; a single band has no ``band`` dimension
    (``y, x``, FORMATS.md), so no coordinate either. Coordinates named alike hold equal
    values (rioxarray also gives pixel-index ``x`` / ``y`` to files without georeferencing,
    and 2-D ``xc`` / ``yc`` to rotated ones: refzarr gives neither)."""
    from tiffkit import _rioxarray

    group = _scan(path)
    target = tmp_path / f"{path.name}.json"
    refzarr.write(group, target)
    overviews = sum(1 for n in group.members if n.startswith("overview_"))
    for level, name in enumerate([None, *(f"overview_{k}" for k in range(1, overviews + 1))]):
        expected = _rioxarray(path, None if level == 0 else level - 1)
        bands = expected.sizes["band"]
        ds = xr.open_dataset(target, engine="refzarr", group=name)
        assert ("band" in ds["band_data"].dims) == (bands > 1), name
        assert ("band" in ds.variables) == (bands > 1), name
        if bands > 1:
            assert "band" in ds.indexes, name
            np.testing.assert_array_equal(ds["band"].values, expected["band"].values, strict=True)
        for coord in set(ds.coords) & set(expected.coords) - {"spatial_ref"}:
            np.testing.assert_array_equal(ds[coord].values, expected[coord].values, strict=True)


def test_corpus_layout_cogeo() -> None:
    """The COG: series 0 with six overviews, its GDAL mask as series_1 (bool), JPEG tables."""
    path = next(p for p in FILES if p.name == "cogeo.tif")
    group = _scan(path)
    assert sorted(group.members) == [
        "band",
        "band_data",
        *[f"overview_{k}" for k in range(1, 7)],
        "series_1",
        "spatial_ref",
        "x",
        "y",
    ]
    data = group["band_data"]
    assert data.meta.dimension_names == ("y", "x", "band")
    assert data.meta.chunks == (512, 512, 3)
    assert data.meta.codecs[0]["id"] == "imagecodecs_jpeg"
    assert data.meta.codecs[0]["tables"]
    mask = group["series_1/band_data"]
    assert mask.meta.dtype == bool
    assert "series_1/overview_6/band_data" in group


def test_corpus_nodata_and_gdal_metadata() -> None:
    by_name = {p.name: p for p in FILES}
    nodata = _scan(by_name["all-nodata.tif"])["band_data"].meta
    assert nodata.fill_value == 0
    assert nodata.attributes["_FillValue"] == 0
    assert list(nodata.attributes["long_name"]) == ["blue", "green", "red", "nir"]
    assert nodata.dimension_names == ("band", "y", "x")
    nan = _scan(by_name["float_nan.tif"])["band_data"].meta
    assert nan.fill_value != nan.fill_value  # NaN
