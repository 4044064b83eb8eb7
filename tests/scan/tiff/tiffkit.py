"""TIFF test kit: tifffile's arrays for every series and level of a file, and checks that a
scanned group reads back exactly those, through refzarr and through fsspec + zarr-python 3 on
written JSON and Parquet; rioxarray's coordinates and CRS for GeoTIFFs."""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import tifffile
import xarray as xr
import zarr
from zarr.storage import FsspecStore

import refzarr
import refzarr.scan.tiff.scanner  # registers the codecs TIFF references use
from refzarr import RefGroup
from roundtrip import reference_options

__all__ = [
    "array_paths",
    "assert_geo_matches_rioxarray",
    "assert_matches_tiff",
    "assert_reader_matches_tiff",
    "assert_written_matches_tiff",
    "tiff_arrays",
]


def array_paths(series: int, level: int) -> str:
    """Path of ``band_data`` of a series and level (``series_1/overview_2/band_data``)."""
    parts = [] if series == 0 else [f"series_{series}"]
    if level:
        parts.append(f"overview_{level}")
    return "/".join([*parts, "band_data"])


def tiff_arrays(path: Path) -> dict[str, np.ndarray]:
    """Every series and level of a TIFF as tifffile reads it, by ``band_data`` path."""
    found = {}
    with tifffile.TiffFile(path) as tif:
        for i, series in enumerate(tif.series):
            for level, reduced in enumerate(series.levels):
                found[array_paths(i, level)] = reduced.asarray()
    return found


def _assert_same(got: np.ndarray, expected: np.ndarray, where: str) -> None:
    assert got.shape == expected.shape, f"{where}: shape {got.shape} != {expected.shape}"
    assert got.dtype.newbyteorder("=") == expected.dtype.newbyteorder("="), (
        f"{where}: dtype {got.dtype} != {expected.dtype}"
    )
    nan = expected.dtype.kind in "fc"
    assert np.array_equal(got, expected, equal_nan=nan), f"{where}: values differ"


def _open(store: Any, group: str) -> zarr.Group:
    root = zarr.open_group(store, mode="r", zarr_format=2, use_consolidated=False)
    return root if not group else root[group]


def assert_matches_tiff(group: RefGroup, path: Path) -> None:
    """The group's ``band_data`` arrays read through refzarr equal tifffile's, every series
    and level, and nothing else is a ``band_data``."""
    expected = tiff_arrays(path)
    found = sorted(name for name, _ in group.arrays() if name.endswith("band_data"))
    assert found == sorted(expected)
    root = _open(refzarr.ReferenceStore(group), "")
    for name, values in expected.items():
        _assert_same(np.asarray(root[name][...]), values, f"{path.name}:{name}")


def assert_reader_matches_tiff(group: RefGroup, path: Path) -> None:
    """Every ``band_data`` read by refzarr's own reader (`refzarr.open_groups`, undecoded)
    equals tifffile's, every series and level."""
    groups = refzarr.open_groups(group, mask_and_scale=False, decode_times=False)
    for name, values in tiff_arrays(path).items():
        folder, _, leaf = name.rpartition("/")
        got = groups[f"/{folder}"][leaf].values
        _assert_same(got, values, f"{path.name}:{name} (refzarr reader)")


def assert_written_matches_tiff(group: RefGroup, path: Path, tmp_path: Path) -> None:
    """The group written as JSON and as Parquet reads back through fsspec's
    ReferenceFileSystem + zarr exactly as tifffile reads the file."""
    expected = tiff_arrays(path)
    for target in (tmp_path / f"{path.name}.json", tmp_path / f"{path.name}.parq"):
        refzarr.write(group, target)
        for name, values in expected.items():
            folder, _, leaf = name.rpartition("/")
            store = FsspecStore.from_url(
                f"reference://{folder}", storage_options=reference_options(target), read_only=True
            )
            array = _open(store, "")[leaf]
            _assert_same(np.asarray(array[...]), values, f"{target.name}:{name}")


def _rioxarray(path: Path, level: int | None = None) -> xr.DataArray:
    import rioxarray

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # NotGeoreferencedWarning
        kwargs = {} if level is None else {"overview_level": level}
        opened = rioxarray.open_rasterio(path, **kwargs)
    assert isinstance(opened, xr.DataArray)
    return opened


def assert_geo_matches_rioxarray(group: RefGroup, path: Path, level: int = 0) -> None:
    """``x``, ``y`` and ``spatial_ref`` of series 0 (at an overview level) equal rioxarray's:
    coordinates exactly, CRS equal as pyproj sees it, GeoTransform and GCPs equal."""
    import rioxarray  # noqa: F401  (the .rio accessor)
    from pyproj import CRS

    prefix = f"overview_{level}/" if level else ""
    expected = _rioxarray(path, None if level == 0 else level - 1)
    ref = expected.coords["spatial_ref"].attrs
    ds = refzarr.open_dataset(group, group=prefix.rstrip("/") or None)
    got = ds["spatial_ref"].attrs
    assert ds["band_data"].attrs["grid_mapping"] == "spatial_ref"
    assert "spatial_ref" in ds["band_data"].coords  # as rioxarray: da.rio.crs finds it
    if "crs_wkt" in ref:
        assert CRS.from_wkt(got["crs_wkt"]) == CRS.from_wkt(ref["crs_wkt"]), path.name
        assert ds["band_data"].rio.crs == expected.rio.crs, path.name
        for key in ("grid_mapping_name", "semi_major_axis", "inverse_flattening"):
            if key in ref:
                assert got[key] == ref[key], f"{path.name}: {key}"
    if "gcps" in ref:
        assert json.loads(got["gcps"]) == json.loads(ref["gcps"]), path.name
        assert "x" not in ds.variables
        return
    assert [float(v) for v in got["GeoTransform"].split()] == [
        float(v) for v in ref["GeoTransform"].split()
    ]
    if "x" in expected.coords and expected.coords["x"].ndim == 1:
        np.testing.assert_array_equal(ds["x"].values, expected.coords["x"].values, strict=True)
        np.testing.assert_array_equal(ds["y"].values, expected.coords["y"].values, strict=True)
    else:
        assert "x" not in ds.variables


def write_geotiff(
    path: Path,
    data: np.ndarray,
    *,
    origin: tuple[float, float] = (500_000.0, 4_600_000.0),
    pixel: float = 10.0,
    epsg: int = 32633,
    overviews: int = 1,
    nodata: str | None = None,
    gdal_metadata: str | None = None,
    point: bool = False,
    datetime: str | None = None,
    tile: tuple[int, int] = (16, 16),
    predictor: bool = False,
) -> Path:
    """A small COG-like GeoTIFF: tiled deflate (``predictor``: horizontal), GeoKeys naming
    ``epsg``, ``overviews`` reduced-resolution levels (SubIFDs, halving each time),
    GDAL_NODATA when given."""
    geokeys = [1, 1, 0, 3, 1024, 0, 1, 1, 1025, 0, 1, 2 if point else 1]
    geokeys += [3072 if epsg != 4326 else 2048, 0, 1, epsg]
    if epsg == 4326:
        geokeys[8 + 3] = 1
        geokeys[4 + 3] = 2  # geographic model
    extratags = [
        (33550, "d", 3, (pixel, pixel, 0.0), True),
        (33922, "d", 6, (0.0, 0.0, 0.0, origin[0], origin[1], 0.0), True),
        (34735, "H", len(geokeys), geokeys, True),
    ]
    if nodata is not None:
        extratags.append((42113, "s", 0, nodata, True))
    if gdal_metadata is not None:
        extratags.append((42112, "s", 0, gdal_metadata, True))
    with tifffile.TiffWriter(path) as tif:
        options: dict[str, Any] = {
            "tile": tile,
            "compression": "zlib",
            "predictor": predictor,
            "photometric": "minisblack",
            "metadata": None,
        }
        if data.ndim == 3:
            options["planarconfig"] = "separate"
        tif.write(data, subifds=overviews, extratags=extratags, datetime=datetime, **options)
        for level in range(1, overviews + 1):
            step = 2**level
            tif.write(data[..., ::step, ::step], subfiletype=1, **options)
    return path
