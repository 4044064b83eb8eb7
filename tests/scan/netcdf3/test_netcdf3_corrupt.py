"""Damaged and truncated netCDF3 files raise `ScanError` naming the file and what is wrong,
quickly, without large allocations, and never give references outside the file."""

from __future__ import annotations

import struct
from pathlib import Path

import netCDF4
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from nc3kit import write_nc

import refzarr
from refzarr import ScanError, UnsupportedFeatureError
from refzarr.errors import SourceNotFoundError
from refzarr.scan.netcdf3.header import _parse_quickly, _Parser, _Unsure, parse_header


def _write(ds: netCDF4.Dataset) -> None:
    ds.title = "damaged"
    ds.createDimension("time", None)
    ds.createDimension("x", 4)
    ds.createVariable("x", "f4", ("x",))[:] = np.arange(4.0)
    var = ds.createVariable("v", "i2", ("time", "x"))
    var.units = "K"
    var[:] = np.arange(12).reshape(3, 4)
    ds.createVariable("w", "f8", ("time",))[:] = np.arange(3.0)


def _fixed_only(ds: netCDF4.Dataset) -> None:
    ds.createDimension("x", 4)
    ds.createVariable("x", "f4", ("x",))[:] = np.arange(4.0)


@pytest.fixture(scope="module")
def good(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    path = write_nc(tmp_path_factory.mktemp("nc3") / "good.nc", _write)
    return path.read_bytes()


@pytest.fixture(scope="module")
def header_size(good: bytes) -> int:
    return parse_header(good, len(good), "good").size


def _scan(tmp_path: Path, data: bytes) -> refzarr.RefGroup:
    path = tmp_path / "bad.nc"
    path.write_bytes(data)
    return refzarr.scan(path, format="netcdf3")


def _patched(data: bytes, old: bytes, new: bytes) -> bytes:
    assert data.count(old) == 1, old
    return data.replace(old, new)


def test_bad_magic(tmp_path: Path, good: bytes) -> None:
    with pytest.raises(ScanError, match=r"bad\.nc: not a netCDF3 file"):
        _scan(tmp_path, b"XDF" + good[3:])


def test_unknown_version(tmp_path: Path, good: bytes) -> None:
    with pytest.raises(ScanError, match=r"bad\.nc: unknown netCDF3 format version 3"):
        _scan(tmp_path, b"CDF\x03" + good[4:])


def test_unknown_version_is_detected_as_netcdf3(tmp_path: Path, good: bytes) -> None:
    path = tmp_path / "v9.nc"
    path.write_bytes(b"CDF\x09" + good[4:])
    with pytest.raises(ScanError, match="unknown netCDF3 format version 9"):
        refzarr.scan(path)


def test_empty_and_missing_files(tmp_path: Path) -> None:
    with pytest.raises(ScanError, match="empty"):
        _scan(tmp_path, b"")
    with pytest.raises(SourceNotFoundError, match=r"nowhere\.nc"):
        refzarr.scan(tmp_path / "nowhere.nc", format="netcdf3")


def test_every_truncated_header(tmp_path: Path, good: bytes, header_size: int) -> None:
    for cut in range(4, header_size):
        with pytest.raises(ScanError, match=r"bad\.nc: the header is (truncated or )?damaged"):
            _scan(tmp_path, good[:cut])


def test_truncated_data(tmp_path: Path, good: bytes, header_size: int) -> None:
    with pytest.raises(ScanError, match=r"holds only 0: it is truncated"):
        _scan(tmp_path, good[: header_size + 8])
    one_var = write_nc(tmp_path / "fixed.nc", lambda ds: _fixed_only(ds)).read_bytes()
    with pytest.raises(ScanError, match=r"variable 'x' needs bytes .* beyond the file's end"):
        _scan(tmp_path, one_var[:-4])


def test_record_count_larger_than_the_file_holds(tmp_path: Path, good: bytes) -> None:
    data = good[:4] + struct.pack(">I", 1000) + good[8:]
    with pytest.raises(ScanError, match=r"says 1000 records .* holds only 3"):
        _scan(tmp_path, data)
    with pytest.raises(ScanError, match=r"holds only 2"):
        _scan(tmp_path, good[:-4])  # the last record cut short


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        # the dimension list's count
        (b"\x00\x00\x00\x0a\x00\x00\x00\x02", b"\x00\x00\x00\x0a\x7f\xff\xff\xff", "number of"),
        # a name length
        (b"\x00\x00\x00\x05title", b"\x7f\xff\xff\xf0title", "name length"),
        # the number of values of an attribute
        (b"\x00\x00\x00\x02\x00\x00\x00\x01K", b"\x00\x00\x00\x02\x7f\xff\xff\xffK", "values of"),
        # a list tag
        (b"\x00\x00\x00\x0b\x00\x00\x00\x03", b"\x00\x00\x00\x0d\x00\x00\x00\x03", "variable list"),
    ],
)
def test_absurd_counts_fail_fast(
    tmp_path: Path, good: bytes, old: bytes, new: bytes, message: str
) -> None:
    with pytest.raises(ScanError, match=message):
        _scan(tmp_path, _patched(good, old, new))


def _variable_entry(data: bytes, name: bytes) -> int:
    """Where variable ``name``'s type code starts (after its name, dims and attributes)."""
    at = data.index(struct.pack(">I", len(name)) + name + bytes(-len(name) % 4), 32)
    return at


def test_bad_type_code(tmp_path: Path, good: bytes) -> None:
    # the float variable x: name, 1 dim (id 1), no attributes, then its type (5)
    entry = b"\x00\x00\x00\x01x\x00\x00\x00\x00\x00\x00\x01\x00\x00\x00\x01"
    entry += b"\x00\x00\x00\x00\x00\x00\x00\x00"
    data = _patched(good, entry + b"\x00\x00\x00\x05", entry + b"\x00\x00\x00\x0a")
    with pytest.raises(ScanError, match=r"has int64 .* not a netCDF type of a version 1 file"):
        _scan(tmp_path, data)


def test_dimension_id_out_of_range(tmp_path: Path, good: bytes) -> None:
    entry = b"\x00\x00\x00\x01x\x00\x00\x00\x00\x00\x00\x01"
    data = _patched(good, entry + b"\x00\x00\x00\x01", entry + b"\x00\x00\x00\x07")
    with pytest.raises(ScanError, match="names dimension id 7, but the file has 2 dimensions"):
        _scan(tmp_path, data)


def test_data_offset_beyond_the_file(tmp_path: Path, good: bytes) -> None:
    entry = b"\x00\x00\x00\x01x\x00\x00\x00\x00\x00\x00\x01\x00\x00\x00\x01" + bytes(8)
    at = good.index(entry) + len(entry) + 8  # past the type and vsize: the begin offset
    data = good[:at] + struct.pack(">I", 2**31) + good[at + 4 :]
    with pytest.raises(
        ScanError, match=r"inside the last non-record variable 'x' \(bytes 2147483648"
    ):
        _scan(tmp_path, data)


def test_data_offset_inside_the_header(tmp_path: Path, good: bytes) -> None:
    entry = b"\x00\x00\x00\x01x\x00\x00\x00\x00\x00\x00\x01\x00\x00\x00\x01" + bytes(8)
    at = good.index(entry) + len(entry) + 8
    data = good[:at] + struct.pack(">I", 8) + good[at + 4 :]
    with pytest.raises(ScanError, match="starts at byte 8, inside the header"):
        _scan(tmp_path, data)


@settings(
    max_examples=100,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(data=st.data())
def test_any_damage_fails_cleanly_or_stays_inside_the_file(
    tmp_path: Path, good: bytes, header_size: int, data: st.DataObject
) -> None:
    """Random bytes over the header: a ScanError, or references that all lie in the file."""
    at = data.draw(st.integers(4, header_size - 1), label="at")
    junk = data.draw(st.binary(min_size=1, max_size=8), label="junk")
    damaged = good[:at] + junk + good[at + len(junk) :]
    damaged = damaged[: len(good)] if len(damaged) > len(good) else damaged
    try:
        group = _scan(tmp_path, damaged)
    except ScanError as exc:
        message = str(exc)
        assert "bad.nc" in message
        return
    for name, arr in group.arrays():
        present = arr.manifest.path_id.ravel() >= 0
        ends = (arr.manifest.offset + arr.manifest.length).ravel()[present]
        assert (ends <= len(damaged)).all(), name


def test_a_name_zarr_cannot_hold_is_unsupported_or_skipped(tmp_path: Path) -> None:
    def write(ds: netCDF4.Dataset) -> None:
        ds.createDimension("x", 2)
        ds.createVariable("zarr.json", "i4", ("x",))[:] = [1, 2]
        ds.createVariable("fine", "i4", ("x",))[:] = [3, 4]

    path = write_nc(tmp_path / "names.nc", write)
    with pytest.raises(UnsupportedFeatureError, match=r"names\.nc: variable 'zarr\.json'"):
        refzarr.scan(path)
    group = refzarr.scan(path, on_unsupported="skip")
    assert list(group.members) == ["fine"]
    assert [s.path for s in group.skipped] == ["/zarr.json"]


@settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(data=st.data())
def test_the_quick_parser_agrees_with_the_careful_one(
    good: bytes, header_size: int, data: st.DataObject
) -> None:
    """Over damaged headers (and cut ones), the one-pass parser gives what the careful parser
    gives, or leaves the header to it (which then finds the damage or reads more)."""
    at = data.draw(st.integers(4, header_size - 1), label="at")
    junk = data.draw(st.binary(min_size=1, max_size=8), label="junk")
    damaged = (good[:at] + junk + good[at + len(junk) :])[: len(good)]
    given_bytes = damaged[: data.draw(st.integers(4, len(damaged)), label="given")]
    try:
        quick = _parse_quickly(given_bytes, damaged[3])
    except (_Unsure, struct.error, ValueError, KeyError, OverflowError):
        return
    careful = _Parser(given_bytes, len(damaged), "bad.nc", damaged[3]).header()
    assert repr(quick) == repr(careful)  # NaN attributes compare unequal
