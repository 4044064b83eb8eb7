"""The attribute messages of an object whose attributes are in dense storage (a fractal heap).

HDF5 moves an object's attributes out of its header once there are more than a few (netCDF
coordinate variables often have nine): the messages then live in a fractal heap, indexed by
a version 2 B-tree of their names. Written from the HDF5 File Format Specification, for the
small heaps such objects have: a B-tree that is one leaf, a heap whose root is one direct
block, managed objects only. Anything else raises `FormatMismatch` (the caller then reads
the attributes with h5py).
"""

from __future__ import annotations

import struct
from typing import NamedTuple

from refzarr.scan.hdf5.ohdr import SHARED, FormatMismatch, Read, Superblock, undefined

__all__ = ["DenseAttribute", "dense_attribute_messages"]

_NAME_INDEX = 8
"""B-tree type of the name index of densely stored attributes."""
_NAME_RECORD = 17
"""Bytes of one of its records: heap ID (8), message flags (1), creation order (4), hash (4)."""
_MANAGED = 0


class DenseAttribute(NamedTuple):
    """One attribute message from dense storage, with its creation order."""

    body: bytes
    order: int


def dense_attribute_messages(
    read: Read, sb: Superblock, heap_address: int, index_address: int
) -> list[DenseAttribute]:
    """The attribute messages of the fractal heap at ``heap_address``, as listed by the
    name index B-tree at ``index_address`` (in the index's order: by name hash)."""
    records = _leaf_records(read, sb, index_address)
    if not records:
        return []
    heap = _Heap.read(read, sb, heap_address)
    block = read(heap.block, heap.block_size)  # one read for every object
    out = []
    for heap_id, flags, order in records:
        if flags & SHARED:
            raise FormatMismatch("a shared attribute message in dense storage")
        out.append(DenseAttribute(heap.object(block, heap_id), order))
    return out


def _leaf_records(read: Read, sb: Superblock, address: int) -> list[tuple[bytes, int, int]]:
    """(heap ID, message flags, creation order) of a name index that is a single leaf."""
    o, ln = sb.offset_size, sb.length_size
    head = read(sb.base + address, 16 + o + 2 + ln + 4)
    if head[:4] != b"BTHD" or head[4] != 0 or head[5] != _NAME_INDEX:
        raise FormatMismatch("not an attribute name index B-tree")
    record_size, depth = struct.unpack_from("<HH", head, 10)
    root = int.from_bytes(head[16 : 16 + o], "little")
    (count,) = struct.unpack_from("<H", head, 16 + o)
    total = int.from_bytes(head[18 + o : 18 + o + ln], "little")
    if record_size != _NAME_RECORD or depth != 0 or count != total:
        raise FormatMismatch("attribute name index of more than one leaf")
    if count == 0:
        return []
    if undefined(root, o):
        raise FormatMismatch("attribute name index without a root")
    leaf = read(sb.base + root, 6 + count * _NAME_RECORD)
    if leaf[:4] != b"BTLF" or leaf[4] != 0 or leaf[5] != _NAME_INDEX:
        raise FormatMismatch("not an attribute name index leaf")
    records = []
    for k in range(count):
        at = 6 + k * _NAME_RECORD
        flags, order = struct.unpack_from("<BI", leaf, at + 8)
        records.append((leaf[at : at + 8], flags, order))
    return records


class _Heap(NamedTuple):
    """A fractal heap whose root block is one direct block (no I/O filters)."""

    block: int  # the direct block's position in the file
    block_head: int  # bytes of its header: objects start after it
    block_size: int
    offset_bytes: int  # bytes of an offset in a heap ID
    length_bytes: int  # bytes of a length in a heap ID

    @classmethod
    def read(cls, read: Read, sb: Superblock, address: int) -> _Heap:
        o, ln = sb.offset_size, sb.length_size
        size = 4 + 1 + 2 + 2 + 1 + 4 + ln + o + ln + o + 8 * ln + 2 + ln + ln + 2 + 2 + o + 2
        head = read(sb.base + address, size)
        if head[:4] != b"FRHP" or head[4] != 0:
            raise FormatMismatch("not a fractal heap")
        id_length, filters = struct.unpack_from("<HH", head, 5)
        (max_object,) = struct.unpack_from("<I", head, 10)
        at = 14 + ln + o + ln + o + 8 * ln  # past the statistics
        (width,) = struct.unpack_from("<H", head, at)
        start_block = int.from_bytes(head[at + 2 : at + 2 + ln], "little")
        max_direct = int.from_bytes(head[at + 2 + ln : at + 2 + 2 * ln], "little")
        max_heap_bits, _start_rows = struct.unpack_from("<HH", head, at + 2 + 2 * ln)
        root = int.from_bytes(head[at + 6 + 2 * ln : at + 6 + 2 * ln + o], "little")
        (rows,) = struct.unpack_from("<H", head, at + 6 + 2 * ln + o)
        if filters or rows != 0 or undefined(root, o) or width < 1 or id_length < 2:
            raise FormatMismatch("fractal heap other than one unfiltered direct block")
        if max_direct < 1 or max_direct & (max_direct - 1) or start_block < 1:
            raise FormatMismatch("fractal heap block sizes")
        offset_bytes = (max_heap_bits + 7) // 8
        length_bytes = min(
            (max_direct.bit_length() - 1 + 7) // 8, (max_object.bit_length() - 1) // 8 + 1
        )
        if 1 + offset_bytes + length_bytes > id_length:
            raise FormatMismatch("heap ID too short for its fields")
        checksummed = bool(head[9] & 0x02)
        block_head = 5 + o + offset_bytes + (4 if checksummed else 0)
        block = read(sb.base + root, 5 + o + offset_bytes)
        if block[:4] != b"FHDB" or block[4] != 0:
            raise FormatMismatch("not a fractal heap direct block")
        if int.from_bytes(block[5 : 5 + o], "little") != address or any(block[5 + o :]):
            raise FormatMismatch("direct block of another heap, or not the root")
        return cls(sb.base + root, block_head, start_block, offset_bytes, length_bytes)

    def object(self, block: bytes, heap_id: bytes) -> bytes:
        """The bytes of the managed object ``heap_id`` names, in the direct ``block``."""
        if heap_id[0] >> 6 != 0 or (heap_id[0] >> 4) & 0x03 != _MANAGED:
            raise FormatMismatch("not a managed heap object")
        at = 1 + self.offset_bytes
        offset = int.from_bytes(heap_id[1:at], "little")
        length = int.from_bytes(heap_id[at : at + self.length_bytes], "little")
        if length < 1 or offset < self.block_head or offset + length > self.block_size:
            raise FormatMismatch("heap object outside the root direct block")
        return block[offset : offset + length]
