"""HDF5 datatypes through refzarr.scan: every value read back through fsspec + zarr equals h5py's.

Plain numeric types (every width, float16 included, both byte orders) are covered by
``test_hdf5.py::test_numeric_types_keep_their_byte_order``. Here: variable-length strings and
object references (decoded and inlined as Zarr v2 object arrays), opaque and bitfield types,
HDF5 array types (unfolded into trailing axes), and the types that stay unsupported.

zarr-python 3 reads a ``vlen-utf8`` array as ``np.dtypes.StringDType`` (a scalar as ``str``)
and a ``vlen-bytes`` one as an object array of bytes; h5py reads variable-length strings as
bytes (``.asstr()`` decodes them). Values are compared exactly; the dtypes necessarily differ.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import h5py
import netCDF4
import numcodecs
import numpy as np
import pytest
import xarray as xr
from h5kit import (
    array,
    roundtrip,
    write_h5,
)
from h5py import h5d, h5p, h5s, h5t

import refzarr
from corpus import CORPUS
from refzarr import UnsupportedFeatureError
from refzarr.model import INLINED, MISSING
from refzarr.scan.hdf5 import vlen as hdf5_vlen
from refzarr.scan.hdf5.types import OPAQUE_TAG_ATTR
from refzarr.scan.hdf5.vlen import REFERENCE_ATTR, encode_vlen
from roundtrip import open_zarr_group, reference_options

# -- variable-length strings --------------------------------------------------------------------

WORDS = ["", "a", "héllo", "naïve ☃", "x" * 300, "tab\tnew\nline", "end"]


def _vlen_strings(f: h5py.File) -> None:
    utf8, ascii_ = h5py.string_dtype("utf-8"), h5py.string_dtype("ascii")
    words = np.array(WORDS * 2, dtype=object)
    f.create_dataset("utf8_contiguous", data=words[:7], dtype=utf8)
    f.create_dataset("utf8_chunked", data=words, dtype=utf8, chunks=(3,), compression="gzip")
    f.create_dataset("utf8_2d", data=words[:12].reshape(3, 4), dtype=utf8, chunks=(2, 3))
    f.create_dataset("ascii", data=[b"abc", b"", b"de"], dtype=ascii_, chunks=(2,))
    f.create_dataset("latin1_in_ascii", data=[b"caf\xe9", b"ok"], dtype=ascii_)
    f.create_dataset("scalar", data="scalar ☃", dtype=utf8)
    f.create_dataset("empty", shape=(0, 2), dtype=utf8)
    sparse = f.create_dataset("sparse", shape=(10,), maxshape=(None,), dtype=utf8, chunks=(2,))
    sparse[4:6] = ["written", "too"]
    f.create_dataset("never_written", shape=(4,), dtype=utf8, chunks=(2,))


def test_vlen_strings_are_inlined_object_arrays(tmp_path: Path) -> None:
    group = roundtrip(write_h5(tmp_path / "s.h5", _vlen_strings), tmp_path)
    for name in ("utf8_contiguous", "utf8_chunked", "utf8_2d", "ascii", "scalar"):
        meta = array(group, name).meta
        assert meta.dtype == np.dtype("O"), name
        assert [dict(c) for c in meta.codecs] == [{"id": "vlen-utf8"}], name
        assert meta.fill_value is None, name
    ids = array(group, "utf8_chunked").manifest.path_id
    assert (ids == INLINED).all()  # every chunk holds a non-empty value
    assert array(group, "utf8_2d").meta.chunks == (2, 3)
    dims = array(group, "utf8_2d").meta.dimension_names
    assert dims is not None
    assert dims[0] != dims[1]
    assert (
        array(group, "sparse").manifest.path_id.tolist()
        == [MISSING] * 2 + [INLINED] + [MISSING] * 2
    )
    assert (array(group, "never_written").manifest.path_id == MISSING).all()


def test_non_utf8_bytes_become_vlen_bytes_unchanged(tmp_path: Path) -> None:
    group = roundtrip(write_h5(tmp_path / "s.h5", _vlen_strings), tmp_path)
    meta = array(group, "latin1_in_ascii").meta
    assert [dict(c) for c in meta.codecs] == [{"id": "vlen-bytes"}]
    (chunk,) = array(group, "latin1_in_ascii").manifest.inlined.values()
    decoded = numcodecs.VLenBytes().decode(chunk)
    assert decoded.tolist() == [b"caf\xe9", b"ok"]


def test_vlen_wire_format_is_numcodecs_own() -> None:
    values = [b"", b"abc", "☃".encode(), b"\x00\xff"]
    expected = numcodecs.VLenBytes().encode(np.array(values, dtype=object))
    assert encode_vlen(values) == bytes(expected)


def test_edge_chunks_are_padded_to_the_full_chunk(tmp_path: Path) -> None:
    group = roundtrip(write_h5(tmp_path / "s.h5", _vlen_strings), tmp_path)
    edge = array(group, "utf8_2d").manifest[1, 1]  # rows 2..3 of 3, columns 3..5 of 4
    assert isinstance(edge, bytes)
    decoded = numcodecs.VLenUTF8().decode(edge)
    assert decoded.tolist() == [WORDS[11 % 7], "", "", "", "", ""]


def test_big_contiguous_vlen_strings_are_cut_into_row_chunks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(hdf5_vlen, "DECODED_CHUNK_ELEMENTS", 7)  # at most 2 rows of 3 values

    def write(f: h5py.File) -> None:
        words = np.array([f"w{i}" for i in range(30)], dtype=object).reshape(10, 3)
        f.create_dataset("rows", data=words, dtype=h5py.string_dtype())

    group = roundtrip(write_h5(tmp_path / "big.h5", write), tmp_path)
    rows = array(group, "rows")
    assert rows.meta.chunks == (2, 3)
    assert (rows.manifest.path_id == INLINED).all()


def test_netcdf_string_variable_through_xarray(tmp_path: Path) -> None:
    netcdf = tmp_path / "s.nc"
    with netCDF4.Dataset(netcdf, "w") as nc:
        nc.createDimension("station", 3)
        names = nc.createVariable("name", str, ("station",))
        names[:] = np.array(["Zürich", "", "Nuuk"], dtype=object)
        names.long_name = "station name"
        nc.createVariable("t", "f4", ("station",))[:] = [1.5, 2, 3]
    json_path = tmp_path / "s.json"
    refzarr.write(refzarr.scan(str(netcdf)), json_path)
    with (
        xr.open_dataset(
            "reference://", engine="zarr", backend_kwargs=_zarr_kwargs(json_path)
        ) as through_refs,
        xr.open_dataset(netcdf, engine="h5netcdf") as direct,
    ):
        # values, dimensions, attributes identical; dtype StringDType (zarr) vs <U6 (h5netcdf)
        xr.testing.assert_identical(through_refs.load(), direct.load())
        assert through_refs["name"].values.tolist() == ["Zürich", "", "Nuuk"]


# -- object and region references ---------------------------------------------------------------


def _references(f: h5py.File) -> None:
    f.create_dataset("target", data=np.arange(4))
    f.create_group("grp/inner")
    refs = [f["target"].ref, h5py.Reference(), f["grp/inner"].ref, f.ref]
    f.create_dataset("refs", data=refs, dtype=h5py.ref_dtype)
    f.create_dataset("refs_chunked", data=refs * 2, dtype=h5py.ref_dtype, chunks=(3,))
    f.create_dataset("scalar_ref", data=f["target"].ref, dtype=h5py.ref_dtype)


def test_object_references_become_target_paths(tmp_path: Path) -> None:
    group = roundtrip(write_h5(tmp_path / "r.h5", _references), tmp_path)
    refs = array(group, "refs")
    assert refs.meta.attributes[REFERENCE_ATTR] == "object"
    assert [dict(c) for c in refs.meta.codecs] == [{"id": "vlen-utf8"}]
    root = open_zarr_group(_written(group, tmp_path))
    assert root["refs"][...].tolist() == ["/target", "", "/grp/inner", "/"]
    assert root["scalar_ref"][()] == "/target"


def _region_references(f: h5py.File) -> None:
    target = f.create_dataset("target", data=np.arange(20).reshape(4, 5))
    space = target.id.get_space()
    space.select_elements(np.array([(0, 1), (3, 4)], dtype=np.uint64))
    points = h5py.h5r.create(f.id, b"target", h5py.h5r.DATASET_REGION, space)
    regions = [
        target.regionref[1:3, 2:4],
        target.regionref[...],
        target.regionref[[0, 2], 1],
        h5py.RegionReference(),
        points,
    ]
    f.create_dataset("regions", data=regions, dtype=h5py.regionref_dtype, chunks=(2,))


def test_region_references_become_path_and_selection(tmp_path: Path) -> None:
    group = roundtrip(write_h5(tmp_path / "rr.h5", _region_references), tmp_path)
    assert array(group, "regions").meta.attributes[REFERENCE_ATTR] == "region"
    root = open_zarr_group(_written(group, tmp_path))
    assert root["regions"][...].tolist() == [
        "/target {(1,2)-(2,3)}",
        "/target {ALL}",
        "/target {(0,1)-(0,1), (2,1)-(2,1)}",
        "",
        "/target {(0,1), (3,4)}",
    ]


# -- variable-length sequences ------------------------------------------------------------------


def _vlen_sequences(f: h5py.File) -> None:
    ds = f.create_dataset("seq", shape=(2,), dtype=h5py.vlen_dtype(np.dtype("i4")))
    ds[0], ds[1] = np.arange(3, dtype="i4"), np.arange(1, dtype="i4")
    f.create_dataset("fine", data=np.arange(2))


def test_vlen_sequences_are_unsupported_because_zarr_cannot_read_them(tmp_path: Path) -> None:
    path = write_h5(tmp_path / "v.h5", _vlen_sequences)
    with pytest.raises(
        UnsupportedFeatureError, match=r"v\.h5: dataset '/seq'.*variable-length.*vlen-array"
    ):
        refzarr.scan(str(path))
    group = roundtrip(path, tmp_path, on_unsupported="skip")
    assert [s.path for s in group.skipped] == ["/seq"]
    assert list(group.members) == ["fine"]


# -- opaque and bitfield ------------------------------------------------------------------------


def _opaque_and_bitfield(f: h5py.File) -> None:
    f.create_dataset("opaque_untagged", data=np.frombuffer(b"abcdefghijkl", dtype="V6"))
    tid = h5t.create(h5t.OPAQUE, 4)
    tid.set_tag(b"sensor frame v2")
    tagged = h5d.create(f.id, b"opaque_tagged", tid, h5s.create_simple((3,)))
    tagged.write(h5s.ALL, h5s.ALL, np.frombuffer(b"0123456789ab", dtype="V4"), mtype=tid)
    for name, tid, data in [
        ("bits8", h5t.STD_B8LE, np.array([1, 128, 255], "u1")),
        ("bits16be", h5t.STD_B16BE, np.array([1, 0x8001, 0xFFFF], ">u2")),
        ("bits32", h5t.STD_B32LE, np.array([7, 2**31, 0], "<u4")),
        ("bits64be", h5t.STD_B64BE, np.array([2**63, 1, 3], ">u8")),
    ]:
        dcpl = h5p.create(h5p.DATASET_CREATE)
        dcpl.set_chunk((2,))
        dcpl.set_deflate(4)
        ds = h5d.create(f.id, name.encode(), tid, h5s.create_simple((3,)), dcpl=dcpl)
        ds.write(h5s.ALL, h5s.ALL, data, mtype=tid)


def test_opaque_is_void_with_its_tag_and_bitfield_is_unsigned(tmp_path: Path) -> None:
    group = roundtrip(write_h5(tmp_path / "o.h5", _opaque_and_bitfield), tmp_path)
    assert array(group, "opaque_untagged").meta.dtype == np.dtype("V6")
    assert OPAQUE_TAG_ATTR not in array(group, "opaque_untagged").meta.attributes
    tagged = array(group, "opaque_tagged").meta
    assert tagged.dtype == np.dtype("V4")
    assert tagged.attributes[OPAQUE_TAG_ATTR] == "sensor frame v2"
    for name, dtype in [("bits8", "u1"), ("bits16be", ">u2"), ("bits32", "<u4")]:
        assert array(group, name).meta.dtype == np.dtype(dtype), name
    assert array(group, "bits64be").meta.dtype == np.dtype(">u8")


# -- HDF5 array types ---------------------------------------------------------------------------


def _array_types(f: h5py.File) -> None:
    vec = np.dtype(("<f4", (3,)))
    data = np.arange(30, dtype="<f4").reshape(10, 3) / 7
    # h5py takes an array-typed dataset's shape without the type's axes, its data with them
    f.create_dataset("contiguous", shape=(10,), dtype=vec)[...] = data
    chunked = f.create_dataset("chunked", (10,), vec, chunks=(4,), shuffle=True, compression=3)
    chunked[...] = data
    f.create_dataset("resizable", (5,), vec, chunks=(2,), maxshape=(None,))[:3] = data[:3]
    matrix = f.create_dataset("matrix_2d", (4, 5), (">i2", (2, 3)), chunks=(3, 2), fletcher32=True)
    matrix[...] = np.arange(4 * 5 * 6, dtype=">i2").reshape(4, 5, 2, 3)
    f.create_dataset("big_endian", shape=(4,), dtype=(">f8", (2,)))[...] = data[:4, :2]
    pairs = np.zeros((3, 2), dtype=[("x", "<f4"), ("y", ">i2")])
    pairs["x"], pairs["y"] = data[:3, :2], [[1, -2], [3, -4], [5, -6]]
    f.create_dataset("of_compounds", shape=(3,), dtype=(pairs.dtype, (2,)))[...] = pairs
    dcpl = h5p.create(h5p.DATASET_CREATE)
    dcpl.set_layout(h5d.COMPACT)
    h5d.create(f.id, b"compact", h5t.py_create(vec), h5s.create_simple((4,)), dcpl=dcpl)
    f["compact"][...] = data[:4]


def test_array_types_unfold_into_trailing_axes(tmp_path: Path) -> None:
    group = roundtrip(write_h5(tmp_path / "a.h5", _array_types), tmp_path)
    chunked = array(group, "chunked").meta
    assert (chunked.shape, chunked.chunks, chunked.dtype) == ((10, 3), (4, 3), np.dtype("<f4"))
    assert chunked.codecs[0]["id"] == "shuffle"
    assert chunked.codecs[0]["elementsize"] == 12  # HDF5 shuffles whole elements
    matrix = array(group, "matrix_2d")
    assert (matrix.meta.shape, matrix.meta.chunks) == ((4, 5, 2, 3), (3, 2, 2, 3))
    assert matrix.manifest.grid_shape == (2, 3, 1, 1)
    assert matrix.meta.dimension_names is not None
    assert len(set(matrix.meta.dimension_names)) == 4  # the array type's axes: phony names
    assert array(group, "compact").manifest.path_id.ravel().tolist() == [INLINED]
    assert array(group, "contiguous").meta.chunks == (10, 3)
    assert array(group, "of_compounds").meta.dtype.names == ("x", "y")
    resizable = array(group, "resizable")
    assert resizable.manifest.path_id.ravel().tolist() == [0, 0, MISSING]


# -- compounds zarr-python 3 cannot read --------------------------------------------------------


def _compounds(f: h5py.File) -> None:
    with_vector = np.dtype([("id", "<i4"), ("pos", "<f8", (3,))])
    f.create_dataset("vector_member", data=np.zeros(2, with_vector))
    nested = np.dtype([("a", [("re", "<f4"), ("im", "<f4")]), ("b", "u1")])
    f.create_dataset("nested", data=np.zeros(2, nested))
    f.create_dataset("array_of_nested", shape=(2,), dtype=(nested, (2,)))
    with_string = np.dtype([("name", h5py.string_dtype()), ("v", "<f4")])
    f.create_dataset("vlen_member", data=np.array([("a", 1.0)], with_string))
    f.create_dataset("plain", data=np.zeros(2, [("x", "<i2"), ("y", ">f4")]))


def test_compounds_zarr_cannot_read_are_unsupported_with_reasons(tmp_path: Path) -> None:
    path = write_h5(tmp_path / "c.h5", _compounds)
    with pytest.raises(UnsupportedFeatureError, match=r"c\.h5: dataset '/array_of_nested'.*nested"):
        refzarr.scan(str(path))
    group = roundtrip(path, tmp_path, on_unsupported="skip")
    reasons = {s.path: s.reason for s in group.skipped}
    assert sorted(reasons) == ["/array_of_nested", "/nested", "/vector_member", "/vlen_member"]
    assert "nested compound" in reasons["/array_of_nested"]
    assert "member 'pos' is an array" in reasons["/vector_member"]
    assert "sub-array fields" in reasons["/vector_member"]
    assert "variable-length" in reasons["/vlen_member"]
    assert list(group.members) == ["plain"]


# -- corpus files -------------------------------------------------------------------------------

CORPUS_SKIPPED = {
    "hdf5/test_vlen_datasets_earliest.hdf5": {"variable-length sequences"},
    "hdf5/pyfive_opaque_fixed.hdf5": set(),
    "hdf5/pyfive_references.hdf5": set(),
    "hdf5/compound_datasets_latest.hdf5": {"nested compound", "variable-length"},
    "hdf5/compound-dtype-complex.h5": set(),
    "netcdf4/ref_tst_compounds.nc": set(),
    "netcdf4/test_gold.nc": set(),
}


@pytest.mark.parametrize("name", sorted(CORPUS_SKIPPED))
def test_corpus_types_read_back_identical(name: str, tmp_path: Path) -> None:
    path = CORPUS / name
    if not path.is_file():
        pytest.skip(f"corpus file {path} not present")
    group = roundtrip(path, tmp_path, on_unsupported="skip")
    for feature in CORPUS_SKIPPED[name]:
        assert any(feature in s.reason for s in group.skipped), (feature, group.skipped)
    known = CORPUS_SKIPPED[name]
    for skipped in group.skipped:  # attributes (path@name) are not this file's subject
        assert "@" in skipped.path or any(f in skipped.reason for f in known), skipped


# -- helpers ------------------------------------------------------------------------------------


def _zarr_kwargs(refs: Path) -> dict[str, Any]:
    return {
        "storage_options": reference_options(refs),
        "consolidated": False,
        "zarr_format": 2,
    }


def _written(group: refzarr.RefGroup, tmp_path: Path) -> Path:
    json_path = tmp_path / "written.json"
    refzarr.write(group, json_path)
    return json_path
