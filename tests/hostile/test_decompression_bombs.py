"""Decompression bombs: a chunk of a few bytes that inflates to gigabytes (785 bytes of bz2 made
1 GiB, 10 s, for a chunk of 8 KiB), and a compressed JSON reference set that does (33 KB of
zstd, 1 GiB and 2.2 GB of memory before the set was parsed), are refused while decompressing,
never held whole; the codecs' results within the bound are unchanged."""

from __future__ import annotations

import base64
import bz2
import gzip
import json
import lzma
import tracemalloc
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numcodecs
import numpy as np
import pytest
import zstandard
from setkit import one_array_set

import refzarr
from refzarr.errors import ChunkDecodeError, RefFormatError
from refzarr.formats import source as source_module
from timebound import raised_within

BOMB = 32 * 2**20
"""Bytes every bomb inflates to: over 16 times its 8 KiB chunk and the 1 MiB floor, twice."""

HARD_TIMEOUT = 60
"""Seconds after which a decoding counts as a hang (a bomb takes well under one)."""

HELD = 16 * 2**20
"""Peak of traced memory while refusing a bomb: half of the bomb (lzma's own dictionary is
8 MiB)."""


def _zstd_unsized(data: bytes) -> bytes:
    return zstandard.ZstdCompressor(write_content_size=False).compress(data)


def _zstd_frames(data: bytes) -> bytes:
    """A small frame declaring its size (16 bytes), then the rest in a second frame."""
    return numcodecs.Zstd().encode(data[:16]) + zstandard.ZstdCompressor().compress(data[16:])


BOMBS: dict[str, tuple[dict[str, Any], Callable[[bytes], bytes]]] = {
    "zlib": ({"id": "zlib", "level": 1}, zlib.compress),
    "gzip": ({"id": "gzip", "level": 1}, gzip.compress),
    "bz2": ({"id": "bz2", "level": 1}, bz2.compress),
    "lzma": ({"id": "lzma"}, lzma.compress),
    "zstd": ({"id": "zstd", "level": 1}, lambda d: numcodecs.Zstd().encode(d)),
    "zstd-unsized": ({"id": "zstd", "level": 1}, _zstd_unsized),
    "zstd-frames": ({"id": "zstd", "level": 1}, _zstd_frames),
    "blosc": ({"id": "blosc"}, lambda d: numcodecs.Blosc(cname="lz4").encode(d)),
    "lz4": ({"id": "lz4"}, lambda d: numcodecs.LZ4().encode(d)),
}


def one_chunk_set(
    compressor: dict[str, Any], stored: bytes, filters: list[dict[str, Any]] | None = None
) -> dict[str, Any]:
    """A set of one float64 array of one 8 KiB chunk stored inline as ``stored``."""
    zarray = {"shape": [1024], "chunks": [1024], "dtype": "<f8", "fill_value": None,
              "order": "C", "filters": filters, "compressor": compressor,
              "zarr_format": 2}  # fmt: skip
    return one_array_set(zarray, "base64:" + base64.b64encode(stored).decode())


def traced_peak(call: Callable[[], Any]) -> tuple[BaseException | None, int]:
    """The exception ``call`` raised (within the hard time bound) and the traced peak."""
    tracemalloc.start()
    try:
        error = raised_within(HARD_TIMEOUT, call)
        return error, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


@pytest.fixture(scope="module")
def zeros() -> bytes:
    return bytes(BOMB)


@pytest.mark.parametrize("kind", list(BOMBS))
def test_chunk_bomb_refused_while_inflating(kind: str, zeros: bytes) -> None:
    compressor, compress = BOMBS[kind]
    ds = refzarr.open_dataset(one_chunk_set(compressor, compress(zeros)))
    error, peak = traced_peak(lambda: ds["a"].values)
    assert isinstance(error, ChunkDecodeError), error
    codec = compressor["id"]
    assert f"a/0: a chunk of (1024,) float64 is 8,192 bytes, but its {codec} stream" in str(error)
    assert "such a chunk may decompress to (a damaged chunk or a decompression bomb)" in str(error)
    assert peak < HELD, f"{peak:,} bytes traced while refusing a {kind} bomb"


def test_chunk_bomb_through_the_store(zeros: bytes) -> None:
    store = refzarr.ReferenceStore(one_chunk_set({"id": "bz2", "level": 1}, bz2.compress(zeros)))
    import zarr

    array = zarr.open_array(store, path="a", mode="r")
    error, peak = traced_peak(lambda: array[:])
    assert isinstance(error, ChunkDecodeError), error
    assert "its bz2 stream inflates to more than the 1,048,576 bytes" in str(error)
    assert peak < HELD


def test_zlib_after_a_filter_is_bounded_too(zeros: bytes) -> None:
    """zlib not first in the decoding order (a checksum wraps it) goes through the bound."""
    filters = [{"id": "zlib", "level": 1}]
    stored = numcodecs.Fletcher32().encode(zlib.compress(zeros))
    ds = refzarr.open_dataset(one_chunk_set({"id": "fletcher32"}, stored, filters))
    error = raised_within(HARD_TIMEOUT, lambda: ds["a"].values)
    assert isinstance(error, ChunkDecodeError), error
    assert "its zlib stream inflates to more than" in str(error)


@pytest.mark.parametrize("kind", list(BOMBS))
def test_stored_as_wider_type_still_decodes(kind: str) -> None:
    """A compressor's output legitimately larger than the chunk (stored as float64, read as
    float32 through ``astype``) is within the bound."""
    compressor, compress = BOMBS[kind]
    values = np.arange(1024, dtype="<f8")
    astype = {"id": "astype", "encode_dtype": "<f8", "decode_dtype": "<f4"}
    refs = one_chunk_set(compressor, compress(values.tobytes()), [astype])
    zarray = json.loads(refs["refs"]["a/.zarray"])
    refs["refs"]["a/.zarray"] = json.dumps({**zarray, "dtype": "<f4"})
    got = refzarr.open_dataset(refs)["a"].values
    np.testing.assert_array_equal(got, values.astype("<f4"))


def test_damaged_streams_keep_their_codecs_errors() -> None:
    stored = zlib.compress(bytes(8192))[:-6]
    ds = refzarr.open_dataset(one_chunk_set({"id": "zlib", "level": 1}, stored))
    with pytest.raises(ChunkDecodeError, match=r"a/0: decoding failed: error: Error -5"):
        _ = ds["a"].values


SPACES = 4 * 2**20
FLOOR = 2**16


def spaces_set(path: Path, compression: str) -> Path:
    """A JSON set of one group padded with ``SPACES`` spaces, compressed."""
    text = b'{"version": 1, "refs": {".zgroup": "{\\"zarr_format\\": 2}"' + b" " * SPACES + b"}}"
    packed = zstandard.ZstdCompressor().compress(text) if compression == "zstd" else (
        gzip.compress(text))  # fmt: skip
    out = path / f"spaces.json.{compression}"
    out.write_bytes(packed)
    return out


@pytest.mark.parametrize("compression", ["zstd", "gzip"])
def test_json_set_bomb_refused_while_decompressing(
    tmp_path: Path, compression: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(source_module, "EXPANSION_FLOOR", FLOOR)
    path = spaces_set(tmp_path, compression)
    size = path.stat().st_size
    error, peak = traced_peak(lambda: refzarr.read(path))
    assert isinstance(error, RefFormatError), error
    assert f"the compressed reference set ({size:,} bytes) decompresses to more than" in str(error)
    assert "(100 times its size; a decompression bomb?)" in str(error)
    assert "refzarr.formats.source.set_max_expansion" in str(error)
    assert peak < SPACES // 2, f"{peak:,} bytes traced"


def test_json_set_bomb_read_when_trusted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(source_module, "EXPANSION_FLOOR", FLOOR)
    monkeypatch.setitem(source_module._expansion, "ratio", 100)
    path = spaces_set(tmp_path, "zstd")
    source_module.set_max_expansion(10**6)
    assert refzarr.read(path).members == {}
    with pytest.raises(ValueError, match="positive integer"):
        source_module.set_max_expansion(0)


def test_json_set_under_the_floor_reads(tmp_path: Path) -> None:
    """The floor (64 MiB) admits any ratio: a small set of inlined zeros reads."""
    path = spaces_set(tmp_path, "gzip")
    assert refzarr.read(path).members == {}


def parquet_set(path: Path) -> Path:
    """A Parquet set of one int8 array of 4 one-byte chunks (one inlined), record size 4."""
    zarray = {"shape": [4], "chunks": [1], "dtype": "<i1", "fill_value": None, "order": "C",
              "filters": None, "compressor": None, "zarr_format": 2}  # fmt: skip
    refs = {".zgroup": '{"zarr_format":2}', "a/.zarray": json.dumps(zarray),
            "a/.zattrs": '{"_ARRAY_DIMENSIONS":["x"]}', "a/0": "base64:AQ=="}  # fmt: skip
    out = path / "set.parq"
    refzarr.write(refzarr.from_kerchunk({"version": 1, "refs": refs}), out, record_size=4)
    return out


def record_file(out: Path) -> Path:
    (found,) = (out / "a").iterdir()
    return found


def test_parquet_record_declaring_more_rows_than_a_record(tmp_path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    out = parquet_set(tmp_path)
    rows = 2**20
    ids = pa.array(np.zeros(rows, np.int32))
    table = pa.table({
        "path": pa.DictionaryArray.from_arrays(ids, pa.array([str(tmp_path / "x.bin")])),
        "offset": pa.array(np.zeros(rows, np.int64)),
        "size": pa.array(np.ones(rows, np.int64)),
        "raw": pa.nulls(rows, pa.binary()),
    })  # fmt: skip
    pq.write_table(table, record_file(out), compression="zstd")
    error = raised_within(HARD_TIMEOUT, lambda: refzarr.open_dataset(out)["a"].values)
    assert isinstance(error, RefFormatError), error
    assert "the record file declares 1,048,576 rows, but the set's records hold 4 " in str(error)


def test_parquet_record_inflating_past_its_size(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    from refzarr.formats.parquet import records

    monkeypatch.setattr(records, "EXPANSION_FLOOR", 2**16)
    out = parquet_set(tmp_path)
    table = pa.table({
        "path": pa.nulls(1, pa.string()),
        "offset": pa.nulls(1, pa.int64()),
        "size": pa.nulls(1, pa.int64()),
        "raw": pa.array([bytes(4 * 2**20)], pa.binary()),
    })  # fmt: skip
    pq.write_table(table, record_file(out), compression="zstd")
    size = record_file(out).stat().st_size
    error = raised_within(HARD_TIMEOUT, lambda: refzarr.open_dataset(out)["a"].values)
    assert isinstance(error, RefFormatError), error
    assert f"the record file ({size:,} bytes) declares columns of " in str(error)
    assert "more than 100 times its size (a damaged file or a decompression bomb)" in str(error)


def test_remote_json_set_bomb_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Read head-first (64 KiB, then the rest) from a remote filesystem, alike."""
    import fsspec

    monkeypatch.setattr(source_module, "EXPANSION_FLOOR", FLOOR)
    packed = spaces_set(tmp_path, "zstd").read_bytes()
    fsspec.filesystem("memory").pipe("/bombs/spaces.json.zst", packed)
    try:
        error = raised_within(HARD_TIMEOUT, lambda: refzarr.read("memory://bombs/spaces.json.zst"))
    finally:
        fsspec.filesystem("memory").rm("/bombs", recursive=True)
    assert isinstance(error, RefFormatError), error
    assert f"the compressed reference set ({len(packed):,} bytes) decompresses" in str(error)


def test_sharded_inner_chunk_bomb(zeros: bytes) -> None:
    """An inner chunk of a Zarr v3 shard is bounded as a chunk of its own size."""
    from refzarr.codecs.zarr import ZarrSharding

    codec = ZarrSharding((4,), (2,), "<i4", codecs=[{"id": "bz2", "level": 1}])
    inner = bz2.compress(zeros)
    index = np.array([[0, len(inner)], [2**64 - 1, 2**64 - 1]], dtype="<u8")
    shard = inner + index.tobytes()
    error, peak = traced_peak(lambda: codec.decode(shard))
    assert isinstance(error, ValueError), error
    assert "its bz2 stream inflates to more than the 1,048,576 bytes" in str(error)
    assert peak < HELD


def test_fits_gzip_tile_bomb(zeros: bytes) -> None:
    """A GZIP_1 tile inflates to at most 8 bytes a pixel of its tile."""
    from refzarr.codecs.fits import FitsTile

    codec = FitsTile("GZIP_1", ">i4", (1024,))
    error, peak = traced_peak(lambda: codec.decode(gzip.compress(zeros)))
    assert isinstance(error, ValueError), error
    assert "its gzip stream inflates to more than the 8,192 bytes" in str(error)
    assert peak < HELD
    tile = np.arange(1024, dtype=">i4")
    np.testing.assert_array_equal(codec.decode(gzip.compress(tile.tobytes())), tile)


def test_fits_tile_over_the_chunk_limit_is_not_allocated() -> None:
    from refzarr.codecs.fits import FitsTile

    codec = FitsTile("NOCOMPRESS", ">i4", (2**20, 2**20))
    error, peak = traced_peak(lambda: codec.decode(b"\0" * 16))
    assert isinstance(error, ValueError), error
    assert "over the limit of 2,147,483,648 bytes per chunk" in str(error)
    assert peak < HELD
