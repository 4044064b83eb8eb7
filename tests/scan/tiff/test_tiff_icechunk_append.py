"""Appending GeoTIFF scenes to an Icechunk datacube: a predictor's codec (its chunk shape a
tuple here, a list read back from the store) appends, and scenes in another CRS are refused
by their ``spatial_ref``'s attributes (its value, a scalar 0, said nothing)."""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pytest
import tifffile
from tiffkit import write_geotiff

import refzarr
from refzarr import IncompatibleError

pytest.importorskip("icechunk")


def _stack(paths: list[Path]) -> refzarr.RefGroup:
    """The scenes stacked along ``time`` in input order (no coordinate: the times' CF units
    would differ between stacks, which Icechunk appends refuse)."""
    return refzarr.combine([refzarr.scan(p) for p in paths], concat_dims="time")


@pytest.fixture
def scenes(tmp_path: Path) -> list[Path]:
    rng = np.random.default_rng(7)
    return [
        write_geotiff(
            tmp_path / f"scene_{k}.tif",
            rng.integers(0, 5000, (40, 56), dtype=np.uint16),
            predictor=True,
            overviews=0,
        )
        for k in range(3)
    ]


def _commit(group: refzarr.RefGroup, repo: Path, append: bool) -> None:
    from refzarr.formats.icechunk.repository import commit_icechunk

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # Icechunk's local-storage warning
        commit_icechunk(group, repo, message="scenes", append_dim="time" if append else None)


def test_scenes_with_a_predictor_append(scenes: list[Path], tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    _commit(_stack(scenes[:2]), repo, append=False)
    _commit(_stack(scenes[2:]), repo, append=True)
    import zarr

    from refzarr.formats.icechunk.repository import open_repository

    repository = open_repository(str(repo), None, prefixes=[tmp_path.resolve().as_uri() + "/"])
    root = zarr.open_group(repository.readonly_session("main").store, mode="r")
    expected = np.stack([tifffile.imread(p) for p in scenes])
    np.testing.assert_array_equal(root["band_data"][...], expected, strict=True)
    assert root["spatial_ref"].shape == ()


def test_scenes_in_another_crs_are_refused(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    plain = [
        write_geotiff(tmp_path / f"plain_{k}.tif", np.ones((40, 56), np.uint16), epsg=epsg)
        for k, epsg in enumerate([32633, 32633, 32634])
    ]
    _commit(_stack(plain[:2]), repo, append=False)
    with pytest.raises(IncompatibleError, match="grid mapping 'spatial_ref' differs") as info:
        _commit(_stack(plain[2:]), repo, append=True)
    assert "UTM zone 33N" in str(info.value)
    assert "UTM zone 34N" in str(info.value)


def test_stacks_with_their_own_time_units_append(scenes: list[Path], tmp_path: Path) -> None:
    """Each stack's ``time`` is CF-encoded from its own first date (days since 2021-01-01,
    then days since 2021-03-01): the appended times are re-encoded in the store's units
    (they were refused: "attribute 'units' is ... in the store and ... in the appended")."""
    import xarray as xr

    from refzarr.formats.icechunk.repository import open_repository

    months = ["2021-01", "2021-02", "2021-03"]
    named = [p.rename(p.with_name(f"scene_{m}.tif")) for p, m in zip(scenes, months, strict=True)]
    time = refzarr.FromRegex(
        r"_(\d{4}-\d{2})\.tif$", parse=lambda s: np.datetime64(f"{s}-01", "ns")
    )

    def stack(paths: list[Path]) -> refzarr.RefGroup:
        groups = [refzarr.scan(p) for p in paths]
        urls = [str(p) for p in paths]
        return refzarr.combine(groups, concat_dims="time", coords={"time": time}, urls=urls)

    repo = tmp_path / "repo"
    _commit(stack(named[:2]), repo, append=False)
    _commit(stack(named[2:]), repo, append=True)
    with pytest.raises(IncompatibleError, match="duplicate coordinate values"):
        _commit(stack(named[1:2]), repo, append=True)  # 2021-02 again, in its own units
    repository = open_repository(str(repo), None, prefixes=[tmp_path.resolve().as_uri() + "/"])
    ds = xr.open_zarr(repository.readonly_session("main").store, consolidated=False)
    expected = [np.datetime64(f"{m}-01", "ns") for m in months]
    np.testing.assert_array_equal(ds["time"].values, expected)
    np.testing.assert_array_equal(
        ds["band_data"].values, np.stack([tifffile.imread(p) for p in named]), strict=True
    )


def test_multiband_scenes_append_with_one_band(tmp_path: Path) -> None:
    """``band`` (1..3) is a dimension coordinate: written once, compared (not stacked) when
    scenes are appended, and still ``(3,)`` after the append."""
    import xarray as xr

    from refzarr.formats.icechunk.repository import open_repository

    rng = np.random.default_rng(5)
    paths = [
        write_geotiff(
            tmp_path / f"rgb_{k}.tif", rng.integers(0, 5000, (3, 40, 56), np.uint16), overviews=0
        )
        for k in range(3)
    ]
    repo = tmp_path / "repo"
    _commit(_stack(paths[:2]), repo, append=False)
    _commit(_stack(paths[2:]), repo, append=True)
    repository = open_repository(str(repo), None, prefixes=[tmp_path.resolve().as_uri() + "/"])
    ds = xr.open_zarr(repository.readonly_session("main").store, consolidated=False)
    assert ds["band_data"].dims == ("time", "band", "y", "x")
    np.testing.assert_array_equal(ds["band"].values, np.arange(1, 4), strict=True)
    np.testing.assert_array_equal(
        ds["band_data"].values, np.stack([tifffile.imread(p) for p in paths]), strict=True
    )
