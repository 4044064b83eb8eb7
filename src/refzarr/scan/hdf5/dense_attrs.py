"""The attribute messages of an object whose attributes are in dense storage (a fractal heap).

HDF5 moves an object's attributes out of its header once there are more than a few (netCDF
coordinate variables often have nine): the messages then live in a fractal heap, indexed by
a version 2 B-tree of their names. Written from the HDF5 File Format Specification: a B-tree
of any depth, a heap whose root is one direct block or an indirect block of direct blocks
(what objects with up to about 10,000 attributes have), managed objects and huge ones
(attributes larger than the heap's largest managed object, e.g. a long history), no I/O
filters. Anything else raises `FormatMismatch` (the caller then reads the attributes with
h5py).
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import NamedTuple

from refzarr.scan.hdf5.ohdr import SHARED, FormatMismatch, Read, Superblock, undefined

__all__ = ["DenseAttribute", "SharedInDenseStorage", "dense_attribute_messages"]

_NAME_INDEX = 8
"""B-tree type of the name index of densely stored attributes."""
_NAME_RECORD = 17
"""Bytes of one of its records: heap ID (8), message flags (1), creation order (4), hash (4)."""
_MANAGED, _HUGE = 0, 1
"""Kinds of heap objects: in the heap's blocks, or each stored on its own."""
_HUGE_INDEX = 1
"""B-tree type of the index of huge objects of an unfiltered heap."""
_MAX_HUGE = 1 << 26
"""Bytes of the largest attribute message read here (64 MiB: larger ones are left to h5py)."""
_PREFIX = 10
"""Bytes of a B-tree node besides its records and child pointers: signature, version, type,
checksum."""
_MAX_BLOCKS = 1 << 12
"""More direct blocks than a root indirect block of attributes has (HDF5's default table
width is 4): a damaged header, left to h5py."""
_MAX_RECORDS = 1 << 20
"""More records than any object's attributes: a damaged count, refused."""


class SharedInDenseStorage(FormatMismatch):
    """An attribute message in dense storage is shared (in the shared message table)."""


class DenseAttribute(NamedTuple):
    """One attribute message from dense storage, with its creation order."""

    body: bytes
    order: int


def dense_attribute_messages(
    read: Read, sb: Superblock, heap_address: int, index_address: int
) -> list[DenseAttribute]:
    """The attribute messages of the fractal heap at ``heap_address``, as listed by the
    name index B-tree at ``index_address`` (in the index's order: by name hash)."""
    records = _records(read, sb, index_address)
    if not records:
        return []
    if any(flags & SHARED for _, flags, _ in records):  # in the shared message table
        raise SharedInDenseStorage("a shared attribute message in dense storage")
    heap = _Heap.read(read, sb, heap_address)
    blocks: dict[int, bytes] = {}

    def block(at: _Block) -> bytes:  # each direct block read once, for all its objects
        if at.position not in blocks:
            blocks[at.position] = read(at.position, at.size)
        return blocks[at.position]

    huge: dict[int, tuple[int, int]] | None = None
    out = []
    for heap_id, _, order in records:
        if (heap_id[0] >> 4) & 0x03 != _HUGE or heap_id[0] >> 6:
            out.append(DenseAttribute(heap.object(block, heap_id), order))
            continue
        if huge is None:  # the huge objects' index, read once when one is asked for
            huge = _huge_objects(read, sb, heap)
        out.append(DenseAttribute(_huge_object(read, sb, heap, huge, heap_id), order))
    return out


def _huge_objects(read: Read, sb: Superblock, heap: _Heap) -> dict[int, tuple[int, int]]:
    """ID -> (address, length) of the huge objects of an unfiltered heap (its B-tree of
    type 1 records: address, length, ID); none when its IDs hold them directly."""
    o, ln = sb.offset_size, sb.length_size
    if heap.id_length - 1 >= o + ln or undefined(heap.huge_tree, o):
        return {}
    out = {}
    for raw in _btree_records(read, sb, heap.huge_tree, _HUGE_INDEX, o + 2 * ln):
        address = int.from_bytes(raw[:o], "little")
        length = int.from_bytes(raw[o : o + ln], "little")
        out[int.from_bytes(raw[o + ln :], "little")] = (address, length)
    return out


def _huge_object(
    read: Read, sb: Superblock, heap: _Heap, huge: dict[int, tuple[int, int]], heap_id: bytes
) -> bytes:
    """The bytes of the huge object ``heap_id`` names (stored outside the heap's blocks)."""
    o, ln = sb.offset_size, sb.length_size
    if heap.id_length - 1 >= o + ln:  # the ID holds its address and length
        address = int.from_bytes(heap_id[1 : 1 + o], "little")
        length = int.from_bytes(heap_id[1 + o : 1 + o + ln], "little")
    else:
        key = int.from_bytes(heap_id[1 : 1 + min(heap.id_length - 1, 8)], "little")
        if key not in huge:
            raise FormatMismatch("a huge heap object not in its index")
        address, length = huge[key]
    if length < 1 or length > _MAX_HUGE:
        raise FormatMismatch("huge heap object size")
    return read(sb.base + address, length)


def _records(read: Read, sb: Superblock, address: int) -> list[tuple[bytes, int, int]]:
    """(heap ID, message flags, creation order) of every record of a name index B-tree."""
    records = _btree_records(read, sb, address, _NAME_INDEX, _NAME_RECORD)
    return [_record(raw) for raw in records]


def _btree_records(
    read: Read, sb: Superblock, address: int, kind: int, record_size: int
) -> list[bytes]:
    """Every record of the version 2 B-tree of type ``kind`` at ``address``, in order."""
    o, ln = sb.offset_size, sb.length_size
    head = read(sb.base + address, 16 + o + 2 + ln + 4)
    if head[:4] != b"BTHD" or head[4] != 0 or head[5] != kind:
        raise FormatMismatch(f"not a B-tree of type {kind}")
    (node_size,) = struct.unpack_from("<I", head, 6)
    size, depth = struct.unpack_from("<HH", head, 10)
    root = int.from_bytes(head[16 : 16 + o], "little")
    (count,) = struct.unpack_from("<H", head, 16 + o)
    total = int.from_bytes(head[18 + o : 18 + o + ln], "little")
    if size != record_size or total > _MAX_RECORDS or depth > 8:
        raise FormatMismatch(f"B-tree of type {kind}: header")
    if count == 0:
        return []
    if undefined(root, o):
        raise FormatMismatch(f"B-tree of type {kind} without a root")
    records: list[bytes] = []
    _Tree(read, sb, node_size, depth, kind, record_size).node(root, count, depth, records)
    if len(records) != total:
        raise FormatMismatch(f"B-tree of type {kind}: records do not add up")
    return records


class _Tree:
    """The node layout of a version 2 B-tree (H5B2 header sizes)."""

    def __init__(
        self, read: Read, sb: Superblock, node_size: int, depth: int, kind: int, record_size: int
    ) -> None:
        self.read, self.sb, self.node_size = read, sb, node_size
        self.kind, self.record_size = kind, record_size
        leaf_max = (node_size - _PREFIX) // record_size
        if leaf_max < 1:
            raise FormatMismatch("B-tree node size")
        self.count_bytes = _encoded_size(leaf_max)
        self.total_bytes = [0]  # by depth: bytes of "records below a child" (depth > 1)
        cumulative = leaf_max
        for level in range(1, depth + 1):
            pointer = sb.offset_size + self.count_bytes + self.total_bytes[level - 1]
            most = (node_size - _PREFIX - pointer) // (record_size + pointer)
            if most < 1:
                raise FormatMismatch("B-tree node size")
            cumulative = (most + 1) * cumulative + most
            self.total_bytes.append(_encoded_size(cumulative))

    def node(self, address: int, count: int, depth: int, out: list[bytes]) -> None:
        """Append the records of the node at ``address`` (``count`` records, ``depth`` above
        the leaves) and of those below it, in order."""
        if len(out) + count > _MAX_RECORDS:
            raise FormatMismatch("B-tree: too many records")
        o, size = self.sb.offset_size, self.record_size
        data = self.read(self.sb.base + address, self.node_size)
        signature = b"BTLF" if depth == 0 else b"BTIN"
        if data[:4] != signature or data[4] != 0 or data[5] != self.kind:
            raise FormatMismatch(f"not a node of a B-tree of type {self.kind}")
        at = 6 + count * size
        if at > self.node_size:
            raise FormatMismatch("B-tree node overflows")
        records = [data[6 + k * size : 6 + (k + 1) * size] for k in range(count)]
        if depth == 0:
            out.extend(records)
            return
        below = self.total_bytes[depth - 1] if depth > 1 else 0
        step = o + self.count_bytes + below
        if at + (count + 1) * step > self.node_size:
            raise FormatMismatch("B-tree node overflows")
        for k in range(count + 1):
            child = int.from_bytes(data[at : at + o], "little")
            n = int.from_bytes(data[at + o : at + o + self.count_bytes], "little")
            if undefined(child, o):
                raise FormatMismatch("B-tree: a child without an address")
            self.node(child, n, depth - 1, out)
            if k < count:
                out.append(records[k])
            at += step


def _record(raw: bytes) -> tuple[bytes, int, int]:
    """(heap ID, message flags, creation order) of a name index record."""
    flags, order = struct.unpack_from("<BI", raw, 8)
    return raw[:8], flags, order


def _encoded_size(n: int) -> int:
    """Bytes HDF5 encodes a count of at most ``n`` in (``H5VM_limit_enc_size``)."""
    return (max(n, 1).bit_length() - 1) // 8 + 1


class _Block(NamedTuple):
    """A direct block of a fractal heap: where its heap space starts, its file position."""

    start: int
    position: int
    size: int


class _Heap(NamedTuple):
    """A fractal heap whose root is one direct block or an indirect block of direct blocks
    (no I/O filters)."""

    blocks: tuple[_Block, ...]  # by heap offset
    block_head: int  # bytes of a direct block's header: objects start after it
    offset_bytes: int  # bytes of an offset in a heap ID
    length_bytes: int  # bytes of a length in a heap ID
    id_length: int  # bytes of a heap ID
    huge_tree: int  # address of the B-tree of its huge objects

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
        if filters or undefined(root, o) or width < 1 or id_length < 2:
            raise FormatMismatch("fractal heap with I/O filters, or without a root")
        if max_direct < 1 or max_direct & (max_direct - 1) or start_block < 1:
            raise FormatMismatch("fractal heap block sizes")
        if start_block & (start_block - 1) or start_block > max_direct or max_heap_bits > 64:
            raise FormatMismatch("fractal heap block sizes")
        offset_bytes = (max_heap_bits + 7) // 8
        length_bytes = min(
            (max_direct.bit_length() - 1 + 7) // 8, (max_object.bit_length() - 1) // 8 + 1
        )
        if 1 + offset_bytes + length_bytes > id_length:
            raise FormatMismatch("heap ID too short for its fields")
        checksummed = bool(head[9] & 0x02)
        block_head = 5 + o + offset_bytes + (4 if checksummed else 0)
        if rows == 0:
            _check_block(read, sb, root, b"FHDB", address, 0, offset_bytes)
            blocks: tuple[_Block, ...] = (_Block(0, sb.base + root, start_block),)
        else:
            direct_rows = (max_direct.bit_length() - start_block.bit_length()) + 2
            if rows > direct_rows:
                raise FormatMismatch("fractal heap with indirect blocks below its root")
            if rows * width > _MAX_BLOCKS:
                raise FormatMismatch("fractal heap root of more blocks than expected")
            blocks = _root_blocks(read, sb, root, address, width, start_block, rows, offset_bytes)
        huge_tree = int.from_bytes(head[14 + ln : 14 + ln + o], "little")
        return cls(blocks, block_head, offset_bytes, length_bytes, id_length, huge_tree)

    def object(self, block_bytes: Callable[[_Block], bytes], heap_id: bytes) -> bytes:
        """The bytes of the managed object ``heap_id`` names (``block_bytes``: a direct
        block's bytes)."""
        if heap_id[0] >> 6 != 0 or (heap_id[0] >> 4) & 0x03 != _MANAGED:
            raise FormatMismatch("not a managed heap object")
        at = 1 + self.offset_bytes
        offset = int.from_bytes(heap_id[1:at], "little")
        length = int.from_bytes(heap_id[at : at + self.length_bytes], "little")
        for block in self.blocks:
            inside = offset - block.start
            if 0 <= inside < block.size:
                if length < 1 or inside < self.block_head or inside + length > block.size:
                    raise FormatMismatch("heap object outside its direct block")
                return block_bytes(block)[inside : inside + length]
        raise FormatMismatch("heap object in no direct block")


def _check_block(
    read: Read, sb: Superblock, address: int, signature: bytes, heap: int, start: int, nbytes: int
) -> None:
    """FormatMismatch unless the heap block at ``address`` is of ``heap`` at ``start``."""
    o = sb.offset_size
    block = read(sb.base + address, 5 + o + nbytes)
    if block[:4] != signature or block[4] != 0:
        raise FormatMismatch("not a fractal heap block")
    if int.from_bytes(block[5 : 5 + o], "little") != heap:
        raise FormatMismatch("block of another heap")
    if int.from_bytes(block[5 + o :], "little") != start:
        raise FormatMismatch("heap block at another offset")


def _root_blocks(
    read: Read,
    sb: Superblock,
    root: int,
    heap: int,
    width: int,
    start_block: int,
    rows: int,
    nbytes: int,
) -> tuple[_Block, ...]:
    """The direct blocks a root indirect block of ``rows`` rows of direct blocks lists."""
    o = sb.offset_size
    _check_block(read, sb, root, b"FHIB", heap, 0, nbytes)
    entries = read(sb.base + root + 5 + o + nbytes, rows * width * o)
    blocks, start = [], 0
    for row in range(rows):
        size = start_block << max(row - 1, 0)
        for column in range(width):
            at = (row * width + column) * o
            child = int.from_bytes(entries[at : at + o], "little")
            if not undefined(child, o):
                _check_block(read, sb, child, b"FHDB", heap, start, nbytes)
                blocks.append(_Block(start, sb.base + child, size))
            start += size
    return tuple(blocks)
