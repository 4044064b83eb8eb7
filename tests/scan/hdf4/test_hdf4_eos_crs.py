"""HDF-EOS2 grids get their CRS as rioxarray and GDAL users expect: a 0-d ``spatial_ref``
with ``crs_wkt`` (pyproj), CF grid-mapping attributes and ``GeoTransform``, named by the grid's
fields in ``grid_mapping``. Checked on the MODIS tile of the corpus against GDAL's "MODIS
Sinusoidal" and on small files of every projection refzarr expresses, through refzarr's reader
and through fsspec + zarr on the JSON and Parquet it writes; projections it cannot express get
no CRS at all."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import rioxarray  # noqa: F401  (the .rio accessor)
import xarray as xr
from affine import Affine
from h4kit import all_readers, assert_matches_pyhdf, write_eos_grid
from hypothesis import given, settings
from hypothesis import strategies as st
from pyproj import CRS, Transformer

import refzarr
from corpus import CORPUS
from refzarr.scan.hdf4 import gctp
from refzarr.scan.hdf4.eos import EosGrid, axes, geotransform
from roundtrip import reference_options

pytestmark = [
    # rioxarray 0.19's transform() multiplies affines with `*`, which affine 3.1 deprecates
    pytest.mark.filterwarnings(
        "ignore:Use `@` matmul instead of `\\*` mul operator:PendingDeprecationWarning"
    ),
    # fsspec's LazyReferenceMapper reads Parquet references with pandas' fastparquet engine
    pytest.mark.filterwarnings(
        "ignore:The 'fastparquet' engine is deprecated:pandas.errors.Pandas4Warning"
    ),
]

MODIS = CORPUS / "hdf4" / "MOD09GA.A2008296.h14v17.006.2015181011753.hdf"
MODIS_SINUSOIDAL = CRS.from_proj4("+proj=sinu +lon_0=0 +x_0=0 +y_0=0 +R=6371007.181 +units=m")
GDAL_MODIS_WKT = (
    'PROJCS["unnamed",GEOGCS["Unknown datum based upon the custom spheroid",'
    'DATUM["Not specified (based on custom spheroid)",SPHEROID["Custom spheroid",6371007.181,0]],'
    'PRIMEM["Greenwich",0],UNIT["degree",0.0174532925199433]],PROJECTION["Sinusoidal"],'
    'PARAMETER["longitude_of_center",0],PARAMETER["false_easting",0],'
    'PARAMETER["false_northing",0],UNIT["Meter",1]]'
)
"""What GDAL's HDF4 driver reports for MODIS land grids (the well-known "MODIS Sinusoidal")."""

GRIDS = {"MODIS_Grid_500m_2D": 2400, "MODIS_Grid_1km_2D": 1200}
Opener = Callable[[refzarr.RefGroup, Path], xr.Dataset]


def _refzarr(group: refzarr.RefGroup, folder: Path) -> xr.Dataset:
    return refzarr.open_dataset(group)


def _zarr(suffix: str) -> Opener:
    def open_(group: refzarr.RefGroup, folder: Path) -> xr.Dataset:
        target = folder / f"refs.{suffix}"
        refzarr.write(group, target)
        return xr.open_dataset(
            "reference://",
            engine="zarr",
            backend_kwargs={"storage_options": reference_options(target), "consolidated": False},
        )

    return open_


OPENERS = {"refzarr": _refzarr, "zarr+json": _zarr("json"), "zarr+parquet": _zarr("parq")}


def assert_same_crs(found: CRS, expected: CRS) -> None:
    """Equal CRSs as PROJ compares them, or else (CF attributes give CRSs named "undefined";
    PROJ gives a polar proj-string's CRS axes towards the south) the same ellipsoid and the
    same geographic position of points of the test grid."""
    if found == expected:
        return
    assert found.is_geographic == expected.is_geographic
    a, b = found.ellipsoid, expected.ellipsoid
    assert a is not None
    assert b is not None
    assert a.semi_major_metre == pytest.approx(b.semi_major_metre, rel=0, abs=1e-6)
    assert a.semi_minor_metre == pytest.approx(b.semi_minor_metre, rel=0, abs=1e-3)
    if found.is_geographic:
        return
    points = ([-40000.0, 0.0, 40000.0], [30000.0, 0.0, -30000.0])
    got = Transformer.from_crs(found, "EPSG:4326", always_xy=True).transform(*points)
    want = Transformer.from_crs(expected, "EPSG:4326", always_xy=True).transform(*points)
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-9)  # degrees: ~0.1 mm


def _gt(array: refzarr.RefArray) -> list[float]:
    return [float(v) for v in array.meta.attributes["GeoTransform"].split()]


def _centres(gt: list[float], columns: int, rows: int) -> tuple[np.ndarray, np.ndarray]:
    x = gt[0] + (np.arange(columns) + 0.5) * gt[1]
    y = gt[3] + (np.arange(rows) + 0.5) * gt[5]
    return x, y


@pytest.fixture(scope="module")
def modis() -> refzarr.RefGroup:
    if not MODIS.exists():
        pytest.skip("corpus absent")
    return refzarr.scan(MODIS)


@pytest.mark.parametrize("grid", GRIDS)
def test_modis_crs_is_gdals_modis_sinusoidal(modis: refzarr.RefGroup, grid: str) -> None:
    ref = modis[f"spatial_ref:{grid}"]
    assert isinstance(ref, refzarr.RefArray)
    assert ref.shape == ()
    wkt = ref.meta.attributes["crs_wkt"]
    assert CRS.from_wkt(wkt) == MODIS_SINUSOIDAL
    assert CRS.from_wkt(wkt) == CRS.from_wkt(GDAL_MODIS_WKT)
    assert ref.meta.attributes["spatial_ref"] == wkt  # rioxarray reads this one first
    cells = GRIDS[grid]
    size = (-3335851.559 + 4447802.078667) / cells  # GDAL: (LowerRight - UpperLeft) / size
    assert _gt(ref) == pytest.approx([-4447802.078667, size, 0, -8895604.157333, 0, -size])
    x, y = _centres(_gt(ref), cells, cells)
    np.testing.assert_allclose(_read(modis, f"XDim:{grid}"), x, rtol=0, atol=1e-6)
    np.testing.assert_allclose(_read(modis, f"YDim:{grid}"), y, rtol=0, atol=1e-6)


def _read(group: refzarr.RefGroup, name: str) -> np.ndarray:
    return np.asarray(refzarr.open_dataset(group)[name].values)


def test_modis_grid_fields_name_their_grid_mapping(modis: refzarr.RefGroup) -> None:
    named = {}
    for path, array in modis.arrays():
        dims = array.meta.dimension_names or ()
        mapping = array.meta.attributes.get("grid_mapping")
        grid = next((g for g in GRIDS if f"XDim:{g}" in dims and f"YDim:{g}" in dims), None)
        assert mapping == (None if grid is None else f"spatial_ref:{grid}"), path
        if grid is not None:
            assert array.meta.attributes["coordinates"] == mapping
            named[path] = grid
    assert len(named) == 21  # the 10 + 11 fields of the two grids; compact arrays have none
    spatial = [p for p, _ in modis.arrays() if p.startswith("spatial_ref")]
    assert spatial == [f"spatial_ref:{g}" for g in ("MODIS_Grid_1km_2D", "MODIS_Grid_500m_2D")]


@pytest.mark.parametrize("opener", OPENERS)
def test_modis_rioxarray_crs_and_transform(
    modis: refzarr.RefGroup, tmp_path: Path, opener: str
) -> None:
    ds = OPENERS[opener](modis, tmp_path)
    for grid, cells in GRIDS.items():
        fields = [
            k for k, v in ds.data_vars.items() if v.attrs.get("grid_mapping", "").endswith(grid)
        ]
        one = ds[fields]  # one grid's fields: each grid has its own GeoTransform
        expected = Affine.from_gdal(*_gt(modis[f"spatial_ref:{grid}"]))
        for found in (one, one[fields[0]]):
            assert CRS.from_wkt(found.rio.crs.to_wkt()) == MODIS_SINUSOIDAL
            assert found.rio.transform().almost_equals(expected, precision=1e-6)
            assert found.rio.transform(recalc=True).almost_equals(expected, precision=1e-6)
            assert found.rio.shape == (cells, cells)
    to_lonlat = Transformer.from_crs(ds["sur_refl_b01_1"].rio.crs, "EPSG:4326", always_xy=True)
    lon, lat = to_lonlat.transform(-3335851.559, -8895604.157333)  # the tile's upper-right
    assert lat == pytest.approx(-80.0)  # tile v17 starts at 80 S (tiles are 10 degrees high)
    assert lon == pytest.approx(-3335851.559 / (6371007.181 * np.cos(np.radians(80))) * 180 / np.pi)


CASES: dict[str, tuple[str, str, str]] = {
    # name: (Projection, lines after it, the CRS as PROJ says it)
    "sinusoidal-modis": (
        "GCTP_SNSOID",
        "ProjParams=(6371007.181000,0,0,0,0,0,0,0,0,0,0,0,0)\nSphereCode=-1",
        "+proj=sinu +lon_0=0 +x_0=0 +y_0=0 +R=6371007.181",
    ),
    "sinusoidal-sphere-code": (
        "GCTP_SNSOID",
        "ProjParams=(0,0,0,0,0,0,0,0,0,0,0,0,0)\nSphereCode=21",
        "+proj=sinu +lon_0=0 +x_0=0 +y_0=0 +R=6371007.181",
    ),
    "sinusoidal-gctp-default-sphere": (
        "GCTP_SNSOID",
        "ProjParams=(0,0,0,0,10030000.0,0,1000,2000,0,0,0,0,0)\nSphereCode=-1",
        "+proj=sinu +lon_0=10.5 +x_0=1000 +y_0=2000 +R=6370997",
    ),
    "polar-stereographic-nsidc": (
        "GCTP_PS",
        "ProjParams=(6378273.0,6356889.449,0,0,-45000000.0,70000000.0,0,0,0,0,0,0,0)\n"
        "SphereCode=-1",
        "+proj=stere +lat_0=90 +lat_ts=70 +lon_0=-45 +x_0=0 +y_0=0 +a=6378273 +b=6356889.449",
    ),
    "polar-stereographic-south": (
        "GCTP_PS",
        "ProjParams=(0,0,0,0,0,-71000000.0,0,0,0,0,0,0,0)\nSphereCode=12",
        "+proj=stere +lat_0=-90 +lat_ts=-71 +lon_0=0 +x_0=0 +y_0=0 +ellps=WGS84",
    ),
    "utm-zone-code": (
        "GCTP_UTM",
        "ZoneCode=-13\nProjParams=(0,0,0,0,0,0,0,0,0,0,0,0,0)\nSphereCode=12",
        "+proj=utm +zone=13 +south +ellps=WGS84",
    ),
    "utm-zone-of-a-point": (
        "GCTP_UTM",
        "ZoneCode=0\nProjParams=(-105030000.0,40000000.0,0,0,0,0,0,0,0,0,0,0,0)\nSphereCode=8",
        "+proj=utm +zone=13 +ellps=GRS80",
    ),
    "transverse-mercator": (
        "GCTP_TM",
        "ProjParams=(0,0,0.9999,0,9000000.0,0,500000,0,0,0,0,0,0)\nSphereCode=8",
        "+proj=tmerc +lat_0=0 +lon_0=9 +k=0.9999 +x_0=500000 +y_0=0 +ellps=GRS80",
    ),
    "lambert-azimuthal-ease": (
        "GCTP_LAMAZ",
        "ProjParams=(6371228.0,0,0,0,0,90000000.0,0,0,0,0,0,0,0)\nSphereCode=-1",
        "+proj=laea +lat_0=90 +lon_0=0 +x_0=0 +y_0=0 +R=6371228",
    ),
    "albers-conus": (
        "GCTP_ALBERS",
        "ProjParams=(0,0,29030000.0,45030000.0,-96000000.0,23000000.0,0,0,0,0,0,0,0)\nSphereCode=8",
        "+proj=aea +lat_1=29.5 +lat_2=45.5 +lat_0=23 +lon_0=-96 +x_0=0 +y_0=0 +ellps=GRS80",
    ),
    "albers-hdfeos-default-spheroid": (
        "GCTP_ALBERS",
        "ProjParams=(0,0,29030000.0,45030000.0,-96000000.0,23000000.0,0,0,0,0,0,0,0)",
        "+proj=aea +lat_1=29.5 +lat_2=45.5 +lat_0=23 +lon_0=-96 +x_0=0 +y_0=0 +ellps=clrk66",
    ),
    "lambert-conformal-eccentricity": (
        "GCTP_LAMCC",
        "ProjParams=(6378137.0,0.00669437999014,33000000.0,45000000.0,-97000000.0,"
        "40000000.0,1000000,500000,0,0,0,0,0)\nSphereCode=-1",
        "+proj=lcc +lat_1=33 +lat_2=45 +lat_0=40 +lon_0=-97 +x_0=1000000 +y_0=500000 "
        "+a=6378137 +rf=298.257223563",
    ),
    "mercator": (
        "GCTP_MERCAT",
        "ProjParams=(6378137.0,6356752.314245,0,0,100000000.0,30030000.0,0,0,0,0,0,0,0)\n"
        "SphereCode=-1",
        "+proj=merc +lon_0=100 +lat_ts=30.5 +x_0=0 +y_0=0 +ellps=WGS84",
    ),
    "geographic-hdfeos-default": ("GCTP_GEO", "", "+proj=longlat +ellps=clrk66"),
    "geographic-sphere-code": ("GCTP_GEO", "SphereCode=12", "+proj=longlat +ellps=WGS84"),
}

CF_CHECKED = {next(k for k, v in CASES.items() if v[0] == p) for p, _, _ in CASES.values()}
"""One case of each projection: its CF attributes alone give the CRS too."""

GEO_CORNERS = ("(-124030000.000000,49015030.000000)", "(-66000000.000000,24030000.000000)")
"""Packed DDDMMMSSS.SS: 124 30' W, 49 15' 30" N to 66 W, 24 30' N."""


def _case(folder: Path, name: str) -> tuple[Path, CRS]:
    projection, params, proj = CASES[name]
    corners = (
        GEO_CORNERS if projection == "GCTP_GEO" else ("(-40000.0,30000.0)", "(40000.0,-30000.0)")
    )
    path = write_eos_grid(folder / f"{name}.hdf", projection, params, corners=corners)
    return path, CRS.from_proj4(f"{proj} +units=m" if "longlat" not in proj else proj)


@pytest.mark.parametrize("name", CASES)
def test_projection_crs_and_geotransform(tmp_path: Path, name: str) -> None:
    path, expected = _case(tmp_path, name)
    group = refzarr.scan(path)
    ref = group["spatial_ref"]  # one grid: rioxarray's usual name
    attrs = ref.meta.attributes
    assert_same_crs(CRS.from_wkt(attrs["crs_wkt"]), expected)
    if name in CF_CHECKED:  # what a reader without the WKT finds (from_cf takes ~1 s)
        cf = {k: v for k, v in attrs.items() if k not in ("crs_wkt", "spatial_ref", "GeoTransform")}
        assert_same_crs(CRS.from_cf(cf), expected)
    assert group["band"].meta.attributes["grid_mapping"] == "spatial_ref"
    gt = _gt(ref)
    x, y = _centres(gt, 4, 3)
    ds = refzarr.open_dataset(group)
    np.testing.assert_allclose(ds["XDim:G"].values, x, rtol=0, atol=1e-9)
    np.testing.assert_allclose(ds["YDim:G"].values, y, rtol=0, atol=1e-9)
    if CASES[name][0] == "GCTP_GEO":  # corners in packed degrees, GeoTransform in degrees
        assert gt == pytest.approx(
            [-124.5, 58.5 / 4, 0, 49 + 15 / 60 + 30 / 3600, 0, -(24.75 + 30 / 3600) / 3]
        )
    else:
        assert gt == [-40000.0, 20000.0, 0.0, 30000.0, 0.0, -20000.0]
    assert_same_crs(CRS.from_wkt(ds.rio.crs.to_wkt()), expected)  # the whole dataset: one grid
    assert ds.rio.transform().almost_equals(Affine.from_gdal(*gt), precision=1e-9)


@pytest.mark.parametrize("name", ["sinusoidal-modis", "geographic-hdfeos-default", "utm-zone-code"])
@pytest.mark.parametrize("opener", ["zarr+json", "zarr+parquet"])
def test_projection_through_fsspec_and_zarr(tmp_path: Path, name: str, opener: str) -> None:
    path, expected = _case(tmp_path, name)
    group = refzarr.scan(path)
    assert_matches_pyhdf(path, group, all_readers(group, tmp_path))  # values and attributes
    ds = OPENERS[opener](group, tmp_path)
    assert "spatial_ref" in ds["band"].coords
    assert_same_crs(CRS.from_wkt(ds["band"].rio.crs.to_wkt()), expected)
    gt = _gt(group["spatial_ref"])
    assert ds["band"].rio.transform().almost_equals(Affine.from_gdal(*gt), precision=1e-9)


@pytest.mark.parametrize(
    ("projection", "params"),
    [
        ("GCTP_ISINUS", "ProjParams=(6371007.181,0,0,0,0,0,0,0,86400,0,1,0,0)\nSphereCode=-1"),
        ("GCTP_HOM", "ProjParams=(0,0,0.9996,0,0,0,0,0,0,0,0,0,0)\nSphereCode=12"),
        ("GCTP_BCEA", "ProjParams=(6371228,0,0,0,0,30000000,0,0,0,0,0,0,0)\nSphereCode=-1"),
        # GCTP computes sinusoidal on its 6370997 m sphere, GDAL on the ellipsoid: no guess
        ("GCTP_SNSOID", "ProjParams=(0,0,0,0,0,0,0,0,0,0,0,0,0)\nSphereCode=12"),
        ("GCTP_SNSOID", "ProjParams=(6378137,6356752.3,0,0,0,0,0,0,0,0,0,0,0)\nSphereCode=-1"),
        # spheroid codes from 22 on differ between GCTP versions
        ("GCTP_PS", "ProjParams=(0,0,0,0,0,70000000,0,0,0,0,0,0,0)\nSphereCode=25"),
        ("GCTP_UTM", "ZoneCode=0\nProjParams=(0,0,0,0,0,0,0,0,0,0,0,0,0)\nSphereCode=12"),
        ("GCTP_UTM", "ZoneCode=61\nProjParams=(0,0,0,0,0,0,0,0,0,0,0,0,0)\nSphereCode=12"),
        ("GCTP_TM", "ProjParams=(0,0,0,0,9000000,0,0,0,0,0,0,0,0)\nSphereCode=8"),
        ("GCTP_PS", "ProjParams=(unreadable)\nSphereCode=12"),
        ("GCTP_PS", "SphereCode=12"),  # no ProjParams
        ("GCTP_PS", "ProjParams=(6378137,1,0,0,0,70000000,0,0,0,0,0,0,0)\nSphereCode=-1"),
        ("GCTP_PS", "ProjParams=(6356752,6378137,0,0,0,70000000,0,0,0,0,0,0,0)\nSphereCode=-1"),
        # no SphereCode: HDF-EOS's default Clarke 1866, an ellipsoid (as SphereCode=0)
        ("GCTP_SNSOID", "ProjParams=(6371007.181,0,0,0,0,0,0,0,0,0,0,0,0)"),
    ],
)
def test_projections_not_expressed_get_no_crs(tmp_path: Path, projection: str, params: str) -> None:
    group = refzarr.scan(write_eos_grid(tmp_path / "g.hdf", projection, params))
    assert "spatial_ref" not in group
    assert "grid_mapping" not in group["band"].meta.attributes
    assert "coordinates" not in group["band"].meta.attributes
    assert "XDim:G" in group
    assert "YDim:G" in group


@pytest.mark.parametrize(
    ("extra", "x", "y"),
    [
        ("GridOrigin=HDFE_GD_UL\nPixelRegistration=HDFE_CORNER", [-40000, -20000], [30000, 10000]),
        ("GridOrigin=HDFE_GD_LL", [-30000, -10000], [-20000, 0]),
        ("GridOrigin=HDFE_GD_LR\nPixelRegistration=HDFE_CORNER", [40000, 20000], [-30000, -10000]),
    ],
)
def test_origin_and_registration_keep_geotransform_and_coordinates_one(
    tmp_path: Path, extra: str, x: list[float], y: list[float]
) -> None:
    """GridOrigin orders rows and columns; HDFE_CORNER puts values on cell corners: the
    GeoTransform's cell centres stay the coordinates' values (rioxarray's recalculated
    transform agrees with it)."""
    params = "ProjParams=(6371007.181,0,0,0,0,0,0,0,0,0,0,0,0)\nSphereCode=-1"
    group = refzarr.scan(write_eos_grid(tmp_path / "g.hdf", "GCTP_SNSOID", params, extra=extra))
    ds = refzarr.open_dataset(group)
    gt = _gt(group["spatial_ref"])
    cx, cy = _centres(gt, 4, 3)
    np.testing.assert_allclose(ds["XDim:G"].values[:2], x)
    np.testing.assert_allclose(ds["YDim:G"].values[:2], y)
    np.testing.assert_allclose(ds["XDim:G"].values, cx, rtol=0, atol=1e-9)
    np.testing.assert_allclose(ds["YDim:G"].values, cy, rtol=0, atol=1e-9)
    assert ds.rio.transform(recalc=True).almost_equals(Affine.from_gdal(*gt), precision=1e-9)


def test_without_pyproj_cf_attributes_and_geotransform(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without pyproj: no WKT (refzarr does not write one itself), but the CF grid-mapping
    attributes, from which pyproj (or any CF reader) builds the same CRS, and GeoTransform."""
    path, expected = _case(tmp_path, "polar-stereographic-nsidc")
    gctp._wkt.cache_clear()
    try:
        with monkeypatch.context() as patched:
            patched.setitem(sys.modules, "pyproj", None)  # import pyproj raises ImportError
            group = refzarr.scan(path)
    finally:
        gctp._wkt.cache_clear()
    attrs: dict[str, Any] = dict(group["spatial_ref"].meta.attributes)
    assert "crs_wkt" not in attrs
    assert "spatial_ref" not in attrs
    assert attrs.pop("GeoTransform") == "-40000.0 20000.0 0.0 30000.0 0.0 -20000.0"
    assert attrs["grid_mapping_name"] == "polar_stereographic"
    assert_same_crs(CRS.from_cf(attrs), expected)


def test_eos_coordinates_false_gives_no_crs(tmp_path: Path) -> None:
    path, _ = _case(tmp_path, "sinusoidal-modis")
    group = refzarr.scan(path, eos_coordinates=False)
    assert "spatial_ref" not in group
    assert group["band"].meta.attributes == {"long_name": "a field"}


@settings(max_examples=200, deadline=None)
@given(
    degrees=st.integers(0, 359),
    minutes=st.integers(0, 59),
    seconds=st.floats(0, 59.99, allow_nan=False),
    negative=st.booleans(),
)
def test_packed_degrees(degrees: int, minutes: int, seconds: float, negative: bool) -> None:
    """GCTP's DDDMMMSSS.SS: degrees times 10^6 plus minutes times 10^3 plus seconds."""
    sign = -1 if negative else 1
    packed = sign * (degrees * 1_000_000 + minutes * 1_000 + seconds)
    expected = sign * (degrees + minutes / 60 + seconds / 3600)
    assert gctp.packed_degrees(packed) == pytest.approx(expected, rel=0, abs=1e-9)


@settings(max_examples=200, deadline=None)
@given(
    columns=st.integers(1, 5000),
    rows=st.integers(1, 5000),
    left=st.floats(-2e7, 2e7),
    top=st.floats(-2e7, 2e7),
    width=st.floats(1.0, 4e7),
    height=st.floats(1.0, 4e7),
    origin=st.sampled_from(["HDFE_GD_UL", "HDFE_GD_UR", "HDFE_GD_LL", "HDFE_GD_LR"]),
    registration=st.sampled_from(["HDFE_CENTER", "HDFE_CORNER"]),
)
def test_geotransform_centres_are_the_coordinates(
    columns: int,
    rows: int,
    left: float,
    top: float,
    width: float,
    height: float,
    origin: str,
    registration: str,
) -> None:
    grid = EosGrid(
        "G",
        columns,
        rows,
        (left, top),
        (left + width, top - height),
        "GCTP_SNSOID",
        origin,
        registration,
    )
    x, y = axes(grid)
    gt = geotransform(grid)
    assert (gt[2], gt[4]) == (0.0, 0.0)
    cx, cy = _centres(list(gt), columns, rows)
    np.testing.assert_allclose(x, cx, rtol=1e-12, atol=1e-6)
    np.testing.assert_allclose(y, cy, rtol=1e-12, atol=1e-6)
    assert abs(gt[1]) * columns == pytest.approx(width)
    assert abs(gt[5]) * rows == pytest.approx(height)
