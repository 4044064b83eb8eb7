"""The datasets a dimension scale is attached to, and their extents, read from the file.

HDF5 keeps them in the scale's ``REFERENCE_LIST`` attribute: a compound of an object
reference (the dataset's header address) and the axis. h5py reads it, dereferences each
reference and asks for its dataspace (~25 µs an entry); here the attribute and each user's
dataspace message come straight from the object headers. Written from the HDF5 File Format
Specification for the layout the dimension scales API writes (a compound of one object
reference and one 32-bit integer, in a simple dataspace); anything else raises
`FormatMismatch`, and the caller asks h5py.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import NamedTuple

from refzarr.scan.hdf5.attr_messages import dataspace_dims, vector_attribute
from refzarr.scan.hdf5.ohdr import (
    DATASPACE,
    FormatMismatch,
    Header,
    Read,
    Superblock,
    dataspace_body,
    read_header,
)

__all__ = ["ScaleUser", "scale_users"]

REFERENCE_LIST = b"REFERENCE_LIST"
_DATASPACE_ONLY = frozenset({DATASPACE})
_COMPOUND, _FIXED, _REFERENCE = 6, 0, 7


class ScaleUser(NamedTuple):
    """A dataset attached to a scale: its shape (None: not a dataset, or a null dataspace)
    and the axis the scale is attached to."""

    shape: tuple[int, ...] | None
    axis: int


def scale_users(
    read: Read,
    sb: Superblock,
    messages: list[tuple[bytes, int]],
    header_of: Callable[[int], Header] | None = None,
) -> list[ScaleUser]:
    """The users in ``REFERENCE_LIST`` of a scale whose attribute messages are ``messages``
    (`attribute_messages`; none when it has no such attribute). ``header_of(address)``: the
    messages of a header, at least its dataspace (None: read here)."""
    found = vector_attribute(messages, REFERENCE_LIST, sb)
    if found is None:
        return []
    fields, data, length = found
    size, ref_at, axis_at, axis_format = _entry_layout(fields.type_bytes, sb)
    if len(data) < length * size:
        raise FormatMismatch("short REFERENCE_LIST")
    users = []
    o = sb.offset_size
    for k in range(length):
        entry = data[k * size : (k + 1) * size]
        target = int.from_bytes(entry[ref_at : ref_at + o], "little")
        (axis,) = struct.unpack_from(axis_format, entry, axis_at)
        users.append(ScaleUser(_shape(read, sb, target, header_of), axis))
    return users


def _shape(
    read: Read, sb: Superblock, address: int, header_of: Callable[[int], Header] | None
) -> tuple[int, ...] | None:
    """The current dimensions of the dataset whose header is at ``address`` (None: not a
    dataset, or a null dataspace)."""
    if address == 0:
        raise FormatMismatch("a null reference")
    if header_of is None:
        header = read_header(read, sb, address, _DATASPACE_ONLY)
    else:
        header = header_of(address)
    body = dataspace_body(header)
    return None if body is None else dataspace_dims(body, sb)  # None: a group, a datatype


def _entry_layout(raw: bytes, sb: Superblock) -> tuple[int, int, int, str]:
    """(entry size, reference offset, axis offset, axis struct format) of the compound."""
    if len(raw) < 8 or raw[0] & 0x0F != _COMPOUND:
        raise FormatMismatch("REFERENCE_LIST is not a compound")
    version = raw[0] >> 4
    members = raw[1] | raw[2] << 8
    (size,) = struct.unpack_from("<I", raw, 4)
    if members != 2 or version not in (1, 2, 3):
        raise FormatMismatch("REFERENCE_LIST compound of another layout")
    at = 8
    found: dict[int, tuple[int, bytes]] = {}
    for _ in range(2):
        end = raw.index(b"\0", at)
        at = end + 1 if version == 3 else at + -(-(end + 1 - at) // 8) * 8
        if version == 3:
            width = 1 if size < 1 << 8 else 2 if size < 1 << 16 else 3 if size < 1 << 24 else 4
            offset = int.from_bytes(raw[at : at + width], "little")
            at += width
        else:
            (offset,) = struct.unpack_from("<I", raw, at)
            at += 4 + (28 if version == 1 else 0)  # version 1: array dimensions, unused
        member = raw[at : at + 12]
        if len(member) < 8:
            raise FormatMismatch("short compound member")
        cls = member[0] & 0x0F
        found[cls] = (offset, member)
        at += 8 if cls == _REFERENCE else 12
    reference, integer = found.get(_REFERENCE), found.get(_FIXED)
    if reference is None or integer is None:
        raise FormatMismatch("REFERENCE_LIST members are not a reference and an integer")
    ref_type, int_type = reference[1], integer[1]
    if ref_type[1] & 0x0F != 0 or struct.unpack_from("<I", ref_type, 4)[0] != sb.offset_size:
        raise FormatMismatch("not an object reference")
    if len(int_type) < 12 or struct.unpack_from("<IHH", int_type, 4) != (4, 0, 32):
        raise FormatMismatch("axis is not a 32-bit integer")
    order = ">" if int_type[1] & 0x01 else "<"
    axis_format = order + ("i" if int_type[1] & 0x08 else "I")
    if reference[0] + sb.offset_size > size or integer[0] + 4 > size:
        raise FormatMismatch("compound members beyond its size")
    return size, reference[0], integer[0], axis_format
