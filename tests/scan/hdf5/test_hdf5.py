"""refzarr.scan on HDF5 / netCDF4: every array read back through fsspec + zarr equals h5py's.

Each case writes a small file with h5py into tmp_path, scans it, writes the references as
kerchunk JSON, opens them with fsspec's ReferenceFileSystem + zarr-python 3 (never refzarr's
reader) and compares every array with what h5py reads: equal dtype (byte order included),
identical values (NaN where NaN).
"""

from __future__ import annotations

import pickle
from pathlib import Path
from typing import Any

import fsspec
import h5py
import numpy as np
import pytest
from h5kit import Writer, array, roundtrip, write_h5

import refzarr
from refzarr import UnsupportedFeatureError
from refzarr.codecs.hdf5.filters import Hdf5Filter, filter_to_codec
from refzarr.model import INLINED, MISSING
from refzarr.model.attr_types import original_bytes
from refzarr.scan.hdf5 import Hdf5Scanner
from refzarr.scan.hdf5.attrs import AttributeTable
from refzarr.scan.hdf5.types import ENUM_ATTR
from roundtrip import assert_xarray_matches_netcdf

# -- the kit ------------------------------------------------------------------------------------


# -- layouts and chunk indexes ------------------------------------------------------------------


def _chunked(f: h5py.File) -> None:
    data = np.arange(7 * 9, dtype="f4").reshape(7, 9) / 3
    f.create_dataset("gzip_shuffle", data=data, chunks=(3, 4), compression="gzip", shuffle=True)
    f.create_dataset("fletcher", data=data, chunks=(2, 5), fletcher32=True, compression=5)
    f.create_dataset("plain", data=data.astype(">i8"), chunks=(4, 4))
    f.create_dataset("one_chunk", data=data, chunks=(7, 9), compression="gzip")
    f.create_dataset("overhang", data=data, chunks=(5, 20), maxshape=(None, None))


def _chunk_indexes(f: h5py.File) -> None:
    data = np.arange(6 * 8, dtype="i4").reshape(6, 8)
    f.create_dataset("fixed_array", data=data, chunks=(2, 3), compression="gzip")
    f.create_dataset("extensible", data=data, chunks=(2, 3), maxshape=(None, 8))
    f.create_dataset("btree_v2", data=data, chunks=(2, 3), maxshape=(None, None), shuffle=True)
    f.create_dataset("single", data=data, chunks=(6, 8), compression="gzip")


@pytest.mark.parametrize("libver", ["earliest", "latest"])
@pytest.mark.parametrize("writer", [_chunked, _chunk_indexes], ids=["filters", "indexes"])
def test_chunked_layouts(tmp_path: Path, writer: Writer, libver: str) -> None:
    group = roundtrip(write_h5(tmp_path / "c.h5", writer, libver=libver), tmp_path)
    for _, arr in group.arrays():
        assert (arr.manifest.path_id == 0).all()


def test_filters_become_codecs_in_encoding_order(tmp_path: Path) -> None:
    group = roundtrip(write_h5(tmp_path / "c.h5", _chunked), tmp_path)
    assert [c["id"] for c in array(group, "gzip_shuffle").meta.codecs] == ["shuffle", "zlib"]
    assert array(group, "gzip_shuffle").meta.codecs[0]["elementsize"] == 4
    assert [c["id"] for c in array(group, "fletcher").meta.codecs] == ["zlib", "fletcher32"]
    assert array(group, "fletcher").meta.codecs[0]["level"] == 5


def _sparse(f: h5py.File) -> None:
    ds = f.create_dataset("sparse", shape=(10, 4), chunks=(3, 4), dtype="f8", fillvalue=np.nan)
    ds[3:6] = 1.5
    f.create_dataset("never", shape=(5,), chunks=(2,), dtype="i2", fillvalue=-7)
    f.create_dataset("unallocated", shape=(5,), dtype="u1", fillvalue=3)
    f.create_dataset("default_fill", shape=(5,), chunks=(2,), dtype="f4")[:2] = 1.0


def test_never_written_chunks_are_missing_and_read_as_fill(tmp_path: Path) -> None:
    group = roundtrip(write_h5(tmp_path / "s.h5", _sparse), tmp_path)
    ids = array(group, "sparse").manifest.path_id.ravel().tolist()
    assert ids == [MISSING, 0, MISSING, MISSING]
    assert np.isnan(array(group, "sparse").meta.fill_value)
    assert (array(group, "never").manifest.path_id == MISSING).all()
    assert array(group, "never").meta.fill_value == -7
    assert (array(group, "unallocated").manifest.path_id == MISSING).all()
    assert array(group, "unallocated").meta.fill_value == 3
    assert array(group, "default_fill").meta.fill_value is None  # HDF5 reads zeros, so does zarr


def _contiguous_and_compact(f: h5py.File) -> None:
    f.create_dataset("contiguous", data=np.arange(20, dtype=">u2").reshape(4, 5))
    space = h5py.h5s.create_simple((3, 2))
    dcpl = h5py.h5p.create(h5py.h5p.DATASET_CREATE)
    dcpl.set_layout(h5py.h5d.COMPACT)
    h5py.h5d.create(f.id, b"compact", h5py.h5t.IEEE_F64BE, space, dcpl=dcpl)
    f["compact"][...] = np.arange(6.0).reshape(3, 2) - 2.5


def test_contiguous_is_one_whole_chunk_and_compact_is_inlined(tmp_path: Path) -> None:
    path = write_h5(tmp_path / "l.h5", _contiguous_and_compact)
    group = roundtrip(path, tmp_path)
    contiguous = array(group, "contiguous")
    assert contiguous.meta.chunks == (4, 5)
    ref = contiguous.manifest[0, 0]
    with h5py.File(path) as f:
        assert ref == (str(path.resolve()), f["contiguous"].id.get_offset(), 40)
    assert array(group, "compact").manifest.path_id.ravel().tolist() == [INLINED]


def test_inline_threshold_inlines_small_chunks(tmp_path: Path) -> None:
    path = write_h5(tmp_path / "c.h5", _chunked)
    group = roundtrip(path, tmp_path, inline_threshold=40)
    ids = array(group, "fletcher").manifest.path_id
    assert (ids == INLINED).any()
    assert (ids == 0).any()


# -- datatypes ----------------------------------------------------------------------------------

NUMERIC = [f"{order}{kind}{size}" for order in "<>" for kind in "iu" for size in (1, 2, 4, 8)]
NUMERIC += [f"{order}f{size}" for order in "<>" for size in (2, 4, 8)]
NUMERIC += ["<c8", ">c8", "<c16", ">c16"]


def _numeric(f: h5py.File) -> None:
    for code in NUMERIC:
        dtype = np.dtype(code)
        values = (np.arange(12) - 3).astype(dtype) if dtype.kind != "u" else np.arange(12)
        values = np.asarray(values, dtype=dtype).reshape(3, 4)
        f.create_dataset(f"contiguous_{code}", data=values)
        f.create_dataset(f"chunked_{code}", data=values, chunks=(2, 3), compression="gzip")


def test_numeric_types_keep_their_byte_order(tmp_path: Path) -> None:
    group = roundtrip(write_h5(tmp_path / "n.h5", _numeric), tmp_path)
    for code in NUMERIC:
        assert array(group, f"chunked_{code}").meta.dtype == np.dtype(code)


def _other_types(f: h5py.File) -> None:
    f.create_dataset("bool", data=np.array([[True, False], [False, True]]))
    f.create_dataset("fixed_string", data=np.array([b"a", b"abcd", b""], dtype="S4"))
    f.create_dataset("char", data=np.array([b"x", b"y"], dtype="S1"), chunks=(1,))
    packed = np.dtype([("a", "<i2"), ("b", ">f8"), ("c", "S3")])
    f.create_dataset("packed_compound", data=np.array([(1, 2.5, b"xy"), (-3, 0, b"")], packed))
    padded = np.dtype({"names": ["x", "y"], "formats": ["u1", "<f4"], "offsets": [0, 4]})
    f.create_dataset("padded", data=np.array([(1, 2.5), (2, -1)], padded), chunks=(1,))
    colours = h5py.enum_dtype({"RED": 0, "GREEN": 1, "BLUE": 7}, basetype=">i2")
    f.create_dataset("enum", data=np.array([0, 7, 1], ">i2"), dtype=colours)


def test_bool_strings_compound_enum(tmp_path: Path) -> None:
    group = roundtrip(write_h5(tmp_path / "t.h5", _other_types), tmp_path)
    assert array(group, "fixed_string").meta.dtype == np.dtype("S4")
    assert array(group, "padded").meta.dtype.itemsize == 8
    enum = array(group, "enum")
    assert enum.meta.dtype == np.dtype(">i2")
    assert enum.meta.attributes[ENUM_ATTR] == {"RED": 0, "GREEN": 1, "BLUE": 7}


def _scalar_and_empty(f: h5py.File) -> None:
    f.create_dataset("scalar", data=np.float32(2.5))
    f.create_dataset("scalar_int", data=np.int64(-4))
    f.create_dataset("empty", shape=(0, 3), dtype="f8")
    f.create_dataset("empty_chunked", shape=(0,), maxshape=(None,), chunks=(4,), dtype="i4")


def test_scalar_and_empty_datasets(tmp_path: Path) -> None:
    group = roundtrip(write_h5(tmp_path / "s.h5", _scalar_and_empty), tmp_path)
    assert array(group, "scalar").meta.shape == ()
    assert array(group, "scalar").meta.dimension_names == ()
    assert array(group, "empty").meta.shape == (0, 3)


# -- structure: groups, links -------------------------------------------------------------------


def _structure(f: h5py.File) -> None:
    inner = f.create_group("a/b")
    inner.attrs["level"] = 2
    inner.create_dataset("x", data=np.arange(5), chunks=(2,))
    f["a"].create_dataset("y", data=np.ones((2, 2)))
    f["hard"] = inner["x"]
    f["soft"] = h5py.SoftLink("/a/y")
    f.create_group("empty_group")


def test_nested_groups_and_links(tmp_path: Path) -> None:
    group = roundtrip(write_h5(tmp_path / "g.h5", _structure), tmp_path)
    assert group["a/b"].attributes == {"level": 2, "_nczarr_attr": {"types": {}, "netcdf": 4}}
    assert array(group, "hard").manifest == array(group, "a/b/x").manifest
    assert array(group, "soft").manifest == array(group, "a/y").manifest
    assert "empty_group" in group


def test_external_link_is_followed_or_its_missing_target_skipped(tmp_path: Path) -> None:
    other = write_h5(tmp_path / "other.h5", lambda f: f.create_dataset("v", data=[1, 2]))

    def writer(f: h5py.File) -> None:
        f["ext"] = h5py.ExternalLink("other.h5", "/v")
        f["gone"] = h5py.ExternalLink("missing.h5", "/v")
        f.create_dataset("kept", data=[3, 4])

    path = write_h5(tmp_path / "e.h5", writer)
    with pytest.raises(
        UnsupportedFeatureError, match=r"e\.h5: link '/gone'.*'missing\.h5'.*not found"
    ):
        refzarr.scan(str(path))
    group = roundtrip(path, tmp_path, on_unsupported="skip")
    assert [s.path for s in group.skipped] == ["/gone"]
    assert array(group, "ext").manifest.paths == (str(other),)
    assert "kept" in group


def test_soft_link_through_an_external_link_is_refused(tmp_path: Path) -> None:
    write_h5(tmp_path / "t.h5", lambda f: f.create_dataset("v", data=np.arange(5)))

    def writer(f: h5py.File) -> None:
        f["ext"] = h5py.ExternalLink("t.h5", "/")
        f["soft"] = h5py.SoftLink("/ext/v")

    path = write_h5(tmp_path / "a.h5", writer)
    with pytest.raises(UnsupportedFeatureError, match=r"'/soft'.*soft link into another file"):
        refzarr.scan(path)


# -- dimensions ---------------------------------------------------------------------------------


def _dimensions(f: h5py.File) -> None:
    time = f.create_dataset("time", data=np.arange(4.0))
    time.make_scale("time")
    x = f.create_dataset("x", shape=(3,), dtype="f4")
    x.make_scale("This is a netCDF dimension but not a netCDF variable.         3")
    var = f.create_dataset("var", data=np.zeros((4, 3)))
    var.dims[0].attach_scale(time)
    var.dims[1].attach_scale(x)
    sub = f.create_group("sub")
    nested = sub.create_dataset("nested", data=np.zeros((4, 2, 2)))
    nested.dims[0].attach_scale(time)
    f.create_dataset("no_scales", data=np.zeros((5, 5, 6)))
    f.create_dataset("same_length", data=np.zeros(6))


def test_dimension_names(tmp_path: Path) -> None:
    group = roundtrip(write_h5(tmp_path / "d.h5", _dimensions), tmp_path)
    assert "x" not in group  # a netCDF dimension, not a variable
    assert array(group, "time").meta.dimension_names == ("time",)
    assert array(group, "var").meta.dimension_names == ("time", "x")
    no_scales = array(group, "no_scales").meta.dimension_names
    assert no_scales == ("phony_dim_0", "phony_dim_1", "phony_dim_2")  # 5 and 5: two names
    assert array(group, "same_length").meta.dimension_names == ("phony_dim_2",)
    nested = array(group, "sub/nested").meta.dimension_names
    assert nested == ("time", "phony_dim_3", "phony_dim_4")  # a group of its own
    assert "CLASS" not in array(group, "time").meta.attributes
    assert "DIMENSION_LIST" not in array(group, "var").meta.attributes


def test_netcdf_file_through_xarray(netcdf_file: Path, tmp_path: Path) -> None:
    group = roundtrip(netcdf_file, tmp_path)
    refs = tmp_path / "nc.json"
    refzarr.write(group, refs)
    assert_xarray_matches_netcdf(refs, netcdf_file, check_dims=True)
    assert array(group, "forecast/pressure").meta.dimension_names == ("step", "lat")


def test_netcdf_non_coordinate_variable_named_like_a_dimension(tmp_path: Path) -> None:
    h5netcdf = pytest.importorskip("h5netcdf")
    path = tmp_path / "nc.nc"
    with h5netcdf.File(path, "w") as f:
        f.dimensions = {"x": 3, "y": 2}
        f.create_variable("x", ("y",), "f4", data=np.array([1, 2], "f4"))
        f.create_variable("data", ("y", "x"), "i2", data=np.arange(6, dtype="i2").reshape(2, 3))
        f.create_group("sub").create_variable("inner", ("x",), "f8", data=np.arange(3.0))
    group = roundtrip(path, tmp_path)
    assert sorted(name for name, _ in group.arrays()) == ["data", "sub/inner", "x"]
    assert array(group, "x").meta.dimension_names == ("y",)
    assert array(group, "sub/inner").meta.dimension_names == ("x",)
    refs = tmp_path / "nc.json"
    refzarr.write(group, refs)
    assert_xarray_matches_netcdf(refs, path)
    assert_xarray_matches_netcdf(refs, path, group="sub")


def test_netcdf_coordinates_of_several_dimensions_in_sibling_groups(tmp_path: Path) -> None:
    """Each group's dimension ids are listed once per scan and kept per group: the 2-D
    coordinate variables of two sibling groups are named by their own group's dimensions
    (and the root's)."""
    netCDF4 = pytest.importorskip("netCDF4")
    path = tmp_path / "nc.nc"
    with netCDF4.Dataset(path, "w") as nc:
        nc.createDimension("x", 2)
        for name, length in (("a", 3), ("b", 4)):
            sub = nc.createGroup(name)
            sub.createDimension(f"{name}y", length)
            sub.createDimension(f"{name}z", 1)
            for var in (f"{name}y", f"{name}z"):  # coordinate variables of two dimensions
                dims = (var, "x")
                sub.createVariable(var, "f4", dims)[:] = np.zeros((len(sub.dimensions[var]), 2))
    group = roundtrip(path, tmp_path)
    for name in ("a", "b"):
        assert array(group, f"{name}/{name}y").meta.dimension_names == (f"{name}y", "x")
        assert array(group, f"{name}/{name}z").meta.dimension_names == (f"{name}z", "x")


# -- attributes ---------------------------------------------------------------------------------


def _attributes(f: h5py.File) -> None:
    ds = f.create_dataset("v", data=np.arange(3, dtype="i2"), fillvalue=-1)
    ds.attrs["_FillValue"] = np.int16(-1)
    ds.attrs["scale_factor"] = np.float32(0.5)
    ds.attrs["valid_range"] = np.array([0, 10], dtype="i2")
    ds.attrs["one_element"] = np.array([3.25])
    ds.attrs["units"] = b"m s-1"
    ds.attrs["text"] = "héllo"
    ds.attrs["binary"] = np.bytes_(b"\xff\x00\x01")
    ds.attrs["names"] = np.array([b"ab", b"c"])
    ds.attrs["flag"] = np.bool_(True)
    ds.attrs["matrix"] = np.arange(4).reshape(2, 2)
    ds.attrs["_Netcdf4Dimid"] = np.int32(0)
    f.attrs["title"] = "root"
    f.attrs["_NCProperties"] = b"version=2"


def test_attributes_keep_their_types(tmp_path: Path) -> None:
    group = roundtrip(write_h5(tmp_path / "a.h5", _attributes), tmp_path)
    attrs = array(group, "v").meta.attributes
    assert dict(attrs) == {
        "_FillValue": -1,
        "scale_factor": 0.5,
        "valid_range": (0, 10),
        "one_element": 3.25,
        "units": "m s-1",
        "text": "héllo",
        "binary": "\ufffd\x01",  # as netCDF4-python shows bytes that are not UTF-8 (no NUL)
        "names": ("ab", "c"),
        "flag": True,
        "matrix": ((0, 1), (2, 3)),
        # the types JSON loses, as NCZarr records them (issue 13)
        "_nczarr_attr": {
            "types": {"_FillValue": "<i2", "scale_factor": "<f4", "valid_range": "<i2"},
            # numbers JSON keeps (one_element, matrix) are int64 / float64 ones, as netCDF-C
            # reads them: refzarr's engine gives numpy values as netCDF4-python does
            "netcdf": 4,
            # and the bytes that were not UTF-8, kept as ints: never re-encoded in silence
            "bytes": {"binary": [0xFF, 0x00, 0x01]},
        },
    }
    assert original_bytes(attrs, "binary") == b"\xff\x00\x01"
    assert original_bytes(attrs, "text") is None
    assert array(group, "v").meta.fill_value == -1
    assert dict(group.attributes) == {"title": "root"}


# -- unsupported features -----------------------------------------------------------------------


def _unsupported(f: h5py.File) -> None:
    f.create_dataset("vlen_seq", shape=(2,), dtype=h5py.vlen_dtype(np.dtype("i4")))
    f.create_dataset("fine", data=np.arange(3))
    f["fine"].attrs["ref"] = f["fine"].ref
    f["fine"].attrs["ok"] = 1


def test_unsupported_raises_naming_file_dataset_feature(tmp_path: Path) -> None:
    path = write_h5(tmp_path / "u.h5", _unsupported)
    with pytest.raises(UnsupportedFeatureError, match=r"u\.h5: dataset '/fine'.*'ref'.*Reference"):
        Hdf5Scanner()(str(path))
    vlen = write_h5(
        tmp_path / "seq.h5", lambda f: f.create_dataset("z", (2,), h5py.vlen_dtype("i4"))
    )
    with pytest.raises(UnsupportedFeatureError, match=r"seq\.h5: dataset '/z'.*variable-length"):
        Hdf5Scanner()(str(vlen))


def test_skip_lists_what_was_left_out_and_why(tmp_path: Path) -> None:
    group = roundtrip(write_h5(tmp_path / "u.h5", _unsupported), tmp_path, on_unsupported="skip")
    reasons = {s.path: s.reason for s in group.skipped}
    assert sorted(reasons) == ["/fine@ref", "/vlen_seq"]
    assert "variable-length sequences" in reasons["/vlen_seq"]
    assert list(group.members) == ["fine"]
    assert dict(array(group, "fine").meta.attributes) == {
        "ok": 1,
        "_nczarr_attr": {"types": {}, "netcdf": 4},
    }


def test_chunk_that_skipped_a_filter_is_reencoded_and_inlined(tmp_path: Path) -> None:
    def writer(f: h5py.File) -> None:
        ds = f.create_dataset("partly", shape=(8,), chunks=(4,), dtype="i4", compression="gzip")
        ds[:4] = 1
        raw = np.arange(4, dtype="i4").tobytes()
        ds.id.write_direct_chunk((4,), raw, filter_mask=1)  # stored without deflate

    group = roundtrip(write_h5(tmp_path / "m.h5", writer), tmp_path)
    assert array(group, "partly").manifest.path_id.tolist() == [0, INLINED]


def test_unknown_filter_is_unsupported() -> None:
    with pytest.raises(UnsupportedFeatureError, match=r"f\.h5: dataset 'v'.*filter 999"):
        filter_to_codec(Hdf5Filter(999, "mystery"), 4, where="f.h5: dataset 'v'")


def test_blosc_and_zstd_configs() -> None:
    blosc = filter_to_codec(Hdf5Filter(32001, "blosc", (2, 2, 4, 800, 9, 2, 1)), 4)
    assert blosc == {"id": "blosc", "cname": "lz4", "clevel": 9, "shuffle": 2, "blocksize": 0}
    assert filter_to_codec(Hdf5Filter(32015, "zstd", (7,)), 4) == {"id": "zstd", "level": 7}


# -- sources and options ------------------------------------------------------------------------


def test_userblock_is_detected(tmp_path: Path) -> None:
    roundtrip(write_h5(tmp_path / "u.bin", _chunked, userblock_size=1024), tmp_path)


def test_unknown_format_names_file_first_bytes_and_formats(tmp_path: Path) -> None:
    text = tmp_path / "notes.nc"  # the name says netCDF: detection never looks at it
    text.write_text("hello")
    with pytest.raises(
        refzarr.ScanError, match=r"notes\.nc: .*first bytes 68 65 6c 6c 6f \('hello'\).*hdf5"
    ):
        refzarr.scan(str(text))


def test_scan_takes_paths_and_rejects_unknown_options(tmp_path: Path) -> None:
    path = write_h5(tmp_path / "c.h5", _chunked)
    assert refzarr.scan(path) == refzarr.scan(str(path))
    with pytest.raises(TypeError, match=r"unknown scan options \['inline'\].*inline_threshold"):
        refzarr.scan(path, inline=3)


def test_scanned_group_pickles_with_its_skipped_list(tmp_path: Path) -> None:
    group = refzarr.scan(write_h5(tmp_path / "u.h5", _unsupported), on_unsupported="skip")
    copy = pickle.loads(pickle.dumps(group))
    assert copy == group
    assert copy.skipped == group.skipped


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(refzarr.SourceNotFoundError, match=r"nope\.h5"):
        refzarr.scan(str(tmp_path / "nope.h5"))


def test_fsspec_url_references_the_url_given(tmp_path: Path) -> None:
    path = write_h5(tmp_path / "c.h5", _chunked)
    memory = fsspec.filesystem("memory")
    memory.pipe("/scan-test/c.h5", path.read_bytes())
    try:
        remote = refzarr.scan("memory://scan-test/c.h5")
    finally:
        memory.rm("/scan-test", recursive=True)
    local = refzarr.scan(str(path))
    for name, arr in local.arrays():
        other = array(remote, name)
        assert other.manifest.paths == ("memory://scan-test/c.h5",)
        np.testing.assert_array_equal(other.manifest.offset, arr.manifest.offset)
        assert other.meta == arr.meta


def test_s3_url_with_storage_options(
    s3: tuple[str, dict[str, Any]], netcdf_file: Path, tmp_path: Path
) -> None:
    bucket, options = s3
    url = f"s3://{bucket}/data/file.nc"
    fsspec.filesystem("s3", **options).put_file(str(netcdf_file), url)
    remote = refzarr.scan(url, storage_options=options)
    local = refzarr.scan(netcdf_file)
    for name, arr in local.arrays():
        other = array(remote, name)
        assert other.manifest.paths in ((), (url,))
        np.testing.assert_array_equal(other.manifest.offset, arr.manifest.offset)
        assert other.meta == arr.meta
    assert remote.attributes == local.attributes


def test_fsspec_url_inlines_through_fsspec(tmp_path: Path) -> None:
    path = write_h5(tmp_path / "c.h5", _chunked)
    memory = fsspec.filesystem("memory")
    memory.pipe("/scan-inline/c.h5", path.read_bytes())
    try:
        remote = refzarr.scan("memory://scan-inline/c.h5", inline_threshold=10**6)
    finally:
        memory.rm("/scan-inline", recursive=True)
    local = refzarr.scan(path, inline_threshold=10**6)
    for name, arr in local.arrays():
        assert (arr.manifest.path_id == INLINED).all()
        assert array(remote, name).manifest == arr.manifest


def test_corrupt_file_is_a_scan_error(tmp_path: Path) -> None:
    path = write_h5(tmp_path / "c.h5", _chunked)
    truncated = tmp_path / "truncated.h5"
    truncated.write_bytes(path.read_bytes()[:600])
    with pytest.raises(refzarr.ScanError, match=r"truncated\.h5"):
        refzarr.scan(truncated)


def test_scanner_is_picklable_and_validates_options() -> None:
    scanner = Hdf5Scanner(inline_threshold=100, on_unsupported="skip")
    assert pickle.loads(pickle.dumps(scanner)) == scanner
    with pytest.raises(ValueError, match="on_unsupported"):
        Hdf5Scanner(on_unsupported="warn")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="inline_threshold"):
        Hdf5Scanner(inline_threshold=-1)


# -- attributes named like refzarr's records ----------------------------------------------------


@pytest.mark.parametrize("name", ["_nczarr_attr", "_nc_source_layout"])
def test_attribute_named_like_a_record_is_refused(name: str, tmp_path: Path) -> None:
    """A source attribute named like the key refzarr records attribute types (or a loaded
    coordinate's layout) under would be merged into or taken for that record: refused,
    naming file, object and attribute; skipping leaves it out and lists it."""
    path = tmp_path / "r.nc"
    with h5py.File(path, "w") as f:
        ds = f.create_dataset("v", data=np.arange(3, dtype="f4"))
        ds.attrs[name] = '{"types": {"units": "<f4"}}'
        ds.attrs["units"] = "m"
        ds.attrs["scale"] = np.float32(2)
        f.attrs[name] = "global"
        f.attrs["title"] = "t"
    expected = rf"r\.nc: dataset '/v': attribute '{name}': refzarr keeps its own records"
    with pytest.raises(UnsupportedFeatureError, match=expected):
        refzarr.scan(str(path))
    group = refzarr.scan(str(path), on_unsupported="skip")
    assert sorted(s.path for s in group.skipped) == [f"/@{name}", f"/v@{name}"]
    attrs = array(group, "v").meta.attributes
    assert dict(attrs) == {"units": "m", "scale": 2.0, "_nczarr_attr": {"types": {"scale": "<f4"}}}
    assert dict(group.attributes) == {"title": "t"}
    ds = refzarr.open_dataset(group)
    assert ds["v"].attrs == {"units": "m", "scale": np.float32(2)}


def test_stored_text_of_a_null_terminated_string_cut_at_a_nul(tmp_path: Path) -> None:
    """The bytes after a NUL of a scalar null-terminated string (h5py stops at the NUL,
    netCDF-C reads them): from the object header and, for objects read by h5py, from HDF5."""
    path = tmp_path / "t.h5"
    with h5py.File(path, "w") as f:
        ds = f.create_dataset("d", data=np.arange(2.0))
        tid = h5py.h5t.C_S1.copy()
        tid.set_size(6)
        tid.set_strpad(h5py.h5t.STR_NULLTERM)
        attr = h5py.h5a.create(ds.id, b"cut", tid, h5py.h5s.create(h5py.h5s.SCALAR))
        attr.write(np.array(b"ab\x00cd\x00", "S6"), mtype=tid)
        ds.attrs["whole"] = np.bytes_(b"abc")
    with h5py.File(path) as f:
        table = AttributeTable(f["d"])  # no header: HDF5 is asked
        assert table["cut"] == b"ab"
        assert table.stored_text("cut") == b"ab\x00cd\x00"
        assert table.stored_text("whole") is None
    group = refzarr.scan(str(path))  # the header parser keeps them
    assert array(group, "d").meta.attributes["cut"] == "abcd"
