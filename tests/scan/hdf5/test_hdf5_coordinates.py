"""Small dimension coordinates are loaded at scan time: held in the references as one
uncompressed chunk of exactly their values, equal to what h5py and netCDF4 read."""

from __future__ import annotations

from pathlib import Path

import h5py
import netCDF4
import numpy as np
import pytest
import xarray as xr
from h5kit import array, assert_matches_h5, roundtrip
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import refzarr
from refzarr.model import INLINED
from refzarr.scan.coordinates import DEFAULT_COORDINATE_BYTES
from refzarr.scan.hdf5 import Hdf5Scanner
from roundtrip import reference_options


def _write_day(path: Path, *, nlat: int = 8, time_values: int = 1) -> Path:
    """A netCDF4 file like a day of a climate archive: unlimited time in chunks of 512,
    contiguous lat, zlib lon, big-endian height, a 1-D data variable that is not a
    coordinate."""
    with netCDF4.Dataset(path, "w") as nc:
        nc.createDimension("time", None)
        nc.createDimension("lat", nlat)
        nc.createDimension("lon", 6)
        nc.createDimension("height", 3)
        time = nc.createVariable("time", "f8", ("time",), chunksizes=(512,))
        time.units = "days since 2000-01-01"
        time[:] = np.arange(time_values) + 0.5
        nc.createVariable("lat", "f4", ("lat",))[:] = np.linspace(-80, 80, nlat)
        lon = nc.createVariable("lon", "f8", ("lon",), zlib=True, shuffle=True)
        lon[:] = np.arange(6) * 60.0
        nc.createVariable("height", np.dtype(">i2"), ("height",), endian="big")[:] = [2, 10, 100]
        nc.createVariable("station_code", "i4", ("lat",))[:] = np.arange(nlat) * 7
        air = nc.createVariable("air", "f4", ("time", "lat", "lon"), zlib=True)
        air[:] = np.arange(time_values * nlat * 6, dtype="f4").reshape(time_values, nlat, 6)
    return path


def _is_loaded(node: refzarr.RefArray) -> bool:
    return (
        node.meta.chunks == node.meta.shape
        and not node.meta.codecs
        and node.manifest.nchunks == 1
        and int(node.manifest.path_id.reshape(-1)[0]) == INLINED
    )


def test_dimension_coordinates_are_loaded_and_equal_h5py(tmp_path: Path) -> None:
    path = _write_day(tmp_path / "day.nc")
    group = roundtrip(path, tmp_path)  # every array read through fsspec + zarr == h5py
    for name in ("time", "lat", "lon", "height"):
        assert _is_loaded(array(group, name)), name
    assert not _is_loaded(array(group, "air"))
    assert not _is_loaded(array(group, "station_code"))  # 1-D, but not named like its dim
    with h5py.File(path) as f:
        for name in ("time", "lat", "lon", "height"):
            node = array(group, name)
            stored = node.manifest[0]
            assert isinstance(stored, bytes)
            assert_matches_h5(np.frombuffer(stored, node.meta.dtype), f[name][()], name)
    assert array(group, "height").meta.dtype == np.dtype(">i2")  # byte order kept
    # attributes untouched, but for the source's layout (shown in encoding by refzarr's engine)
    assert array(group, "lon").meta.attributes == {
        "_nc_source_layout": {
            "chunks": (6,),
            "codecs": ({"id": "shuffle", "elementsize": 8}, {"id": "zlib", "level": 4}),
        }
    }


def test_loaded_coordinates_read_by_xarray_as_netcdf4(tmp_path: Path) -> None:
    path = _write_day(tmp_path / "day.nc", time_values=3)
    refs = tmp_path / "refs.json"
    refzarr.write(refzarr.scan(str(path)), refs)
    backend_kwargs = {"consolidated": False, "storage_options": reference_options(refs)}
    ours = xr.open_dataset("reference://", engine="zarr", backend_kwargs=backend_kwargs).load()
    with xr.open_dataset(path) as theirs:
        xr.testing.assert_identical(ours, theirs.load())
    mine = refzarr.open_dataset(str(refs)).load()
    with xr.open_dataset(path) as theirs:
        xr.testing.assert_identical(mine, theirs.load())


def test_zero_keeps_coordinates_referenced(tmp_path: Path) -> None:
    path = _write_day(tmp_path / "day.nc")
    group = roundtrip(path, tmp_path, inline_coordinates=0)
    for name in ("time", "lat", "lon", "height"):
        assert not _is_loaded(array(group, name)), name
    assert array(group, "time").meta.chunks == (512,)


def test_coordinates_over_the_limit_stay_referenced(tmp_path: Path) -> None:
    path = _write_day(tmp_path / "day.nc", nlat=40)
    group = roundtrip(path, tmp_path, inline_coordinates=40 * 4 - 1)
    assert not _is_loaded(array(group, "lat"))  # 160 bytes
    assert _is_loaded(array(group, "lon"))  # 48 bytes
    group = roundtrip(path, tmp_path, inline_coordinates=40 * 4)
    assert _is_loaded(array(group, "lat"))


def test_unwritten_chunks_load_as_the_fill_value(tmp_path: Path) -> None:
    path = tmp_path / "sparse.h5"
    with h5py.File(path, "w") as f:
        x = f.create_dataset("x", shape=(10,), chunks=(4,), dtype="i4", fillvalue=-9)
        x[:4] = [1, 2, 3, 4]  # chunks 1 and 2 never written
        x.make_scale("x")
    group = roundtrip(path, tmp_path)
    node = array(group, "x")
    assert _is_loaded(node)
    assert np.frombuffer(node.manifest[0], "i4").tolist() == [1, 2, 3, 4] + [-9] * 6


def test_default_and_bad_limits() -> None:
    assert Hdf5Scanner().inline_coordinates == DEFAULT_COORDINATE_BYTES
    with pytest.raises(TypeError, match="inline_coordinates"):
        Hdf5Scanner(inline_coordinates=True)
    with pytest.raises(TypeError, match="inline_coordinates"):
        Hdf5Scanner(inline_coordinates=1.5)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="inline_coordinates"):
        Hdf5Scanner(inline_coordinates=-1)


def test_a_coordinate_that_does_not_decode_stays_referenced(tmp_path: Path) -> None:
    path = tmp_path / "bad.h5"
    with h5py.File(path, "w") as f:
        x = f.create_dataset("x", data=np.arange(100.0), chunks=(100,), compression="gzip")
        x.make_scale("x")
        offset = x.id.get_chunk_info(0).byte_offset
    with open(path, "r+b") as raw:  # the deflate stream's header: no longer zlib
        raw.seek(offset)
        raw.write(b"\xff\xff\xff\xff")
    node = array(refzarr.scan(str(path)), "x")
    assert not _is_loaded(node)  # the reader reports the bad chunk, naming it, when read
    assert node.meta.codecs


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    values=st.lists(st.integers(-(2**31), 2**31 - 1), min_size=1, max_size=40),
    dtype=st.sampled_from(["<i4", ">i4", "<f8", ">u2", "<i8"]),
    chunk=st.integers(1, 50),
    compression=st.sampled_from([None, "gzip", "lzf"]),
    shuffle=st.booleans(),
    fletcher32=st.booleans(),
)
def test_loaded_values_equal_h5py(
    tmp_path: Path,
    values: list[int],
    dtype: str,
    chunk: int,
    compression: str | None,
    shuffle: bool,
    fletcher32: bool,
) -> None:
    data = np.array(values).astype(dtype)
    path = tmp_path / "coordinate.h5"
    with h5py.File(path, "w") as f:
        x = f.create_dataset(
            "x",
            data=data,
            maxshape=(None,),  # a chunk may then be longer than the data
            chunks=(chunk,),
            compression=compression,
            shuffle=shuffle,
            fletcher32=fletcher32,
        )
        x.make_scale("x")
    node = array(refzarr.scan(str(path)), "x")
    assert _is_loaded(node)
    assert node.meta.dtype == np.dtype(dtype)
    with h5py.File(path) as f:
        assert_matches_h5(np.frombuffer(node.manifest[0], node.meta.dtype), f["x"][()], "x")


def test_equal_loaded_coordinates_are_held_once(tmp_path: Path) -> None:
    paths = [_write_day(tmp_path / f"day{k}.nc", nlat=400) for k in range(3)]
    lats = [array(refzarr.scan(str(p)), "lat").manifest[0] for p in paths]
    assert lats[0] is lats[1] is lats[2]  # 1,600 bytes each: one object for the archive
