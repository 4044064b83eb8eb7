"""FastUnshuffle decodes exactly as numcodecs' Shuffle does, for every element size and length."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from numcodecs import Shuffle, Zlib

from refzarr.codecs.unshuffle import MAX_ELEMENT_SIZE, FastUnshuffle, faster


@given(st.integers(2, MAX_ELEMENT_SIZE), st.integers(0, 300), st.integers(0, 2**32 - 1))
def test_equal_to_numcodecs(size: int, count: int, seed: int) -> None:
    data = np.random.default_rng(seed).integers(0, 256, size * count, dtype=np.uint8).tobytes()
    codec = Shuffle(elementsize=size)
    expected = codec.decode(data)
    got = FastUnshuffle(codec).decode(data)
    assert got.dtype == expected.dtype
    np.testing.assert_array_equal(got, expected)
    np.testing.assert_array_equal(
        FastUnshuffle(codec).decode(codec.encode(data)), np.frombuffer(data, np.uint8)
    )


@pytest.mark.parametrize("source", [bytes, bytearray, lambda b: np.frombuffer(b, np.float32)])
def test_buffer_kinds(source: object) -> None:
    values = np.arange(1000, dtype=np.float32)
    codec = Shuffle(elementsize=4)
    stored = bytes(codec.encode(values))
    got = FastUnshuffle(codec).decode(source(stored))  # type: ignore[operator]
    np.testing.assert_array_equal(got.view(np.float32), values)


def test_length_not_a_multiple_raises_like_numcodecs() -> None:
    codec = Shuffle(elementsize=4)
    with pytest.raises(ValueError, match="multiple of elementsize"):
        FastUnshuffle(codec).decode(b"12345")


def test_only_plain_shuffle_is_replaced() -> None:
    assert isinstance(faster(Shuffle(elementsize=8)), FastUnshuffle)
    for codec in (Shuffle(elementsize=1), Shuffle(elementsize=MAX_ELEMENT_SIZE + 1), Zlib()):
        assert faster(codec) is codec
