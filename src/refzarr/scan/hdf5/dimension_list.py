"""The dimension scales attached to each axis of a dataset, read from its ``DIMENSION_LIST``.

HDF5's ``H5DSiterate_scales`` reads the whole attribute, dereferences a scale and finds its
name by searching the file (~60 µs an axis). ``DIMENSION_LIST`` is a vector (one entry per
axis) of variable-length sequences of object references; the sequences live in the file's
global heap. Written from the HDF5 File Format Specification for that layout; anything else
raises `FormatMismatch` (the caller then asks HDF5).
"""

from __future__ import annotations

import struct

from refzarr.scan.hdf5.attr_messages import vector_attribute
from refzarr.scan.hdf5.ohdr import FormatMismatch, Read, Superblock

__all__ = ["dimension_list"]

DIMENSION_LIST = b"DIMENSION_LIST"
_VLEN, _REFERENCE = 9, 7


def dimension_list(
    read: Read, sb: Superblock, messages: list[tuple[bytes, int]]
) -> list[list[int]] | None:
    """The header addresses of the scales attached to each axis of a dataset whose attribute
    messages are ``messages`` (`attribute_messages`), in HDF5's order (None: it has no
    ``DIMENSION_LIST``)."""
    found = vector_attribute(messages, DIMENSION_LIST, sb)
    if found is None:
        return None
    fields, data, length = found
    _check_type(fields.type_bytes, sb)
    o = sb.offset_size
    entry = 4 + o + 4
    if len(data) < length * entry:
        raise FormatMismatch("short DIMENSION_LIST")
    heaps: dict[int, bytes] = {}
    axes: list[list[int]] = []
    for k in range(length):
        at = k * entry
        (count,) = struct.unpack_from("<I", data, at)
        collection = int.from_bytes(data[at + 4 : at + 4 + o], "little")
        (index,) = struct.unpack_from("<I", data, at + 4 + o)
        if count == 0:
            axes.append([])
            continue
        if collection not in heaps:
            heaps[collection] = _collection(read, sb, collection)
        refs = _heap_object(heaps[collection], index, sb)
        if len(refs) != count * o:
            raise FormatMismatch("DIMENSION_LIST sequence of another size")
        axes.append([int.from_bytes(refs[j : j + o], "little") for j in range(0, len(refs), o)])
    return axes


def _check_type(raw: bytes, sb: Superblock) -> None:
    """A variable-length sequence of object references, or `FormatMismatch`."""
    if len(raw) < 16 or raw[0] & 0x0F != _VLEN or raw[1] & 0x0F != 0:  # 0: a sequence
        raise FormatMismatch("DIMENSION_LIST is not a sequence")
    base = raw[8:16]
    if base[0] & 0x0F != _REFERENCE or base[1] & 0x0F != 0:  # 0: an object reference
        raise FormatMismatch("DIMENSION_LIST does not hold object references")
    if struct.unpack_from("<I", base, 4)[0] != sb.offset_size:
        raise FormatMismatch("object references of another size")


def _collection(read: Read, sb: Superblock, address: int) -> bytes:
    """A global heap collection, whole."""
    ln = sb.length_size
    head = read(sb.base + address, 8 + ln)
    if head[:4] != b"GCOL" or head[4] != 1:
        raise FormatMismatch("not a global heap collection")
    size = int.from_bytes(head[8 : 8 + ln], "little")
    if size < 8 + ln:
        raise FormatMismatch("global heap collection size")
    return read(sb.base + address, size)


def _heap_object(collection: bytes, index: int, sb: Superblock) -> bytes:
    """The data of object ``index`` of a global heap collection."""
    ln = sb.length_size
    at = 8 + ln
    while at + 8 + ln <= len(collection):
        number = int.from_bytes(collection[at : at + 2], "little")
        size = int.from_bytes(collection[at + 8 : at + 8 + ln], "little")
        if number == 0:  # free space: the objects end here
            break
        start = at + 8 + ln
        if start + size > len(collection):
            raise FormatMismatch("global heap object beyond its collection")
        if number == index:
            return collection[start : start + size]
        at = start + -(-size // 8) * 8
    raise FormatMismatch(f"global heap object {index} not found")
