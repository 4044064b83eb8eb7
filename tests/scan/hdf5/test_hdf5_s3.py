"""Scanning HDF5 on S3 (moto_server): references read back identical, and few GET requests.

Requests are counted at the HTTP level by `s3proxy.CountingProxy`, a reverse proxy between
s3fs and moto_server (fixture `s3_proxy`). Uploads go to moto directly, uncounted.

Requests per scan, measured (GETs / HEADs / MB read). Before: a separate open for format
detection (s3fs's default 50 MiB read-ahead), then h5py through an 8 MiB read-ahead cache,
which refetches on every jump back. After: one open, fsspec "blockcache" of 2 MiB blocks,
each block fetched at most once:

| file | size | before | after |
|---|---|---|---|
| `_many_chunks` earliest (8,000 chunks, B-tree v1) | 3.6 MB | 2 / 3 / 7.2 | 2 / 1 / 3.6 |
| `_many_chunks` latest (fixed arrays) | 3.3 MB | 2 / 3 / 6.5 | 2 / 1 / 3.3 |
| `_spread` (three sessions, 12 MB of raw data between) | 25.3 MB | 7 / 3 / 58.9 | 3 / 1 / 4.3 |
| `_appended_netcdf` (20 index nodes every ~0.8 MB) | 16.1 MB | 7 / 3 / 51.7 | 8 / 1 / 16.1 |
"""

from __future__ import annotations

import contextlib
import json
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import fsspec
import h5py
import numpy as np
import pytest
import zarr
from h5kit import assert_matches_h5, write_h5
from zarr.core.sync import sync as zarr_sync
from zarr.storage import FsspecStore

import refzarr
from refzarr.scan import ScannedGroup
from refzarr.scan.base import HEAD_BYTES
from refzarr.scan.detect import detect_format
from refzarr.scan.hdf5 import Hdf5Scanner
from refzarr.scan.hdf5.source import BLOCK_SIZE
from s3proxy import CountingProxy, iter_paths

ProxiedS3 = tuple[str, dict[str, Any], CountingProxy]

BIG = 12 * 2**20
"""Bytes of raw data `_spread` writes between its metadata sessions."""


def _many_chunks(f: h5py.File) -> None:
    """Several datasets, thousands of chunks: B-tree nodes interleaved with chunk data."""
    rng = np.random.default_rng(3)
    for k in range(4):
        f.create_dataset(f"v{k}", data=rng.random((400, 500), dtype="f4"), chunks=(10, 10))


def _spread_first(f: h5py.File) -> None:
    rng = np.random.default_rng(4)
    f.create_dataset("a", data=rng.integers(0, 99, (100, 100), dtype="i2"), chunks=(10, 10))
    f.create_dataset("big1", data=rng.random(BIG // 8))


def _spread(path: Path) -> Path:
    """Metadata far apart: datasets written in three sessions, big raw data between them."""
    write_h5(path, _spread_first)
    rng = np.random.default_rng(5)
    with h5py.File(path, "a") as f:
        f.create_dataset("g/b", data=rng.random((60, 70)), chunks=(6, 7), compression="gzip")
        f.create_dataset("big2", data=rng.random(BIG // 8))
    with h5py.File(path, "a") as f:
        f.create_dataset("c", data=rng.integers(0, 9, (100, 300), dtype="u1"), chunks=(10, 30))
        f["a"].attrs["added_later"] = "metadata at the end of the file"
    return path


def _appended_netcdf(path: Path) -> Path:
    """netCDF4 model output: variables along an unlimited time, written one step at a time,
    so every variable's chunk index (B-tree v1) grows in nodes spread through the file."""
    import netCDF4

    rng = np.random.default_rng(6)
    with netCDF4.Dataset(path, "w") as ds:
        ds.createDimension("time", None)
        ds.createDimension("y", 50)
        ds.createDimension("x", 100)
        variables = [
            ds.createVariable(f"v{k}", "f4", ("time", "y", "x"), chunksizes=(1, 50, 100))
            for k in range(4)
        ]
        for step in range(200):
            for variable in variables:
                variable[step] = rng.random((50, 100), dtype="f4")
    return path


@contextlib.contextmanager
def _references_store(refs: dict[str, Any], options: dict[str, Any]) -> Iterator[FsspecStore]:
    """zarr's store over fsspec's ReferenceFileSystem, data on S3; its session closed after."""
    store = FsspecStore.from_url(
        "reference://",
        storage_options={
            "fo": refs,
            "remote_protocol": "s3",
            "remote_options": {**options, "asynchronous": True},
            "skip_instance_cache": True,
        },
        read_only=True,
    )
    try:
        yield store
    finally:
        for remote in {id(fs): fs for fs in store.fs.fss.values()}.values():
            if getattr(remote, "_s3", None) is not None:

                async def close(remote: Any = remote) -> None:
                    client = await remote.set_session()
                    await client.close()

                zarr_sync(close())


def _assert_reads_back(
    group: ScannedGroup,
    local: Path,
    options: dict[str, Any],
    tmp: Path,
    where: tuple[slice, ...] = (),
) -> None:
    """Every array (``where`` of it) through JSON references + fsspec + zarr equals h5py's."""
    refzarr.write(group, tmp / "refs.json")
    refs = json.loads((tmp / "refs.json").read_text())
    with _references_store(refs, options) as store, h5py.File(local, "r") as f:
        root = zarr.open_group(store, mode="r", zarr_format=2)
        for path, _ in group.arrays():
            array = root[path]
            assert isinstance(array, zarr.Array)
            got = np.asarray(array[where] if where else array[...])
            assert_matches_h5(got, np.asarray(f[path][where] if where else f[path][()]), path)


def _upload(local: Path, bucket: str, direct: dict[str, Any]) -> str:
    url = f"s3://{bucket}/data/{local.name}"
    fsspec.filesystem("s3", **direct).put_file(str(local), url)
    return url


def _report(proxy: CountingProxy, url: str, size: int) -> tuple[int, int]:
    """Print the requests a scan made for ``url``; the GET count and bytes answered."""
    key = "/" + url.removeprefix("s3://")
    gets, got = proxy.count("GET", key), proxy.bytes_sent("GET", key)
    print(f"{url}: {size} bytes, {gets} GETs, {proxy.count('HEAD', key)} HEAD, {got} bytes read")
    for line in iter_paths(proxy.matching(path=key)):
        print("   ", line)
    return gets, got


def _no_block_twice(proxy: CountingProxy, url: str) -> None:
    ranges = [r.range for r in proxy.matching("GET", "/" + url.removeprefix("s3://"))]
    assert len(ranges) == len(set(ranges)), ranges


@pytest.mark.parametrize("libver", ["earliest", "latest"])
def test_many_chunks_over_s3_in_few_gets(
    s3: tuple[str, dict[str, Any]], s3_proxy: ProxiedS3, tmp_path: Path, libver: str
) -> None:
    bucket, options, proxy = s3_proxy
    local = write_h5(tmp_path / f"many-{libver}.h5", _many_chunks, libver=libver)
    url = _upload(local, bucket, s3[1])
    proxy.reset()
    group = refzarr.scan(url, storage_options=options, format="hdf5")
    size = local.stat().st_size
    gets, _ = _report(proxy, url, size)
    # the chunk index is spread through the file (B-tree v1) or compact (fixed arrays): at
    # most one GET per block
    assert gets <= math.ceil(size / BLOCK_SIZE) <= 3
    # one HEAD records its size / ETag / time for `check_sources`, and the open is given it
    assert proxy.count("HEAD") == 1
    _no_block_twice(proxy, url)
    proxy.reset()  # detecting the format costs one small GET more
    assert refzarr.scan(url, storage_options=options) == group
    assert proxy.count("GET") == gets + 1
    assert proxy.matching("GET")[0].range == f"bytes=0-{HEAD_BYTES - 1}"
    assert sum(arr.manifest.nchunks for _, arr in group.arrays()) == 8000
    # a corner and a block in the middle: one GET per chunk to moto makes all 8,000 slow
    _assert_reads_back(group, local, s3[1], tmp_path, (slice(185, 215), slice(242, 275)))


def test_metadata_far_apart_costs_few_gets_not_the_whole_file(
    s3: tuple[str, dict[str, Any]], s3_proxy: ProxiedS3, tmp_path: Path
) -> None:
    bucket, options, proxy = s3_proxy
    local = _spread(tmp_path / "spread.h5")
    url = _upload(local, bucket, s3[1])
    proxy.reset()
    group = refzarr.scan(url, storage_options=options, format="hdf5")
    size = local.stat().st_size
    gets, got = _report(proxy, url, size)
    assert gets <= 5
    assert got <= size // 2
    _no_block_twice(proxy, url)
    _assert_reads_back(group, local, s3[1], tmp_path)


def test_appended_netcdf_costs_a_get_per_block_not_per_node(
    s3: tuple[str, dict[str, Any]], s3_proxy: ProxiedS3, tmp_path: Path
) -> None:
    bucket, options, proxy = s3_proxy
    local = _appended_netcdf(tmp_path / "appended.nc")
    url = _upload(local, bucket, s3[1])
    proxy.reset()
    group = refzarr.scan(url, storage_options=options, format="hdf5")
    size = local.stat().st_size
    gets, _ = _report(proxy, url, size)
    nodes = local.read_bytes().count(b"TREE\x01")  # v1 B-tree nodes of chunk indexes
    print(f"{nodes} chunk index nodes")
    # the nodes are spread through the whole file (every ~0.8 MB): each block once, far
    # fewer requests than one per node
    assert gets <= math.ceil(size / BLOCK_SIZE)
    assert gets <= nodes // 2
    _no_block_twice(proxy, url)
    _assert_reads_back(group, local, s3[1], tmp_path, (slice(97, 101),))


def test_scanner_called_directly_costs_the_same(
    s3: tuple[str, dict[str, Any]], s3_proxy: ProxiedS3, tmp_path: Path
) -> None:
    bucket, options, proxy = s3_proxy
    url = _upload(write_h5(tmp_path / "small.h5", _many_chunks), bucket, s3[1])
    proxy.reset()
    via_scan = refzarr.scan(url, storage_options=options, format="hdf5")
    counts = proxy.count("GET"), proxy.count("HEAD")
    proxy.reset()
    assert Hdf5Scanner(storage_options=options)(url) == via_scan
    # `scan` asks (HEAD) for the state it records in ``sources`` and opens the file with it
    assert (proxy.count("GET"), proxy.count("HEAD")) == counts


def test_scan_survives_throttling_and_dropped_connections(
    s3: tuple[str, dict[str, Any]], s3_proxy: ProxiedS3, tmp_path: Path
) -> None:
    """s3fs retries a 503 SlowDown and a connection dropped without an answer."""
    bucket, options, proxy = s3_proxy
    local = write_h5(tmp_path / "retried.h5", _many_chunks)
    url = _upload(local, bucket, s3[1])
    expected = refzarr.scan(local)
    key = "/" + url.removeprefix("s3://")
    proxy.reset()
    proxy.fail("GET", key, times=2, how="503")
    proxy.fail("GET", key, times=1, how="drop")
    proxy.fail("HEAD", key, times=1, how="drop")
    group = refzarr.scan(url, storage_options=options, format="hdf5")
    _report(proxy, url, local.stat().st_size)
    assert [r.status for r in proxy.matching("GET", key)][:3] == [503, 503, 0]  # 0: dropped
    assert proxy.matching("HEAD", key)[0].status == 0
    for name, arr in expected.arrays():
        other = group[name]
        assert isinstance(other, refzarr.RefArray)
        np.testing.assert_array_equal(other.manifest.offset, arr.manifest.offset)


def test_missing_object_and_bucket(s3_proxy: ProxiedS3) -> None:
    bucket, options, _ = s3_proxy
    for url in (f"s3://{bucket}/nope.nc", "s3://refzarr-no-such-bucket/x.h5"):
        with pytest.raises(refzarr.SourceNotFoundError, match=rf"{url}: no such file"):
            refzarr.scan(url, storage_options=options)


def test_detect_format_alone_reads_one_small_block(
    s3: tuple[str, dict[str, Any]], s3_proxy: ProxiedS3, tmp_path: Path
) -> None:
    bucket, options, proxy = s3_proxy
    url = _upload(_spread(tmp_path / "big.h5"), bucket, s3[1])
    proxy.reset()
    assert detect_format(url, options).name == "hdf5"
    assert proxy.count("GET") == 1
    assert proxy.bytes_sent("GET") == HEAD_BYTES


def test_proxy_forwards_uploads_and_counts_by_method_and_path(s3_proxy: ProxiedS3) -> None:
    bucket, options, proxy = s3_proxy
    fs = fsspec.filesystem("s3", **options)
    data = bytes(range(256)) * 4000  # above botocore's threshold for Expect: 100-continue
    fs.pipe_file(f"{bucket}/up/a.bin", data)
    assert fs.cat_file(f"{bucket}/up/a.bin", start=10, end=20) == data[10:20]
    assert proxy.count("PUT", f"/{bucket}/up/a.bin") == 1
    assert proxy.count("GET", f"/{bucket}/up/") == 1
    assert proxy.matching("GET", f"/{bucket}/up/")[0].range == "bytes=10-19"
