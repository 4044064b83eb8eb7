"""The scanner's fast paths give exactly what the general ones (and h5py) give.

Attributes read with HDF5's low-level calls against h5py's ``obj.attrs``; local paths opened
without fsspec against the same file through a ``file://`` URL; one-chunk contiguous data
against the general cutting code; unlimited dimensions against the longest dataset using them.
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any

import h5py
import numpy as np
import pytest
from h5kit import array, write_h5
from h5py import h5a, h5s, h5t

import refzarr
from refzarr.scan.hdf5.attrs import _MISSING, AttributeTable, _read_fast, get_attribute
from refzarr.scan.hdf5.contiguous import Segment, _manifest, contiguous_manifest
from refzarr.scan.hdf5.dims import NETCDF_DIMENSION_ONLY, is_dimension_only
from refzarr.scan.hdf5.source import open_source


def _fixed_string(obj: h5py.HLObject, name: str, value: bytes, pad: int, cset: int) -> None:
    """A scalar fixed-length string attribute with the given padding and character set."""
    tid = h5t.C_S1.copy()
    tid.set_size(len(value))
    tid.set_strpad(pad)
    tid.set_cset(cset)
    attr = h5a.create(obj.id, name.encode("utf8"), tid, h5s.create(h5s.SCALAR))
    attr.write(np.array(value, dtype=f"S{len(value)}"), mtype=tid)


def _write_attributes(obj: h5py.HLObject) -> None:
    attrs = obj.attrs
    for dtype in ("<i1", "<u1", ">i2", "<u2", ">i4", "<u4", "<i8", ">u8"):
        attrs[f"int {dtype}"] = np.array([1, -1 if dtype[1] == "i" else 7, 3], dtype=dtype)
        attrs[f"scalar {dtype}"] = np.array(5, dtype=dtype)
    for dtype in ("<f2", ">f4", "<f4", ">f8", "<f8"):
        attrs[f"float {dtype}"] = np.array([np.nan, -0.0, 1.5, np.inf], dtype=dtype)
        attrs[f"one {dtype}"] = np.array([2.5], dtype=dtype)
    attrs["matrix"] = np.arange(6, dtype="<i4").reshape(2, 3)
    attrs["empty array"] = np.zeros((0,), dtype="<f8")
    attrs["ascii"] = np.bytes_(b"degrees")
    attrs["fixed strings"] = np.array([b"ab", b"c", b""], dtype="S2")
    attrs.create("utf-8 fixed", np.bytes_("héllo".encode()), dtype=h5py.string_dtype("utf-8", 6))
    attrs["vlen str"] = "text"
    attrs["vlen strs"] = np.array(["a", "bc"], dtype=h5py.string_dtype())
    attrs["empty float"] = h5py.Empty("f4")
    attrs["empty str"] = h5py.Empty(h5py.string_dtype())
    attrs["bool"] = np.bool_(True)
    attrs["complex"] = np.complex64(1 + 2j)
    attrs["compound"] = np.array((1, 2.0), dtype=[("a", "<i4"), ("b", "<f8")])
    attrs.create("enum", 1, dtype=h5py.enum_dtype({"A": 0, "B": 1}, basetype="i1"))
    attrs["ünïcode näme"] = np.int16(3)
    _fixed_string(obj, "nullterm", b"abc\0", h5t.STR_NULLTERM, h5t.CSET_ASCII)
    _fixed_string(obj, "spacepad", b"ab  ", h5t.STR_SPACEPAD, h5t.CSET_ASCII)
    _fixed_string(obj, "nullpad utf8", "é".encode() + b"\0", h5t.STR_NULLPAD, h5t.CSET_UTF8)


def _assert_same(got: Any, expected: Any, name: str) -> None:
    assert type(got) is type(expected), name
    if isinstance(expected, h5py.Empty):
        assert got.dtype == expected.dtype, name
    elif isinstance(expected, np.ndarray | np.generic):
        assert got.dtype == expected.dtype, name
        assert got.dtype.metadata == expected.dtype.metadata, name
        np.testing.assert_array_equal(got, expected, strict=True, err_msg=name)
    else:
        assert got == expected, name


@pytest.mark.parametrize("track_order", [False, True])
def test_attribute_table_reads_what_h5py_reads(tmp_path: Path, track_order: bool) -> None:
    def writer(f: h5py.File) -> None:
        _write_attributes(f.create_group("g", track_order=track_order))
        _write_attributes(f.create_dataset("d", data=np.arange(3), track_order=track_order))

    path = write_h5(tmp_path / "attrs.h5", writer)
    with h5py.File(path, "r") as f:
        for obj in (f["g"], f["d"]):
            table = AttributeTable(obj)
            assert table.names == list(obj.attrs)
            for name in obj.attrs:
                _assert_same(table[name], obj.attrs[name], name)
                _assert_same(table.get(name), obj.attrs[name], name)
            assert table.get("absent") is None
            assert "absent" not in table
            with pytest.raises(KeyError):
                table["absent"]


def test_numbers_and_fixed_strings_take_the_fast_path(tmp_path: Path) -> None:
    path = write_h5(tmp_path / "attrs.h5", lambda f: _write_attributes(f.create_group("g")))
    fast = {"int >i2", "scalar <u1", "float >f8", "one <f2", "matrix", "empty array", "ascii"}
    fast |= {"fixed strings", "utf-8 fixed", "nullterm", "spacepad", "ünïcode näme"}
    fast |= {"compound", "complex"}  # h5py reads a two-float compound as complex
    slow = {"vlen str", "vlen strs", "empty float", "empty str", "bool", "enum"}
    with h5py.File(path, "r") as f:
        oid = f["g"].id
        for name in fast:
            assert _read_fast(oid, name) is not _MISSING, name
        for name in slow:
            assert _read_fast(oid, name) is _MISSING, name


def test_reference_list_of_a_scale_reads_as_in_h5py(tmp_path: Path) -> None:
    def writer(f: h5py.File) -> None:
        scale = f.create_dataset("x", data=np.arange(4))
        scale.make_scale("x")
        for name in ("a", "b"):
            f.create_dataset(name, data=np.zeros((2, 4))).dims[1].attach_scale(scale)

    path = write_h5(tmp_path / "scales.h5", writer)
    with h5py.File(path, "r") as f:
        scale = f["x"]
        got, expected = get_attribute(scale, "REFERENCE_LIST"), scale.attrs["REFERENCE_LIST"]
        assert _read_fast(scale.id, "REFERENCE_LIST") is not _MISSING
        assert got.dtype == expected.dtype
        assert [(f[r].name, int(d)) for r, d in got] == [(f[r].name, int(d)) for r, d in expected]
        assert get_attribute(scale, "absent", 7) == 7
        _assert_same(get_attribute(scale, "CLASS"), scale.attrs["CLASS"], "CLASS")


def test_local_path_and_file_url_scan_the_same(tmp_path: Path) -> None:
    def writer(f: h5py.File) -> None:
        f.attrs["title"] = "t"
        f.create_dataset("contiguous", data=np.arange(10.0))
        f.create_dataset("chunked", data=np.arange(100).reshape(10, 10), chunks=(5, 5))
        f["soft"] = h5py.SoftLink("/contiguous")
        f.create_group("sub").create_dataset("x", data=np.int8(3))

    path = write_h5(tmp_path / "f.h5", writer)
    by_path = refzarr.scan(str(path))
    assert by_path == refzarr.scan(path.as_uri())
    assert by_path == refzarr.scan(os.path.relpath(path))
    assert array(by_path, "contiguous").manifest.paths == (str(path),)
    with open_source(str(path), None) as source:
        assert source.url == str(path)
        assert source.size == path.stat().st_size
        assert source.read_range(0, 8) == path.read_bytes()[:8]


def test_missing_local_file_is_reported(tmp_path: Path) -> None:
    with pytest.raises(refzarr.errors.SourceNotFoundError, match="no such file"):
        refzarr.scan(str(tmp_path / "absent.h5"))


def _general(shape: tuple[int, ...], itemsize: int, segment: Segment, inline_threshold: int) -> Any:
    """What `contiguous_manifest` gives for one whole-array chunk without its fast path."""
    grid = (1,) * len(shape)
    coords = np.zeros((1, len(shape)), dtype=np.int64)
    starts = np.zeros(1, dtype=np.int64)
    total = itemsize * math.prod(shape)

    def read_at(url: str, offset: int, length: int) -> bytes:
        return bytes(range(offset, offset + length))

    return _manifest(grid, coords, starts, total, total, [segment], read_at, inline_threshold, "x")


@pytest.mark.parametrize("shape", [(), (5,), (2, 3, 4)])
@pytest.mark.parametrize("extra", [0, 16])
@pytest.mark.parametrize("threshold", [0, -1, 1])
def test_one_chunk_contiguous_equals_general(
    shape: tuple[int, ...], extra: int, threshold: int
) -> None:
    itemsize = 4
    total = itemsize * math.prod(shape)
    segment = Segment("/data/file.h5", 100, total + extra)
    inline_threshold = max(total + threshold, 0)

    def read_at(url: str, offset: int, length: int) -> bytes:
        return bytes(range(offset, offset + length))

    chunks, manifest = contiguous_manifest(
        shape,
        itemsize,
        [segment],
        chunk_bytes=None,
        read_at=read_at,
        inline_threshold=inline_threshold,
        where="x",
    )
    assert chunks == shape
    assert manifest == _general(shape, itemsize, segment, inline_threshold)
    assert manifest.paths == _general(shape, itemsize, segment, inline_threshold).paths


def test_unlimited_dimension_is_its_longest_variable(tmp_path: Path) -> None:
    netCDF4 = pytest.importorskip("netCDF4")
    path = tmp_path / "unlimited.nc"
    with netCDF4.Dataset(path, "w") as nc:
        nc.createDimension("time", None)
        nc.createDimension("x", 3)
        nc.createVariable("time", "f8", ("time",))[:2] = [0.0, 1.0]
        nc.createVariable("early", "i4", ("time", "x"))[:1] = 1
        group = nc.createGroup("later")
        group.createVariable("long", "f4", ("time",))[:6] = np.arange(6)
        nc.createVariable("zlast", "i2", ("x", "time"))[:, :4] = 2
    scanned = refzarr.scan(str(path))
    with netCDF4.Dataset(path) as nc:
        for name in ("time", "early", "zlast", "later/long"):
            assert array(scanned, name).meta.shape == nc[name].shape, name
    assert array(scanned, "time").meta.shape == (6,)


def test_dimension_only_with_and_without_attribute_table(tmp_path: Path) -> None:
    text = NETCDF_DIMENSION_ONLY + b" x"

    def writer(f: h5py.File) -> None:
        f.create_dataset("fixed", data=0).attrs["NAME"] = np.bytes_(text)
        f.create_dataset("vlen", data=0).attrs["NAME"] = text.decode()
        f.create_dataset("short", data=0).attrs["NAME"] = np.bytes_(b"x")
        f.create_dataset("array", data=0).attrs["NAME"] = np.array([text, text])
        f.create_dataset("empty", data=0).attrs["NAME"] = h5py.Empty("S1")
        f.create_dataset("none", data=0)

    path = write_h5(tmp_path / "names.h5", writer)
    with h5py.File(path, "r") as f:
        for name, expected in [("fixed", True), ("vlen", False), ("short", False)]:
            assert is_dimension_only(f[name], AttributeTable(f[name])) is expected, name
        for name in ("array", "empty", "none"):
            assert is_dimension_only(f[name], AttributeTable(f[name])) is False, name
        for name in f:
            assert is_dimension_only(f[name]) is is_dimension_only(f[name], AttributeTable(f[name]))
