"""ReferenceStore under zarr-python 3 and xarray: values equal h5py / netCDF in each way of serving
chunks (decoded under codec-free metadata, stored and checked, stored unchecked); listing, byte
ranges, missing chunks, read-only, and URL restrictions that act before any request."""

from __future__ import annotations

import asyncio
import base64
import json
import math
import pickle
import zlib
from pathlib import Path
from typing import Any

import h5py
import numcodecs
import numpy as np
import pytest
import xarray as xr
import zarr
from zarr.abc.store import OffsetByteRequest, RangeByteRequest, Store, SuffixByteRequest
from zarr.core.buffer import default_buffer_prototype

import refzarr
from refzarr import ChunkDecodeError, ForbiddenURLError, ReferenceStore, UnsupportedFeatureError
from roundtrip import h5_datasets, kerchunk_hdf5_refs

MODES: dict[str, dict[str, bool]] = {
    "decoded": {},
    "stored": {"decoded": False},
    "unchecked": {"check_chunks": False},
}
"""Keyword arguments of each way the store serves chunks."""


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


@pytest.mark.parametrize("mode", MODES)
def test_zarr_reads_every_array_like_h5py(
    netcdf_file: Path, refs: dict[str, Any], mode: str
) -> None:
    root = zarr.open_group(ReferenceStore(refs, **MODES[mode]), mode="r", zarr_format=2)
    arrays = _arrays(root)
    expected = h5_datasets(netcdf_file)
    assert set(arrays) == set(expected)
    for path, array in arrays.items():
        got = np.asarray(array[...])
        assert got.dtype == expected[path].dtype, path
        np.testing.assert_array_equal(got, expected[path], strict=True, err_msg=path)


@pytest.mark.parametrize("mode", MODES)
def test_xarray_open_zarr_equals_netcdf(netcdf_file: Path, refs: dict[str, Any], mode: str) -> None:
    got = xr.open_zarr(ReferenceStore(refs, **MODES[mode]), consolidated=True, zarr_format=2)
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


@pytest.mark.parametrize("mode", MODES)
def test_a_pickled_array_reads_the_same(refs: dict[str, Any], mode: str) -> None:
    """A copy of the store (as dask sends one to a worker) serves its own arrays the same."""
    array = zarr.open_array(ReferenceStore(refs, **MODES[mode]), path="temperature", mode="r")
    expected = array[...]  # read first: the original has its decoders then
    copy = pickle.loads(pickle.dumps(array))
    assert (copy.store.check_chunks, copy.store.decoded) == (
        array.store.check_chunks,
        array.store.decoded,
    )
    np.testing.assert_array_equal(copy[...], expected, strict=True)


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


def _zarray(store: ReferenceStore, path: str) -> dict[str, Any]:
    text = _get(store, f"{path}/.zarray")
    assert text is not None
    found: dict[str, Any] = json.loads(text)
    return found


def test_decoded_arrays_have_no_codecs(refs: dict[str, Any]) -> None:
    group = refzarr.read(refs)
    as_stored = _zarray(ReferenceStore(group, decoded=False), "temperature")
    assert as_stored["filters"], "the fixture's temperature is compressed"
    for store in (ReferenceStore(group), ReferenceStore(group, check_chunks=False)):
        zarray = _zarray(store, "temperature")
        consolidated = json.loads(_get(store, ".zmetadata") or b"")
        assert consolidated["metadata"]["temperature/.zarray"] == zarray
        expected = as_stored if not store.decoded else {**as_stored, "filters": None}
        assert zarray == expected


def test_decoded_chunks_hold_the_values(netcdf_file: Path, refs: dict[str, Any]) -> None:
    store = ReferenceStore(refs)
    zarray = _zarray(store, "temperature")
    chunks = tuple(zarray["chunks"])
    data = _get(store, "temperature/0.0.0")
    assert data is not None
    values = np.frombuffer(data, dtype=zarray["dtype"]).reshape(chunks)
    with h5py.File(netcdf_file) as f:
        expected = f["temperature"][tuple(slice(0, c) for c in chunks)]
    np.testing.assert_array_equal(values, expected, strict=True)


def test_xarray_encoding_shows_the_codecs_only_as_stored(refs: dict[str, Any]) -> None:
    decoded = xr.open_zarr(ReferenceStore(refs), zarr_format=2)["temperature"].encoding
    stored = xr.open_zarr(ReferenceStore(refs, decoded=False), zarr_format=2)
    assert not decoded.get("filters")
    assert not decoded.get("compressors")
    assert stored["temperature"].encoding.get("filters")
    assert decoded["dtype"] == stored["temperature"].encoding["dtype"]


def _raw_refs(
    values: np.ndarray[Any, Any],
    chunks: tuple[int, ...],
    codecs: list[dict[str, Any]],
    **zarray: Any,
) -> dict[str, Any]:
    """A kerchunk set of one array ``a``, every chunk inlined and encoded with ``codecs``."""
    refs: dict[str, Any] = {
        ".zgroup": '{"zarr_format":2}',
        "a/.zarray": json.dumps(
            {
                "shape": list(values.shape),
                "chunks": list(chunks),
                "dtype": values.dtype.descr if values.dtype.names else values.dtype.str,
                "fill_value": None,
                "order": "C",
                "filters": codecs or None,
                "compressor": None,
                "zarr_format": 2,
                **zarray,
            }
        ),
    }
    order = zarray.get("order", "C")
    pipeline = [numcodecs.get_codec(dict(c)) for c in codecs]
    for index in np.ndindex(*(-(-s // c) for s, c in zip(values.shape, chunks, strict=True))):
        region = tuple(slice(i * c, (i + 1) * c) for i, c in zip(index, chunks, strict=True))
        chunk = np.zeros(chunks, dtype=values.dtype)
        part = values[region]
        chunk[tuple(slice(0, n) for n in part.shape)] = part
        encoded: Any = chunk.ravel(order=order)
        for codec in pipeline:
            encoded = codec.encode(encoded)
        raw = bytes(encoded) if not isinstance(encoded, np.ndarray) else encoded.tobytes()
        refs["a/" + (".".join(map(str, index)) or "0")] = "base64:" + base64.b64encode(raw).decode()
    return refs


LAYOUTS = {
    "big-endian F order": (
        np.arange(7 * 5, dtype=">i4").reshape(7, 5) * 3 - 50,
        (3, 2),
        [{"id": "shuffle", "elementsize": 4}, {"id": "zlib", "level": 1}],
        {"order": "F"},
    ),
    "structured": (
        np.array([(i, i / 4) for i in range(9)], dtype=[("n", "<u2"), ("x", ">f8")]),
        (4,),
        [{"id": "zlib", "level": 1}],
        {},
    ),
    "fixed strings": (
        np.array(["a", "bb", "ccc", "dddd", "e"], dtype="<U4"),
        (2,),
        [{"id": "zlib", "level": 1}],
        {},
    ),
    "scalar": (np.array(2.5, dtype="<f8"), (), [{"id": "zlib", "level": 1}], {}),
}


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_layouts_read_the_same_in_every_mode(layout: str, mode: str) -> None:
    values, chunks, codecs, zarray = LAYOUTS[layout]
    store = ReferenceStore(_raw_refs(values, chunks, codecs, **zarray), **MODES[mode])
    got = zarr.open_array(store, path="a", mode="r", zarr_format=2)[...]
    assert got.dtype == values.dtype
    np.testing.assert_array_equal(got, values, strict=True)


def _vlen_refs(chunk: bytes) -> dict[str, Any]:
    zarray = {
        "shape": [3],
        "chunks": [3],
        "dtype": "|O",
        "fill_value": None,
        "order": "C",
        "filters": [{"id": "vlen-utf8"}],
        "compressor": {"id": "zlib", "level": 1},
        "zarr_format": 2,
    }
    return {
        ".zgroup": '{"zarr_format":2}',
        "a/.zarray": json.dumps(zarray),
        "a/0": "base64:" + base64.b64encode(chunk).decode(),
    }


def test_object_arrays_keep_their_codecs_and_are_checked() -> None:
    words = np.array(["é", "", "long word"], dtype=object)
    chunk = zlib.compress(numcodecs.VLenUTF8().encode(words))
    store = ReferenceStore(_vlen_refs(chunk))
    assert _zarray(store, "a")["filters"] == [{"id": "vlen-utf8"}, {"id": "zlib", "level": 1}]
    got = zarr.open_array(store, path="a", mode="r", zarr_format=2)[...]
    assert got.tolist() == words.tolist()
    broken = ReferenceStore(_vlen_refs(chunk[:-3]))
    with pytest.raises(ChunkDecodeError, match=r"a/0 \(inlined in the reference set\)"):
        zarr.open_array(broken, path="a", mode="r", zarr_format=2)[...]


def _sizes(store: ReferenceStore, keys: list[str], old: bool = False) -> dict[str, int | str]:
    """Each key's size, or the error it raises; ``old``: zarr's own ``getsize`` (``len(get)``),
    what the store answered before it told sizes from the manifest."""
    getsize = (lambda key: Store.getsize(store, key)) if old else store.getsize
    found: dict[str, int | str] = {}
    for key in keys:
        try:
            found[key] = asyncio.run(getsize(key))
        except FileNotFoundError:
            found[key] = "absent"
    return found


def _no_reads(*args: Any) -> None:
    raise AssertionError("getsize fetched a chunk")


@pytest.mark.parametrize("mode", MODES)
def test_getsize_answers_as_get_did_without_fetching(
    refs: dict[str, Any], mode: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = ReferenceStore(refs, **MODES[mode])
    sparse = refzarr.read(refs)["sparse"]
    assert isinstance(sparse, refzarr.RefArray)
    missing = next(i for i in np.ndindex(sparse.manifest.grid_shape) if sparse.manifest[i] is None)
    keys = [
        *asyncio.run(_collect(store.list())),
        "sparse/" + ".".join(map(str, missing)),
        "temperature/99.0.0",
        "nothing/here",
    ]
    expected = _sizes(store, keys, old=True)
    monkeypatch.setattr(store.reader, "read", _no_reads)
    monkeypatch.setattr(store, "_decode", _no_reads)
    assert _sizes(store, keys) == expected
    assert list(expected.values()).count("absent") == 3
    array = zarr.open_array(store, path="temperature", mode="r", zarr_format=2)
    chunk_bytes = math.prod(array.chunks) * array.dtype.itemsize
    if store.decoded:
        assert asyncio.run(store.getsize("temperature/0.0.0")) == chunk_bytes
    else:  # the stored length: the fixture's temperature is compressed
        assert asyncio.run(store.getsize("temperature/0.0.0")) < chunk_bytes


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_getsize_of_inlined_and_whole_file_chunks(
    layout: str, mode: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    values, chunks, codecs, zarray = LAYOUTS[layout]
    refs = _raw_refs(values, chunks, codecs, **zarray)
    first = next(key for key in refs if key.startswith("a/") and not key.endswith(".zarray"))
    whole = tmp_path / "chunk.bin"  # the first chunk as a whole-file reference
    whole.write_bytes(base64.b64decode(refs[first].removeprefix("base64:")))
    refs[first] = [str(whole)]
    store = ReferenceStore(refs, **MODES[mode])
    keys = asyncio.run(_collect(store.list()))
    expected = _sizes(store, keys, old=True)
    monkeypatch.setattr(store.reader, "read", _no_reads)
    assert _sizes(store, keys) == expected


async def _collect(iterator: Any) -> list[str]:
    return [key async for key in iterator]
