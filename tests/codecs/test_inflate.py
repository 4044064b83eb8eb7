"""FastInflate decodes exactly as numcodecs' Zlib does (with or without libdeflate, with right,
generous or short size hints), and fails where it fails."""

from __future__ import annotations

import zlib
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from numcodecs import Zlib

from refzarr import ArrayMeta
from refzarr.codecs import inflate
from refzarr.codecs.chunk import ChunkDecoder
from refzarr.codecs.inflate import FastInflate
from refzarr.errors import ChunkDecodeError

BUFFERS = [bytes, memoryview, bytearray, lambda b: np.frombuffer(b, np.uint8)]


@pytest.fixture(params=["libdeflate", "zlib only"])
def backend(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    if request.param == "libdeflate" and inflate._LIBDEFLATE is None:
        pytest.skip("imagecodecs (refzarr[codecs]) with libdeflate is not installed")
    if request.param == "zlib only":
        monkeypatch.setattr(inflate, "_LIBDEFLATE", None)
    return str(request.param)


@given(
    st.binary(max_size=5000),
    st.integers(0, 9),
    st.sampled_from([None, 0, -1, 1, 1000]),  # no hint, exact, short by one, long
)
def test_equal_to_numcodecs(data: bytes, level: int, slack: int | None) -> None:
    stored = zlib.compress(data, level)
    size = None if slack is None else len(data) + slack
    codec = FastInflate(Zlib(level))
    got = codec.decode(stored, size=size if size is None or size > 0 else None)
    assert bytes(got) == bytes(Zlib(level).decode(stored))


@pytest.mark.parametrize("kind", BUFFERS)
def test_buffer_kinds(backend: str, kind: Any) -> None:
    data = np.arange(1000, dtype="<f4").tobytes()
    stored = zlib.compress(data)
    assert bytes(FastInflate(Zlib()).decode(kind(stored), size=len(data))) == data
    out = np.empty(len(data), np.uint8)
    FastInflate(Zlib()).decode(kind(stored), out=out)
    assert out.tobytes() == data


@pytest.mark.parametrize(
    "damage",
    [
        lambda s: s[:-1],  # truncated: the checksum is cut
        lambda s: s[:-1] + bytes([s[-1] ^ 1]),  # a wrong checksum
        lambda s: s[2:],  # no zlib header (a raw deflate stream)
        lambda s: b"",
    ],
)
def test_damaged_streams_raise_as_numcodecs(backend: str, damage: Any) -> None:
    data = np.arange(1000, dtype="<f4").tobytes()
    stored = damage(zlib.compress(data))
    with pytest.raises(zlib.error) as expected:
        Zlib().decode(stored)
    with pytest.raises(zlib.error) as got:
        FastInflate(Zlib()).decode(stored, size=len(data))
    assert str(got.value) == str(expected.value)


def test_a_short_hint_falls_back_and_stops_hinting(backend: str) -> None:
    data = bytes(range(256)) * 20
    codec = FastInflate(Zlib())
    assert codec.decode(zlib.compress(data), size=100) == data
    assert codec.sized is False
    assert codec.decode(zlib.compress(data), size=len(data)) == data


def _decoder(chunks: tuple[int, ...] = (8, 16)) -> ChunkDecoder:
    meta = ArrayMeta(
        shape=(16, 16), chunks=chunks, dtype=np.dtype("<f4"), codecs=({"id": "zlib", "level": 1},)
    )
    return ChunkDecoder(meta, "v")


def test_chunk_decoder_uses_it(backend: str) -> None:
    values = np.arange(128, dtype="<f4").reshape(8, 16)
    decoder = _decoder()
    assert isinstance(decoder.inflate, FastInflate)
    got = decoder.decode(memoryview(zlib.compress(values.tobytes())), "v/0.0")
    np.testing.assert_array_equal(got, values)


@pytest.mark.parametrize("count", [127, 129])
def test_chunk_decoder_rejects_a_wrong_size(backend: str, count: int) -> None:
    stored = zlib.compress(np.arange(count, dtype="<f4").tobytes())
    with pytest.raises(ChunkDecodeError, match=rf"v/0\.1: decoded to {4 * count} bytes"):
        _decoder().decode(stored, "v/0.1")


def test_chunk_decoder_names_a_damaged_chunk(backend: str) -> None:
    stored = zlib.compress(np.arange(128, dtype="<f4").tobytes())[:-3]
    with pytest.raises(ChunkDecodeError, match=r"v/1\.0: decoding failed: error: Error -5"):
        _decoder().decode(stored, "v/1.0")
