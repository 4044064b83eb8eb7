"""Reference sets and the data they point at on S3 (moto_server from the `s3` fixture).

Everything goes through real s3fs requests to a local moto server: writing and reading each
format, reading data on S3 through fsspec's ReferenceFileSystem, atomic replacement on an
object store (no rename there: copy, then delete) and missing keys.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import fsspec
import numpy as np
import pytest
import xarray as xr
from zarr.core.sync import sync as zarr_sync
from zarr.storage import FsspecStore

import refzarr
from refzarr.formats.kerchunk_json import write as json_write
from refzarr.formats.parquet import write as parquet_write
from refzarr.formats.source import locate
from refzarr.model import ArrayMeta, ChunkManifest, RefArray, RefGroup
from roundtrip import INLINE_SMALL, assert_groups_identical, h5_datasets, kerchunk_hdf5_refs

S3Bucket = tuple[str, dict[str, Any]]

SUFFIXES = [".json", ".json.zst", ".json.gz", ".parq"]


def s3fs_of(options: dict[str, Any]) -> Any:
    """The (cached) s3fs filesystem for ``options``, its listings cache emptied."""
    fs = fsspec.filesystem("s3", **options)
    fs.invalidate_cache()
    return fs


def objects(bucket: str, options: dict[str, Any]) -> dict[str, bytes]:
    """Every object in ``bucket``, by key."""
    fs = s3fs_of(options)
    return {path.partition("/")[2]: fs.cat_file(path) for path in fs.find(bucket)}


def leftovers(bucket: str, options: dict[str, Any]) -> list[str]:
    """Temporary or backup objects in ``bucket``."""
    return [key for key in objects(bucket, options) if ".tmp-" in key or ".old-" in key]


def records_group(nchunks: int, url: str = "s3://data/a.nc", name: str = "x") -> RefGroup:
    """Array ``name`` of ``nchunks`` referenced chunks, and a nested group with one array."""
    manifest = ChunkManifest.from_arrays(
        [url], np.zeros(nchunks, np.int32), np.arange(nchunks) * 8, [8] * nchunks
    )
    meta = ArrayMeta(shape=(nchunks,), chunks=(1,), dtype=np.dtype("<f8"))
    inner = RefGroup(
        attributes={"where": "nested"},
        members={"y": RefArray(meta, manifest)},
    )
    return RefGroup(attributes={"n": nchunks}, members={name: RefArray(meta, manifest), "g": inner})


@pytest.fixture
def netcdf_group(netcdf_file: Path) -> RefGroup:
    """The standard test file's references (small chunks inlined) as a group."""
    return refzarr.read(kerchunk_hdf5_refs(netcdf_file, INLINE_SMALL))


# -- (a) reference sets on S3 -----------------------------------------------------------------


@pytest.mark.parametrize("suffix", SUFFIXES)
def test_write_then_read_back(s3: S3Bucket, netcdf_group: RefGroup, suffix: str) -> None:
    bucket, options = s3
    url = f"s3://{bucket}/sets/refs{suffix}"
    refzarr.write(netcdf_group, url, storage_options=options)
    assert_groups_identical(refzarr.read(url, storage_options=options), netcdf_group)
    assert leftovers(bucket, options) == []


@pytest.mark.parametrize("suffix", [".json", ".parq"])
def test_expand_references_from_s3(s3: S3Bucket, netcdf_group: RefGroup, suffix: str) -> None:
    bucket, options = s3
    url = f"s3://{bucket}/refs{suffix}"
    refzarr.write(netcdf_group, url, storage_options=options)
    expanded = refzarr.expand_references(url, storage_options=options)
    assert refzarr.read(expanded) == netcdf_group


def test_json_v1_on_s3(s3: S3Bucket) -> None:
    bucket, options = s3
    url = f"s3://{bucket}/v1.json"
    group = records_group(5, "s3://some-bucket/long/prefix/file.nc")
    refzarr.write(group, url, version=1, storage_options=options)
    assert refzarr.read(url, storage_options=options) == group


# -- (b) data on S3, read through the references ----------------------------------------------


@contextlib.contextmanager
def references_store(
    refs_url: str, options: dict[str, Any], group: str = ""
) -> Iterator[FsspecStore]:
    """zarr's read-only store over fsspec's ReferenceFileSystem for references and data on S3.

    The store is rooted at ``group`` (see roundtrip.open_zarr_group for why not at the root).

    zarr's store is asynchronous, so the s3fs the references read through is too, and nothing
    closes an asynchronous s3fs's session by itself: it is closed here (left open, aiohttp
    warns when it is garbage-collected).
    """
    reference_options = {
        "fo": refs_url,
        "target_options": options,
        "remote_protocol": "s3",
        "remote_options": {**options, "asynchronous": True},
        "skip_instance_cache": True,
    }
    store = FsspecStore.from_url(
        f"reference://{group}", storage_options=reference_options, read_only=True
    )
    try:
        yield store
    finally:
        remotes = {id(fs): fs for fs in store.fs.fss.values() if getattr(fs, "asynchronous", 0)}
        for remote in remotes.values():
            if getattr(remote, "_s3", None) is not None:  # connected

                async def close(remote: Any = remote) -> None:
                    client = await remote.set_session()  # the open session, as s3fs documents
                    await client.close()

                zarr_sync(close())


@pytest.mark.parametrize(
    "suffix",
    [
        ".json",
        # fsspec's LazyReferenceMapper reads Parquet references with pandas' fastparquet
        # engine, which pandas 3 deprecates; reading through fsspec is what is checked here
        pytest.param(
            ".parq",
            marks=pytest.mark.filterwarnings(
                "ignore:The 'fastparquet' engine is deprecated:pandas.errors.Pandas4Warning"
            ),
        ),
    ],
)
def test_data_on_s3_read_through_references(s3: S3Bucket, netcdf_file: Path, suffix: str) -> None:
    """kerchunk scans the file on S3; fsspec + xarray read it back exactly as h5py does."""
    from kerchunk.hdf import SingleHdf5ToZarr

    bucket, options = s3
    data_url = f"s3://{bucket}/data/sample.nc"
    s3fs_of(options).put_file(str(netcdf_file), data_url)
    with fsspec.open(data_url, "rb", **options) as f:
        refs = SingleHdf5ToZarr(f, url=data_url, inline_threshold=0, error="raise").translate()
    refs_url = f"s3://{bucket}/refs/sample{suffix}"
    refzarr.write(refzarr.read(refs), refs_url, storage_options=options)

    expected = h5_datasets(netcdf_file)
    compared = set()
    for group in ("", "forecast"):
        prefix = f"{group}/" if group else ""
        with (
            references_store(refs_url, options, group) as store,
            xr.open_dataset(
                store, engine="zarr", consolidated=False, decode_cf=False, mask_and_scale=False
            ) as ds,
        ):
            for name, variable in ds.variables.items():
                values = expected[f"{prefix}{name}"]
                native = values.astype(values.dtype.newbyteorder("="))  # as xarray hands it out
                np.testing.assert_array_equal(variable.values, native, strict=True, err_msg=name)
                compared.add(f"{prefix}{name}")
    assert compared == set(expected)


# -- (c) atomic replacement on S3 -------------------------------------------------------------


@pytest.mark.parametrize("suffix", [".json", ".json.zst"])
def test_failed_json_write_keeps_the_old_object(
    s3: S3Bucket, monkeypatch: pytest.MonkeyPatch, suffix: str
) -> None:
    bucket, options = s3
    url = f"s3://{bucket}/refs{suffix}"
    refzarr.write(records_group(3), url, storage_options=options)
    before = objects(bucket, options)

    def fail(*args: object, **kwargs: object) -> None:
        raise RuntimeError("rendering failed")

    monkeypatch.setattr(json_write, "render_parts", fail)
    with pytest.raises(RuntimeError, match="rendering failed"):
        refzarr.write(records_group(4), url, storage_options=options)
    assert objects(bucket, options) == before


def test_failed_upload_keeps_the_old_object(s3: S3Bucket, monkeypatch: pytest.MonkeyPatch) -> None:
    """The new bytes are uploaded under a temporary key and that upload fails half way."""
    bucket, options = s3
    url = f"s3://{bucket}/refs.json"
    refzarr.write(records_group(3), url, storage_options=options)
    before = objects(bucket, options)
    fs = locate(url, options).fs  # the cached instance refzarr.write will use
    real_pipe = fs.pipe_file

    def half_then_fail(path: str, data: bytes, **kwargs: Any) -> None:
        real_pipe(path, data[: len(data) // 2], **kwargs)
        raise OSError("connection reset")

    monkeypatch.setattr(fs, "pipe_file", half_then_fail)
    with pytest.raises(OSError, match="connection reset"):
        refzarr.write(records_group(4), url, storage_options=options)
    monkeypatch.undo()
    assert objects(bucket, options) == before


def test_failed_parquet_write_keeps_the_old_set(
    s3: S3Bucket, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The second record file fails to encode after the first was uploaded."""
    bucket, options = s3
    url = f"s3://{bucket}/refs.parq"
    refzarr.write(records_group(3), url, record_size=1, storage_options=options)
    before = objects(bucket, options)
    real_encode = parquet_write.encode_record
    calls = []

    def fail_second(table: Any) -> bytes:
        calls.append(1)
        if len(calls) == 2:
            raise RuntimeError("encoding failed")
        return real_encode(table)

    monkeypatch.setattr(parquet_write, "encode_record", fail_second)
    with pytest.raises(RuntimeError, match="encoding failed"):
        refzarr.write(records_group(6), url, record_size=1, storage_options=options)
    assert objects(bucket, options) == before
    monkeypatch.undo()
    assert refzarr.read(url, storage_options=options) == records_group(3)


def test_parquet_set_failing_half_way_into_place_is_restored(
    s3: S3Bucket, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An object store moves a directory file by file: a move that fails after some files
    leaves neither a mix of old and new files nor the new set's leftovers."""
    bucket, options = s3
    url = f"s3://{bucket}/refs.parq"
    refzarr.write(records_group(3), url, record_size=1, storage_options=options)
    before = objects(bucket, options)
    fs = locate(url, options).fs  # the cached instance refzarr.write will use
    real_copy = fs.copy
    copies = []

    def copy_half_of_the_second(sources: list[str], targets: list[str], **kwargs: Any) -> None:
        copies.append(sources)
        if len(copies) == 2:  # the new set moving into place (the old one is set aside first)
            real_copy(sources[:-1], targets[:-1], **kwargs)  # all but one
            raise OSError("connection reset")
        real_copy(sources, targets, **kwargs)

    monkeypatch.setattr(fs, "copy", copy_half_of_the_second)
    with pytest.raises(OSError, match="connection reset"):
        refzarr.write(records_group(2, name="new"), url, record_size=1, storage_options=options)
    monkeypatch.undo()
    assert len(copies) == 3  # set aside, half moved, restored
    assert objects(bucket, options) == before
    assert refzarr.read(url, storage_options=options) == records_group(3)


def test_overwriting_a_parquet_set_replaces_it_whole(s3: S3Bucket) -> None:
    bucket, options = s3
    url = f"s3://{bucket}/refs.parq"
    refzarr.write(records_group(3), url, record_size=1, storage_options=options)
    old = sorted(objects(bucket, options))
    assert old == [
        "refs.parq/.zmetadata",
        "refs.parq/g/y/refs.0.parq",
        "refs.parq/g/y/refs.1.parq",
        "refs.parq/g/y/refs.2.parq",
        "refs.parq/x/refs.0.parq",
        "refs.parq/x/refs.1.parq",
        "refs.parq/x/refs.2.parq",
    ]
    refzarr.write(records_group(3), url, record_size=3, storage_options=options)
    assert sorted(objects(bucket, options)) == [
        "refs.parq/.zmetadata",
        "refs.parq/g/y/refs.0.parq",
        "refs.parq/x/refs.0.parq",
    ]
    assert refzarr.read(url, storage_options=options) == records_group(3)


def test_overwriting_a_json_object_replaces_it(s3: S3Bucket) -> None:
    bucket, options = s3
    url = f"s3://{bucket}/refs.json"
    refzarr.write(records_group(3), url, storage_options=options)
    refzarr.write(records_group(5), url, storage_options=options)
    assert sorted(objects(bucket, options)) == ["refs.json"]
    assert refzarr.read(url, storage_options=options) == records_group(5)


# -- (d) missing keys -------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["missing.json", "missing.json.zst", "missing.parq"])
def test_missing_key_raises_source_not_found(s3: S3Bucket, name: str) -> None:
    bucket, options = s3
    url = f"s3://{bucket}/{name}"
    with pytest.raises(refzarr.SourceNotFoundError, match=re.escape(url)):
        refzarr.read(url, storage_options=options)
    with pytest.raises(refzarr.SourceNotFoundError, match=re.escape(url)):
        refzarr.expand_references(url, storage_options=options)
