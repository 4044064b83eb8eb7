"""A MODIS archive as a user builds it: daily copies of the corpus tile scanned with
``refzarr scan --concat-dim time --coord-regex --coord-format``, read back against pyhdf, and a
granule of another tile mixed in (named by its grid mapping's GeoTransform)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import rioxarray  # noqa: F401  (the .rio accessor)
import xarray as xr
from pyhdf.SD import SD

import refzarr
from corpus import CORPUS
from refzarr.cli import main

MODIS = CORPUS / "hdf4" / "MOD09GA.A2008296.h14v17.006.2015181011753.hdf"
SCAN = ["--concat-dim", "time", "--coord-regex", r"time=A(\d{7})", "--coord-format", "time=%Y%j"]


def _daily(folder: Path, day: int, tile: str = "h14v17") -> Path:
    path = folder / f"MOD09GA.A2008{day}.{tile}.006.2015181011753.hdf"
    shutil.copyfile(MODIS, path)
    return path


def _shift_one_tile_east(path: Path) -> None:
    """Rewrite the grid corners in ``StructMetadata.0`` as tile h15v17's (same length)."""
    data = path.read_bytes()
    shifted = data.replace(
        b"UpperLeftPointMtrs=(-4447802.078667", b"UpperLeftPointMtrs=(-3335851.559000"
    ).replace(b"LowerRightMtrs=(-3335851.559000", b"LowerRightMtrs=(-2223901.039333")
    assert shifted != data
    assert len(shifted) == len(data)
    path.write_bytes(shifted)


# rioxarray 0.19's transform() multiplies affines with `*`, which affine 3.1 deprecates
pytestmark = pytest.mark.filterwarnings(
    "ignore:Use `@` matmul instead of `\\*` mul operator:PendingDeprecationWarning"
)


@pytest.fixture(autouse=True)
def _corpus() -> None:
    if not MODIS.exists():
        pytest.skip("corpus absent")


def test_daily_granules_along_time(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for day in (296, 297):
        _daily(tmp_path, day)
    out = tmp_path / "archive.json"
    assert main(["scan", str(tmp_path / "*.hdf"), *SCAN, "-o", str(out)]) == 0
    ds = xr.open_dataset(out, engine="refzarr", mask_and_scale=False)  # as docs/formats/hdf4.md
    assert [str(t)[:10] for t in ds["time"].values] == ["2008-10-22", "2008-10-23"]
    truth = SD(str(MODIS)).select("sur_refl_b01_1").get()
    band = ds["sur_refl_b01_1"]
    for day in range(2):
        np.testing.assert_array_equal(band.isel(time=day).values, truth)
    reflectance = band.where(band != band.attrs["_FillValue"]) / band.attrs["scale_factor"]
    valid = truth[truth != -28672] / 10000.0  # MOD09: scale_factor 10000 means "divide by"
    assert float(reflectance.max()) == pytest.approx(valid.max(), rel=1e-6)
    assert float(reflectance.min()) == pytest.approx(valid.min(), rel=1e-6)
    # one grid mapping per grid, kept once (not stacked along time), as in each granule
    granule = refzarr.scan(MODIS)
    combined = refzarr.read(out)
    for grid in ("MODIS_Grid_500m_2D", "MODIS_Grid_1km_2D"):
        mapping = combined[f"spatial_ref:{grid}"]
        assert mapping.shape == ()
        assert mapping.meta.attributes == granule[f"spatial_ref:{grid}"].meta.attributes
    assert band.attrs["grid_mapping"] == "spatial_ref:MODIS_Grid_500m_2D"
    assert band.rio.crs is not None
    assert band.isel(time=1).rio.transform() == band.isel(time=0).rio.transform()


def test_granule_of_another_tile_is_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _daily(tmp_path, 296)
    _shift_one_tile_east(_daily(tmp_path, 297, tile="h15v17"))
    code = main(["scan", str(tmp_path / "*.hdf"), *SCAN, "-o", str(tmp_path / "a.json")])
    err = capsys.readouterr().err
    assert code != 0
    # the grids' spatial_ref differ: named before any coordinate value is read
    assert "grid mapping 'spatial_ref:MODIS_Grid_1km_2D' differs between" in err
    assert "A2008297.h15v17" in err
    assert "not on one CRS and grid: 'GeoTransform' is '-4447802.078667 926.6" in err
    assert "in the second; combine each CRS's (or grid's) files separately" in err


@pytest.mark.parametrize("form", ["json", "icechunk"])
def test_refresh_along_a_new_dimension(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], form: str
) -> None:
    """A granule rewritten (here: only touched) is scanned again into its place along the
    ``time`` dimension combine added (the fresh scan has no ``time`` axis)."""
    days = [_daily(tmp_path, day) for day in (296, 297, 298)]
    out = tmp_path / f"archive.{form}"
    assert main(["scan", str(tmp_path / "*.hdf"), *SCAN, "-o", str(out), "--format", form]) == 0
    before = refzarr.read(out) if form == "json" else None
    stat = days[1].stat()
    os.utime(days[1], ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))
    assert main(["validate", "--sources", str(out)]) == 1
    assert main(["refresh", str(out)]) == 0
    assert main(["validate", "--sources", str(out)]) == 0
    assert "refreshed" in capsys.readouterr().out
    if before is not None:
        after = refzarr.read(out)
        for path, array in before.arrays():
            assert after[path] == array, path


@pytest.mark.parametrize(
    ("broken", "says"),
    [
        (
            lambda data: data[:1_000_000],
            "tag 1963 (vdata records) ref 1263 points at bytes 2109847..2109851, past the "
            "file's end (1000000 bytes; truncated file?): its objects reach at least byte",
        ),
        (lambda data: b"<html>404 not found</html>", "--input-format NAME"),
    ],
    ids=["truncated", "not-hdf4"],
)
def test_a_broken_granule_among_many_is_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], broken: Any, says: str
) -> None:
    """A broken download in the archive: named, with the CLI option that leaves it out."""
    _daily(tmp_path, 296)
    bad = _daily(tmp_path, 297)
    bad.write_bytes(broken(bad.read_bytes()))
    out = tmp_path / "a.json"
    assert main(["scan", str(tmp_path / "*.hdf"), *SCAN, "-o", str(out)]) != 0
    err = capsys.readouterr().err
    assert bad.name in err
    assert says in err
    assert "(--skip-errors leaves out the files that cannot be scanned)" in err
    assert main(["scan", str(tmp_path / "*.hdf"), *SCAN, "-o", str(out), "--skip-errors"]) == 0
    assert f"{out}: 1 file along time, 1 skipped\n" == capsys.readouterr().out
    assert refzarr.read(out)["sur_refl_b01_1"].meta.dimension_names[0] == "time"


def test_append_a_day_keeps_one_grid_mapping(tmp_path: Path) -> None:
    """Appending a granule along ``time`` to a Parquet archive: each grid's ``spatial_ref``
    is checked equal and kept once; rioxarray finds the CRS on the appended set."""
    _daily(tmp_path, 296)
    later = tmp_path / "later"
    later.mkdir()
    _daily(later, 297)
    out = tmp_path / "archive.parq"
    assert main(["scan", str(tmp_path / "*.hdf"), *SCAN, "-o", str(out)]) == 0
    append = ["--append-dim", "time", *SCAN[2:]]
    assert main(["scan", str(later / "*.hdf"), *append, "-o", str(out)]) == 0
    ds = xr.open_dataset(out, engine="refzarr")
    band = ds["sur_refl_b01_1"]
    assert band.sizes["time"] == 2
    assert ds["spatial_ref:MODIS_Grid_500m_2D"].dims == ()
    granule = refzarr.scan(MODIS)["spatial_ref:MODIS_Grid_500m_2D"].meta.attributes
    assert refzarr.read(out)["spatial_ref:MODIS_Grid_500m_2D"].meta.attributes == granule
    assert band.rio.crs.to_wkt() == band.isel(time=1).rio.crs.to_wkt()
