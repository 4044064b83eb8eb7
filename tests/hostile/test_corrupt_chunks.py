"""Corrupt chunks and impossible ranges: the xarray engine and `ReferenceStore` (through zarr)
raise the same refzarr errors, naming the key, with the range as given (never overflowed)."""

from __future__ import annotations

import asyncio
import json
import time
import zlib
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import xarray as xr
import zarr
from zarr.abc.store import RangeByteRequest
from zarr.core.buffer import default_buffer_prototype

import refzarr
from refzarr.errors import ChunkDecodeError, ChunkFetchError
from refzarr.model import RefGroup

LAST = 2**63 - 1


@pytest.fixture(scope="module")
def group(tmp_path_factory: pytest.TempPathFactory) -> RefGroup:
    folder = tmp_path_factory.mktemp("corrupt")
    good = zlib.compress(np.arange(2, dtype="<i4").tobytes())
    data = folder / "data.bin"
    data.write_bytes(good + b"not zlib at all")
    url = data.as_uri()
    zarray = {
        "shape": [12],
        "chunks": [2],
        "dtype": "<i4",
        "fill_value": -1,
        "order": "C",
        "filters": None,
        "compressor": {"id": "zlib", "level": 1},
        "zarr_format": 2,
    }
    refs = {
        ".zgroup": '{"zarr_format":2}',
        "a/.zarray": json.dumps(zarray),
        "a/.zattrs": '{"_ARRAY_DIMENSIONS":["x"]}',
        "a/0": [url, 0, len(good)],
        "a/1": [url, len(good), 15],  # not zlib
        "a/2": "base64:" + "AAAA" * 4,  # inlined, not zlib
        "a/3": [url, LAST, 2],  # ends past any file
        "a/4": [url, LAST - 1, 1],  # a valid range past this file's end
        "a/5": [url, 1, 3],  # truncated zlib stream
    }
    return refzarr.from_kerchunk(refs)


def through_xarray(group: RefGroup, chunk: int) -> Any:
    return refzarr.open_dataset(group)["a"][2 * chunk : 2 * chunk + 2].values


def through_zarr(group: RefGroup, chunk: int) -> Any:
    """Through the store serving chunks decoded (its default)."""
    return zarr.open_array(refzarr.ReferenceStore(group), path="a", mode="r")[2 * chunk]


def through_zarr_as_stored(group: RefGroup, chunk: int) -> Any:
    """Through the store serving chunks as stored, checked by a decode first."""
    store = refzarr.ReferenceStore(group, decoded=False)
    return zarr.open_array(store, path="a", mode="r")[2 * chunk]


def through_open_zarr(group: RefGroup, chunk: int) -> Any:
    """Through xarray's zarr engine over the store (dask chunks)."""
    ds = xr.open_zarr(refzarr.ReferenceStore(group), zarr_format=2, consolidated=True)
    return ds["a"][2 * chunk : 2 * chunk + 2].values


READERS = [through_xarray, through_zarr, through_zarr_as_stored, through_open_zarr]


@pytest.mark.parametrize("read", READERS)
def test_the_good_chunk_reads(group: RefGroup, read: Callable[[RefGroup, int], Any]) -> None:
    assert np.asarray(read(group, 0)).ravel()[0] == 0


@pytest.mark.parametrize("read", READERS)
@pytest.mark.parametrize("chunk", [1, 2, 5])
def test_corrupt_chunks_are_chunk_decode_errors(
    group: RefGroup, read: Callable[[RefGroup, int], Any], chunk: int
) -> None:
    started = time.monotonic()
    with pytest.raises(ChunkDecodeError, match=rf"a/{chunk}\b.*decoding failed"):
        read(group, chunk)
    assert time.monotonic() - started < 30


@pytest.mark.parametrize("read", READERS)
def test_a_range_past_any_file_names_its_true_end(
    group: RefGroup, read: Callable[[RefGroup, int], Any]
) -> None:
    with pytest.raises(ChunkFetchError) as info:
        read(group, 3)
    message = str(info.value)
    assert f"bytes {LAST}-{LAST + 2} (offset {LAST}, length 2) for a/3" in message
    # no wrapped-around end anywhere after the file's path (a path may hold "-2": pytest-2)
    said = message[message.index("cannot read bytes") :]
    assert "-2" not in said.replace(f"{LAST}-{LAST + 2}", "")
    assert "the reference is corrupt" in message


@pytest.mark.parametrize("read", READERS)
def test_a_range_past_the_file_end(group: RefGroup, read: Callable[[RefGroup, int], Any]) -> None:
    with pytest.raises(ChunkFetchError, match=rf"bytes {LAST - 1}-{LAST} .* for a/4"):
        read(group, 4)


def test_unchecked_store_leaves_decoding_to_zarr(group: RefGroup) -> None:
    store = refzarr.ReferenceStore(group, check_chunks=False)
    with pytest.raises(zlib.error):
        zarr.open_array(store, path="a", mode="r")[2]


@pytest.mark.parametrize("read", [through_zarr, through_zarr_as_stored])
def test_the_store_names_where_the_bytes_came_from(
    group: RefGroup, read: Callable[[RefGroup, int], Any]
) -> None:
    with pytest.raises(ChunkDecodeError, match=r"a/1 \(bytes \d+-\d+ of file://.*data\.bin\)"):
        read(group, 1)
    with pytest.raises(ChunkDecodeError, match=r"a/2 \(inlined in the reference set\)"):
        read(group, 2)


def test_a_byte_range_of_a_corrupt_chunk_is_a_chunk_decode_error(group: RefGroup) -> None:
    store = refzarr.ReferenceStore(group)
    request = RangeByteRequest(0, 4)
    with pytest.raises(ChunkDecodeError, match=r"a/1\b"):
        asyncio.run(store.get("a/1", default_buffer_prototype(), request))
    whole = asyncio.run(store.get("a/0", default_buffer_prototype()))
    part = asyncio.run(store.get("a/0", default_buffer_prototype(), request))
    assert whole is not None
    assert part is not None
    assert whole.to_bytes() == np.arange(2, dtype="<i4").tobytes()
    assert part.to_bytes() == whole.to_bytes()[:4]
