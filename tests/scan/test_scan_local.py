"""`refzarr.scan` of a plain local path opens the file once (detection, the scanner's
``scan_opened``, the record of sources share it) and gives what the forced format gives:
the same group, the same record of sources, the same errors."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import netCDF4
import numpy as np
import pytest

import refzarr
from refzarr.errors import ScanError, SourceNotFoundError
from refzarr.scan.netcdf3 import NetCDF3Scanner
from refzarr.sources.record import read_record


def _nc3(path: Path, records: int = 2) -> Path:
    with netCDF4.Dataset(path, "w", format="NETCDF3_CLASSIC") as ds:
        ds.title = "small"
        ds.createDimension("time", None)
        ds.createDimension("x", 3)
        t = ds.createVariable("time", "f8", ("time",))
        x = ds.createVariable("x", "f4", ("x",))
        v = ds.createVariable("v", "i2", ("time", "x"), fill_value=-1)
        x[:] = [1, 2, 3]
        t[:] = np.arange(records)
        v[:] = np.arange(3 * records).reshape(records, 3)
    return path


def _same(a: refzarr.RefGroup, b: refzarr.RefGroup) -> None:
    assert a == b
    assert a.sources == b.sources
    assert [(s.url, s.format, dict(s.options), dict(s.files)) for s in read_record(a)] == [
        (s.url, s.format, dict(s.options), dict(s.files)) for s in read_record(b)
    ]


@pytest.mark.parametrize("options", [{}, {"inline_threshold": 100}, {"chunk_bytes": 8}])
def test_detected_scan_equals_the_forced_one(tmp_path: Path, options: dict[str, Any]) -> None:
    path = _nc3(tmp_path / "a.nc")
    detected = refzarr.scan(path, **options)
    _same(detected, refzarr.scan(path, format="netcdf3", **options))
    assert detected == NetCDF3Scanner(**options)(str(path))
    assert detected.sources is not None
    assert str(path) in detected.sources["scans"][0]["files"]


def test_relative_and_dotted_paths_record_as_before(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _nc3(tmp_path / "a.nc")
    (tmp_path / "sub").mkdir()
    monkeypatch.chdir(tmp_path / "sub")
    for name in ("../a.nc", "./../a.nc", str(tmp_path / "sub" / ".." / "a.nc")):
        _same(refzarr.scan(name), refzarr.scan(name, format="netcdf3"))
    monkeypatch.chdir(tmp_path)
    _same(refzarr.scan("a.nc"), refzarr.scan("a.nc", format="netcdf3"))


def test_the_file_is_opened_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = _nc3(tmp_path / "a.nc")
    opened: list[str] = []
    real_open = os.open

    def counting_open(name: Any, *args: Any, **kwargs: Any) -> int:
        opened.append(os.fspath(name))
        return real_open(name, *args, **kwargs)

    monkeypatch.setattr(os, "open", counting_open)
    refzarr.scan(str(path))
    assert opened == [str(path)]


def test_errors_are_those_of_detection(tmp_path: Path) -> None:
    with pytest.raises(SourceNotFoundError, match="no such file or directory"):
        refzarr.scan(tmp_path / "missing.nc")
    empty = tmp_path / "empty.nc"
    empty.write_bytes(b"")
    with pytest.raises(ScanError, match="the file is empty"):
        refzarr.scan(empty)
    truncated = tmp_path / "cut.nc"
    truncated.write_bytes(_nc3(tmp_path / "whole.nc", records=50).read_bytes()[:200])
    with pytest.raises(ScanError) as detected:
        refzarr.scan(truncated)
    with pytest.raises(ScanError) as forced:
        refzarr.scan(truncated, format="netcdf3")
    assert str(detected.value) == str(forced.value)


def test_a_format_without_scan_opened_is_scanned_by_path(tmp_path: Path) -> None:
    import h5py

    path = tmp_path / "a.h5"
    with h5py.File(path, "w") as f:
        f["v"] = np.arange(4)
    _same(refzarr.scan(path), refzarr.scan(path, format="hdf5"))


def test_pipes_sockets_and_unreadable_paths_are_said_as_before(tmp_path: Path) -> None:
    import socket

    fifo = tmp_path / "pipe.nc"
    os.mkfifo(fifo)
    with pytest.raises(ScanError, match="not a regular file"):
        refzarr.scan(fifo)  # opened without waiting for a writer, never read
    sock_path = tmp_path / "s.nc"
    with socket.socket(socket.AF_UNIX) as sock:
        sock.bind(str(sock_path))
        with pytest.raises(ScanError, match="not a regular file"):
            refzarr.scan(sock_path)
    with pytest.raises(ScanError, match="no store refzarr scans"):
        refzarr.scan(tmp_path)  # a directory that is no Zarr store
    with pytest.raises(NotADirectoryError):
        refzarr.scan(str(_nc3(tmp_path / "a.nc")) + "/")
