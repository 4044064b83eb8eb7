"""A file refzarr scans (netCDF, TIFF, GRIB, HDF4, FITS, DMR++) given where a reference set is
expected (`refzarr.read`, `expand_references`, ``engine="refzarr"``): a `RefFormatError`
names its format and the scan to run, and a local file is not read whole to find out."""

from __future__ import annotations

import tracemalloc
from pathlib import Path

import fsspec
import pytest
import xarray as xr

import refzarr
from corpus import ONE_PER_FORMAT
from refzarr import RefFormatError

FILES = {name: path for name, path in ONE_PER_FORMAT.items() if name != "zarr"}  # files


@pytest.mark.parametrize("name", sorted(FILES))
def test_a_source_file_is_named(name: str) -> None:
    path = FILES[name]
    if not path.exists():
        pytest.skip("corpus absent")
    title = {"netcdf3": "netCDF3", "hdf5": "HDF5", "tiff": "TIFF", "grib": "GRIB",
             "hdf4": "HDF4", "fits": "FITS", "dmrpp": "DMR\\+\\+"}[name]  # fmt: skip
    pattern = rf"is not a reference set but a {title}.* file: scan it first \(group = refzarr"
    with pytest.raises(RefFormatError, match=pattern):
        refzarr.read(path)
    with pytest.raises(RefFormatError, match=pattern):
        refzarr.expand_references(str(path))
    with pytest.raises(RefFormatError, match=pattern):
        xr.open_dataset(path, engine="refzarr")


def test_through_fsspec_too() -> None:
    """A remote (here in-memory) file is read before it is judged, then named the same way."""
    fs = fsspec.filesystem("memory")
    fs.pipe("/given/scene.tif", FILES["tiff"].read_bytes())
    with pytest.raises(RefFormatError, match="is not a reference set but a TIFF"):
        refzarr.read("memory://given/scene.tif")
    fs.rm("/given", recursive=True)


def test_a_large_local_file_is_not_read_whole(tmp_path: Path) -> None:
    """Only the first `HEAD_READ` bytes of a local file that does not begin like JSON are
    read: a sparse 4 GiB file with a netCDF3 header fails at once, without 4 GiB of memory."""
    big = tmp_path / "big.nc"
    with big.open("wb") as f:
        f.write(FILES["netcdf3"].read_bytes())
        f.truncate(4 * 2**30)  # sparse: no disk used
    tracemalloc.start()
    try:
        with pytest.raises(RefFormatError, match="netCDF3"):
            refzarr.read(big)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 64 * 2**20


def test_text_that_is_no_format_keeps_the_json_error(tmp_path: Path) -> None:
    junk = tmp_path / "refs.json"
    junk.write_text("not json at all")
    with pytest.raises(RefFormatError, match=r"refs.json: not valid JSON"):
        refzarr.read(junk)


@pytest.mark.parametrize(
    ("zarr_format", "consolidated"), [(2, False), (2, True), (3, False)], ids=["v2", "v2c", "v3"]
)
def test_a_zarr_store_is_named(tmp_path: Path, zarr_format: int, consolidated: bool) -> None:
    """A Zarr store directory (consolidated or not) is named as one, whether or not it holds a
    ``.zmetadata`` (which also marks a Parquet reference set)."""
    import zarr

    store = tmp_path / "store.zarr"
    root = zarr.open_group(store, mode="w", zarr_format=zarr_format)  # type: ignore[arg-type]
    root.create_array("x", shape=(4,), dtype="i4")
    if consolidated:
        zarr.consolidate_metadata(store)
    pattern = "is not a reference set but a Zarr v2 / v3 store: scan it first"
    with pytest.raises(RefFormatError, match=pattern):
        refzarr.read(store)
    with pytest.raises(RefFormatError, match=pattern):
        refzarr.expand_references(str(store))


def test_a_broken_parquet_set_keeps_its_own_error(tmp_path: Path) -> None:
    """A directory holding ``.zmetadata`` and no other Zarr metadata is a Parquet reference
    set's shape: its own error, not "a Zarr store"."""
    broken = tmp_path / "refs"
    broken.mkdir()
    (broken / ".zmetadata").write_text("{}")
    with pytest.raises(RefFormatError) as caught:
        refzarr.read(broken)
    assert "not a reference set but" not in str(caught.value)


def test_a_directory_of_files_keeps_its_own_error(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("text")
    with pytest.raises(RefFormatError, match=r"is a directory but holds no \.zmetadata"):
        refzarr.read(tmp_path)
