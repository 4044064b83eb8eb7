"""Fixed-length NULLTERM strings end at their first NUL, as HDF5 reads them (issue 13, point 5)."""

from __future__ import annotations

from pathlib import Path

import h5py
import numpy as np
import pytest
from h5py import h5d, h5p, h5s, h5t

import refzarr
from refzarr.codecs.hdf5.nullterm import Hdf5NullTerm
from scan.hdf5.h5kit import array, roundtrip

VALUES = np.array([b"swe\x00et", b"abcdef", b"\x00zzzzz", b"ab\x00\x00\x00c", b""], "S6")


def _string_type(size: int, pad: int) -> h5t.TypeID:
    tid = h5t.C_S1.copy()
    tid.set_size(size)
    tid.set_strpad(pad)
    return tid


def _write(path: Path, layout: str, pad: int = h5t.STR_NULLTERM) -> None:
    dcpl = h5p.create(h5p.DATASET_CREATE)
    if layout == "chunked":
        dcpl.set_chunk((2,))
        dcpl.set_deflate(1)
    elif layout == "compact":
        dcpl.set_layout(h5d.COMPACT)
    tid = _string_type(6, pad)
    with h5py.File(path, "w") as f:
        ds = h5py.h5d.create(f.id, b"s", tid, h5s.create_simple((5,)), dcpl=dcpl)
        ds.write(h5s.ALL, h5s.ALL, VALUES, mtype=tid)  # the bytes as given, NULs included


@pytest.mark.parametrize("layout", ["contiguous", "chunked", "compact"])
def test_nullterm_strings_end_at_first_nul(tmp_path: Path, layout: str) -> None:
    path = tmp_path / "s.h5"
    _write(path, layout)
    with h5py.File(path) as f:
        expected = f["s"][()]
    assert expected[0] == b"swe"
    group = roundtrip(path, tmp_path, inline_threshold=0)  # fsspec + zarr equal h5py
    assert array(group, "s").meta.codecs[0]["id"] == Hdf5NullTerm.codec_id
    got = refzarr.open_dataset(group)["s"].values
    np.testing.assert_array_equal(got, expected, strict=True)


def test_nullpad_strings_keep_their_bytes(tmp_path: Path) -> None:
    path = tmp_path / "p.h5"
    _write(path, "contiguous", h5t.STR_NULLPAD)
    group = roundtrip(path, tmp_path)
    assert array(group, "s").meta.codecs == ()
    assert refzarr.open_dataset(group)["s"].values[0] == b"swe\x00et"


def test_nullterm_codec() -> None:
    codec = Hdf5NullTerm(3)
    data = np.frombuffer(b"a\x00bcd\x00\x00\x00x", "u1")
    assert bytes(codec.decode(data)) == b"a\x00\x00cd\x00\x00\x00\x00"
    out = np.zeros(9, "u1")
    assert bytes(codec.decode(data, out=out)) == b"a\x00\x00cd\x00\x00\x00\x00"
    assert bytes(codec.encode(data)) == b"a\x00\x00cd\x00\x00\x00\x00"
    with pytest.raises(ValueError, match="itemsize"):
        Hdf5NullTerm(0)
