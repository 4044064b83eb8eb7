"""Zarr stores on S3 (moto_server) and in memory: references to the objects, read back
identical; a scan costs one listing and the metadata reads, never a request per chunk."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import fsspec
import numpy as np
import pytest
import xarray as xr
import zarr
from zarrkit import assert_same, store_arrays

import refzarr
from refzarr import ReferenceStore
from refzarr.scan.detect import detect_format
from refzarr.scan.zarr import ZarrScanner
from roundtrip import chunk_keys
from s3proxy import CountingProxy


def _write(path: Path, fmt: int) -> Path:
    """A store with a nested group, a sharded array (v3) and 120 chunks in one array."""
    root = zarr.open_group(path, mode="w", zarr_format=fmt)
    root.attrs["title"] = "on S3"
    many = root.create_array("many", shape=(60, 40), chunks=(5, 20), dtype="f4", fill_value=-1)
    many[:55] = np.arange(55 * 40, dtype="f4").reshape(55, 40)
    sub = root.create_group("sub")
    if fmt == 3:
        sharded = sub.create_array(
            "sharded", shape=(8, 8), chunks=(2, 2), shards=(4, 4), dtype="i2"
        )
        sharded[:6] = 3
    else:
        sub.create_array("b", shape=(3,), chunks=(2,), dtype="u1")[:] = [1, 2, 3]
    return path


def _upload(local: Path, bucket: str, options: dict[str, Any]) -> str:
    url = f"s3://{bucket}/{local.name}"
    fsspec.filesystem("s3", **options).put(str(local), url, recursive=True)
    return url


def _read_through_references(group: refzarr.RefGroup, options: dict[str, Any]) -> zarr.Group:
    return zarr.open_group(
        ReferenceStore(group, storage_options=dict(options)), mode="r", zarr_format=2
    )


@pytest.mark.parametrize("fmt", [3])  # Zarr v2 on S3: test_scan_requests_v2
def test_store_on_s3(s3: tuple[str, dict[str, Any]], tmp_path: Path, fmt: int) -> None:
    bucket, options = s3
    url = _upload(_write(tmp_path / "s.zarr", fmt), bucket, options)
    assert detect_format(f"{url}/", options).name == "zarr"
    group = refzarr.scan(f"{url}/", storage_options=dict(options))
    ref = group["many"].manifest[(0, 0)]  # type: ignore[union-attr]
    assert ref.url == f"{url}/many/c/0/0" if fmt == 3 else f"{url}/many/0.0"
    # zarr-python reads the local copy (over S3 it leaves aiohttp sessions open at exit)
    expected = store_arrays(str(tmp_path / "s.zarr"))
    ours = _read_through_references(group, options)
    for path, values in expected.items():
        assert_same(np.asarray(ours[path][...]), values, path)
    refzarr.write(group, tmp_path / "refs.json")
    fs = fsspec.filesystem(
        "reference",
        fo=str(tmp_path / "refs.json"),
        remote_protocol="s3",
        remote_options=dict(options),
        skip_instance_cache=True,
    )
    many = json.loads(fs.cat_file("many/.zarray"))
    for key in chunk_keys("many", many):  # every chunk's bytes through fsspec from S3
        local = tmp_path / "s.zarr" / _store_key(key, fmt)
        assert (fs.cat_file(key) if local.exists() else None) == (
            local.read_bytes() if local.exists() else None
        ), key


def test_scan_requests(s3_proxy: tuple[str, dict[str, Any], CountingProxy], tmp_path: Path) -> None:
    """One listing, then only metadata GETs: 120 chunks cost no request each."""
    bucket, options, proxy = s3_proxy
    direct = {**options, "client_kwargs": {**options["client_kwargs"]}}
    url = f"s3://{bucket}/s.zarr"
    local = _write(tmp_path / "s.zarr", 3)
    fsspec.filesystem("s3", **direct).put(str(local), url, recursive=True)
    proxy.reset()
    group = ZarrScanner(storage_options=options)(url)
    assert group["many"].manifest.grid_shape == (12, 2)  # type: ignore[union-attr]
    gets = proxy.count("GET")
    lists = sum(1 for r in proxy.matching("GET") if "list-type" in r.query)
    print(f"{url}: {proxy.count()} requests, {gets} GETs of which {lists} listings")
    for r in proxy.matching():
        print("   ", r.method, r.path, r.query[:80])
    assert gets - lists <= 8  # zarr.json of the root, sub, many, sharded (+ retries of absent keys)
    assert lists <= 4


def test_store_in_memory(tmp_path: Path) -> None:
    fs = fsspec.filesystem("memory")
    local = _write(tmp_path / "m.zarr", 3)
    fs.put(str(local), "/refzarr-test/m.zarr", recursive=True)
    try:
        group = ZarrScanner()("memory://refzarr-test/m.zarr")
        expected = store_arrays(str(local))
        ours = _read_through_references(group, {})
        for path, values in expected.items():
            assert_same(np.asarray(ours[path][...]), values, path)
    finally:
        fs.rm("/refzarr-test", recursive=True)


def _store_key(reference_key: str, fmt: int) -> str:
    """The store's key of a chunk key of the references (``many/0.1`` -> ``many/c/0/1``)."""
    path, _, index = reference_key.rpartition("/")
    return f"{path}/c/{index.replace('.', '/')}" if fmt == 3 else reference_key


def test_scan_requests_v2(
    s3_proxy: tuple[str, dict[str, Any], CountingProxy], tmp_path: Path
) -> None:
    """Zarr v2: one listing, a GET per metadata document (.zgroup, .zattrs, .zarray)."""
    bucket, options, proxy = s3_proxy
    url = f"s3://{bucket}/s.zarr"
    local = _write(tmp_path / "s.zarr", 2)
    fsspec.filesystem("s3", **options).put(str(local), url, recursive=True)
    proxy.reset()
    group = ZarrScanner(storage_options=options)(url)
    documents = sum(1 for p in local.rglob(".z*"))
    assert proxy.count("GET") == 1 + documents
    expected = store_arrays(str(local))
    ours = _read_through_references(group, options)
    for path, values in expected.items():
        assert_same(np.asarray(ours[path][...]), values, path)


@pytest.mark.parametrize("fmt", [2, 3])
def test_xarray_store_on_s3_along_time(
    s3: tuple[str, dict[str, Any]], tmp_path: Path, fmt: int
) -> None:
    """Stores xarray wrote, on S3, combined along time: dimension coordinates are read (from
    S3) and held in the set by default, and xarray reads what it reads from the stores."""
    bucket, options = s3
    stores = []
    for day in range(2):
        ds = xr.Dataset(
            {"t": (("time", "x"), np.arange(6, dtype="f4").reshape(2, 3) + day, {"units": "K"})},
            coords={"time": ("time", [2 * day, 2 * day + 1]), "x": ("x", [0.5, 1.5, 2.5])},
        )
        stores.append(tmp_path / f"day{day}.zarr")
        ds.to_zarr(stores[-1], zarr_format=fmt, consolidated=False, mode="w")
    urls = [_upload(s, bucket, options) for s in stores]
    group = refzarr.combine(
        [refzarr.scan(u, storage_options=dict(options)) for u in urls], concat_dims="time"
    )
    assert group["time"].manifest.count_written() == 1  # type: ignore[union-attr]
    with (
        xr.open_mfdataset(
            stores, engine="zarr", consolidated=False, combine="nested", concat_dim="time"
        ) as truth,
        refzarr.open_dataset(group, storage_options=dict(options)) as ours,
    ):
        xr.testing.assert_identical(ours.load(), truth.load())
