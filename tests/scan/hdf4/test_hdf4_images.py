"""GR raster images under ``images/`` read back as HDF4's GR interface (``GRreadimage``, from
the library pyhdf bundles; pyhdf itself wraps no GR) reads them, with their attributes."""

from __future__ import annotations

import ctypes
import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from h4kit import _ChunkDef, all_readers, hdf4_lib
from pyhdf.HDF import HC, HDF

import refzarr

FASTPARQUET = pytest.mark.filterwarnings("ignore:The 'fastparquet' engine is deprecated")
DFNT = {"u1": 21, "u2": 23, "i2": 22, "f4": 5, "i4": 24}


def _pair(a: int, b: int) -> Any:
    return (ctypes.c_int32 * 2)(a, b)


def _write(path: Path) -> None:
    lib = hdf4_lib("libdf")
    hdf = HDF(os.fspath(path), HC.WRITE | HC.CREATE)
    gr = lib.GRstart(hdf._id)
    rng = np.random.default_rng(2)
    images = {
        "rgb": rng.integers(0, 60000, (5, 7, 3)).astype("u2"),
        "gray": rng.random((6, 9)).astype("f4"),
        "deflated": rng.integers(-300, 300, (16, 12)).astype("i2"),
        "chunked": rng.integers(0, 9, (20, 14)).astype("i4"),
    }
    for name, data in images.items():
        ncomp = data.shape[2] if data.ndim == 3 else 1
        height, width = data.shape[:2]
        ri = lib.GRcreate(
            gr, name.encode(), ncomp, DFNT[data.dtype.str[1:]], 0, _pair(width, height)
        )
        if name == "deflated":
            info = (ctypes.c_int32 * 8)(6)
            assert lib.GRsetcompress(ri, 4, info) == 0
        if name == "chunked":  # 8 x 5 chunks, deflated; only the top half is written
            definition = _ChunkDef()
            definition.words[0], definition.words[1] = 8, 5
            definition.words[32], definition.words[34] = 4, 1
            assert lib.GRsetchunk(ri, definition, 3) == 0
            data = data[:8]
            height = 8
        buffer = np.ascontiguousarray(data)
        status = lib.GRwriteimage(
            ri, _pair(0, 0), None, _pair(width, height), buffer.ctypes.data_as(ctypes.c_void_p)
        )
        assert status == 0
        assert lib.GRsetattr(ri, b"units", 4, 5, b"count") == 0
        lib.GRendaccess(ri)
    lib.GRend(gr)
    hdf.close()


def _read(path: Path) -> dict[str, np.ndarray]:
    """Every image as GRreadimage gives it (pixel interlace), by name."""
    lib = hdf4_lib("libdf")
    hdf = HDF(os.fspath(path))
    gr = lib.GRstart(hdf._id)
    count, attrs = ctypes.c_int32(), ctypes.c_int32()
    lib.GRfileinfo(gr, ctypes.byref(count), ctypes.byref(attrs))
    out = {}
    dtypes = {v: k for k, v in DFNT.items()}
    for index in range(count.value):
        ri = lib.GRselect(gr, index)
        name = ctypes.create_string_buffer(256)
        ncomp, nt, il, nattrs = (ctypes.c_int32() for _ in range(4))
        dims = _pair(0, 0)
        lib.GRgetiminfo(
            ri,
            name,
            ctypes.byref(ncomp),
            ctypes.byref(nt),
            ctypes.byref(il),
            dims,
            ctypes.byref(nattrs),
        )
        width, height = dims[0], dims[1]
        data = np.zeros((height, width, ncomp.value), dtype=dtypes[nt.value])
        assert (
            lib.GRreadimage(
                ri, _pair(0, 0), None, _pair(width, height), data.ctypes.data_as(ctypes.c_void_p)
            )
            == 0
        )
        out[name.value.decode()] = data[..., 0] if ncomp.value == 1 else data
        lib.GRendaccess(ri)
    lib.GRend(gr)
    hdf.close()
    return out


@FASTPARQUET
def test_images_match_gr_interface(tmp_path: Path) -> None:
    path = tmp_path / "images.hdf"
    _write(path)
    expected = _read(path)
    group = refzarr.scan(path)
    assert sorted(group["images"].members) == sorted(expected)
    (tmp_path / "read").mkdir()
    readers = all_readers(group, tmp_path / "read")
    for name, values in expected.items():
        array = group[f"images/{name}"]
        assert isinstance(array, refzarr.RefArray)
        assert array.meta.attributes["units"] == "count"
        for reader_name, read in readers.items():
            got = read(f"images/{name}")
            assert got.dtype.newbyteorder("=") == values.dtype, (name, reader_name)
            np.testing.assert_array_equal(got, values, err_msg=f"{name} {reader_name}")
    assert group["images/deflated"].meta.codecs[0]["id"] == "zlib"
    # HDF4's chunks of a GR image are no boxes of it: decoded and held in the references
    assert group["images/chunked"].manifest.path_id.tolist() == [[-2]]
