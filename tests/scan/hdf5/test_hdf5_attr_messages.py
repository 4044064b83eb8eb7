"""Attributes read from object header messages are exactly what h5py's ``obj.attrs`` gives.

Over hand-written attributes of every kind (in version 1 and 2 headers, compact and dense
storage, creation order tracked or not), hypothesis-generated ones, and every object of
every file of the corpus.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import h5py
import numpy as np
import pytest
from h5kit import CORPUS_FILES, corpus_h5_files, write_h5
from h5py import h5a, h5ds, h5g, h5p, h5s, h5t
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from test_hdf5_fast_paths import _assert_same, _write_attributes

from refzarr.scan.hdf5.attr_messages import UNREAD, HeaderAttributes
from refzarr.scan.hdf5.attrs import AttributeTable
from refzarr.scan.hdf5.headers import ObjectHeaders

_KINDS = ("int", "scalar", "float", "one", "matrix", "empty array", "ascii", "fixed strings")


def _headers(f: h5py.File) -> ObjectHeaders:
    data = Path(f.filename).read_bytes()
    return ObjectHeaders(f, lambda position, length: data[position : position + length], len(data))


def _objects(f: h5py.File) -> list[h5py.HLObject]:
    found: list[h5py.HLObject] = [f]
    f.visititems(lambda _name, obj: found.append(obj) if hasattr(obj, "attrs") else None)
    return found


def _check(header: HeaderAttributes, obj: h5py.HLObject) -> int:
    """Compare with h5py; the number of values read from the header."""
    assert header.names == list(obj.attrs)
    if isinstance(obj, h5py.Dataset):
        _check_scale(header, obj)
    read = 0
    for name in header.names:
        value = header.values[name]
        if value is not UNREAD:
            _assert_same(value, obj.attrs[name], name)
            read += 1
    return read


def _check_scale(header: HeaderAttributes, ds: h5py.Dataset) -> None:
    """What the header says of ``H5DSis_scale``, when it says something, is HDF5's answer."""
    if header.dimension_scale is None:
        assert "CLASS" in header.names
        return
    assert header.dimension_scale == h5ds.is_scale(ds.id), ds.name
    table = AttributeTable(ds, header=header)
    assert table.dimension_scale() == h5ds.is_scale(ds.id), ds.name


def _group(f: h5py.File, name: str, *, tracked: bool, compact: bool) -> h5py.Group:
    gcpl = h5p.create(h5p.GROUP_CREATE)
    if tracked:
        gcpl.set_attr_creation_order(h5p.CRT_ORDER_TRACKED | h5p.CRT_ORDER_INDEXED)
    if compact:
        gcpl.set_attr_phase_change(1000, 900)
    return h5py.Group(h5g.create(f.id, name.encode(), gcpl=gcpl))


@pytest.mark.parametrize("libver", ["earliest", "latest"])
@pytest.mark.parametrize("tracked", [False, True])
@pytest.mark.parametrize("compact", [False, True])
def test_every_kind_of_attribute(tmp_path: Path, libver: str, tracked: bool, compact: bool) -> None:
    def writer(f: h5py.File) -> None:
        _write_attributes(_group(f, "g", tracked=tracked, compact=compact))

    path = write_h5(tmp_path / "attrs.h5", writer, libver=libver)
    with h5py.File(path, "r") as f:
        header = _headers(f).attributes(f["g"].id)
        assert header is not None  # dense storage of any size is read here too
        assert _check(header, f["g"]) >= 20
        unread = {name for name in header.names if header.values[name] is UNREAD}
        assert unread == {
            "vlen str",
            "vlen strs",
            "empty float",
            "empty str",
            "bool",
            "complex",
            "compound",
            "enum",
            "spacepad",
        }
        table = AttributeTable(f["g"], header=header)
        for name in f["g"].attrs:
            _assert_same(table[name], f["g"].attrs[name], name)


def test_netcdf_text_attribute_without_terminating_nul(tmp_path: Path) -> None:
    netcdf4 = pytest.importorskip("netCDF4")
    path = tmp_path / "t.nc"
    with netcdf4.Dataset(path, "w") as nc:
        nc.setncattr("title", "exactly")
        nc.createDimension("x", 2)
        v = nc.createVariable("v", "f4", ("x",), fill_value=-1.0)
        v.setncattr("units", "K")
        v.setncattr("valid_range", np.array([0, 5], "i2"))
    with h5py.File(path, "r") as f:
        headers = _headers(f)
        for obj in _objects(f):
            header = headers.attributes(obj.id)
            assert header is not None
            _check(header, obj)


def test_corpus_objects(tmp_path: Path) -> None:
    parsed = read = 0
    for f in corpus_h5_files():
        headers = _headers(f)
        for obj in _objects(f):
            header = headers.attributes(obj.id)
            if header is not None:
                parsed += 1
                read += _check(header, obj)
    if CORPUS_FILES:
        assert parsed > 20
        assert read > 50


_NUMBERS = st.sampled_from(["<i1", "<u1", ">i2", "<u2", "<i4", ">u4", "<i8", ">u8", "<f2", ">f4"])
_NUMBERS |= st.sampled_from(["<f4", ">f8", "<f8"])
_SHAPES = hnp.array_shapes(min_dims=0, max_dims=2, min_side=0, max_side=3)
_VALUES = st.one_of(
    _NUMBERS.flatmap(lambda dtype: hnp.arrays(np.dtype(dtype), _SHAPES)),
    hnp.arrays(
        np.dtype("S4"), _SHAPES, elements=st.binary(max_size=4).map(lambda b: b.rstrip(b"\0"))
    ),
    st.binary(min_size=1, max_size=12).map(np.bytes_),
)
_NAMES = st.text(
    alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\0/."),
    min_size=1,
    max_size=8,
)


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    st.dictionaries(_NAMES, _VALUES, min_size=0, max_size=20),
    st.booleans(),
    st.booleans(),
    st.sampled_from(["earliest", "latest"]),
)
def test_generated_attributes(
    tmp_path: Path, attrs: dict[str, Any], tracked: bool, compact: bool, libver: str
) -> None:
    def writer(f: h5py.File) -> None:
        group = _group(f, "g", tracked=tracked, compact=compact)
        for name, value in attrs.items():
            group.attrs[name] = value

    path = write_h5(tmp_path / "gen.h5", writer, libver=libver)
    with h5py.File(path, "r") as f:
        header = _headers(f).attributes(f["g"].id)
        if header is None:  # a heap or B-tree beyond one block: left to h5py
            assert not compact
            return
        assert _check(header, f["g"]) == len(attrs)


@pytest.mark.parametrize("tracked", [False, True])
def test_dense_attributes(tmp_path: Path, tracked: bool) -> None:
    def writer(f: h5py.File) -> None:
        group = _group(f, "g", tracked=tracked, compact=False)
        for k in range(12):
            group.attrs[f"n{(k * 7) % 12}"] = np.int32(k) if k % 2 else np.bytes_(b"x" * k)
        group.attrs["last"] = np.arange(3.0)

    path = write_h5(tmp_path / "dense.h5", writer, libver="latest")
    with h5py.File(path, "r") as f:
        header = _headers(f).attributes(f["g"].id)
        assert header is not None
        assert _check(header, f["g"]) == 13


def test_file_with_a_user_block(tmp_path: Path) -> None:
    def writer(f: h5py.File) -> None:
        f.attrs["a"] = np.int32(3)
        f.create_dataset("d", data=np.arange(3)).attrs["units"] = np.bytes_(b"m")

    path = write_h5(tmp_path / "ub.h5", writer, userblock_size=1024)
    with h5py.File(path, "r") as f:
        headers = _headers(f)
        for obj in _objects(f):
            header = headers.attributes(obj.id)
            assert header is not None
            assert _check(header, obj) == 1


_CLASS_VALUES = st.sampled_from(
    [b"DIMENSION_SCALE", b"DIMENSION_SCAL", b"DIMENSION_SCALEX", b"DIM", b"", b"dimension_scale"]
)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    _CLASS_VALUES,
    st.integers(min_value=-1, max_value=3),
    st.sampled_from([h5t.STR_NULLTERM, h5t.STR_NULLPAD, h5t.STR_SPACEPAD]),
    st.sampled_from([h5t.CSET_ASCII, h5t.CSET_UTF8]),
    st.sampled_from(["scalar", "one", "vlen", "int", "none", "make_scale"]),
    st.sampled_from(["earliest", "latest"]),
)
def test_dimension_scale_class_as_hdf5_judges_it(
    tmp_path: Path, value: bytes, extra: int, pad: int, cset: int, kind: str, libver: str
) -> None:
    """``CLASS`` attributes of every shape and type: the header's answer is HDF5's."""

    def writer(f: h5py.File) -> None:
        ds = f.create_dataset("d", data=np.arange(3))
        if kind == "make_scale":
            ds.make_scale(value.decode())
        elif kind == "vlen":
            ds.attrs["CLASS"] = value.decode()
        elif kind == "int":
            ds.attrs["CLASS"] = np.int32(len(value))
        elif kind != "none":
            tid = h5t.C_S1.copy()
            size = max(1, len(value) + extra)
            tid.set_size(size)
            tid.set_strpad(pad)
            tid.set_cset(cset)
            space = h5s.create(h5s.SCALAR) if kind == "scalar" else h5s.create_simple((1,))
            attr = h5a.create(ds.id, b"CLASS", tid, space)
            data = value.ljust(size, b"\0")[:size]
            attr.write(np.array(data if kind == "scalar" else [data], dtype=f"S{size}"), mtype=tid)

    path = write_h5(tmp_path / "cls.h5", writer, libver=libver)
    with h5py.File(path, "r") as f:
        header = _headers(f).attributes(f["d"].id)
        assert header is not None
        _check_scale(header, f["d"])
        if kind in ("none", "make_scale"):
            assert header.dimension_scale is (kind == "make_scale")


def test_values_parsed_once_per_process_stay_apart(tmp_path: Path) -> None:
    """Scalars are parsed once for every file repeating them; arrays are never shared."""

    def writer(f: h5py.File) -> None:
        _write_attributes(f.create_group("g"))

    path = write_h5(tmp_path / "twice.h5", writer)
    with h5py.File(path, "r") as f:
        first = _headers(f).attributes(f["g"].id)
        second = _headers(f).attributes(f["g"].id)
        assert first is not None
        assert second is not None
        assert _check(second, f["g"]) > 20
        for name, value in first.values.items():
            if isinstance(value, np.ndarray):
                assert value is not second.values[name], name
                value[...] = 0  # a caller changing its copy changes nobody else's
        third = _headers(f).attributes(f["g"].id)
        assert third is not None
        assert _check(third, f["g"]) > 20
