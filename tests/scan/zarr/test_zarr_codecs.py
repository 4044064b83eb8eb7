"""refzarr's numcodecs codecs for Zarr v3 features: a shard decoded whole (`ZarrSharding`) and
an axis permutation (`ZarrTranspose`); and what the scanner names unsupported."""

from __future__ import annotations

import math
from pathlib import Path

import numcodecs
import numpy as np
import pytest
import zarr
from hypothesis import given, settings
from hypothesis import strategies as st

import refzarr
from refzarr import UnsupportedFeatureError
from refzarr.codecs.zarr import ZarrSharding, ZarrTranspose
from refzarr.scan.base import Probe
from refzarr.scan.zarr import ZarrScanner, is_zarr_store


@st.composite
def shards(draw: st.DrawFn) -> tuple[ZarrSharding, np.ndarray]:
    ndim = draw(st.integers(1, 3))
    inner = tuple(draw(st.integers(1, 3)) for _ in range(ndim))
    shard = tuple(c * draw(st.integers(1, 3)) for c in inner)
    dtype = draw(st.sampled_from(["<i2", ">f8", "|u1", "<c8"]))
    codecs = draw(st.sampled_from([[], [{"id": "zlib", "level": 1}], [{"id": "crc32c"}]]))
    codec = ZarrSharding(
        shard_shape=shard,
        chunk_shape=inner,
        dtype=dtype,
        fill_value=[0, 0] if dtype == "<c8" else 0,
        codecs=codecs,
        order=draw(st.sampled_from(["C", "F"])),
        index_codecs=draw(st.sampled_from([[], [{"id": "crc32c", "location": "end"}]])),
        index_dtype=draw(st.sampled_from(["<u8", ">u8"])),
        index_location=draw(st.sampled_from(["start", "end"])),
    )
    values = np.arange(math.prod(shard)).reshape(shard).astype(dtype)
    return codec, values


@settings(max_examples=40, deadline=None)
@given(shards())
def test_sharding_round_trip(case: tuple[ZarrSharding, np.ndarray]) -> None:
    codec, values = case
    again = numcodecs.get_codec(codec.get_config())
    assert isinstance(again, ZarrSharding)
    decoded = again.decode(codec.encode(values))
    assert decoded.dtype == values.dtype
    np.testing.assert_array_equal(decoded, values, strict=True)


def test_sharding_inner_chunks_never_written_are_fill() -> None:
    codec = ZarrSharding((4,), (2,), "<i4", fill_value=-7, codecs=[])
    index = np.array([[32, 8], [2**64 - 1, 2**64 - 1]], dtype="<u8")
    shard = b"\x00" * 32 + np.array([5, 6], "<i4").tobytes() + index.tobytes()
    np.testing.assert_array_equal(codec.decode(shard), [5, 6, -7, -7])


@pytest.mark.parametrize(
    ("data", "message"),
    [(b"\x00" * 10, "cannot hold its index"), (np.array([[0, 99]], "<u8").tobytes(), "past")],
)
def test_sharding_damaged_shard(data: bytes, message: str) -> None:
    codec = ZarrSharding((2,), (2,), "<i4", codecs=[])
    with pytest.raises(ValueError, match=message):
        codec.decode(data)


def test_sharding_checks_the_index_checksum() -> None:
    codec = ZarrSharding((2,), (2,), "<i4", codecs=[], index_codecs=[{"id": "crc32c"}])
    data = bytearray(codec.encode(np.array([1, 2], "<i4")))
    data[-5] ^= 1  # a bit of the index flipped
    with pytest.raises(RuntimeError, match=r"(?i)checksum"):
        codec.decode(bytes(data))


@settings(max_examples=30, deadline=None)
@given(st.permutations(range(3)), st.lists(st.integers(1, 4), min_size=3, max_size=3))
def test_transpose_round_trip(order: list[int], shape: list[int]) -> None:
    codec = numcodecs.get_codec(ZarrTranspose(order, shape, "<i4").get_config())
    values = np.arange(math.prod(shape), dtype="<i4").reshape(shape)
    stored = codec.encode(values)
    np.testing.assert_array_equal(stored, values.transpose(order))
    np.testing.assert_array_equal(codec.decode(stored.tobytes()).reshape(shape), values)


def test_detection_looks_at_the_listing_only() -> None:
    assert is_zarr_store(Probe("x", b"", None, frozenset({"zarr.json", "c"})))
    assert is_zarr_store(Probe("x", b"", None, frozenset({".zmetadata"})))
    assert not is_zarr_store(Probe("x.zarr", b"", None, frozenset({"data.nc"})))
    assert not is_zarr_store(Probe("x.zarr", b"{}", lambda o, n: b"", frozenset()))


def test_sharded_strings_unsupported(tmp_path: Path) -> None:
    root = zarr.open_group(tmp_path / "s.zarr", mode="w")
    root.create_array("text", shape=(4,), chunks=(1,), shards=(2,), dtype=str)[:] = list("abcd")
    root.create_array("n", shape=(2,), dtype="i1")[:] = [1, 2]
    with pytest.raises(UnsupportedFeatureError, match=r"s\.zarr: array 'text': sharded variable"):
        ZarrScanner()(str(tmp_path / "s.zarr"))
    group = refzarr.scan(tmp_path / "s.zarr", on_unsupported="skip")
    assert list(group.members) == ["n"]
    assert [s.path for s in group.skipped] == ["/text"]  # type: ignore[attr-defined]
