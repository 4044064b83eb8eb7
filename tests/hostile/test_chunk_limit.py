"""A chunk declared huge (``chunks [2**40]``) with a few stored bytes: every read path
refuses it before allocating, naming the array, the chunk key, its size and the setter."""

from __future__ import annotations

import base64
import zlib
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
import xarray as xr
import zarr
from setkit import one_array_set
from test_shape_bombs import bounded

import refzarr
from refzarr.codecs import chunk as chunk_module
from refzarr.errors import ChunkDecodeError

LIMIT_MESSAGE = (
    r"a/0.*: a chunk of \(1099511627776,\) int32 decodes to 4,398,046,511,104 bytes, over "
    r"the limit of 2,147,483,648 bytes per chunk \(raise it with "
    r"refzarr\.codecs\.chunk\.set_max_chunk_bytes"
)


def huge_chunk(compressor: dict[str, Any] | None, chunk: int = 2**40) -> dict[str, Any]:
    zarray = {"shape": [2**40], "chunks": [chunk], "dtype": "<i4", "fill_value": 7, "order": "C",
              "filters": None, "compressor": compressor, "zarr_format": 2}  # fmt: skip
    stored = zlib.compress(bytes(4096)) if compressor else b"\x01\x00\x00\x00"
    return one_array_set(zarray, "base64:" + base64.b64encode(stored).decode())


COMPRESSORS = [None, {"id": "zlib", "level": 1}]


@pytest.mark.parametrize("compressor", COMPRESSORS, ids=["raw", "zlib"])
def test_refzarr_reader(compressor: dict[str, Any] | None) -> None:
    ds = refzarr.open_dataset(huge_chunk(compressor))
    with pytest.raises(ChunkDecodeError, match=LIMIT_MESSAGE):
        bounded(lambda: ds["a"][:3].values)


@pytest.mark.parametrize("compressor", COMPRESSORS, ids=["raw", "zlib"])
def test_xarray_engine(compressor: dict[str, Any] | None) -> None:
    ds = xr.open_dataset(huge_chunk(compressor), engine="refzarr")  # type: ignore[arg-type]
    with pytest.raises(ChunkDecodeError, match=LIMIT_MESSAGE):
        bounded(lambda: ds["a"][:3].values)


@pytest.mark.parametrize("check_chunks", [True, False])
@pytest.mark.parametrize("compressor", COMPRESSORS, ids=["raw", "zlib"])
def test_reference_store(compressor: dict[str, Any] | None, check_chunks: bool) -> None:
    store = refzarr.ReferenceStore(refzarr.read(huge_chunk(compressor)), check_chunks=check_chunks)
    array = zarr.open_array(store, path="a", mode="r")
    with pytest.raises(ChunkDecodeError, match=LIMIT_MESSAGE):
        bounded(lambda: array[:3])


@pytest.fixture
def small_limit() -> Iterator[None]:
    chunk_module.set_max_chunk_bytes(4000)
    yield
    chunk_module.set_max_chunk_bytes(chunk_module.MAX_CHUNK_BYTES)


def test_the_limit_is_configurable(small_limit: None) -> None:
    refs = huge_chunk(None, chunk=1000)  # 4,000 bytes: at the limit
    refs["refs"]["a/0"] = "base64:" + base64.b64encode(np.arange(1000, dtype="<i4")).decode()
    ds = refzarr.open_dataset(refs, mask_and_scale=False)
    assert ds["a"][998:1001].values.tolist() == [998, 999, 7]
    chunk_module.set_max_chunk_bytes(3999)
    with pytest.raises(ChunkDecodeError, match="4,000 bytes, over the limit of 3,999"):
        _ = refzarr.open_dataset(refs)["a"][:3].values
    assert chunk_module.max_chunk_bytes() == 3999
    with pytest.raises(ValueError, match="positive integer"):
        chunk_module.set_max_chunk_bytes(0)


def test_the_default_is_2_gib() -> None:
    assert chunk_module.MAX_CHUNK_BYTES == chunk_module.max_chunk_bytes() == 2**31


def test_a_stored_range_past_the_limit_is_not_fetched(tmp_path: Any) -> None:
    """``[url, 0, 2**40]`` for a chunk of four values: refused before any byte is read."""
    data = tmp_path / "data.bin"
    data.write_bytes(bytes(16))
    refs = huge_chunk(None, chunk=4)
    refs["refs"]["a/0"] = [data.as_uri(), 0, 2**40]
    says = (
        r"a/0: its stored range in file://.*data\.bin is 1,099,511,627,776 bytes long, over "
        r"the limit of 2,147,483,648 bytes per chunk: not fetched"
    )
    with pytest.raises(refzarr.ChunkFetchError, match=says):
        bounded(lambda: refzarr.open_dataset(refs)["a"][:3].values)
    array = zarr.open_array(refzarr.ReferenceStore(refzarr.read(refs)), path="a", mode="r")
    with pytest.raises(refzarr.ChunkFetchError, match=says):
        bounded(lambda: array[:3])
