"""refzarr's engine shows a netCDF4 file as ``engine="netcdf4"`` does (issue 13).

Decoded dtypes (float32 ``scale_factor`` -> float32), default fills never masked, the order
of variables, attributes and groups through JSON and Parquet, and consolidated metadata that
lists each group's members together (zarr-python issue 4226).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import h5py
import netCDF4
import numpy as np
import pytest
import xarray as xr
import zarr

import refzarr
from corpus import corpus_files
from refzarr import ArrayMeta, ChunkManifest, RefArray, RefGroup
from roundtrip import open_zarr_group, reference_options

FORMATS = ["json", "parquet"]


def _refs(nc: Path, tmp_path: Path, kind: str) -> Path:
    out = tmp_path / ("refs.json" if kind == "json" else "refs.parq")
    refzarr.write(refzarr.scan(str(nc)), out)
    return out


def _assert_same(refs: Path, nc: Path, **kwargs: Any) -> None:
    with (
        xr.open_dataset(refs, engine="refzarr", **kwargs) as got,
        xr.open_dataset(nc, engine="netcdf4", **kwargs) as expected,
    ):
        got.load()
        expected.load()
        xr.testing.assert_identical(got, expected)
        assert list(got.variables) == list(expected.variables)
        assert list(got.attrs) == list(expected.attrs)
        for name, var in expected.variables.items():
            assert got[name].dtype == var.dtype, name
            assert list(got[name].attrs) == list(var.attrs), name
            for key, value in var.attrs.items():
                assert np.asarray(got[name].attrs[key]).dtype == np.asarray(value).dtype, key


@pytest.fixture(scope="module")
def packed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("packed") / "packed.nc"
    with netCDF4.Dataset(path, "w") as ds:
        ds.createDimension("time", None)
        ds.createDimension("x", 4)
        ds.title = "packed"
        ds.count = np.int16(3)
        ds.ratio = np.float32(0.25)
        t = ds.createVariable("temp", "i2", ("time", "x"), fill_value=np.int16(-999))
        t.scale_factor = np.float32(0.5)
        t.add_offset = np.float32(10.0)
        t.valid_range = np.array([-100, 100], "i2")
        t[0:2, :] = np.arange(8).reshape(2, 4) * 0.5 + 10
        t[1, 1] = np.ma.masked
        s = ds.createVariable("scaled", "i2", ("x",))
        s.scale_factor = np.float32(0.1)
        s[:] = [1.0, 2.0, 3.0, 4.0]
        m = ds.createVariable("with_missing", "f4", ("x",))
        m.missing_value = np.float32(-1)
        m[:] = [1, -1, 3, 4]
        ds.createVariable("unwritten", "f8", ())
        ds.createVariable("partial", "f4", ("time", "x"))[0, :] = 1.0  # record 1 never written
        u = ds.createVariable("ubyte", "i1", ("x",), fill_value=np.int8(-1))
        u._Unsigned = "true"
        u[:] = np.array([1, 2, -1, 4], "i1")
        for name in ("zeta", "beta", "alpha"):  # not alphabetical
            ds.createVariable(name, "i4", ("x",))[:] = 1
    return path


@pytest.mark.parametrize("kind", FORMATS)
def test_decoded_like_netcdf4(packed: Path, tmp_path: Path, kind: str) -> None:
    refs = _refs(packed, tmp_path, kind)
    _assert_same(refs, packed)
    with xr.open_dataset(refs, engine="refzarr") as ds:
        assert ds["temp"].dtype == np.float32
        assert ds["scaled"].dtype == np.float32
        assert float(ds["unwritten"]) == pytest.approx(9.969209968386869e36)  # not masked
        assert float(ds["partial"][1, 0]) == pytest.approx(9.969209968386869e36)


@pytest.mark.parametrize("kind", FORMATS)
@pytest.mark.parametrize("options", [{"mask_and_scale": False}, {"decode_cf": False}])
def test_raw_like_netcdf4(packed: Path, tmp_path: Path, kind: str, options: dict) -> None:
    _assert_same(_refs(packed, tmp_path, kind), packed, **options)


def test_attribute_types_survive_write_and_read(packed: Path, tmp_path: Path) -> None:
    group = refzarr.scan(str(packed))
    temp = group["temp"]
    assert isinstance(temp, RefArray)
    types = temp.meta.attributes["_nczarr_attr"]["types"]
    assert dict(types) == {
        "scale_factor": "<f4",
        "add_offset": "<f4",
        "valid_range": "<i2",
        "_FillValue": "<i2",
    }
    for kind in FORMATS:
        again = refzarr.read(_refs(packed, tmp_path, kind))
        assert again == group, kind


@pytest.fixture(scope="module")
def nested(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("nested") / "nested.nc"
    with netCDF4.Dataset(path, "w") as ds:
        ds.createDimension("x", 2)
        for group_name in ("zgroup", "agroup"):
            g = ds.createGroup(group_name)
            g.b_attr = 1
            g.a_attr = np.float32(2)
            for name in ("second", "first"):
                g.createVariable(name, "f4", ("x",))[:] = [1, 2]
            g.createGroup("inner").createVariable("v", "i2", ("x",))[:] = [3, 4]
        ds.createVariable("top", "u1", ("x",))[:] = [5, 6]
    return path


@pytest.mark.parametrize("kind", FORMATS)
def test_group_and_member_order(nested: Path, tmp_path: Path, kind: str) -> None:
    refs = _refs(nested, tmp_path, kind)
    group = refzarr.read(refs)
    assert list(group.members) == ["zgroup", "agroup", "top"]  # creation order
    assert list(group["zgroup"].members) == ["second", "first", "inner"]  # type: ignore[union-attr]
    for sub in ("zgroup", "agroup", "zgroup/inner"):
        _assert_same_group(refs, nested, sub)
    tree = xr.open_datatree(refs, engine="refzarr")
    assert list(tree.children) == ["zgroup", "agroup"]


def _assert_same_group(refs: Path, nc: Path, group: str) -> None:
    with (
        xr.open_dataset(refs, engine="refzarr", group=group) as got,
        xr.open_dataset(nc, engine="netcdf4", group=group) as expected,
    ):
        xr.testing.assert_identical(got.load(), expected.load())
        assert list(got.variables) == list(expected.variables)
        assert list(got.attrs) == list(expected.attrs)


def _band(value: int) -> RefArray:
    meta = ArrayMeta(shape=(2,), chunks=(2,), dtype=np.dtype("u1"), dimension_names=("x",))
    manifest = ChunkManifest.from_arrays(
        [], np.array([-2]), np.array([0]), np.array([0]), inlined={(0,): bytes([value] * 2)}
    )
    return RefArray(meta, manifest)


def _tiff_like() -> RefGroup:
    """``overview_1`` beside ``series_1/overview_1`` (zarr-python issue 4226)."""
    overview = RefGroup({}, {"band_data": _band(1)})
    series = RefGroup(
        {}, {"band_data": _band(2), "overview_1": RefGroup({}, {"band_data": _band(3)})}
    )
    return RefGroup({}, {"band_data": _band(0), "overview_1": overview, "series_1": series})


def test_consolidated_metadata_lists_each_group_together(tmp_path: Path) -> None:
    group = _tiff_like()
    store = refzarr.ReferenceStore(group)
    root = zarr.open_consolidated(store, mode="r", zarr_format=2)
    assert root["series_1/overview_1/band_data"][:].tolist() == [3, 3]
    assert sorted(k for k, _ in root.members(max_depth=None)) == sorted(
        [
            "band_data",
            "overview_1",
            "overview_1/band_data",
            "series_1",
            "series_1/band_data",
            "series_1/overview_1",
            "series_1/overview_1/band_data",
        ]
    )
    keys = list(refzarr.to_kerchunk(group))
    metadata = [k for k in keys if k.rpartition("/")[2].startswith(".z")]
    assert metadata.index("series_1/.zgroup") < metadata.index("series_1/band_data/.zarray")
    assert metadata.index("series_1/band_data/.zarray") < metadata.index(
        "series_1/overview_1/.zgroup"
    )
    refzarr.write(group, tmp_path / "t.json")
    assert open_zarr_group(tmp_path / "t.json", "series_1/overview_1")["band_data"][:].tolist() == [
        3,
        3,
    ]


# -- every corpus netCDF4 file, every group ---------------------------------------------------


def _groups(nc: Path) -> list[str]:
    with netCDF4.Dataset(nc) as ds:
        found: list[str] = []
        todo = [ds]
        while todo:
            group = todo.pop(0)
            found.append(group.path)
            todo.extend(group.groups.values())
    return found


@pytest.mark.filterwarnings("ignore:Duplicate dimension names:UserWarning")  # both sides
@pytest.mark.parametrize("nc", corpus_files("netcdf4"), ids=lambda p: p.name)
def test_corpus_identical_through_refzarr(nc: Path, tmp_path: Path) -> None:
    """``xr.open_dataset(refs, engine="refzarr")`` equals ``xr.open_dataset(file)``, each group."""
    refs = tmp_path / "refs.json"
    refzarr.write(refzarr.scan(str(nc), on_unsupported="skip"), refs)
    for group in _groups(nc):
        where = None if group == "/" else group
        try:
            with xr.open_dataset(nc, engine="netcdf4", group=where) as opened:
                expected = opened.load()
        except (TypeError, ValueError) as exc:  # xarray cannot open it itself
            pytest.skip(f"xarray cannot open {nc.name}{group}: {exc}")
        with xr.open_dataset(refs, engine="refzarr", group=where) as got:
            got.load()
            expected = expected.drop_vars([v for v in expected.variables if v not in got])
            xr.testing.assert_identical(got, expected)
            assert list(got.variables) == list(expected.variables), group
            for name, var in expected.variables.items():
                assert got[name].dtype == var.dtype, f"{group}{name}"


# -- strings, enums, non-UTF-8 text, engine errors --------------------------------------------


@pytest.fixture(scope="module")
def typed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("typed") / "typed.nc"
    with netCDF4.Dataset(path, "w") as ds:
        ds.createDimension("x", 2)
        names = ds.createVariable("names", str, ("x",))
        names[0] = "ab"
        names[1] = "cde"
        kind = ds.createEnumType("u1", "cloud_t", {"clear": 0, "cloudy": 1})
        ds.createVariable("clouds", kind, ("x",), fill_value=255)[:] = [0, 1]
        ds.createVariable("v", "f4", ("x",))[:] = [1, 2]
        ds["v"].setncattr("raw", b"\xffab")
        ds.createGroup("sub").createVariable("w", "i2", ())
    return path


def test_strings_enums_and_text_like_netcdf4(typed: Path, tmp_path: Path) -> None:
    refs = _refs(typed, tmp_path, "json")
    _assert_same(refs, typed)
    with (
        xr.open_dataset(refs, engine="refzarr") as got,
        xr.open_dataset(typed, engine="netcdf4") as expected,
    ):
        assert got["names"].load().dtype == expected["names"].load().dtype
        assert got["clouds"].attrs == expected["clouds"].attrs  # no _hdf5_enum attribute
        assert got["clouds"].encoding["dtype"].metadata["enum"] == {"clear": 0, "cloudy": 1}
        assert got["v"].attrs["raw"] == expected["v"].attrs["raw"] == "\ufffdab"
        again = tmp_path / "again.nc"
        got.to_netcdf(again)  # an enum again, not an attribute netCDF4 refuses
    with netCDF4.Dataset(again) as ds:
        assert ds["clouds"].datatype.enum_dict == {"clear": 0, "cloudy": 1}


def test_missing_group_is_an_oserror(typed: Path, tmp_path: Path) -> None:
    refs = _refs(typed, tmp_path, "json")
    with pytest.raises(OSError, match="group not found: 'nope'"):
        xr.open_dataset(refs, engine="refzarr", group="nope")
    with pytest.raises(OSError, match="is an array, not a group"):
        xr.open_dataset(refs, engine="refzarr", group="v")
    with pytest.raises(OSError, match="group not found"):
        xr.open_dataset(typed, engine="netcdf4", group="nope")  # the contract we follow
    with xr.open_dataset(refs, engine="refzarr", group="/sub") as ds:
        assert list(ds.variables) == ["w"]


def test_drop_variables_and_chunks(packed: Path, tmp_path: Path) -> None:
    refs = _refs(packed, tmp_path, "json")
    with xr.open_dataset(refs, engine="refzarr", drop_variables=["temp"], chunks={}) as ds:
        assert "temp" not in ds
        assert ds["partial"].chunks is not None
        with xr.open_dataset(packed, engine="netcdf4", drop_variables=["temp"]) as nc:
            xr.testing.assert_identical(ds.load(), nc.load())


def test_scan_repr_is_short(packed: Path) -> None:
    text = repr(refzarr.scan(str(packed)))
    assert text.startswith("<ScannedGroup: 9 arrays, 0 groups>")
    assert "temp  (time: 2, x: 4)  int16" in text
    assert len(text) < 1200


def test_encoding_like_netcdf4(packed: Path, tmp_path: Path) -> None:
    """What ``to_netcdf`` needs to write the source's layout again (issue 13, point 7)."""
    path = tmp_path / "enc.nc"
    with netCDF4.Dataset(path, "w") as ds:
        ds.createDimension("t", None)
        ds.createDimension("y", 6)
        v = ds.createVariable(
            "v",
            "f8",
            ("t", "y"),
            zlib=True,
            complevel=4,
            shuffle=True,
            fletcher32=True,
            chunksizes=(2, 3),
        )
        v[0:4, :] = np.arange(24.0).reshape(4, 6)
    keys = ["zlib", "complevel", "shuffle", "fletcher32", "szip", "zstd", "bzip2", "blosc"]
    keys += ["chunksizes", "contiguous", "original_shape", "dtype"]
    with (
        xr.open_dataset(_refs(path, tmp_path, "json"), engine="refzarr") as got,
        xr.open_dataset(path, engine="netcdf4") as expected,
    ):
        assert got.encoding["unlimited_dims"] == expected.encoding["unlimited_dims"] == {"t"}
        assert {k: got["v"].encoding[k] for k in keys} == {
            k: expected["v"].encoding[k] for k in keys
        }
        assert got["v"].encoding["preferred_chunks"] == {"t": 2, "y": 3}
    with xr.open_dataset(_refs(packed, tmp_path, "parquet"), engine="refzarr") as ds:
        assert ds.encoding["unlimited_dims"] == {"time"}


@pytest.mark.filterwarnings("ignore:The 'fastparquet' engine is deprecated")
@pytest.mark.parametrize("kind", ["json", "parquet"])
def test_loaded_coordinate_keeps_source_encoding(tmp_path: Path, kind: str) -> None:
    """A coordinate loaded at scan time (one raw chunk in the references) still shows the
    source's chunking and filters, so ``to_netcdf`` writes them again; ``source`` names the
    data file of a referenced variable as the netCDF4 backend names the file."""
    path = tmp_path / "coord.nc"
    with netCDF4.Dataset(path, "w") as ds:
        ds.createDimension("time", None)
        time = ds.createVariable("time", "f8", ("time",), zlib=True, chunksizes=(4,))
        time.units = "days since 2000-01-01"
        time[:] = np.arange(10.0)
        ds.createVariable("v", "f4", ("time",), zlib=True, chunksizes=(5,))[:] = 1.0
    group = refzarr.scan(str(path))
    assert group["time"].manifest.inlined  # loaded: the check below is about that case
    keys = ["zlib", "complevel", "shuffle", "chunksizes", "contiguous", "original_shape"]
    out = tmp_path / ("refs.json" if kind == "json" else "refs.parq")
    refzarr.write(group, out)
    with (
        xr.open_dataset(out, engine="refzarr") as got,
        xr.open_dataset(path, engine="netcdf4") as expected,
    ):
        for name in ("time", "v"):
            assert {k: got[name].encoding[k] for k in keys} == {
                k: expected[name].encoding[k] for k in keys
            }, name
        assert got["time"].encoding["preferred_chunks"] == {"time": 4}
        assert "_nc_source_layout" not in got["time"].attrs
        assert got["v"].encoding["source"] == str(path)
        rewritten = tmp_path / "again.nc"
        got.to_netcdf(rewritten)
    with netCDF4.Dataset(rewritten) as again:
        assert again["time"].chunking() == [4]
        assert again["time"].filters()["zlib"]
    options = {"consolidated": False, "storage_options": reference_options(out)}
    with xr.open_dataset(
        "reference://", engine="zarr", backend_kwargs=options, decode_times=False
    ) as via_fsspec:
        assert "_nc_source_layout" not in via_fsspec["time"].attrs
        assert via_fsspec["time"].values.tolist() == list(range(10))


def test_auto_complex_like_netcdf4(tmp_path: Path) -> None:
    path = tmp_path / "complex.nc"
    xr.Dataset({"z": ("x", np.array([1 + 2j, 3 - 1j], "c8"))}).to_netcdf(
        path, engine="netcdf4", auto_complex=True
    )
    refs = _refs(path, tmp_path, "json")
    _assert_same(refs, path, auto_complex=True)
    with xr.open_dataset(refs, engine="refzarr") as got:  # netCDF4 shows the (r, i) compound
        assert got["z"].dtype == np.complex64


# -- netCDF3 and netCDF4 alike: numbers, unlimited dimensions, text with NUL ------------------

ALL_FORMATS = ["NETCDF4", "NETCDF4_CLASSIC", "NETCDF3_CLASSIC", "NETCDF3_64BIT_DATA"]


def _open_both(nc: Path, refs: Path, **kwargs: Any) -> tuple[xr.Dataset, xr.Dataset]:
    got = xr.open_dataset(refs, engine="refzarr", **kwargs).load()
    expected = xr.open_dataset(nc, engine="netcdf4", **kwargs).load()
    return got, expected


def _assert_attrs_exactly(got: dict[str, Any], expected: dict[str, Any], where: str) -> None:
    """Same names in order, same Python / numpy types, same values (arrays: dtype too)."""
    assert list(got) == list(expected), where
    for key, value in expected.items():
        mine = got[key]
        assert type(mine) is type(value), f"{where}@{key}: {mine!r} != {value!r}"
        if isinstance(value, np.ndarray):
            assert mine.dtype == value.dtype, f"{where}@{key}"
        np.testing.assert_array_equal(mine, value, strict=True, err_msg=f"{where}@{key}")


@pytest.fixture(scope="module", params=ALL_FORMATS)
def numbers(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Attributes of the types JSON keeps (int64 where the format has it, double, vectors of
    them), next to packing whose decoded dtype they decide."""
    fmt = request.param
    path = tmp_path_factory.mktemp("numbers") / f"{fmt}.nc"
    wide = fmt in ("NETCDF4", "NETCDF3_64BIT_DATA")
    with netCDF4.Dataset(path, "w", format=fmt) as ds:
        ds.createDimension("x", 3)
        ds.title = "numbers"
        ds.version = 2.5
        ds.bounds = np.array([1.5, 2.5])
        if wide:
            ds.count = np.int64(7)
            ds.counts = np.array([1, 2], "i8")
        p = ds.createVariable("packed", "i2", ("x",), fill_value=np.int16(-1))
        p.scale_factor = 0.5  # double: decodes to float64, as from the file
        p.add_offset = 1.0
        p.valid_range = np.array([-10.0, 10.0])
        p.comment = "text stays text"
        p[:] = [1.0, 2.0, 3.0]
        d = ds.createVariable("plain", "f8", ("x",), fill_value=-9.0)
        d.valid_min = 0.0
        d.missing_value = np.array([-9.0])
        d[:] = [0.5, -9.0, 2.0]
        if wide:
            n = ds.createVariable("ints", "i8", ("x",))
            n.flag_values = np.array([0, 1], "i8")
            n.one = np.int64(1)
            n[:] = [0, 1, 0]
    return path


@pytest.mark.parametrize("kind", FORMATS)
def test_json_native_numbers_are_numpy_like_netcdf4(
    numbers: Path, tmp_path: Path, kind: str
) -> None:
    """int64 / double attributes (no type recorded: JSON keeps it) come back as numpy values
    and arrays, as netCDF4-python gives them; CF decoding gives netCDF4's dtypes."""
    refs = _refs(numbers, tmp_path, kind)
    _assert_same(refs, numbers)
    for options in ({}, {"mask_and_scale": False}, {"decode_cf": False}):
        got, expected = _open_both(numbers, refs, **options)
        _assert_attrs_exactly(got.attrs, expected.attrs, f"{options} global")
        for name, var in expected.variables.items():
            assert got[name].dtype == var.dtype, (options, name)
            _assert_attrs_exactly(got[name].attrs, var.attrs, f"{options} {name}")
            encoding = {k: v for k, v in var.encoding.items() if k in ("_FillValue", "dtype")}
            assert {k: got[name].encoding.get(k) for k in encoding} == encoding, name
    got, _ = _open_both(numbers, refs)
    assert type(got.attrs["version"]) is np.float64
    assert got["packed"].dtype == np.float64  # a double scale_factor, as netCDF4 unpacks
    assert isinstance(got["packed"].attrs["comment"], str)


@pytest.mark.parametrize("fmt", ["NETCDF3_CLASSIC", "NETCDF3_64BIT_OFFSET", "NETCDF3_64BIT_DATA"])
def test_netcdf3_encoding_dtype_is_native_like_netcdf4(fmt: str, tmp_path: Path) -> None:
    """netCDF4-python names a netCDF3 variable's dtype in native order (``float32``, not the
    stored ``>f4``); a big-endian netCDF4 variable keeps ``>f4`` (both engines)."""
    path = tmp_path / "v.nc"
    with netCDF4.Dataset(path, "w", format=fmt) as ds:
        ds.createDimension("x", 2)
        ds.createDimension("n", 3)
        for code in ("i1", "i2", "i4", "f4", "f8", "S1"):
            ds.createVariable(f"v_{code}", code, ("x",) if code != "S1" else ("x", "n"))
    refs = _refs(path, tmp_path, "json")
    got, expected = _open_both(path, refs)
    for name, var in expected.variables.items():
        assert got[name].encoding["dtype"] == var.encoding["dtype"], name
        assert got[name].encoding["dtype"].isnative, name
    big = tmp_path / "big.nc"
    with netCDF4.Dataset(big, "w") as ds:
        ds.createDimension("x", 2)
        ds.createVariable("v", ">f4", ("x",), endian="big")[:] = [1, 2]
    got, expected = _open_both(big, _refs(big, tmp_path, "json"))
    assert got["v"].encoding["dtype"] == expected["v"].encoding["dtype"] == np.dtype(">f4")


@pytest.mark.parametrize("fmt", ALL_FORMATS)
@pytest.mark.parametrize("kind", FORMATS)
def test_unused_unlimited_dimension_like_netcdf4(fmt: str, kind: str, tmp_path: Path) -> None:
    """An unlimited dimension no variable uses is still in ``encoding["unlimited_dims"]``
    (``to_netcdf`` then warns as it does for the file opened with netCDF4); independent
    readers see no trace of where it is recorded."""
    path = tmp_path / "u.nc"
    with netCDF4.Dataset(path, "w", format=fmt) as ds:
        ds.createDimension("t", None)
        ds.createDimension("x", 2)
        ds.title = "unused"
        ds.createVariable("v", "f4", ("x",))[:] = [1, 2]
    refs = _refs(path, tmp_path, kind)
    got, expected = _open_both(path, refs)
    assert got.encoding["unlimited_dims"] == expected.encoding["unlimited_dims"] == {"t"}
    xr.testing.assert_identical(got, expected)
    if kind == "json":  # fsspec + zarr + xarray's Zarr engine: the record stays hidden
        options = {"consolidated": False, "storage_options": reference_options(refs)}
        with xr.open_dataset("reference://", engine="zarr", backend_kwargs=options) as zarr_view:
            assert dict(zarr_view.attrs) == {"title": "unused"}
            assert zarr_view["v"].values.tolist() == [1, 2]


def test_unused_unlimited_dimension_of_a_subgroup(tmp_path: Path) -> None:
    """Each group records its own unused unlimited dimensions."""
    path = tmp_path / "g.nc"
    with netCDF4.Dataset(path, "w") as ds:
        ds.createDimension("t", None)
        ds.createDimension("x", 2)
        ds.createVariable("v", "f4", ("x",))[:] = [1, 2]
        sub = ds.createGroup("sub")
        sub.createDimension("s", None)
        sub.createVariable("w", "f4", ("x",))[:] = [3, 4]
    refs = _refs(path, tmp_path, "json")
    for group in (None, "sub"):
        got = xr.open_dataset(refs, engine="refzarr", group=group)
        expected = xr.open_dataset(path, engine="netcdf4", group=group)
        assert got.encoding["unlimited_dims"] == expected.encoding["unlimited_dims"], group


def _nul_texts(ds: netCDF4.Dataset) -> None:
    ds.createDimension("x", 1)
    v = ds.createVariable("v", "f4", ("x",))
    v.inner = "ab\x00cd"  # NC_CHAR: netCDF4-python removes every NUL
    v.lead = "\x00ab"
    v.trail = "ab\x00\x00"
    v.only = "\x00"
    v.bad = b"\xff\x00a"  # not UTF-8 either
    v.fine = "no nul"
    ds.title = "x\x00y"
    if ds.data_model == "NETCDF4":
        v.setncattr_string("string", "ab\x00cd")  # NC_STRING: up to the NUL (a C string)
        v.setncattr_string("strings", ["ab\x00cd", "e"])


@pytest.mark.parametrize("fmt", ["NETCDF4", "NETCDF3_CLASSIC"])
def test_text_attributes_with_nul_like_netcdf4(fmt: str, tmp_path: Path) -> None:
    path = tmp_path / "nul.nc"
    with netCDF4.Dataset(path, "w", format=fmt) as ds:
        _nul_texts(ds)
    got, expected = _open_both(path, _refs(path, tmp_path, "json"))
    assert got["v"].attrs == expected["v"].attrs
    assert got.attrs == expected.attrs == {"title": "xy"}
    assert got["v"].attrs["inner"] == "abcd"
    assert got["v"].attrs["bad"] == "\ufffda"
    with netCDF4.Dataset(path) as ds:
        assert ds["v"].inner == "abcd"  # what this test stands on


def test_fixed_length_text_attributes_with_nul_of_hdf5_files(tmp_path: Path) -> None:
    """HDF5 fixed-length strings as netCDF-C reads them: a scalar whole with its NULs
    removed, whatever its padding; the strings of an array each up to its first NUL."""
    path = tmp_path / "fixed.h5"
    with h5py.File(path, "w") as f:
        d = f.create_dataset("d", data=np.arange(2.0))
        d.attrs["nullpad"] = np.bytes_(b"ab\x00cd")
        d.attrs["strings"] = np.array([b"ab", b"c\x00d"])
        d.attrs["one"] = np.array([b"ab\x00cd"])
        for name, shape in (("nullterm", None), ("nullterms", (2,))):
            tid = h5py.h5t.C_S1.copy()
            tid.set_size(3 if shape else 6)
            tid.set_strpad(h5py.h5t.STR_NULLTERM)
            space = h5py.h5s.create_simple(shape) if shape else h5py.h5s.create(h5py.h5s.SCALAR)
            attr = h5py.h5a.create(d.id, name.encode(), tid, space)
            data = [b"a\x00b", b"cd\x00"] if shape else b"ab\x00cd\x00"
            attr.write(np.array(data, f"S{tid.get_size()}"), mtype=tid)
    assert h5py.File(path)["d"].attrs["nullterm"] == b"ab"  # h5py stops at the NUL
    got, expected = _open_both(path, _refs(path, tmp_path, "json"))
    assert got["d"].attrs == expected["d"].attrs
    assert got["d"].attrs["nullterm"] == "abcd"
    assert got["d"].attrs["strings"] == ["ab", "c"]
