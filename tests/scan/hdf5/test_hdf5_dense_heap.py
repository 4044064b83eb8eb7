"""Attributes in dense storage of any size are read from the file's fractal heap, not by h5py.

Past about 10,000 attributes HDF5's heap grows indirect blocks below its root one; these
were not read and h5py read the attributes instead (12,000 numbers in 3.2 s). Tens of
thousands of numeric and string attributes, huge and tiny heap objects and a group of
20,000 members are compared with h5py (names, order, values, dtypes); damaged heaps and
name indexes give a ScanError naming the file, the object and what is damaged.
"""

from __future__ import annotations

import re
import shutil
import struct
from collections.abc import Callable
from pathlib import Path
from typing import Any

import h5py
import numpy as np
import pytest
from numcodecs.jenkins import jenkins_lookup3
from test_hdf5_fast_paths import _assert_same

import refzarr
from refzarr.errors import ScanError
from refzarr.scan.hdf5 import fractal_heap
from refzarr.scan.hdf5.attr_messages import UNREAD
from refzarr.scan.hdf5.attrs import attribute_to_json
from refzarr.scan.hdf5.fractal_heap import FractalHeap
from refzarr.scan.hdf5.headers import ObjectHeaders
from refzarr.scan.hdf5.ohdr import DamagedStructure, read_superblock

COUNT = 20_000
"""Attributes (and members) per object: HDF5's heap then has indirect blocks below its root."""
_NUMBERS = ("i1", "u2", "<i4", ">i8", "<f4", "<f8", "u1")


def _name(k: int) -> str:
    """Names whose creation order is not their alphabetical order."""
    return f"a{(k * 7919) % COUNT:05d}"


def _number(k: int) -> Any:
    dtype = np.dtype(_NUMBERS[k % len(_NUMBERS)])
    if k % 5 == 0:
        return np.arange(k % 4 + 1, dtype=dtype)
    return dtype.type(k % 100 - 50 if dtype.kind == "i" else k % 200)


def _string(k: int) -> Any:
    if k % 3 == 0:
        return np.bytes_(f"fixed {k}".encode())  # a fixed-length string
    if k % 3 == 1:
        return f"variable {k} é" * (k % 4 + 1)  # a variable-length UTF-8 string
    return np.array([f"s{k}", ""], dtype=h5py.string_dtype())


def _write(path: Path, fill: Callable[[h5py.File], None]) -> Path:
    with h5py.File(path, "w", libver="latest") as f:
        fill(f)
    return path


def _numbers(f: h5py.File) -> None:
    attrs = f.create_dataset("numbers", data=np.arange(3), track_order=True).attrs
    for k in range(COUNT):
        attrs[_name(k)] = _number(k)


def _strings(f: h5py.File) -> None:
    attrs = f.create_dataset("strings", data=np.arange(3)).attrs  # by name: order not tracked
    for k in range(COUNT):
        attrs[_name(k)] = _string(k)


def _huge(f: h5py.File) -> None:
    attrs = f.create_group("g", track_order=True).attrs
    for k in range(12):
        attrs[f"small{k}"] = np.int32(k)
    attrs["big"] = np.arange(40_000.0)  # past the heap's largest managed object: "huge"
    attrs["long"] = np.bytes_(b"x" * 100_000)
    attrs["managed"] = np.arange(500, dtype="i2")


def _members(f: h5py.File) -> None:
    x = f.create_dataset("x", data=np.arange(3))
    group = f.create_group("g", track_order=True)
    for k in range(COUNT):
        group[_name(k)] = x  # hard links: one object scanned, 20,000 names listed


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """One file per kind of content (each object's attributes in their own heap)."""
    folder = tmp_path_factory.mktemp("dense")
    kinds = {"numbers": _numbers, "strings": _strings, "huge": _huge, "members": _members}
    return {kind: _write(folder / f"{kind}.h5", fill) for kind, fill in kinds.items()}


def _headers(f: h5py.File) -> ObjectHeaders:
    data = Path(f.filename).read_bytes()
    return ObjectHeaders(f, lambda position, length: data[position : position + length], len(data))


_OBJECT = {"numbers": "numbers", "strings": "strings", "huge": "g"}
"""The object holding the attributes in each file."""


@pytest.fixture(scope="module")
def expected(files: dict[str, Path]) -> dict[str, dict[str, Any]]:
    """The attributes h5py reads, in its order, by kind of file (HDF5 takes ~0.2 ms to read
    each of these: read once)."""
    out = {}
    for kind, path in _OBJECT.items():
        with h5py.File(files[kind], "r") as f:
            out[kind] = dict(f[path].attrs.items())
    return out


@pytest.mark.parametrize("kind", ["numbers", "huge"])
def test_values_are_h5py_values(
    files: dict[str, Path], expected: dict[str, dict[str, Any]], kind: str
) -> None:
    """Names in h5py's order (creation order when tracked), values and dtypes exactly."""
    with h5py.File(files[kind], "r") as f:
        header = _headers(f).attributes(f[_OBJECT[kind]].id)
    assert header is not None  # read here, not left to h5py
    assert header.names == list(expected[kind])
    for name, value in expected[kind].items():
        assert header.values[name] is not UNREAD, name
        _assert_same(header.values[name], value, name)


@pytest.mark.parametrize("kind", ["numbers", "strings", "huge"])
def test_scan_gives_h5py_attributes_without_h5py(
    files: dict[str, Path], expected: dict[str, dict[str, Any]], kind: str, opened: list[bytes]
) -> None:
    """Through the scanner: names, order, JSON values and dtypes as h5py gives them; HDF5 is
    never asked to open one of them."""
    group = refzarr.scan(str(files[kind]))
    assert not opened
    found = group.members[_OBJECT[kind]]
    got = dict(found.meta.attributes if isinstance(found, refzarr.RefArray) else found.attributes)
    types = dict(got.pop("_nczarr_attr", {}).get("types", {}))
    assert list(got) == list(expected[kind])
    assert got == {name: _json(value) for name, value in expected[kind].items()}
    assert types == {name: t for name, value in expected[kind].items() if (t := _type(value))}


def _json(value: Any) -> Any:
    """A value as the scanner's frozen JSON attributes hold it."""
    return _frozen(attribute_to_json(value))


def _frozen(value: Any) -> Any:
    return tuple(_frozen(v) for v in value) if isinstance(value, list) else value


def _type(value: Any) -> str | None:
    """The dtype the scanner records for a number (those JSON does not give back)."""
    dtype = getattr(value, "dtype", None)
    if dtype is None or dtype.kind not in "iuf":
        return None
    native = dtype.newbyteorder("=")
    return None if native in (np.int64, np.float64) else str(native.str)


def test_huge_objects_are_read_from_their_own_place(
    files: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    huge: list[bytes] = []
    real = FractalHeap._huge_object

    def counting(self: FractalHeap, heap_id: bytes) -> bytes:
        huge.append(heap_id)
        return real(self, heap_id)

    monkeypatch.setattr(FractalHeap, "_huge_object", counting)
    refzarr.scan(str(files["huge"]))
    assert len(huge) == 2  # "big" and "long"


def test_tiny_objects_are_in_their_heap_ids() -> None:
    """HDF5 keeps objects shorter than a heap ID in the ID (attribute heaps never do: an
    attribute message is longer than their 8-byte IDs)."""
    assert fractal_heap._tiny(bytes([0x20 | 2]) + b"abc\0\0\0\0") == b"abc"
    extended = bytes([0x20 | 0x00, 19]) + bytes(range(20))  # 12-bit length in IDs > 18 bytes
    assert fractal_heap._tiny(extended) == bytes(range(20))
    with pytest.raises(DamagedStructure, match="tiny object of 9 bytes"):
        fractal_heap._tiny(bytes([0x20 | 8]) + b"1234567")


def test_group_of_many_members_lists_them_as_h5py(files: dict[str, Path]) -> None:
    group = refzarr.scan(str(files["members"]))
    with h5py.File(files["members"], "r") as f:
        names = list(f["g"])
    assert len(names) == COUNT
    assert list(group.members["g"].members) == names  # creation order, tracked


# Damaged heaps. The "numbers" file has one fractal heap: every block found belongs to it.


def _blocks(data: bytes, signature: bytes) -> list[tuple[int, int]]:
    """(position, heap offset) of every heap block with ``signature`` (8-byte addresses,
    5-byte heap offsets: what h5py writes for these heaps)."""
    found, at = [], data.find(signature)
    while at >= 0:
        found.append((at, int.from_bytes(data[at + 13 : at + 18], "little")))
        at = data.find(signature, at + 1)
    return found


def _root_entries(data: bytes) -> int:
    """Where the child entries of the root indirect block start."""
    (root,) = [at for at, offset in _blocks(data, b"FHIB") if offset == 0]
    return root + 18


def _no_nested_signature(data: bytearray) -> str:
    nested = [at for at, offset in _blocks(data, b"FHIB") if offset != 0]
    data[nested[0] : nested[0] + 4] = b"XXXX"
    return "no indirect block signature at address"


def _no_direct_signature(data: bytearray) -> str:
    first = _blocks(data, b"FHDB")[0][0]
    data[first : first + 4] = b"XXXX"
    return "no direct block signature at address"


def _reseal_indirect(data: bytearray, original: bytes, at: int) -> None:
    """Give the indirect block at ``at`` the checksum of its damaged bytes (the damage is then
    found by the structure's own checks, not its checksum)."""
    end = next(
        e
        for e in range(at + 18, len(original) - 3)
        if jenkins_lookup3(original[at:e], 0) == int.from_bytes(original[e : e + 4], "little")
    )
    data[end : end + 4] = jenkins_lookup3(bytes(data[at:end]), 0).to_bytes(4, "little")


def _reseal_direct(data: bytearray, original: bytes, at: int) -> None:
    """Give the direct block at ``at`` the checksum of its damaged bytes (HDF5 computes it
    over the whole block, its checksum field zeroed: 18 bytes in, for these heaps)."""

    def checksum(block: bytes, size: int) -> int:
        zeroed = bytearray(block[at : at + size])
        zeroed[18:22] = bytes(4)
        return int(jenkins_lookup3(bytes(zeroed), 0))

    stored = int.from_bytes(original[at + 18 : at + 22], "little")
    size = next(1 << k for k in range(10, 20) if checksum(original, 1 << k) == stored)
    data[at + 18 : at + 22] = checksum(bytes(data), size).to_bytes(4, "little")


def _block_past_the_end(data: bytearray) -> str:
    at = _root_entries(data)
    original = bytes(data)
    data[at : at + 8] = struct.pack("<Q", len(data) * 4)
    _reseal_indirect(data, original, at - 18)
    return r"direct block at address \d+ \(1024 bytes at \d+\) runs past the file's end"


def _loop_to_the_root(data: bytearray) -> str:
    entries = _root_entries(data)
    root = entries - 18  # its address (the file has no user block)
    first_indirect = entries + 8 * 8 * 4  # after 8 rows of 4 direct blocks
    original = bytes(data)
    data[first_indirect : first_indirect + 8] = struct.pack("<Q", root)
    _reseal_indirect(data, original, root)
    return "indirect block at address .* listed twice"


def _moved_block(data: bytearray) -> str:
    at = _blocks(data, b"FHDB")[1][0]
    original = bytes(data)
    data[at + 13 : at + 18] = (12345).to_bytes(5, "little")
    _reseal_direct(data, original, at)
    return "says heap offset 12345, its place in the doubling table"


def _no_index_leaf(data: bytearray) -> str:
    at = data.find(b"BTLF\x00\x08")  # a leaf of the name index (the scanner's)
    data[at : at + 4] = b"XXXX"
    return "no B-tree node of type 8 at address"


@pytest.mark.parametrize(
    "damage",
    [
        _no_nested_signature,
        _no_direct_signature,
        _block_past_the_end,
        _loop_to_the_root,
        _moved_block,
        _no_index_leaf,
    ],
)
def test_damaged_heap_is_a_named_scan_error(
    files: dict[str, Path], tmp_path: Path, damage: Callable[[bytearray], str]
) -> None:
    data = bytearray(files["numbers"].read_bytes())
    what = damage(data)
    path = tmp_path / "damaged.h5"
    path.write_bytes(bytes(data))
    match = rf"{re.escape(str(path))}: object '/numbers': .*damaged: .*{what}"
    with pytest.raises(ScanError, match=match):
        refzarr.scan(str(path))


def test_truncated_heap_is_a_scan_error(files: dict[str, Path], tmp_path: Path) -> None:
    path = tmp_path / "truncated.h5"
    shutil.copy(files["numbers"], path)
    last = _blocks(path.read_bytes(), b"FHDB")[-1][0]
    with path.open("r+b") as f:
        f.truncate(last + 100)
    with pytest.raises(ScanError, match=re.escape(str(path))):
        refzarr.scan(str(path))


def test_an_object_costs_the_reads_of_its_blocks(files: dict[str, Path]) -> None:
    """`FractalHeap` reads one object at a time: the first object of the heap's last block
    without reading the blocks before it."""
    data = files["numbers"].read_bytes()
    reads: list[tuple[int, int]] = []

    def read(position: int, length: int) -> bytes:
        reads.append((position, length))
        return data[position : position + length]

    sb = read_superblock(read, 0, len(data))
    heap_at = data.find(b"FRHP")
    last_at, last_offset = _blocks(data, b"FHDB")[-1]
    heap = FractalHeap(read, sb, heap_at)
    reads.clear()
    body = heap.object(bytes([0]) + (last_offset + 22).to_bytes(5, "little") + b"\x04\x00")
    assert body == data[last_at + 22 : last_at + 26]
    assert sum(length for _, length in reads) < 4 * 1024 + 65_536 + 1_024
