"""netCDF3 files written by netCDF4-python (CDF-1, CDF-2, CDF-5) read back through the
references exactly as netCDF4-python reads them: every type, record and non-record variables,
zero records, streaming record counts, large variables cut into chunks, data beyond 4 GiB
(sparse files), inlined chunks, remote files, and files combined along the record dimension."""

from __future__ import annotations

import os
import pickle
import struct
from pathlib import Path

import fsspec
import netCDF4
import numpy as np
import pytest
import xarray as xr
import zarr
from nc3kit import (
    FORMATS,
    array,
    assert_decoded_matches,
    assert_group_matches,
    assert_raw_equal,
    assert_values_match,
    read_truth,
    write_nc,
)

import refzarr
from refzarr.scan.netcdf3 import NetCDF3Scanner

FASTPARQUET = pytest.mark.filterwarnings("ignore:The 'fastparquet' engine is deprecated")

CLASSIC_TYPES = ("i1", "S1", "i2", "i4", "f4", "f8")
CDF5_TYPES = ("u1", "u2", "u4", "i8", "u8")


def _every_type(fmt: str) -> object:
    def write(ds: netCDF4.Dataset) -> None:
        ds.title = "every type"
        ds.numbers = np.array([1, 2, 3], dtype="i2")
        ds.one_double = np.float64(0.1)
        ds.createDimension("time", None)
        ds.createDimension("x", 3)
        ds.createDimension("nchar", 4)
        types = CLASSIC_TYPES + (CDF5_TYPES if fmt == "NETCDF3_64BIT_DATA" else ())
        time = ds.createVariable("time", "f8", ("time",))
        time.units = "days since 2000-01-01"
        for k, code in enumerate(types):
            if code == "S1":
                var = ds.createVariable("text", "S1", ("time", "nchar"))
                var[:] = netCDF4.stringtochar(np.array(["ab", "cdef", "g", ""], "S4"))
                continue
            fill = np.array(7, dtype=code) if code not in ("f4", "f8") else np.array(-1.5, code)
            rec = ds.createVariable(f"rec_{code}", code, ("time", "x"), fill_value=fill)
            rec.valid_max = np.array(100, dtype=code)
            rec[:] = (np.arange(12).reshape(4, 3) + k).astype(code)
            fixed = ds.createVariable(f"fixed_{code}", code, ("x",))
            fixed[:] = np.array([1, 7, 3], dtype=code)
            fixed.missing_value = np.array(7, dtype=code)
        scalar = ds.createVariable("scalar", "i4", ())
        scalar[...] = 42
        packed = ds.createVariable("packed", "i2", ("time",))
        packed.scale_factor = np.float32(0.5)
        packed.add_offset = np.float64(10.0)
        packed[:] = np.array([1, 2, 3, 4], dtype="i2")
        unsigned = ds.createVariable("unsigned", "i1", ("x",))
        unsigned._Unsigned = "true"
        unsigned[:] = np.array([-1, 0, 127], dtype="i1")
        time[:] = np.arange(4.0)

    return write


@FASTPARQUET
@pytest.mark.parametrize("fmt", FORMATS)
def test_every_type_matches_netcdf4(fmt: str, tmp_path: Path) -> None:
    path = write_nc(tmp_path / "types.nc", _every_type(fmt), fmt)  # type: ignore[arg-type]
    group = refzarr.scan(path)
    truth = read_truth(path)
    assert_group_matches(group, truth, fmt)
    assert_values_match(group, truth, tmp_path, fmt)
    json_path = tmp_path / "types.json"
    refzarr.write(group, json_path)
    assert_decoded_matches(group, path, json_path)
    # one chunk per record (several record variables), the fill value from _FillValue
    rec = array(group, "rec_i2")
    assert rec.meta.chunks == (1, 3)
    assert rec.manifest.grid_shape == (4, 1)
    assert rec.meta.fill_value == 7
    assert rec.meta.dtype == np.dtype(">i2")
    stride = np.diff(rec.manifest.offset.ravel().astype(np.int64))
    assert len(set(stride.tolist())) == 1
    assert array(group, "fixed_i2").meta.fill_value is None  # missing_value only
    assert array(group, "text").meta.dtype == np.dtype("S1")


def test_cdf5_types_are_unsigned_and_64_bit(tmp_path: Path) -> None:
    path = write_nc(tmp_path / "cdf5.nc", _every_type("NETCDF3_64BIT_DATA"), "NETCDF3_64BIT_DATA")  # type: ignore[arg-type]
    group = refzarr.scan(path)
    dtypes = {name: array(group, f"rec_{name}").meta.dtype.str for name in CDF5_TYPES}
    assert dtypes == {"u1": "|u1", "u2": ">u2", "u4": ">u4", "i8": ">i8", "u8": ">u8"}


def _records(count: int, variables: int = 2) -> object:
    def write(ds: netCDF4.Dataset) -> None:
        ds.createDimension("time", None)
        ds.createDimension("x", 5)
        time = ds.createVariable("time", "f8", ("time",))
        lon = ds.createVariable("x", "f4", ("x",))
        lon[:] = np.linspace(0, 1, 5)
        for k in range(variables - 1):
            var = ds.createVariable(f"v{k}", "i2", ("time", "x"))
            if count:
                var[:] = np.arange(count * 5).reshape(count, 5) + k
        if count:
            time[:] = np.arange(count) * 0.5

    return write


@pytest.mark.parametrize("fmt", FORMATS)
def test_zero_records(fmt: str, tmp_path: Path) -> None:
    path = write_nc(tmp_path / "empty.nc", _records(0), fmt)  # type: ignore[arg-type]
    group = refzarr.scan(path)
    assert array(group, "v0").meta.shape == (0, 5)
    assert array(group, "time").meta.shape == (0,)
    truth = read_truth(path)
    assert_group_matches(group, truth, fmt)
    with refzarr.open_dataset(group) as ds, xr.open_dataset(path) as direct:
        xr.testing.assert_identical(ds.load(), direct.load())


def test_single_record_variable_is_coalesced(tmp_path: Path) -> None:
    path = write_nc(tmp_path / "one.nc", _records(7, variables=1))  # type: ignore[arg-type]
    group = refzarr.scan(path, inline_coordinates=0)
    time = array(group, "time")
    assert time.meta.chunks == (7,)
    assert time.manifest.grid_shape == (1,)
    assert int(time.manifest.length.ravel()[0]) == 7 * 8
    values = zarr.open_array(refzarr.ReferenceStore(group), path="time", mode="r")[...]
    assert_raw_equal(np.asarray(values), read_truth(path).variables["time"][1], "time")


@pytest.mark.parametrize("fmt", ["NETCDF3_CLASSIC", "NETCDF3_64BIT_DATA"])
@pytest.mark.parametrize("tail", [0, 5, 10])
def test_streaming_record_count(fmt: str, tail: int, tmp_path: Path) -> None:
    """All bits set in the record count: the count comes from the file's size (a partial
    last record whose data is all there counts). netCDF-C 4.10 takes the value literally, so
    the truth is the same file with the real count."""
    path = write_nc(tmp_path / "real.nc", _records(6), fmt)  # type: ignore[arg-type]
    data = bytearray(path.read_bytes())
    width = 8 if fmt == "NETCDF3_64BIT_DATA" else 4
    assert int.from_bytes(data[4 : 4 + width], "big") == 6
    data[4 : 4 + width] = b"\xff" * width
    streamed = tmp_path / "streamed.nc"
    recsize = 8 + 5 * 2 + 2  # time, then v0 (10 bytes padded to 12)
    streamed.write_bytes(bytes(data) + bytes(tail))
    group = refzarr.scan(streamed)
    expected = 6 + (tail >= recsize - 2)  # v0's data ends 2 bytes before the record does
    assert array(group, "v0").meta.shape == (expected, 5)
    if tail == 0:
        with refzarr.open_dataset(group) as ds, xr.open_dataset(path) as direct:
            xr.testing.assert_identical(ds.load(), direct.load())


@FASTPARQUET
@pytest.mark.parametrize("rows", [12, 13])
def test_large_variables_are_cut_along_the_first_axis(rows: int, tmp_path: Path) -> None:
    def write(ds: netCDF4.Dataset) -> None:
        ds.createDimension("y", rows)
        ds.createDimension("x", 10)
        ds.createDimension("t", None)
        for name in ("a", "b"):  # "b" is the last variable: its chunks may not run on
            ds.createVariable(name, "f8", ("y", "x"))[:] = np.random.default_rng(0).random(
                (rows, 10)
            )
        ds.createVariable("only", "i4", ("t", "x"))[:] = np.arange(rows * 10).reshape(rows, 10)

    path = write_nc(tmp_path / "big.nc", write, "NETCDF3_64BIT_OFFSET")
    group = NetCDF3Scanner(chunk_bytes=400)(str(path))
    for name in ("a", "b", "only"):
        meta = array(group, name).meta
        assert meta.chunks[1:] == (10,), name
        assert meta.chunks[0] < rows, (name, meta.chunks)
        ends = array(group, name).manifest.offset + array(group, name).manifest.length
        assert int(ends.max()) <= os.path.getsize(path)
    assert_values_match(group, read_truth(path), tmp_path, "chunked")


def test_inline_threshold_inlines_small_chunks(tmp_path: Path) -> None:
    path = write_nc(tmp_path / "small.nc", _every_type("NETCDF3_CLASSIC"))  # type: ignore[arg-type]
    group = refzarr.scan(path, inline_threshold=1000)
    assert all(not arr.manifest.paths for _, arr in group.arrays())
    values = zarr.open_group(refzarr.ReferenceStore(group), mode="r", zarr_format=2)
    for name, (_, expected, _) in read_truth(path).variables.items():
        got = values[name]
        assert isinstance(got, zarr.Array)
        assert_raw_equal(np.asarray(got[...]), expected, name)


def test_remote_file_through_fsspec(tmp_path: Path) -> None:
    path = write_nc(tmp_path / "local.nc", _records(4))  # type: ignore[arg-type]
    fs = fsspec.filesystem("memory")
    fs.pipe("/nc3/remote.nc", path.read_bytes())
    try:
        remote = refzarr.scan("memory://nc3/remote.nc")
        local = refzarr.scan(path)
        assert list(remote.members) == list(local.members)
        for name, arr in local.arrays():
            other = array(remote, name)
            assert other.meta == arr.meta
            if arr.manifest.paths:
                assert other.manifest.paths == ("memory://nc3/remote.nc",)
                assert (other.manifest.offset == arr.manifest.offset).all()
        with refzarr.open_dataset(remote) as ds, xr.open_dataset(path) as direct:
            xr.testing.assert_identical(ds.load(), direct.load())
    finally:
        fs.rm("/nc3", recursive=True)


def test_char_attribute_not_utf8_as_netcdf4_shows_it(tmp_path: Path) -> None:
    """Text attributes holding bytes that are not UTF-8 (Latin-1, a stray NUL) read as
    netCDF4-python and xarray show them: U+FFFD for each bad byte, NULs removed."""

    def write(ds: netCDF4.Dataset) -> None:
        ds.note = "caf\u00e9"
        ds.other = "zzzzz"
        ds.createDimension("x", 2)
        var = ds.createVariable("v", "i2", ("x",))
        var.comment = "ABCDEFGH"
        var[:] = [1, 2]

    path = write_nc(tmp_path / "latin.nc", write)
    data = (
        path.read_bytes().replace(b"zzzzz", b"caf\xe9!").replace(b"ABCDEFGH", b"AB\xff\xfeEF\x00H")
    )
    path.write_bytes(data)
    group = refzarr.scan(path)
    with netCDF4.Dataset(path) as ds:
        assert group.attributes["note"] == ds.note == "caf\u00e9"
        assert group.attributes["other"] == ds.other == "caf\ufffd!"
        assert (
            array(group, "v").meta.attributes["comment"] == ds["v"].comment == "AB\ufffd\ufffdEFH"
        )
    # the stored bytes are kept (never re-encoded in silence), as the HDF5 scanner keeps them
    assert group.attributes["_nczarr_attr"]["bytes"] == {"other": tuple(b"caf\xe9!")}
    kept = array(group, "v").meta.attributes["_nczarr_attr"]["bytes"]
    assert kept == {"comment": tuple(b"AB\xff\xfeEF\x00H")}
    assert_decoded_matches(group, path)


def _name(text: str) -> bytes:
    raw = text.encode()
    return struct.pack(">I", len(raw)) + raw + bytes(-len(raw) % 4)


def write_sparse_cdf2(path: Path, n: int) -> dict[str, int]:
    """A CDF-2 file of three float64 variables of ``n`` values and a record variable
    ``after(t, m)`` of 2 records after them, written by seeking past what is never written
    (a sparse file). netCDF-C writes every byte of such a file, so the header is built here,
    by the format specification; netCDF4-python is the truth reading it."""
    dims = [("n", n), ("t", 0), ("m", 3)]
    variables = [("huge0", (0,), 6), ("huge1", (0,), 6), ("huge2", (0,), 6), ("after", (1, 2), 4)]
    head = b"CDF\x02" + struct.pack(">I", 2)
    head += struct.pack(">II", 0x0A, len(dims)) + b"".join(
        _name(name) + struct.pack(">I", length) for name, length in dims
    )
    head += struct.pack(">II", 0, 0)  # no global attributes
    entries = []
    for name, dimids, code in variables:
        vsize = 8 * n if code == 6 else 12
        entry = _name(name) + struct.pack(f">I{len(dimids)}I", len(dimids), *dimids)
        entries.append((entry + struct.pack(">IIII", 0, 0, code, vsize), vsize))
    size = len(head) + 8 + sum(len(e) + 8 for e, _ in entries)
    begins, out = {}, head + struct.pack(">II", 0x0B, len(variables))
    at = size
    for (name, _, _), (entry, vsize) in zip(variables, entries, strict=True):
        begins[name] = at
        out += entry + struct.pack(">Q", at)
        at += vsize
    with open(path, "wb") as f:
        f.write(out)
        f.seek(begins["huge2"] + 8 * (n - 4))
        f.write(np.arange(4.0).astype(">f8").tobytes())
        f.seek(begins["after"])
        f.write(np.arange(6, dtype=">i4").tobytes())
    return begins


def test_data_beyond_8_gib_in_a_sparse_cdf2_file(tmp_path: Path) -> None:
    """Variables starting past 2**32 and past 8 GiB in a 64-bit offset file (9 GiB, sparse:
    almost nothing of it on disk)."""
    path = tmp_path / "sparse.nc"
    n = 3 * 2**27  # 3 GiB of float64 per variable
    begins = write_sparse_cdf2(path, n)
    if os.stat(path).st_blocks * 512 > 2**26:
        pytest.skip("the file system does not keep files sparse")
    group = refzarr.scan(path)
    assert begins["after"] > 8 * 2**30
    assert int(array(group, "after").manifest.offset.ravel()[0]) == begins["after"]
    assert int(array(group, "huge2").manifest.offset.ravel()[0]) == begins["huge2"] > 2**32
    assert array(group, "huge2").manifest.grid_shape == (48,)  # 64 MiB chunks
    store = zarr.open_group(refzarr.ReferenceStore(group), mode="r", zarr_format=2)
    with netCDF4.Dataset(path) as ds:
        assert [len(d) for d in ds.dimensions.values()] == [n, 2, 3]
        tail = np.asarray(store["huge2"][n - 4 :])  # type: ignore[index]
        assert_raw_equal(tail, ds["huge2"][n - 4 :].data, "huge2")
        after = np.asarray(store["after"][...])  # type: ignore[index]
        assert_raw_equal(after, ds["after"][...].data, "after")


def test_files_combine_along_the_record_dimension(tmp_path: Path) -> None:
    paths = []
    for k in range(3):

        def write(ds: netCDF4.Dataset, k: int = k) -> None:
            _records(4)(ds)  # type: ignore[operator]
            ds["time"][:] = np.arange(4) + 4 * k
            ds["time"].units = "days since 2000-01-01"
            ds["v0"][:] = np.arange(20).reshape(4, 5) + 100 * k

        paths.append(write_nc(tmp_path / f"part{k}.nc", write))
    groups = [refzarr.scan(p) for p in reversed(paths)]
    combined = refzarr.combine(groups, concat_dims="time")
    assert array(combined, "v0").meta.shape == (12, 5)
    parts = []
    for p in paths:  # one at a time: no dask threads around netCDF-C
        with xr.open_dataset(p) as part:
            parts.append(part.load())
    direct = xr.concat(parts, dim="time", data_vars="minimal", coords="minimal", join="exact")
    with refzarr.open_dataset(combined) as ds:
        xr.testing.assert_identical(ds.load(), direct)


def test_scanner_is_picklable_and_checks_its_options() -> None:
    scanner = NetCDF3Scanner(chunk_bytes=1000, inline_threshold=10)
    assert pickle.loads(pickle.dumps(scanner)) == scanner
    with pytest.raises(ValueError, match="chunk_bytes must be >= 1"):
        NetCDF3Scanner(chunk_bytes=0)
    with pytest.raises(TypeError, match="chunk_bytes must be an int"):
        NetCDF3Scanner(chunk_bytes=True)


def test_default_fill_values_are_not_masked_and_packing_keeps_float32(tmp_path: Path) -> None:
    """Without ``_FillValue``, values netCDF-C filled with its default fill (never written)
    are shown as xarray shows them reading the file (not masked), and a ``short`` packed with
    a ``float`` ``scale_factor`` decodes to float32 (issue 13, point 2)."""

    def write(ds: netCDF4.Dataset) -> None:
        ds.createDimension("time", None)
        ds.createDimension("x", 3)
        ds.set_fill_on()
        never = ds.createVariable("never", "f4", ("x",))  # never written: default fill
        never.units = "K"
        some = ds.createVariable("some", "i4", ("time", "x"))
        some[0] = [1, 2, 3]
        packed = ds.createVariable("packed", "i2", ("time", "x"))
        packed.scale_factor = np.float32(0.25)
        packed.add_offset = np.float32(1.0)
        packed[2] = [4, 5, 6]  # records 0 and 1 filled with the default short fill

    path = write_nc(tmp_path / "fills.nc", write)
    group = refzarr.scan(path)
    with xr.open_dataset(path) as direct, refzarr.open_dataset(group) as ours:
        assert float(direct["never"][0]) == pytest.approx(9.969209968386869e36)
        assert direct["packed"].dtype == np.float32
        xr.testing.assert_identical(ours.load(), direct.load())
        assert ours["packed"].dtype == np.float32
        assert not ours["some"].isnull().any()
    assert_decoded_matches(group, path)


@pytest.mark.parametrize("name", ["_nczarr_attr", "_nc_source_layout"])
def test_attribute_named_like_a_record_is_refused(name: str, tmp_path: Path) -> None:
    """A source attribute named like refzarr's attribute-types (or layout) record is refused,
    naming file, variable and attribute, not merged or overwritten in silence; skipping
    leaves it out and lists it (a global one too)."""

    def write(ds: netCDF4.Dataset) -> None:
        ds.createDimension("x", 2)
        v = ds.createVariable("v", "i2", ("x",))
        v.setncattr(name, "mine")
        v.scale_factor = np.float32(0.5)
        v[:] = [1, 2]
        ds.createVariable("w", "f8", ("x",))[:] = [3, 4]
        ds.setncattr(name, np.int16(1))
        ds.title = "t"

    path = write_nc(tmp_path / "r.nc", write)
    with pytest.raises(
        refzarr.UnsupportedFeatureError,
        match=rf"r\.nc: global attributes: attribute '{name}': refzarr keeps its own records",
    ):
        refzarr.scan(str(path))
    group = refzarr.scan(str(path), on_unsupported="skip")
    assert [s.path for s in group.skipped] == [f"/@{name}", f"/v@{name}"]
    assert "variable 'v': attribute" in group.skipped[1].reason
    v = array(group, "v").meta.attributes
    assert dict(v) == {
        "scale_factor": 0.5,
        "_nczarr_attr": {"types": {"scale_factor": "<f4"}, "netcdf": 3},
    }
    assert dict(group.attributes) == {"title": "t", "_nczarr_attr": {"types": {}, "netcdf": 3}}
    with xr.open_dataset(path, engine="netcdf4") as expected:
        got = refzarr.open_dataset(group)
        assert got.attrs == {"title": "t"}
        assert got["v"].attrs == {}
        assert type(got["v"].encoding["scale_factor"]) is np.float32
        for name in ("v", "w"):
            np.testing.assert_array_equal(got[name].values, expected[name].values, strict=True)
