"""BatchDecoder decodes runs of chunks exactly as ChunkDecoder does one by one, flags the chunks
it cannot inflate to a chunk's size, and is offered only for the codecs it handles."""

from __future__ import annotations

import zlib
from typing import Any

import numpy as np
import pytest
from numcodecs import Shuffle

from refzarr import ArrayMeta
from refzarr.codecs import batch
from refzarr.codecs.batch import BatchDecoder
from refzarr.codecs.chunk import ChunkDecoder

pytestmark = pytest.mark.skipif(not batch.CAN_FILL, reason="needs imagecodecs' libdeflate")

CHUNKS = (3, 5)


def _meta(dtype: Any, codecs: tuple[dict[str, Any], ...], order: str = "C") -> ArrayMeta:
    return ArrayMeta(
        shape=(9, 10), chunks=CHUNKS, dtype=np.dtype(dtype), codecs=codecs, order=order
    )  # type: ignore[arg-type]


def _stored(values: np.ndarray, shuffle: int) -> bytes:
    data = values.tobytes()
    if shuffle:
        data = bytes(Shuffle(elementsize=shuffle).encode(data))
    return zlib.compress(data, 3)


@pytest.mark.parametrize(
    ("dtype", "shuffle"),
    [("<f4", 0), (">f8", 0), ("<i2", 2), ("<f4", 4), (">u8", 8), ("u1", 0), ("<c8", 8)],
)
def test_equal_to_one_by_one(dtype: str, shuffle: int) -> None:
    codecs: tuple[dict[str, Any], ...] = ({"id": "zlib", "level": 3},)
    if shuffle:
        codecs = ({"id": "shuffle", "elementsize": shuffle}, *codecs)
    decoder = ChunkDecoder(_meta(dtype, codecs), "v")
    many = BatchDecoder.of(decoder)
    assert many is not None
    rng = np.random.default_rng(0)
    chunks = [(rng.normal(size=CHUNKS) * 100).astype(dtype) for _ in range(6)]
    stored = [_stored(c, shuffle) for c in chunks]
    data = memoryview(b"xx" + b"".join(stored))
    starts = (2 + np.cumsum([0, *map(len, stored[:-1])])).tolist()
    values, decoded = many.decode(data, starts, [len(s) for s in stored])
    assert decoded.all()
    assert values.dtype == np.dtype(dtype)
    for got, chunk, raw in zip(values, chunks, stored, strict=True):
        np.testing.assert_array_equal(got, chunk, strict=True)
        np.testing.assert_array_equal(got, decoder.decode(raw, "v/0.0"), strict=True)


@pytest.mark.parametrize("shuffle", [0, 4])
def test_decodes_into_a_given_array(shuffle: int) -> None:
    codecs: tuple[dict[str, Any], ...] = ({"id": "zlib", "level": 3},)
    if shuffle:
        codecs = ({"id": "shuffle", "elementsize": shuffle}, *codecs)
    many = BatchDecoder.of(ChunkDecoder(_meta("<f4", codecs), "v"))
    assert many is not None
    chunks = [np.full(CHUNKS, k, "<f4") for k in range(3)]
    stored = [_stored(c, shuffle) for c in chunks]
    starts = np.cumsum([0, *map(len, stored[:-1])]).tolist()
    out = np.zeros((5, *CHUNKS), "<f4")
    values, decoded = many.decode(
        memoryview(b"".join(stored)), starts, [len(s) for s in stored], out=out[1:4]
    )
    assert decoded.all()
    assert np.shares_memory(values, out)
    np.testing.assert_array_equal(out[1:4], np.stack(chunks))
    assert not out[0].any()
    assert not out[4].any()
    with pytest.raises(ValueError, match="C-contiguous"):
        many.decode(memoryview(stored[0]), [0], [len(stored[0])], out=out[:, :1])


def test_chunks_not_inflating_to_a_chunk_are_flagged() -> None:
    decoder = ChunkDecoder(_meta("<f4", ({"id": "zlib", "level": 1},)), "v")
    many = BatchDecoder.of(decoder)
    assert many is not None
    good = zlib.compress(np.ones(CHUNKS, "<f4").tobytes())
    stored = [
        good,
        good[:-2],  # truncated
        zlib.compress(np.ones(14, "<f4").tobytes()),  # short
        zlib.compress(np.ones(16, "<f4").tobytes()),  # long
        good,
    ]
    data = memoryview(b"".join(stored))
    starts = np.cumsum([0, *map(len, stored[:-1])]).tolist()
    values, decoded = many.decode(data, starts, [len(s) for s in stored])
    assert decoded.tolist() == [True, False, False, False, True]
    np.testing.assert_array_equal(values[4], np.ones(CHUNKS, "<f4"))


@pytest.mark.parametrize(
    "meta",
    [
        _meta("<f4", ({"id": "zlib", "level": 1},), order="F"),
        _meta("<f4", ({"id": "zlib", "level": 1}, {"id": "shuffle", "elementsize": 4})),
        _meta("<f4", ({"id": "gzip", "level": 1},)),
        _meta("<f4", ()),
        _meta("<i2", ({"id": "shuffle", "elementsize": 4}, {"id": "zlib", "level": 1})),
        _meta("<f4", ({"id": "shuffle", "elementsize": 1}, {"id": "zlib", "level": 1})),
        _meta("<f4", ({"id": "delta", "dtype": "<f4"}, {"id": "zlib", "level": 1})),
    ],
    ids=["F order", "shuffle last", "gzip", "no codec", "odd shuffle", "shuffle 1", "delta"],
)
def test_offered_only_for_what_it_handles(meta: ArrayMeta) -> None:
    assert BatchDecoder.of(ChunkDecoder(meta, "v")) is None


def test_not_offered_without_libdeflate(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(batch, "CAN_FILL", False)
    assert BatchDecoder.of(ChunkDecoder(_meta("<f4", ({"id": "zlib", "level": 1},)), "v")) is None
