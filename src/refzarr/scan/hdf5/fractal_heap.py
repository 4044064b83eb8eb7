"""The objects of an HDF5 fractal heap (where dense attribute storage keeps its messages).

Written from the HDF5 File Format Specification (fractal heap version 0): the heap's linear
space is a doubling table of direct blocks (row 0 and 1 of the starting block size, each row
after twice the one before) under a root that is one direct block or an indirect block,
whose rows past the largest direct block size point to indirect blocks of the same layout.
An object's heap ID gives its offset in that space; the block holding it is found by
arithmetic on the table (one read per block, each read once). Managed, tiny and unfiltered
huge objects are read; a heap with I/O filters raises `FormatMismatch` (the caller then
asks HDF5), and one whose blocks are not where or what its header says `DamagedStructure`.
"""

from __future__ import annotations

import struct
from typing import NamedTuple

from refzarr.scan.hdf5.btree2 import btree_records, encoded_size, read_or_damaged
from refzarr.scan.hdf5.ohdr import (
    DamagedStructure,
    FormatMismatch,
    Read,
    Superblock,
    undefined,
    verify_checksum,
)

__all__ = ["FractalHeap"]

_MANAGED, _HUGE, _TINY = 0, 1, 2
"""Kinds of heap objects (bits 4-5 of a heap ID's first byte)."""
_MAX_HUGE = 1 << 26
"""Bytes of the largest huge object read here (64 MiB: larger ones are left to HDF5)."""
_MAX_ROWS = 64
"""More rows than an indirect block of a 64-bit heap space has: a damaged header."""
_NORMAL_TINY_ID = 18
"""Heap IDs of at most this many bytes hold a tiny object's length in 4 bits, longer in 12."""


class _Table(NamedTuple):
    """The doubling table of a heap's managed space."""

    width: int  # blocks in a row
    start: int  # bytes of a block of rows 0 and 1
    direct_rows: int  # rows of direct blocks an indirect block has at most
    offset_bytes: int  # bytes of a heap offset (in heap IDs and block headers)

    def row_size(self, row: int) -> int:
        """Bytes of each block of ``row``."""
        return self.start << max(row - 1, 0)

    def row_start(self, row: int) -> int:
        """Where ``row`` starts, from the start of its indirect block."""
        return 0 if row == 0 else (self.width * self.start) << (row - 1)

    def row_of(self, inside: int) -> int:
        """The row holding offset ``inside`` of an indirect block."""
        return (inside // (self.width * self.start)).bit_length()

    def rows_below(self, size: int) -> int:
        """Rows of an indirect block of ``size`` bytes (a child of another)."""
        return size.bit_length() - (self.width * self.start).bit_length() + 1


class _Indirect(NamedTuple):
    """An indirect block: where it starts in heap space, its rows, its children's addresses."""

    start: int
    rows: int
    direct: tuple[int, ...]
    indirect: tuple[int, ...]


class FractalHeap:
    """The fractal heap whose header is at ``address``, read as objects are asked for.

    Parameters
    ----------
    read
        ``read(position, length)``: the file's bytes (`BeyondEnd` past its end).
    sb
        The file's superblock.
    address
        The heap header's address (relative to the superblock's base).
    """

    __slots__ = (
        "_address",
        "_block_head",
        "_blocks",
        "_checksummed",
        "_directs",
        "_huge",
        "_huge_tree",
        "_id_length",
        "_indirects",
        "_length_bytes",
        "_read",
        "_root",
        "_root_rows",
        "_sb",
        "_table",
    )

    def __init__(self, read: Read, sb: Superblock, address: int) -> None:
        self._read, self._sb, self._address = read, sb, address
        self._directs: dict[int, bytes] = {}
        self._indirects: dict[int, _Indirect] = {}
        self._blocks: dict[int, tuple[int, int, int]] = {}
        """`_locate` by ``offset // starting block size`` (no block is smaller)."""
        self._huge: dict[int, tuple[int, int]] | None = None
        head = read_or_damaged(read, sb.base + address, _header_size(sb) + 4, "header")
        self._parse_header(head)
        verify_checksum(head, f"fractal heap header at address {address}")

    def _parse_header(self, head: bytes) -> None:
        o, ln = self._sb.offset_size, self._sb.length_size
        if head[:4] != b"FRHP":
            raise DamagedStructure(f"no fractal heap header at address {self._address}")
        if head[4] != 0:
            raise FormatMismatch(f"fractal heap header version {head[4]}")
        self._id_length, filters = struct.unpack_from("<HH", head, 5)
        (max_object,) = struct.unpack_from("<I", head, 10)
        self._huge_tree = int.from_bytes(head[14 + ln : 14 + ln + o], "little")
        at = 14 + ln + o + ln + o + 8 * ln  # past the statistics
        width, start, max_direct, bits, root, rows = _doubling_fields(head, at, o, ln)
        if filters:
            raise FormatMismatch("fractal heap with I/O filters")
        _check_table(width, start, max_direct, bits, rows, self._id_length)
        direct_rows = max_direct.bit_length() - start.bit_length() + 2
        self._table = _Table(width, start, direct_rows, (bits + 7) // 8)
        self._length_bytes = min((max_direct.bit_length() + 6) // 8, encoded_size(max_object))
        self._checksummed = bool(head[9] & 0x02)
        self._block_head = 5 + o + self._table.offset_bytes + (4 if self._checksummed else 0)
        self._root, self._root_rows = root, rows

    def object(self, heap_id: bytes) -> bytes:
        """The bytes of the object ``heap_id`` names (managed, tiny or huge)."""
        if len(heap_id) != self._id_length:
            raise FormatMismatch(f"a heap ID of {len(heap_id)} bytes, not {self._id_length}")
        if heap_id[0] >> 6:
            raise FormatMismatch(f"heap ID version {heap_id[0] >> 6}")
        kind = (heap_id[0] >> 4) & 0x03
        if kind == _MANAGED:
            return self._managed(heap_id)
        if kind == _TINY:
            return _tiny(heap_id)
        if kind == _HUGE:
            return self._huge_object(heap_id)
        raise DamagedStructure(f"a heap ID of unknown type {kind}")

    def _managed(self, heap_id: bytes) -> bytes:
        """A managed object: ``length`` bytes at ``offset`` of the heap's linear space."""
        size = self._table.offset_bytes
        offset = int.from_bytes(heap_id[1 : 1 + size], "little")
        length = int.from_bytes(heap_id[1 + size : 1 + size + self._length_bytes], "little")
        if undefined(self._root, self._sb.offset_size):
            raise DamagedStructure("an object of a heap without blocks")
        if self._root_rows == 0:
            position, block_size, block_start = self._root, self._table.start, 0
        else:
            slot = offset // self._table.start
            found = self._blocks.get(slot)
            if found is None:
                found = self._blocks[slot] = self._locate(offset)
            position, block_size, block_start = found
        inside = offset - block_start
        if length < 1 or inside < self._block_head or inside + length > block_size:
            raise DamagedStructure(
                f"object at heap offset {offset} ({length} bytes) outside its direct block"
            )
        block = self._direct(position, block_size, block_start)
        return block[inside : inside + length]

    def _locate(self, offset: int) -> tuple[int, int, int]:
        """(address, size, heap offset) of the direct block holding heap ``offset``."""
        table = self._table
        block = self._indirect(self._root, 0, self._root_rows)
        while True:
            inside = offset - block.start
            row = table.row_of(inside)
            if row >= block.rows:
                raise DamagedStructure(f"heap offset {offset} beyond the heap's blocks")
            size = table.row_size(row)
            column = (inside - table.row_start(row)) // size
            start = block.start + table.row_start(row) + column * size
            if row < table.direct_rows:
                child = block.direct[row * table.width + column]
                if undefined(child, self._sb.offset_size):
                    raise DamagedStructure(f"heap offset {offset} in a direct block never written")
                return child, size, start
            child = block.indirect[(row - table.direct_rows) * table.width + column]
            if undefined(child, self._sb.offset_size):
                raise DamagedStructure(f"heap offset {offset} in an indirect block never written")
            block = self._indirect(child, start, table.rows_below(size))

    def _indirect(self, address: int, start: int, rows: int) -> _Indirect:
        """The indirect block at ``address`` (of ``rows`` rows, at heap offset ``start``)."""
        found = self._indirects.get(address)
        if found is None:
            found = self._indirects[address] = self._read_indirect(address, start, rows)
        if found.start != start or found.rows != rows:
            raise DamagedStructure(f"indirect block at address {address} listed twice")
        return found

    def _read_indirect(self, address: int, start: int, rows: int) -> _Indirect:
        o, table = self._sb.offset_size, self._table
        if not 0 < rows <= _MAX_ROWS:
            raise DamagedStructure(f"indirect block at address {address} of {rows} rows")
        n_direct = min(rows, table.direct_rows) * table.width
        n_indirect = max(rows - table.direct_rows, 0) * table.width
        head = 5 + o + table.offset_bytes
        what = f"indirect block at address {address}"
        data = read_or_damaged(
            self._read, self._sb.base + address, head + (n_direct + n_indirect) * o + 4, what
        )
        self._check_prefix(data, b"FHIB", address, start)
        verify_checksum(data, f"fractal heap {what}")
        entries = [
            int.from_bytes(data[at : at + o], "little") for at in range(head, len(data) - 4, o)
        ]
        return _Indirect(start, rows, tuple(entries[:n_direct]), tuple(entries[n_direct:]))

    def _direct(self, address: int, size: int, start: int) -> bytes:
        """The direct block at ``address`` (``size`` bytes, at heap offset ``start``)."""
        block = self._directs.get(address)
        if block is None:
            what = f"direct block at address {address}"
            block = read_or_damaged(self._read, self._sb.base + address, size, what)
            self._check_prefix(block, b"FHDB", address, start)
            if self._checksummed:
                _verify_direct(block, self._block_head - 4, f"fractal heap {what}")
            self._directs[address] = block
        elif len(block) != size:
            raise DamagedStructure(f"direct block at address {address} listed with two sizes")
        return block

    def _check_prefix(self, data: bytes, signature: bytes, address: int, start: int) -> None:
        """DamagedStructure unless the block ``data`` (at ``address``) is of this heap, at heap
        offset ``start``."""
        o = self._sb.offset_size
        kind = "direct" if signature == b"FHDB" else "indirect"
        if data[:4] != signature:
            raise DamagedStructure(f"no {kind} block signature at address {address}")
        if data[4] != 0:
            raise FormatMismatch(f"fractal heap {kind} block version {data[4]}")
        if int.from_bytes(data[5 : 5 + o], "little") != self._address:
            raise DamagedStructure(f"{kind} block at address {address} of another heap")
        found = int.from_bytes(data[5 + o : 5 + o + self._table.offset_bytes], "little")
        if found != start:
            raise DamagedStructure(
                f"{kind} block at address {address} says heap offset {found}, "
                f"its place in the doubling table {start}"
            )

    def _huge_object(self, heap_id: bytes) -> bytes:
        """A huge object: stored on its own, its address and length in the ID or the heap's
        B-tree of huge objects."""
        o, ln = self._sb.offset_size, self._sb.length_size
        if self._id_length - 1 >= o + ln:  # the ID holds its address and length
            address = int.from_bytes(heap_id[1 : 1 + o], "little")
            length = int.from_bytes(heap_id[1 + o : 1 + o + ln], "little")
        else:
            key = int.from_bytes(heap_id[1 : 1 + min(self._id_length - 1, 8)], "little")
            if self._huge is None:
                self._huge = self._huge_index()
            if key not in self._huge:
                raise DamagedStructure(f"huge object {key} not in the heap's index of huge objects")
            address, length = self._huge[key]
        if length < 1 or length > _MAX_HUGE:
            raise FormatMismatch(f"a huge heap object of {length} bytes")
        return read_or_damaged(self._read, self._sb.base + address, length, "huge object")

    def _huge_index(self) -> dict[int, tuple[int, int]]:
        """ID -> (address, length) of the huge objects (B-tree records of type 1)."""
        o, ln = self._sb.offset_size, self._sb.length_size
        if undefined(self._huge_tree, o):
            raise DamagedStructure("a huge object in a heap without an index of huge objects")
        out = {}
        for raw in btree_records(self._read, self._sb, self._huge_tree, _HUGE_INDEX, o + 2 * ln):
            address = int.from_bytes(raw[:o], "little")
            length = int.from_bytes(raw[o : o + ln], "little")
            out[int.from_bytes(raw[o + ln :], "little")] = (address, length)
        return out


def _verify_direct(block: bytes, at: int, what: str) -> None:
    """`ChecksumMismatch` unless the checksum at ``at`` of a direct block is that of the whole
    block with its checksum field zeroed (as HDF5 computes it)."""
    zeroed = bytearray(block)
    zeroed[at : at + 4] = bytes(4)
    zeroed += block[at : at + 4]
    verify_checksum(zeroed, what)


_HUGE_INDEX = 1
"""B-tree type of the index of huge objects of an unfiltered heap."""


def _tiny(heap_id: bytes) -> bytes:
    """A tiny object: held in its heap ID (length in 4 bits, or 12 in IDs over 18 bytes)."""
    if len(heap_id) <= _NORMAL_TINY_ID:
        length, at = (heap_id[0] & 0x0F) + 1, 1
    else:
        length, at = ((heap_id[0] & 0x0F) << 8 | heap_id[1]) + 1, 2
    if at + length > len(heap_id):
        raise DamagedStructure(f"a tiny object of {length} bytes in a heap ID of {len(heap_id)}")
    return heap_id[at : at + length]


def _header_size(sb: Superblock) -> int:
    """Bytes of a fractal heap header without I/O filters (its checksum left out)."""
    o, ln = sb.offset_size, sb.length_size
    return 14 + ln + o + ln + o + 8 * ln + 2 + ln + ln + 2 + 2 + o + 2


def _doubling_fields(head: bytes, at: int, o: int, ln: int) -> tuple[int, int, int, int, int, int]:
    """Width, starting block size, largest direct block size, bits of the heap space, root
    address and rows of the root indirect block (0: the root is a direct block)."""
    (width,) = struct.unpack_from("<H", head, at)
    start = int.from_bytes(head[at + 2 : at + 2 + ln], "little")
    max_direct = int.from_bytes(head[at + 2 + ln : at + 2 + 2 * ln], "little")
    (bits,) = struct.unpack_from("<H", head, at + 2 + 2 * ln)
    root = int.from_bytes(head[at + 6 + 2 * ln : at + 6 + 2 * ln + o], "little")
    (rows,) = struct.unpack_from("<H", head, at + 6 + 2 * ln + o)
    return width, start, max_direct, bits, root, rows


def _check_table(
    width: int, start: int, max_direct: int, bits: int, rows: int, id_length: int
) -> None:
    """DamagedStructure unless the doubling table's fields are as the specification says."""
    if not (_power_of_two(width) and _power_of_two(start) and _power_of_two(max_direct)):
        raise DamagedStructure("doubling table sizes that are not powers of two")
    if start > max_direct or not 0 < bits <= 64 or rows > _MAX_ROWS or id_length < 2:
        raise DamagedStructure("doubling table fields out of range")


def _power_of_two(n: int) -> bool:
    return n > 0 and n & (n - 1) == 0
