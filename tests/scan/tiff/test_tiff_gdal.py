"""GDAL's metadata and GeoTIFF variants against rioxarray: band descriptions, scale, offset,
dataset items, nodata, PixelIsPoint, geographic CRS; ``spatial_ref`` a coordinate of
``band_data`` with xarray's defaults, so ``da.rio.crs`` finds it."""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pytest
import xarray as xr
from tiffkit import assert_geo_matches_rioxarray, write_geotiff

import refzarr
from roundtrip import reference_options

METADATA = """<GDALMetadata>
  <Item name="SENSOR">test sensor</Item>
  <Item name="CLOUDS">12.5</Item>
  <Item name="DESCRIPTION" sample="0" role="description">red</Item>
  <Item name="DESCRIPTION" sample="1" role="description">nir</Item>
  <Item name="SCALE" sample="0" role="scale">0.01</Item>
  <Item name="SCALE" sample="1" role="scale">0.01</Item>
  <Item name="OFFSET" sample="0" role="offset">-5</Item>
  <Item name="OFFSET" sample="1" role="offset">-5</Item>
  <Item name="WEBP_LEVEL" domain="IMAGE_STRUCTURE">75</Item>
</GDALMetadata>"""


def _rioxarray(path: Path) -> xr.DataArray:
    import rioxarray

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        opened = rioxarray.open_rasterio(path, mask_and_scale=False)
    assert isinstance(opened, xr.DataArray)
    return opened


def test_gdal_metadata_as_rioxarray_shows_it(tmp_path: Path) -> None:
    data = np.random.default_rng(5).integers(0, 9000, (2, 40, 36), dtype=np.int16)
    path = write_geotiff(
        tmp_path / "meta.tif",
        data,
        nodata="-9999",
        gdal_metadata=METADATA,
        epsg=4326,
        pixel=0.01,
        origin=(10.0, 50.0),
    )
    group = refzarr.scan(path)
    attrs = dict(group["band_data"].meta.attributes)
    expected = _rioxarray(path)
    for key in ("scale_factor", "add_offset", "SENSOR", "CLOUDS", "_FillValue"):
        assert attrs[key] == expected.attrs[key], key
    assert tuple(attrs["long_name"]) == tuple(expected.attrs["long_name"])
    assert "WEBP_LEVEL" not in attrs
    assert group["band_data"].meta.fill_value == -9999
    assert_geo_matches_rioxarray(group, path)
    ds = refzarr.open_dataset(group)  # CF decoding: masked, scaled
    values = data * 0.01 - 5
    np.testing.assert_allclose(ds["band_data"].values, values.astype(ds["band_data"].dtype))


@pytest.mark.parametrize("point", [False, True])
def test_pixel_is_point(point: bool, tmp_path: Path) -> None:
    data = np.arange(30 * 20, dtype=np.uint8).reshape(30, 20)
    path = write_geotiff(tmp_path / "point.tif", data, point=point, overviews=0)
    group = refzarr.scan(path)
    assert_geo_matches_rioxarray(group, path)
    assert (group["band_data"].meta.attributes.get("AREA_OR_POINT") == "Point") is point


def test_without_pyproj_the_epsg_code_is_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import sys

    from refzarr.scan.tiff import geo

    path = write_geotiff(tmp_path / "plain.tif", np.zeros((20, 20), np.uint8), overviews=0)
    monkeypatch.setitem(sys.modules, "pyproj", None)  # import pyproj now raises ImportError
    geo._epsg_attributes.cache_clear()
    try:
        attrs = refzarr.scan(path)["spatial_ref"].meta.attributes
    finally:
        geo._epsg_attributes.cache_clear()
    assert attrs["crs_epsg"] == 32633
    assert "crs_wkt" not in attrs
    assert attrs["GeoTransform"] == "500000.0 10.0 0.0 4600000.0 0.0 -10.0"


def test_codec_module_needs_no_imagecodecs() -> None:
    import subprocess
    import sys

    code = (
        "import sys; sys.modules['imagecodecs'] = None; import numcodecs, refzarr.codecs.tiff; "
        "c = numcodecs.get_codec({'id': 'refzarr.tiff_pad', 'nbytes': 4, 'short': 2}); "
        "print(bytes(c.decode(b'ab')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "b'ab\\x00\\x00'"


def test_spatial_ref_is_a_coordinate_with_xarray_defaults(tmp_path: Path) -> None:
    """Opened with xarray's default ``decode_coords`` (as the JSON through
    ``engine="refzarr"`` and through fsspec + the zarr engine), ``band_data`` carries
    ``spatial_ref`` as rioxarray's ``open_rasterio`` does: ``da.rio.crs`` is the file's CRS
    (it was None: ``spatial_ref`` was a data variable, found only with ``decode_coords="all"``)."""
    import rioxarray  # noqa: F401  (the .rio accessor)

    path = write_geotiff(tmp_path / "scene.tif", np.ones((20, 24), np.uint8), epsg=32633)
    target = tmp_path / "scene.json"
    refzarr.write(refzarr.scan(path), target)
    opened = [
        xr.open_dataset(target, engine="refzarr"),
        xr.open_dataset(
            "reference://",
            engine="zarr",
            backend_kwargs={"storage_options": reference_options(target), "consolidated": False},
        ),
    ]
    for ds in opened:
        assert list(ds.data_vars) == ["band_data"]
        assert ds["band_data"].rio.crs == "EPSG:32633"
        assert ds["spatial_ref"].dims == ()
