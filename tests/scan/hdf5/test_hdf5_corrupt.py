"""Corrupt input: truncated and damaged HDF5 files, impostors, empty and missing files.

Each must give `ScanError` (or `SourceNotFoundError`) naming the file (and the dataset where it
is known): no hang, no crash, no partial result. The scans of damaged files run in a child
process with a timeout, so that a crash in the HDF5 library fails these tests instead of
killing pytest; all local cases share one child (started once, reporting one JSON line per
file as it goes, so a crash names the file that caused it).
"""

from __future__ import annotations

import re
import struct
from collections.abc import Callable
from pathlib import Path
from typing import Any

import fsspec
import h5py
import numpy as np
import pytest
from h5kit import write_h5

import refzarr
from childkit import Outcome, scan_in_child
from refzarr.scan.hdf5.source import check_within_file

CHILD_TIMEOUT = 120
"""Seconds the child process scanning every damaged file may take (it needs a few)."""


# -- the damaged files ----------------------------------------------------------------------------


def _healthy(f: h5py.File) -> None:
    """A chunked dataset (a B-tree of several nodes), a contiguous one, a nested group."""
    data = np.arange(40 * 300, dtype="f4").reshape(40, 300)
    f.create_dataset("temp", data=data, chunks=(4, 10), compression="gzip")
    f.create_dataset("plain", data=np.arange(1000, dtype="i8"))
    f.create_dataset("g/inner", data=data[:10], chunks=(5, 50))


def _chunk(path: Path, name: str, index: int) -> Any:
    with h5py.File(path, "r") as f:
        return f[name].id.get_chunk_info(index)


def _header_address(path: Path, name: str) -> int:
    with h5py.File(path, "r") as f:
        return int(h5py.h5o.get_info(f[name].id).addr)


def _chunk_index_node(data: bytes) -> int:
    """The offset of the last v1 B-tree node of a chunk index (signature ``TREE``, type 1)."""
    at = data.rfind(b"TREE\x01")
    assert at > 0
    return at


def _cut(at: Callable[[Path, bytes], int]) -> Callable[[Path], bytes]:
    def damage(healthy: Path) -> bytes:
        data = healthy.read_bytes()
        return data[: at(healthy, data)]

    return damage


def _replace_address(healthy: Path, old: int, new: int) -> bytes:
    """The file with the one 8-byte little-endian occurrence of address ``old`` made ``new``."""
    data = healthy.read_bytes()
    packed = struct.pack("<Q", old)
    assert data.count(packed) == 1, "the address must occur once, in the chunk index"
    return data.replace(packed, struct.pack("<Q", new))


def _address_beyond_end(healthy: Path) -> bytes:
    """Flipped high bytes in the chunk index: chunk 7 of ``temp`` points far past the end."""
    offset = int(_chunk(healthy, "/temp", 7).byte_offset)
    return _replace_address(healthy, offset, offset | (0x3A << 40))


def _address_into_neighbour(healthy: Path) -> bytes:
    """A flipped low byte: chunk 7 of ``temp`` now starts inside another chunk's bytes."""
    info = _chunk(healthy, "/temp", 7)
    return _replace_address(healthy, int(info.byte_offset), int(info.byte_offset) + 16)


CUTS: dict[str, Callable[[Path], bytes]] = {
    "inside-superblock": _cut(lambda _, __: 30),
    "inside-object-header": _cut(lambda p, _: _header_address(p, "/plain") + 20),
    "inside-chunk-data": _cut(
        lambda p, _: (lambda c: c.byte_offset + c.size // 2)(_chunk(p, "/temp", 100))
    ),
    "inside-chunk-index": _cut(lambda _, data: _chunk_index_node(data) + 40),
    "last-byte-missing": _cut(lambda _, data: len(data) - 1),
}


def _checksummed_index(tmp: Path) -> bytes:
    """libver="latest": a fixed-array chunk index, checksummed, with one address flipped."""
    healthy = write_h5(tmp / "latest.h5", _healthy, libver="latest")
    offset = int(_chunk(healthy, "/temp", 7).byte_offset)
    return _replace_address(healthy, offset, offset + 16)


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Outcome]:
    """Every damaged local file, scanned in one child process."""
    tmp = tmp_path_factory.mktemp("corrupt")
    healthy = write_h5(tmp / "healthy.h5", _healthy, libver="earliest")
    files = {f"cut-{name}": damage(healthy) for name, damage in CUTS.items()}
    files["index-address-beyond-end"] = _address_beyond_end(healthy)
    files["index-address-into-neighbour"] = _address_into_neighbour(healthy)
    files["index-checksummed-flipped"] = _checksummed_index(tmp)
    files["not-hdf5"] = b"Lorem ipsum dolor sit amet, " * 40
    files["empty"] = b""
    files["only-the-signature"] = b"\x89HDF\r\n\x1a\n"
    cases = [{"id": "healthy", "url": str(healthy)}]
    for name, data in files.items():
        path = tmp / f"{name}.nc"
        path.write_bytes(data)
        cases.append({"id": name, "url": str(path)})
    cases.append({"id": "missing", "url": str(tmp / "missing.nc")})
    return scan_in_child(cases, CHILD_TIMEOUT)


def test_the_child_scans_the_healthy_file(outcomes: dict[str, Outcome]) -> None:
    assert outcomes["healthy"].outcome == "result", outcomes["healthy"]


@pytest.mark.parametrize("cut", sorted(CUTS))
def test_truncated_file_is_a_scan_error(outcomes: dict[str, Outcome], cut: str) -> None:
    outcomes[f"cut-{cut}"].assert_error("ScanError", f"cut-{cut}.nc", "truncated")


def test_truncated_file_names_the_end_hdf5_expected(outcomes: dict[str, Outcome]) -> None:
    """Cut after the superblock, HDF5 itself says where the file should end."""
    outcomes["cut-inside-chunk-data"].assert_error("ScanError", "eof")


@pytest.mark.parametrize(
    ("name", "says"),
    [
        ("not-hdf5", "not a format refzarr recognises"),
        ("empty", "empty"),
        ("only-the-signature", "h5py cannot open it"),
    ],
)
def test_damaged_or_impostor_file_is_a_scan_error(
    outcomes: dict[str, Outcome], name: str, says: str
) -> None:
    outcomes[name].assert_error("ScanError", f"{name}.nc", says)


def test_missing_file_is_source_not_found(outcomes: dict[str, Outcome]) -> None:
    outcomes["missing"].assert_error("SourceNotFoundError", "missing.nc", "no such file")
    assert "FileNotFoundError" in outcomes["missing"].bases


def test_damaged_checksummed_index_is_a_scan_error_naming_the_dataset(
    outcomes: dict[str, Outcome],
) -> None:
    name = "index-checksummed-flipped"
    outcomes[name].assert_error("ScanError", f"{name}.nc", "'/temp'", "checksum")


@pytest.mark.parametrize(
    ("name", "says"),
    [
        ("index-address-beyond-end", "beyond the file's end"),
        ("index-address-into-neighbour", "share bytes"),
    ],
)
def test_damaged_chunk_index_is_a_scan_error_naming_the_chunk(
    outcomes: dict[str, Outcome], name: str, says: str
) -> None:
    outcomes[name].assert_error("ScanError", f"{name}.nc", "'/temp'", "chunk (0, 7)", says)


@pytest.mark.parametrize(
    ("damage", "says"),
    [(_address_beyond_end, "chunk (0, 7) at bytes"), (_address_into_neighbour, "share bytes")],
)
def test_check_within_file_catches_a_damaged_chunk_index(
    tmp_path: Path, damage: Callable[[Path], bytes], says: str
) -> None:
    """h5py reports the damaged addresses without complaint; the check does not."""
    healthy = write_h5(tmp_path / "healthy.h5", _healthy)
    for _, arr in refzarr.scan(healthy).arrays():
        assert arr.manifest.paths in ((), (str(healthy),))
        check_within_file(arr.manifest, str(healthy), healthy.stat().st_size, "healthy")
    damaged = tmp_path / "damaged.h5"
    damaged.write_bytes(damage(healthy))
    with pytest.raises(
        refzarr.ScanError, match=rf"damaged\.h5: dataset '/temp': .*{re.escape(says)}"
    ):
        refzarr.scan(damaged)


# -- on S3 ------------------------------------------------------------------------------------


def test_damaged_and_missing_files_on_s3(s3: tuple[str, dict[str, Any]], tmp_path: Path) -> None:
    bucket, options = s3
    healthy = write_h5(tmp_path / "healthy.h5", _healthy)
    fs = fsspec.filesystem("s3", **options)
    damaged = {
        "truncated": CUTS["inside-chunk-index"](healthy),
        "not-hdf5": b"<html>not found</html>" * 10,
        "empty": b"",
    }
    cases = []
    for name, data in damaged.items():
        url = f"s3://{bucket}/{name}.nc"
        fs.pipe_file(url, data)
        cases.append({"id": name, "url": url, "options": options})
    cases.append({"id": "missing", "url": f"s3://{bucket}/missing.nc", "options": options})
    outcomes = scan_in_child(cases, CHILD_TIMEOUT)
    outcomes["truncated"].assert_error("ScanError", f"s3://{bucket}/truncated.nc", "truncated")
    outcomes["not-hdf5"].assert_error("ScanError", "not-hdf5.nc", "not a format refzarr recognises")
    outcomes["empty"].assert_error("ScanError", "empty.nc", "empty")
    outcomes["missing"].assert_error("SourceNotFoundError", f"s3://{bucket}/missing.nc")
