"""Checksummed HDF5 metadata refzarr reads itself (version 2 object headers, fractal heap
blocks, version 2 B-tree nodes): one bit flipped inside is a named `ScanError`, as HDF5
refuses the file too, where it used to read as another value in silence."""

from __future__ import annotations

from pathlib import Path

import h5py
import numpy as np
import pytest

import refzarr
from refzarr.errors import ScanError

MARKER = np.array([0x0123456789ABCDEF], dtype="<u8")
"""An attribute value found once in the file's bytes."""


def _write(path: Path, count: int) -> Path:
    """A file (latest format) whose group ``g`` has ``count`` attributes, ``marked`` the
    marker (8 or fewer attributes stay in the object header, more go to dense storage)."""
    with h5py.File(path, "w", libver="latest") as f:
        g = f.create_group("g")
        g.attrs["marked"] = MARKER
        for k in range(count - 1):
            g.attrs[f"a{k:03d}"] = np.arange(3) + k
        f.create_dataset("x", data=np.arange(4))
    return path


def _flip(path: Path, at: int) -> None:
    data = bytearray(path.read_bytes())
    data[at] ^= 0x01
    path.write_bytes(bytes(data))


def _signature_before(data: bytes, at: int, signatures: tuple[bytes, ...]) -> bytes:
    """The signature of the structure holding byte ``at`` (the nearest one before it)."""
    found = max((data.rfind(s, 0, at), s) for s in signatures)
    assert found[0] >= 0
    return found[1]


def _h5py_refuses(path: Path) -> None:
    with pytest.raises((OSError, RuntimeError, KeyError)), h5py.File(path, "r") as f:
        dict(f["g"].attrs)


def _refzarr_refuses(path: Path, structure: str) -> None:
    with pytest.raises(ScanError) as info:
        refzarr.scan(str(path))
    message = str(info.value)
    assert str(path) in message
    assert structure in message
    assert "the file is corrupt (checksum mismatch" in message


@pytest.fixture(scope="module")
def good(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("checksums")
    return {"compact": _write(folder / "compact.h5", 4), "dense": _write(folder / "dense.h5", 40)}


def _copy(source: Path, tmp_path: Path) -> Path:
    target = tmp_path / source.name
    target.write_bytes(source.read_bytes())
    return target


@pytest.mark.parametrize("kind", ["compact", "dense"])
def test_unchanged_files_scan_as_h5py_reads_them(good: dict[str, Path], kind: str) -> None:
    group = refzarr.scan(str(good[kind]))
    with h5py.File(good[kind], "r") as f:
        expected = dict(f["g"].attrs)
    found = group["g"].attributes
    assert set(expected) <= set(found)
    assert found["marked"] in (int(MARKER[0]), [int(MARKER[0])])


@pytest.mark.parametrize(
    ("kind", "signature", "structure"),
    [
        ("compact", b"OHDR", "object header fails its checksum"),
        ("dense", b"FHDB", "fractal heap direct block at address"),
    ],
)
def test_flipped_attribute_value_is_a_checksum_error(
    good: dict[str, Path], tmp_path: Path, kind: str, signature: bytes, structure: str
) -> None:
    path = _copy(good[kind], tmp_path)
    data = path.read_bytes()
    at = data.find(MARKER.tobytes())
    assert at > 0
    assert data.find(MARKER.tobytes(), at + 1) == -1
    assert _signature_before(data, at, (b"OHDR", b"OCHK", b"FHDB", b"BTLF")) == signature
    _flip(path, at + 3)
    _h5py_refuses(path)
    _refzarr_refuses(path, structure)


def test_flipped_btree_record_is_a_checksum_error(good: dict[str, Path], tmp_path: Path) -> None:
    """A bit of the name hash of an attribute's record in the name index (a version 2 B-tree
    leaf): refzarr does not use the hash, so only the checksum tells."""
    path = _copy(good["dense"], tmp_path)
    data = path.read_bytes()
    leaf = data.find(b"BTLF\x00\x08")  # a leaf of the name index
    assert leaf > 0
    _flip(path, leaf + 6 + 13)  # first record: heap ID (8), flags, creation order (4), hash
    _h5py_refuses(path)
    _refzarr_refuses(path, "B-tree leaf node at address")
