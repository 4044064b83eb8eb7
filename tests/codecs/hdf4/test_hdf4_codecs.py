"""HDF4 codecs on hand-made streams: configs round-trip through numcodecs, decoding follows
HDF4's coders (its own files are checked in tests/scan/hdf4), damaged data raises."""

from __future__ import annotations

import numpy as np
import pytest
from numcodecs import get_codec

from refzarr.codecs.hdf4 import Hdf4NBit, Hdf4Rle, Hdf4SkipHuffman, Hdf4Szip

CODECS = [
    Hdf4Rle(size=8),
    Hdf4SkipHuffman(size=8, skip_size=2),
    Hdf4NBit(size=8, nt_size=2, start_bit=9, bit_len=6, sign_ext=True, fill_one=False),
    Hdf4Szip(size=8, options_mask=4, pixels_per_block=8, bits_per_pixel=16, pixels_per_scanline=4),
]


@pytest.mark.parametrize("codec", CODECS, ids=lambda c: c.codec_id)
def test_config_round_trip(codec: object) -> None:
    config = codec.get_config()  # type: ignore[attr-defined]
    assert config["id"].startswith("refzarr.hdf4_")
    assert get_codec(config).get_config() == config
    with pytest.raises(NotImplementedError, match="decodes only"):
        codec.encode(b"\0" * 8)  # type: ignore[attr-defined]


def test_rle_runs_and_literals() -> None:
    # a run of 5 x 0x07 (0x80 | (5 - 3)), then 3 literals (control 2)
    stream = bytes([0x82, 0x07, 0x02, 1, 2, 3])
    assert Hdf4Rle(size=8).decode(stream).tobytes() == bytes([7] * 5 + [1, 2, 3])


def test_rle_short_stream_raises() -> None:
    with pytest.raises(ValueError, match="decodes to 3 bytes, 8 expected"):
        Hdf4Rle(size=8).decode(bytes([0x02, 1, 2, 3]))


def test_nbit_sign_extension() -> None:
    # two int16 values, 6 bits ending at bit 9: fields 0b100001 (negative) and 0b000011
    bits = "100001" + "000011"
    stream = int(bits.ljust(16, "0"), 2).to_bytes(2, "big")
    codec = Hdf4NBit(size=4, nt_size=2, start_bit=9, bit_len=6, sign_ext=True)
    values = np.frombuffer(codec.decode(stream).tobytes(), ">i2")
    assert values.tolist() == [np.int16(np.uint16(0b1111111000010000)), 0b0000000000110000]


def test_nbit_fill_ones() -> None:
    stream = bytes([0b10100000])
    codec = Hdf4NBit(size=1, nt_size=1, start_bit=3, bit_len=3, fill_one=True)
    assert codec.decode(stream).tobytes() == bytes([0b11111011])


def test_skipping_huffman_initial_codes() -> None:
    # before any splaying, leaf b + 256 hangs below node 1: its code is a 1, then b's 8 bits
    codec = Hdf4SkipHuffman(size=1, skip_size=1)
    stream = int("1" + "10100101" + "0" * 7, 2).to_bytes(2, "big")
    assert codec.decode(stream).tobytes() == bytes([0xA5])
    with pytest.raises(ValueError, match="ends after 0 of 1 bytes"):
        codec.decode(b"")


def test_szip_preamble_stored_raw() -> None:
    """HDF4 stores a block szip would enlarge raw, flagged by the preamble's first byte."""
    codec = Hdf4Szip(
        size=4,
        options_mask=(1 << 16) | 4,
        pixels_per_block=8,
        bits_per_pixel=8,
        pixels_per_scanline=4,
    )
    assert codec.decode(b"\x01\x00\x00\x00\x04abcd").tobytes() == b"abcd"
