"""The scanner layer every format shares: the registry, detection from first bytes (never the
name), forced formats, option checks, missing optional libraries, picklable scanners."""

from __future__ import annotations

import pickle
from collections.abc import Iterator
from pathlib import Path

import h5py
import numpy as np
import pytest

import refzarr
from refzarr.errors import MissingDependencyError, ScanError
from refzarr.scan import Scanner, make_scanner
from refzarr.scan.base import Probe, ScanFormat, ScanOptions, register, registered_formats
from refzarr.scan.detect import describe_head, detect_format
from refzarr.scan.hdf5 import Hdf5Scanner


def _h5(path: Path) -> Path:
    with h5py.File(path, "w") as f:
        f["v"] = np.arange(6, dtype="<i4")
    return path


def _is_toy(probe: Probe) -> bool:
    return probe.head.startswith(b"TOYFMT")


@pytest.fixture
def toy_format() -> Iterator[ScanFormat]:
    """A format registered for one test, whose library is not installed."""
    toy = ScanFormat(
        name="toy",
        title="Toy format",
        detect=_is_toy,
        scanner="refzarr.scan.hdf5.scanner:Hdf5Scanner",
        extra="toy",
        requires=("refzarr_no_such_module",),
    )
    register(toy)
    yield toy
    from refzarr.scan import base

    del base._REGISTRY["toy"]


def test_hdf5_is_detected_from_bytes_whatever_the_name(tmp_path: Path) -> None:
    path = _h5(tmp_path / "data.tif")
    assert detect_format(str(path)).name == "hdf5"
    assert refzarr.scan(path) == refzarr.scan(path, format="hdf5")


def test_an_unknown_format_lists_formats_and_first_bytes(tmp_path: Path) -> None:
    path = tmp_path / "x.h5"
    path.write_bytes(b"\x00\x01binary junk" * 10)
    names = ", ".join(f"{f.name} ({f.title})" for f in registered_formats())
    with pytest.raises(ScanError) as raised:
        refzarr.scan(path)
    message = str(raised.value)
    assert str(path) in message
    assert describe_head(path.read_bytes()) in message
    assert names in message
    assert "format=" in message


def test_empty_file_and_plain_directory_are_named(tmp_path: Path) -> None:
    (tmp_path / "empty.nc").write_bytes(b"")
    with pytest.raises(ScanError, match=r"empty\.nc: the file is empty"):
        refzarr.scan(tmp_path / "empty.nc")
    folder = tmp_path / "folder"
    folder.mkdir()
    (folder / "a.txt").write_text("x")
    with pytest.raises(ScanError, match=r"folder: a directory that is no store"):
        refzarr.scan(folder)


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(refzarr.SourceNotFoundError, match=r"nope\.nc: no such file"):
        refzarr.scan(tmp_path / "nope.nc")


def test_unknown_format_name_lists_the_names() -> None:
    with pytest.raises(ValueError, match=r"unknown format 'netcdf9'.*hdf5"):
        refzarr.scan("whatever.nc", format="netcdf9")


def test_missing_library_names_the_extra(tmp_path: Path, toy_format: ScanFormat) -> None:
    path = tmp_path / "t.toy"
    path.write_bytes(b"TOYFMT" + bytes(20))
    assert detect_format(str(path)) == toy_format
    with pytest.raises(MissingDependencyError, match=r"pip install 'refzarr\[toy\]'"):
        refzarr.scan(path)
    assert isinstance(MissingDependencyError("x"), ImportError)


def test_options_are_checked_against_the_format(tmp_path: Path) -> None:
    path = _h5(tmp_path / "a.h5")
    with pytest.raises(TypeError, match=r"unknown scan options \['bogus'\]"):
        refzarr.scan(path, bogus=1)
    with pytest.raises(TypeError, match=r"unknown scan options \['bogus'\] for HDF5"):
        refzarr.scan(path, format="hdf5", bogus=1)
    with pytest.raises(ValueError, match=r"on_unsupported must be"):
        refzarr.scan(path, on_unsupported="warn")
    with pytest.raises(TypeError, match=r"storage_options must be a mapping"):
        ScanOptions(storage_options=3)  # type: ignore[arg-type]


def test_scanners_are_configured_picklable_callables(tmp_path: Path) -> None:
    path = _h5(tmp_path / "a.h5")
    scanner = make_scanner(path, inline_threshold=10)
    assert isinstance(scanner, Scanner)
    assert isinstance(scanner, Hdf5Scanner)
    again = pickle.loads(pickle.dumps(scanner))
    assert again == scanner
    assert again(str(path)) == refzarr.scan(path, inline_threshold=10)
    assert make_scanner(format="hdf5") == Hdf5Scanner()


def test_scan_many_checks_options_before_scanning(tmp_path: Path) -> None:
    paths = [_h5(tmp_path / f"{i}.h5") for i in range(2)]
    with pytest.raises(TypeError, match=r"unknown scan options \['bogus'\]"):
        refzarr.scan_many(paths, executor="serial", bogus=1)
    with pytest.raises(ValueError, match=r"contiguous_chunk_bytes"):
        refzarr.scan_many(paths, executor="serial", contiguous_chunk_bytes=-5)
    results = refzarr.scan_many(paths, executor="serial", format="hdf5")
    assert list(results) == [refzarr.scan(p) for p in paths]


def test_declared_options_are_the_scanner_fields() -> None:
    """`ScanFormat.options` (checked without importing a library) match the scanner class."""
    import dataclasses

    for scan_format in registered_formats():
        try:
            cls = scan_format.scanner_class()
        except MissingDependencyError:
            continue
        fields = {f.name for f in dataclasses.fields(cls)}
        assert scan_format.option_names() == fields, scan_format.name


def test_scanning_hdf5_imports_no_other_format_library(tmp_path: Path) -> None:
    import subprocess
    import sys

    path = _h5(tmp_path / "a.h5")
    code = (
        "import sys, refzarr; refzarr.scan(sys.argv[1]); "
        "print(sorted(m for m in ('tifffile', 'eccodes', 'astropy', 'pyhdf') if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, str(path)], capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "[]"


def test_a_fifo_or_unreadable_file_is_named_not_waited_on(tmp_path: Path) -> None:
    import os

    fifo = tmp_path / "pipe.nc"
    os.mkfifo(fifo)
    with pytest.raises(ScanError, match=r"pipe\.nc: not a regular file"):
        refzarr.scan(fifo)
    if os.geteuid() != 0:  # root reads every file
        locked = _h5(tmp_path / "locked.h5")
        locked.chmod(0)
        with pytest.raises(ScanError, match=r"locked\.h5: cannot read it: permission denied"):
            refzarr.scan(locked)
