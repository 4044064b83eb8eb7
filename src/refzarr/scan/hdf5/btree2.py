"""The records of an HDF5 version 2 B-tree (the indexes of dense attribute storage).

Written from the HDF5 File Format Specification: a header (``BTHD``) naming the root node,
internal nodes (``BTIN``) with their children's addresses and record counts, leaf nodes
(``BTLF``); records are returned in the tree's order, whatever its depth. A tree of another
version raises `FormatMismatch` (the caller then asks HDF5); nodes that are not where or what
the nodes above them say raise `DamagedStructure`.
"""

from __future__ import annotations

import struct

from refzarr.scan.hdf5.ohdr import (
    BeyondEnd,
    DamagedStructure,
    FormatMismatch,
    Read,
    Superblock,
    undefined,
    verify_checksum,
)

__all__ = ["btree_records", "encoded_size", "read_or_damaged"]

_PREFIX = 10
"""Bytes of a B-tree node besides its records and child pointers: signature, version, type,
checksum."""
_MAX_RECORDS = 1 << 20
"""More records than any object's attributes: a damaged count, refused."""
_MAX_DEPTH = 8


def btree_records(
    read: Read, sb: Superblock, address: int, kind: int, record_size: int
) -> list[bytes]:
    """Every record of the version 2 B-tree of type ``kind`` at ``address``, in order."""
    o, ln = sb.offset_size, sb.length_size
    head = read_or_damaged(
        read, sb.base + address, 16 + o + 2 + ln + 4, f"B-tree header at {address}"
    )
    if head[:4] != b"BTHD":
        raise DamagedStructure(f"no B-tree header signature at address {address}")
    if head[4] != 0:
        raise FormatMismatch(f"B-tree header version {head[4]}")
    verify_checksum(head, f"B-tree header at address {address}")
    if head[5] != kind:
        raise DamagedStructure(f"B-tree at address {address} of type {head[5]}, not {kind}")
    (node_size,) = struct.unpack_from("<I", head, 6)
    size, depth = struct.unpack_from("<HH", head, 10)
    root = int.from_bytes(head[16 : 16 + o], "little")
    (count,) = struct.unpack_from("<H", head, 16 + o)
    total = int.from_bytes(head[18 + o : 18 + o + ln], "little")
    if size != record_size or total > _MAX_RECORDS or depth > _MAX_DEPTH:
        raise DamagedStructure(f"B-tree header at address {address}: sizes out of range")
    if count == 0:
        return []
    if undefined(root, o):
        raise DamagedStructure(f"B-tree at address {address} without a root")
    records: list[bytes] = []
    _Tree(read, sb, node_size, depth, kind, record_size).node(root, count, depth, records)
    if len(records) != total:
        raise DamagedStructure(
            f"B-tree at address {address}: {len(records)} records, its header says {total}"
        )
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
            raise DamagedStructure(f"B-tree node size {node_size}")
        self.count_bytes = encoded_size(leaf_max)
        self.total_bytes = [0]  # by depth: bytes of "records below a child" (depth > 1)
        cumulative = leaf_max
        for level in range(1, depth + 1):
            pointer = sb.offset_size + self.count_bytes + self.total_bytes[level - 1]
            most = (node_size - _PREFIX - pointer) // (record_size + pointer)
            if most < 1:
                raise DamagedStructure(f"B-tree node size {node_size}")
            cumulative = (most + 1) * cumulative + most
            self.total_bytes.append(encoded_size(cumulative))

    def node(self, address: int, count: int, depth: int, out: list[bytes]) -> None:
        """Append the records of the node at ``address`` (``count`` records, ``depth`` above
        the leaves) and of those below it, in order."""
        if len(out) + count > _MAX_RECORDS:
            raise DamagedStructure("B-tree: more records than any index holds")
        o, size = self.sb.offset_size, self.record_size
        data = read_or_damaged(
            self.read, self.sb.base + address, self.node_size, f"B-tree node at {address}"
        )
        signature = b"BTLF" if depth == 0 else b"BTIN"
        if data[:4] != signature or data[4] != 0 or data[5] != self.kind:
            raise DamagedStructure(f"no B-tree node of type {self.kind} at address {address}")
        at = 6 + count * size
        if at > self.node_size:
            raise DamagedStructure(f"B-tree node at address {address} overflows")
        records = [data[6 + k * size : 6 + (k + 1) * size] for k in range(count)]
        what = f"B-tree {'leaf' if depth == 0 else 'internal'} node at address {address}"
        if depth == 0:
            verify_checksum(data, what, at)
            out.extend(records)
            return
        below = self.total_bytes[depth - 1] if depth > 1 else 0
        step = o + self.count_bytes + below
        if at + (count + 1) * step + 4 > self.node_size:
            raise DamagedStructure(f"B-tree node at address {address} overflows")
        verify_checksum(data, what, at + (count + 1) * step)
        for k in range(count + 1):
            child = int.from_bytes(data[at : at + o], "little")
            n = int.from_bytes(data[at + o : at + o + self.count_bytes], "little")
            if undefined(child, o):
                raise DamagedStructure(
                    f"B-tree node at address {address}: a child without an address"
                )
            self.node(child, n, depth - 1, out)
            if k < count:
                out.append(records[k])
            at += step


def encoded_size(n: int) -> int:
    """Bytes HDF5 encodes a value of at most ``n`` in (``H5VM_limit_enc_size``)."""
    return (max(n, 1).bit_length() - 1) // 8 + 1


def read_or_damaged(read: Read, position: int, length: int, what: str) -> bytes:
    """``read(position, length)``; DamagedStructure naming ``what`` past the file's end."""
    try:
        return read(position, length)
    except BeyondEnd as exc:
        raise DamagedStructure(
            f"{what} ({length} bytes at {position}) runs past the file's end"
        ) from exc
