"""Bad HDF4 input: truncated files, DD blocks past the end or looping, unknown compression,
damaged bytes. Every failure is a ScanError or UnsupportedFeatureError naming the file."""

from __future__ import annotations

import contextlib
import shutil
import struct
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import refzarr
from corpus import CORPUS
from refzarr.errors import RefzarrError, ScanError, UnsupportedFeatureError
from refzarr.scan.hdf4.dd import read_dd_table
from refzarr.scan.hdf4.source import open_source

SMALL = CORPUS / "hdf4" / "sds_compressed.hdf"
pytestmark = pytest.mark.skipif(not SMALL.exists(), reason="corpus absent")


def _copy(tmp_path: Path, data: bytes, name: str = "bad.hdf") -> Path:
    path = tmp_path / name
    path.write_bytes(data)
    return path


@pytest.mark.parametrize("cut", [2, 5, 10, 200, 1000, 2000, 3943])
def test_truncated(tmp_path: Path, cut: int) -> None:
    data = SMALL.read_bytes()
    path = _copy(tmp_path, data[:cut])
    with pytest.raises(ScanError, match=str(path)):
        refzarr.scan(path, format="hdf4")


def test_dd_block_loop(tmp_path: Path) -> None:
    data = bytearray(SMALL.read_bytes())
    data[6:10] = struct.pack(">i", 4)  # the first block's "next" points back at itself
    path = _copy(tmp_path, bytes(data))
    with pytest.raises(ScanError, match="loops back"):
        refzarr.scan(path)


def test_dd_past_end(tmp_path: Path) -> None:
    data = bytearray(SMALL.read_bytes())
    first = 10  # first descriptor of the first block
    for k in range(int.from_bytes(data[4:6], "big")):
        at = first + 12 * k
        if int.from_bytes(data[at : at + 2], "big") not in (1, 0):
            data[at + 4 : at + 8] = struct.pack(">i", len(data) + 100)
            break
    path = _copy(tmp_path, bytes(data))
    with pytest.raises(ScanError, match="past the file's end"):
        refzarr.scan(path)


def _coder_offset(path: Path, name: str) -> int:
    """Byte offset of the coder field of the deflate SDS ``name``'s compression header."""
    group = refzarr.scan(path)
    assert name in group
    with open_source(str(path), None) as source:
        table = read_dd_table(source)
        for dd in table.order:
            if dd.special and dd.tag & 0x3FFF == 702:
                header = source.read_range(dd.offset, dd.length, "header")
                kind = int.from_bytes(header[:2], "big")
                if kind == 3:  # compressed: type, version, length, ref, model, coder
                    coder_at = dd.offset + 2 + 8 + 2
                elif kind == 5:  # chunked: its header, then the compression header
                    length = int.from_bytes(header[2:6], "big")
                    coder_at = dd.offset + 6 + length + 6 + 2
                else:
                    continue
                coder = int.from_bytes(source.read_range(coder_at, 2, "coder"), "big")
                if coder == 4:  # the deflate SDS
                    return coder_at
    raise AssertionError("no chunked deflate SDS found")


def test_unknown_compression(tmp_path: Path) -> None:
    path = _copy(tmp_path, SMALL.read_bytes())
    at = _coder_offset(path, "SDSgzip")
    data = bytearray(path.read_bytes())
    data[at : at + 2] = struct.pack(">H", 9)
    path.write_bytes(bytes(data))
    with pytest.raises(UnsupportedFeatureError, match=r"SDSgzip.*unknown compression \(code 9\)"):
        refzarr.scan(path)
    skipped = refzarr.scan(path, on_unsupported="skip")
    assert "SDSgzip" not in skipped
    assert [s.path for s in skipped.skipped] == ["/SDSgzip"]
    np.testing.assert_array_equal(np.asarray(skipped["SDSskiphuff"].shape), np.asarray((16, 5)))


def test_not_hdf4(tmp_path: Path) -> None:
    path = _copy(tmp_path, b"\x89HDF\r\n\x1a\n" + bytes(100))
    with pytest.raises(ScanError, match="no HDF4 magic"):
        refzarr.scan(path, format="hdf4")


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(flips=st.lists(st.tuples(st.integers(0, 3944), st.integers(1, 255)), min_size=1, max_size=4))
def test_damaged_bytes_fail_cleanly(tmp_path: Path, flips: list[tuple[int, int]]) -> None:
    """Damage anywhere gives a scan or a refzarr error, never another exception."""
    data = bytearray(SMALL.read_bytes())
    for at, mask in flips:
        data[at % len(data)] ^= mask
    path = tmp_path / "flipped.hdf"
    path.write_bytes(bytes(data))
    with contextlib.suppress(RefzarrError):
        refzarr.scan(path, format="hdf4")


def test_memory_filesystem(tmp_path: Path) -> None:
    """A file on another fsspec filesystem scans the same, referenced by its URL."""
    import fsspec

    fs = fsspec.filesystem("memory")
    fs.pipe("/hdf4/small.hdf", SMALL.read_bytes())
    remote = refzarr.scan("memory://hdf4/small.hdf")
    local = refzarr.scan(SMALL)
    assert list(remote.members) == list(local.members)
    array = remote["SDSgzip"]
    assert array.manifest[0, 0].url == "memory://hdf4/small.hdf"
    assert array.meta == local["SDSgzip"].meta
    shutil.rmtree(tmp_path, ignore_errors=True)
