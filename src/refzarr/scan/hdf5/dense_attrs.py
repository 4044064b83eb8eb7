"""The attribute messages of an object whose attributes are in dense storage (a fractal heap).

HDF5 moves an object's attributes out of its header once there are more than a few (netCDF
coordinate variables often have nine): the messages then live in a fractal heap
(`refzarr.scan.hdf5.fractal_heap`), indexed by a version 2 B-tree of their names
(`refzarr.scan.hdf5.btree2`). Written from the HDF5 File Format Specification. A shared
message raises `SharedInDenseStorage`, what this reader does not read `FormatMismatch` (the
caller then reads the attributes with h5py), a damaged heap or index `DamagedStructure`.
"""

from __future__ import annotations

import struct
from typing import NamedTuple

from refzarr.scan.hdf5.btree2 import btree_records
from refzarr.scan.hdf5.fractal_heap import FractalHeap
from refzarr.scan.hdf5.ohdr import SHARED, FormatMismatch, Read, Superblock

__all__ = ["DenseAttribute", "SharedInDenseStorage", "dense_attribute_messages"]

_NAME_INDEX = 8
"""B-tree type of the name index of densely stored attributes."""
_NAME_RECORD = 17
"""Bytes of one of its records: heap ID (8), message flags (1), creation order (4), hash (4)."""


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
    records = btree_records(read, sb, index_address, _NAME_INDEX, _NAME_RECORD)
    if not records:
        return []
    parsed = [_record(raw) for raw in records]
    if any(flags & SHARED for _, flags, _ in parsed):  # in the shared message table
        raise SharedInDenseStorage("a shared attribute message in dense storage")
    heap = FractalHeap(read, sb, heap_address)
    return [DenseAttribute(heap.object(heap_id), order) for heap_id, _, order in parsed]


def _record(raw: bytes) -> tuple[bytes, int, int]:
    """(heap ID, message flags, creation order) of a name index record."""
    flags, order = struct.unpack_from("<BI", raw, 8)
    return raw[:8], flags, order
