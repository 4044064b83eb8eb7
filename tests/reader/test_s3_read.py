"""Reading through references from S3 (moto_server behind a counting, fault-injecting proxy):
values equal h5py's, few GET requests, transient faults retried, lasting faults raise."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import fsspec
import h5py
import numpy as np
import pytest
import xarray as xr
import zarr

import refzarr
from refzarr import ChunkFetchError, ReferenceStore
from refzarr.io import FetchPolicy, RangeReader
from refzarr.reader import ArrayReader
from roundtrip import kerchunk_hdf5_refs

SHAPE, CHUNKS = (1024, 64, 64), (1, 32, 32)  # 4,096 gzip chunks, about 12 MB


@pytest.fixture(scope="module")
def small_chunks(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("s3read") / "small_chunks.h5"
    data = np.round(np.random.default_rng(0).normal(280, 5, SHAPE), 1).astype(np.float32)
    with h5py.File(path, "w") as f:
        f.create_dataset("air", data=data, chunks=CHUNKS, compression="gzip")
    return path


@pytest.fixture
def on_s3(
    small_chunks: Path, s3: tuple[str, dict[str, Any]], s3_proxy: tuple[str, dict[str, Any], Any]
) -> tuple[refzarr.RefGroup, dict[str, Any], Any, str]:
    """The file uploaded (directly to moto), its references, and proxied storage options."""
    bucket, direct = s3
    _, options, proxy = s3_proxy
    url = f"s3://{bucket}/small_chunks.h5"
    fsspec.filesystem("s3", **direct).put_file(str(small_chunks), url)
    refs = kerchunk_hdf5_refs(small_chunks, inline_threshold=0)
    text = str(small_chunks)
    for key, value in refs["refs"].items():
        if isinstance(value, list) and value[0] == text:
            refs["refs"][key] = [url, *value[1:]]
    return refzarr.read(refs), options, proxy, f"/{bucket}/small_chunks.h5"


def _expected(path: Path) -> np.ndarray:
    with h5py.File(path) as f:
        return np.asarray(f["air"][...])


def test_whole_variable_in_a_handful_of_gets(
    small_chunks: Path, on_s3: tuple[refzarr.RefGroup, dict[str, Any], Any, str]
) -> None:
    group, options, proxy, path = on_s3
    got = refzarr.open_dataset(group, storage_options=options)["air"].values
    gets = proxy.count("GET", path)
    print(f"whole read of {np.prod(group['air'].manifest.grid_shape)} chunks: {gets} GETs")
    np.testing.assert_array_equal(got, _expected(small_chunks), strict=True)
    assert gets <= 4


def test_zarr_through_the_store_reads_the_same(
    small_chunks: Path, on_s3: tuple[refzarr.RefGroup, dict[str, Any], Any, str]
) -> None:
    group, options, _, _ = on_s3
    root = zarr.open_group(ReferenceStore(group, storage_options=options), mode="r", zarr_format=2)
    np.testing.assert_array_equal(root["air"][:8], _expected(small_chunks)[:8], strict=True)
    ds = xr.open_zarr(ReferenceStore(group, storage_options=options), zarr_format=2)
    np.testing.assert_array_equal(ds["air"][:4].values, _expected(small_chunks)[:4])


@pytest.mark.parametrize("how", ["503", "drop"])
def test_transient_failures_are_retried(
    small_chunks: Path, on_s3: tuple[refzarr.RefGroup, dict[str, Any], Any, str], how: str
) -> None:
    group, options, proxy, path = on_s3
    proxy.fail("GET", path, times=2, how=how)
    array = group["air"]
    assert isinstance(array, refzarr.RefArray)
    policy = FetchPolicy(max_gap=0, max_block=2**20, concurrency=4, attempts=4, backoff=0.01)
    reader = RangeReader(storage_options=options, remote_policy=policy)
    got = ArrayReader(array, "air", reader)[0:64]
    np.testing.assert_array_equal(got, _expected(small_chunks)[0:64], strict=True)
    assert proxy.count("GET", path) > 2  # the failures happened, and were retried


def test_lasting_failures_raise_never_fill(
    on_s3: tuple[refzarr.RefGroup, dict[str, Any], Any, str],
) -> None:
    group, options, proxy, path = on_s3
    proxy.fail("GET", path, times=10_000, how="503")
    array = group["air"]
    assert isinstance(array, refzarr.RefArray)
    policy = FetchPolicy(max_gap=0, max_block=2**20, concurrency=2, attempts=2, backoff=0.01)
    # botocore's own retries off, so the test waits for s3fs's and ours only
    quick = {**options, "config_kwargs": {"retries": {"max_attempts": 1, "mode": "standard"}}}
    reader = RangeReader(storage_options=quick, remote_policy=policy)
    with pytest.raises(ChunkFetchError, match=r"small_chunks\.h5.*air/0\.0\.0"):
        ArrayReader(array, "air", reader)[0]


def test_missing_object_raises(on_s3: tuple[refzarr.RefGroup, dict[str, Any], Any, str]) -> None:
    group, options, _, _ = on_s3
    array = group["air"]
    assert isinstance(array, refzarr.RefArray)
    manifest = array.manifest
    gone = refzarr.ChunkManifest.from_arrays(
        [manifest.paths[0].replace("small_chunks", "gone")],
        manifest.path_id,
        manifest.offset,
        manifest.length,
        {},
    )
    reader = RangeReader(storage_options=options)
    with pytest.raises(ChunkFetchError, match=r"gone\.h5"):
        ArrayReader(refzarr.RefArray(array.meta, gone), "air", reader)[0]
