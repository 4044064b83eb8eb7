"""The dimension scales attached to each axis of a dataset, read from its ``DIMENSION_LIST``.

HDF5's ``H5DSiterate_scales`` reads the whole attribute, dereferences a scale and finds its
name by searching the file (~60 µs an axis). ``DIMENSION_LIST`` is a vector (one entry per
axis) of variable-length sequences of object references; the sequences live in the file's
global heap. Written from the HDF5 File Format Specification for that layout; anything else
raises `FormatMismatch` (the caller then asks HDF5).

netCDF-C puts the ``DIMENSION_LIST`` sequences of a file's variables one after the other in
4 KiB collections (~170 a collection): `Collections` reads each collection once per scan
and walks it once, however many variables' sequences it holds (read and walked again for
each variable, they cost ~130 µs a variable of a 500-variable file, ~10% of its scan).
"""

from __future__ import annotations

import struct

from refzarr.scan.hdf5.attr_messages import vector_attribute
from refzarr.scan.hdf5.ohdr import FormatMismatch, Read, Superblock

__all__ = ["Collections", "dimension_list"]

DIMENSION_LIST = b"DIMENSION_LIST"
KEPT_BYTES = 4 << 20
"""Bytes of global heap collections kept per scan (netCDF-C writes 4 KiB ones)."""
_VLEN, _REFERENCE = 9, 7


class _Walked:
    """One global heap collection, walked as far as the objects asked for so far."""

    __slots__ = ("at", "data", "done", "objects")

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.objects: dict[int, bytes] = {}
        """The objects met so far, by number (the first of a number, as a walk finds it)."""
        self.at: int | None = None
        """Where the walk goes on (None: not started)."""
        self.done = False


class Collections:
    """The global heap collections read so far in one scan (`dimension_list`), at most
    `KEPT_BYTES` of them (a file whose sequences point into many large collections must not
    make a scan hold them all: past that, those kept are dropped and read again when asked)."""

    __slots__ = ("_bytes", "_walked")

    def __init__(self) -> None:
        self._walked: dict[int, _Walked] = {}
        self._bytes = 0

    def walked(self, read: Read, sb: Superblock, address: int) -> _Walked:
        """The collection at ``address``, read on first use."""
        found = self._walked.get(address)
        if found is None:
            found = _Walked(_collection(read, sb, address))
            if self._bytes + len(found.data) > KEPT_BYTES:
                self._walked.clear()
                self._bytes = 0
            self._walked[address] = found
            self._bytes += len(found.data)
        return found


def dimension_list(
    read: Read,
    sb: Superblock,
    messages: list[tuple[bytes, int]],
    collections: Collections | None = None,
) -> list[list[int]] | None:
    """The header addresses of the scales attached to each axis of a dataset whose attribute
    messages are ``messages`` (`attribute_messages`), in HDF5's order (None: it has no
    ``DIMENSION_LIST``); ``collections``: those read so far in this scan (read and walked
    once each; the file is opened read-only, so they do not change)."""
    found = vector_attribute(messages, DIMENSION_LIST, sb)
    if found is None:
        return None
    fields, data, length = found
    _check_type(fields.type_bytes, sb)
    o = sb.offset_size
    entry = 4 + o + 4
    if len(data) < length * entry:
        raise FormatMismatch("short DIMENSION_LIST")
    heaps = Collections() if collections is None else collections
    axes: list[list[int]] = []
    for k in range(length):
        at = k * entry
        (count,) = struct.unpack_from("<I", data, at)
        collection = int.from_bytes(data[at + 4 : at + 4 + o], "little")
        (index,) = struct.unpack_from("<I", data, at + 4 + o)
        if count == 0:
            axes.append([])
            continue
        refs = _heap_object(heaps.walked(read, sb, collection), index, sb)
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


def _heap_object(walked: _Walked, index: int, sb: Superblock) -> bytes:
    """The data of object ``index`` of a global heap collection: the first object of that
    number a walk from its start meets (the walk goes on from where the last one stopped)."""
    found = walked.objects.get(index)
    if found is not None:
        return found
    collection, ln = walked.data, sb.length_size
    at = 8 + ln if walked.at is None else walked.at
    while not walked.done and at + 8 + ln <= len(collection):
        number = int.from_bytes(collection[at : at + 2], "little")
        size = int.from_bytes(collection[at + 8 : at + 8 + ln], "little")
        if number == 0:  # free space: the objects end here
            break
        start = at + 8 + ln
        if start + size > len(collection):
            walked.at = at  # a walk that gets here again fails here again
            raise FormatMismatch("global heap object beyond its collection")
        data = walked.objects.setdefault(number, collection[start : start + size])
        at = walked.at = start + -(-size // 8) * 8
        if number == index:
            return data
    walked.done = True
    raise FormatMismatch(f"global heap object {index} not found")
