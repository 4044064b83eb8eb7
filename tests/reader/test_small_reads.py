"""Small reads (a point, a window inside one chunk) take shorter paths through the reader (one
chunk's entry, one range's plan, one chunk's decode): they give what the whole read gives, and
every check of a read still runs on them (the sources' record, the per-chunk limit)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import netCDF4
import numpy as np
import pytest
import zarr

import refzarr
from corpus import CORPUS
from refzarr import ChunkDecodeError, SourceChangedError
from refzarr.codecs.chunk import max_chunk_bytes, set_max_chunk_bytes
from refzarr.io import RangeReader
from refzarr.model import RefArray
from refzarr.reader.array import ArrayReader
from sourceskit import touch_later

FILES = [
    CORPUS / "netcdf4" / "kerchunk_air.nc",
    CORPUS / "netcdf4" / "test_gold.nc",
    CORPUS / "hdf5" / "chunked_v4_datasets.hdf5",
    CORPUS / "hdf5" / "test_compressed_chunked_datasets_latest.hdf5",
    CORPUS / "hdf5" / "pyfive_btreev2.hdf5",
]


def _selections(shape: tuple[int, ...], chunks: tuple[int, ...]) -> list[Any]:
    """Points (first, last, negative, on a chunk edge), windows in one chunk and across
    chunks, a step, a reversed slice."""
    first = tuple(0 for _ in shape)
    last = tuple(n - 1 for n in shape)
    edge = tuple(min(c, n - 1) for n, c in zip(shape, chunks, strict=True))
    inside = tuple(slice(0, max(1, min(c, n) // 2)) for n, c in zip(shape, chunks, strict=True))
    across = tuple(slice(max(0, c - 1), min(n, c + 2)) for n, c in zip(shape, chunks, strict=True))
    return [
        first,
        last,
        tuple(-1 for _ in shape),
        edge,
        inside,
        across,
        (slice(None, None, 2),),
        (slice(None, None, -1),),
        (0, ...),
    ]


def _arrays(path: Path) -> list[tuple[str, RefArray]]:
    group = refzarr.scan(path)
    return [
        (name, array)
        for name, array in group.arrays()
        if array.meta.ndim and array.meta.dtype.kind not in "OV" and array.meta.is_regular
    ]


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_small_reads_equal_the_whole_read(path: Path) -> None:
    if not path.exists():
        pytest.skip("corpus absent")
    reader = RangeReader()
    arrays = _arrays(path)
    assert arrays
    for name, array in arrays:
        whole = ArrayReader(array, name, reader)[...]
        for selection in _selections(array.meta.shape, array.meta.chunks):
            got = ArrayReader(array, name, reader)[selection]
            want = whole[selection]
            assert got.shape == want.shape, (name, selection)
            assert got.dtype == want.dtype, (name, selection)
            np.testing.assert_array_equal(got, want, err_msg=f"{name} {selection}")


def _chunked(path: Path, scale: float) -> Path:
    """``v(t, x)`` float32, zlib, chunks (1, 8): 32 chunks."""
    with netCDF4.Dataset(path, "w") as ds:
        ds.createDimension("t", 4)
        ds.createDimension("x", 64)
        var = ds.createVariable("v", "f4", ("t", "x"), zlib=True, chunksizes=(1, 8))
        var[:] = np.arange(256, dtype="f4").reshape(4, 64) * scale
    return path


@pytest.fixture
def chunked(tmp_path: Path) -> tuple[Path, Path]:
    source = _chunked(tmp_path / "chunked.nc", 1.0)
    target = tmp_path / "refs.json"
    refzarr.write(refzarr.scan(source), target)
    return source, target


def _point_dataset(target: Path) -> float:
    return float(refzarr.open_dataset(target)["v"][2, 9].values)


def _point_store(target: Path) -> float:
    store = refzarr.ReferenceStore(target)
    return float(zarr.open_array(store, path="v", mode="r", zarr_format=2)[2, 9])


@pytest.mark.parametrize("read", [_point_dataset, _point_store], ids=["dataset", "store"])
def test_a_point_read_checks_the_sources_of_each_opening(
    chunked: tuple[Path, Path], read: Any
) -> None:
    source, target = chunked
    assert read(target) == 2 * 64 + 9
    _chunked(source, 2.0)  # rewritten: the same layout, other values
    touch_later(source)
    with pytest.raises(SourceChangedError, match="changed since it was scanned"):
        read(target)  # opened again: checked again
    assert refzarr.refresh(target)
    assert read(target) == 2 * (2 * 64 + 9)


def test_a_point_read_of_an_opened_set_keeps_its_check(chunked: tuple[Path, Path]) -> None:
    source, target = chunked
    ds = refzarr.open_dataset(target)
    _chunked(source, 2.0)
    touch_later(source)
    with pytest.raises(SourceChangedError):
        ds["v"][0, 0].values  # noqa: B018  (the read is the test)
    with pytest.raises(SourceChangedError):  # and again, without another stat
        ds["v"][1, 1].values  # noqa: B018


def test_a_point_read_keeps_the_per_chunk_limit(chunked: tuple[Path, Path]) -> None:
    _, target = chunked
    ds = refzarr.open_dataset(target)
    limit = max_chunk_bytes()
    set_max_chunk_bytes(16)  # a chunk of 8 float32 decodes to 32 bytes
    try:
        with pytest.raises(ChunkDecodeError, match="over the limit"):
            ds["v"][1, 3].values  # noqa: B018
    finally:
        set_max_chunk_bytes(limit)
    assert float(ds["v"][1, 3].values) == 67
