"""ReferenceStore under zarr-python 3 and xarray: values equal h5py / netCDF; listing, byte
ranges, missing chunks, read-only, and URL restrictions that act before any request."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import h5py
import numpy as np
import pytest
import xarray as xr
import zarr
from zarr.abc.store import OffsetByteRequest, RangeByteRequest, SuffixByteRequest
from zarr.core.buffer import default_buffer_prototype

import refzarr
from refzarr import ForbiddenURLError, ReferenceStore, UnsupportedFeatureError
from roundtrip import h5_datasets, kerchunk_hdf5_refs


@pytest.fixture
def refs(netcdf_file: Path) -> dict[str, Any]:
    return kerchunk_hdf5_refs(netcdf_file, inline_threshold=50)


def _arrays(group: zarr.Group, prefix: str = "") -> dict[str, zarr.Array]:
    found: dict[str, zarr.Array] = {}
    for name, member in group.members():
        path = f"{prefix}{name}"
        if isinstance(member, zarr.Array):
            found[path] = member
        else:
            found.update(_arrays(member, f"{path}/"))
    return found


def test_zarr_reads_every_array_like_h5py(netcdf_file: Path, refs: dict[str, Any]) -> None:
    root = zarr.open_group(ReferenceStore(refs), mode="r", zarr_format=2)
    arrays = _arrays(root)
    expected = h5_datasets(netcdf_file)
    assert set(arrays) == set(expected)
    for path, array in arrays.items():
        got = np.asarray(array[...])
        assert got.dtype == expected[path].dtype, path
        np.testing.assert_array_equal(got, expected[path], strict=True, err_msg=path)


def test_xarray_open_zarr_equals_netcdf(netcdf_file: Path, refs: dict[str, Any]) -> None:
    got = xr.open_zarr(ReferenceStore(refs), consolidated=True, zarr_format=2)
    with xr.open_dataset(netcdf_file) as expected:
        xr.testing.assert_identical(got.load(), expected.load())


def test_from_a_written_reference_file(netcdf_file: Path, tmp_path: Path) -> None:
    path = tmp_path / "refs.parq"
    refzarr.write(refzarr.read(kerchunk_hdf5_refs(netcdf_file, 0)), path)
    root = zarr.open_group(ReferenceStore(path), mode="r", zarr_format=2)
    with h5py.File(netcdf_file) as f:
        np.testing.assert_array_equal(root["temperature"][...], f["temperature"][...])


def _get(store: ReferenceStore, key: str, byte_range: Any = None) -> bytes | None:
    value = asyncio.run(store.get(key, default_buffer_prototype(), byte_range))
    return None if value is None else value.to_bytes()


def test_keys_listing_and_byte_ranges(refs: dict[str, Any]) -> None:
    store = ReferenceStore(refs)
    keys = asyncio.run(_collect(store.list()))
    assert ".zmetadata" in keys
    assert "temperature/.zarray" in keys
    assert "temperature/0.0.0" in keys
    top = set(asyncio.run(_collect(store.list_dir(""))))
    assert {".zgroup", ".zattrs", "temperature", "forecast"} <= top
    whole = _get(store, "temperature/0.0.0")
    assert whole is not None
    assert _get(store, "temperature/0.0.0", RangeByteRequest(2, 9)) == whole[2:9]
    assert _get(store, "temperature/0.0.0", OffsetByteRequest(5)) == whole[5:]
    assert _get(store, "temperature/0.0.0", SuffixByteRequest(4)) == whole[-4:]
    assert _get(store, "temperature/99.0.0") is None
    assert _get(store, "nothing/here") is None
    assert asyncio.run(store.exists("temperature/.zattrs"))


def test_missing_chunks_are_absent_and_read_as_fill(
    netcdf_file: Path, refs: dict[str, Any]
) -> None:
    store = ReferenceStore(refs)
    sparse = refzarr.read(refs)["sparse"]
    assert isinstance(sparse, refzarr.RefArray)
    missing = [i for i in np.ndindex(sparse.manifest.grid_shape) if sparse.manifest[i] is None]
    assert missing, "the fixture has unwritten chunks"
    key = "sparse/" + ".".join(map(str, missing[0]))
    assert _get(store, key) is None
    assert not asyncio.run(store.exists(key))
    root = zarr.open_group(store, mode="r", zarr_format=2)
    with h5py.File(netcdf_file) as f:
        np.testing.assert_array_equal(root["sparse"][...], f["sparse"][...], strict=True)


def test_read_only(refs: dict[str, Any]) -> None:
    store = ReferenceStore(refs)
    assert store.read_only
    with pytest.raises(UnsupportedFeatureError, match="read-only"):
        asyncio.run(store.set("x", default_buffer_prototype().buffer.from_bytes(b"1")))


def test_forbidden_urls_raise_before_any_request(netcdf_file: Path, tmp_path: Path) -> None:
    refs = kerchunk_hdf5_refs(netcdf_file, inline_threshold=0)
    redirected = {
        **refs,
        "refs": {
            key: ["s3://elsewhere/secret.nc", *value[1:]] if isinstance(value, list) else value
            for key, value in refs["refs"].items()
        },
    }
    store = ReferenceStore(redirected, allowed_protocols=["file"])
    with pytest.raises(ForbiddenURLError, match=r"s3://elsewhere/secret\.nc"):
        _get(store, "temperature/0.0.0")
    elsewhere = tmp_path / "other"
    local_only = ReferenceStore(refs, allowed_protocols=[elsewhere.as_uri() + "/"])
    with pytest.raises(ForbiddenURLError):
        _get(local_only, "temperature/0.0.0")


async def _collect(iterator: Any) -> list[str]:
    return [key async for key in iterator]
