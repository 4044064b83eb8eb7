"""The FITS codecs on their own: numcodecs finds them by id, configs round-trip, values as
astropy gives them."""

from __future__ import annotations

import numcodecs
import numpy as np
import pytest

from refzarr.codecs.fits import FitsAsciiTable, FitsTile, FitsUnsigned, tile_digest


@pytest.mark.parametrize(
    ("stored", "dtype"), [(">i2", "<u2"), (">i4", "<u4"), (">i8", "<u8"), ("|u1", "|i1")]
)
def test_unsigned_round_trip(stored: str, dtype: str) -> None:
    codec = numcodecs.get_codec(FitsUnsigned(stored, dtype).get_config())
    info = np.iinfo(dtype)
    values = np.array([info.min, 0, 1, info.max], dtype=dtype)
    encoded = codec.encode(values)
    assert np.asarray(encoded).dtype == np.dtype(stored)
    zero = int(np.asarray(encoded)[1])  # the stored value of 0: the sign bit flipped
    assert zero == (128 if stored == "|u1" else -(2 ** (8 * np.dtype(stored).itemsize - 1)))
    decoded = codec.decode(np.asarray(encoded).tobytes())
    assert decoded.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(decoded, values)


def test_unsigned_rejects_unlike_types() -> None:
    with pytest.raises(ValueError, match="cannot shift"):
        FitsUnsigned(">i2", "<u4")


def test_ascii_rows_parsed() -> None:
    rows = b"  1.5D+01   7 ab" + b"        *    *  " + b" -2.0E-1  -3 c  "
    codec = numcodecs.get_codec(
        FitsAsciiTable(
            16, [["x", "<f8", 0, 9, "*"], ["n", "<i4", 9, 4, "*"], ["s", "S3", 13, 3, None]]
        ).get_config()
    )
    out = codec.decode(rows)
    np.testing.assert_array_equal(out["x"], [15.0, np.nan, -0.2])
    np.testing.assert_array_equal(out["n"], [7, 0, -3])
    assert list(out["s"]) == [b" ab", b"*  ", b"c  "]  # text kept as stored


def test_tile_config_round_trip_and_digest() -> None:
    codec = FitsTile(
        "RICE_ONE", "<i2", (4, 4), edges={"10": [2, 4]}, digests={"ab": [4, 2]}, digest_lengths=[12]
    )
    again = numcodecs.get_codec(codec.get_config())
    assert again.get_config() == codec.get_config()
    assert again.algorithm == "RICE_1"
    assert again.tile_shape(b"x" * 10) == (2, 4)
    assert again.tile_shape(b"x" * 11) == (4, 4)
    assert len(tile_digest(b"abc")) == 16
    with pytest.raises(ValueError, match="unknown FITS tile compression"):
        FitsTile("LZW", "<i2", (4, 4))


def test_gzip_tile_of_edge_shape() -> None:
    import zlib

    values = np.arange(8, dtype=">i2").reshape(2, 4)
    stored = zlib.compress(values.tobytes())
    codec = FitsTile("GZIP_1", "<i2", (4, 4), edges={str(len(stored)): [2, 4]})
    out = codec.decode(stored).reshape(4, 4)
    np.testing.assert_array_equal(out[:2], values)
    np.testing.assert_array_equal(out[2:], 0)
