"""Attributes read straight from an object header's attribute messages, as h5py reads them.

h5py reads an attribute with five HDF5 calls, three of which create objects (~20 µs); a
netCDF file's few dozen small attributes are all in a handful of object headers, one or two
reads each. Written from the HDF5 File Format Specification: attribute messages versions
1-3, dataspace messages versions 1-2, and the datatypes h5py reads with nothing more than a
memory type (integers and IEEE floats of 1-8 bytes, null-terminated or null-padded fixed
strings). An attribute of any other type, or one whose datatype or dataspace is shared, is
listed but left unread (the caller reads it with h5py). Attributes in dense storage (a
fractal heap) come from `refzarr.scan.hdf5.dense_attrs`; a header with a shared attribute
message gives None, and one that is not as the specification says `FormatMismatch` (the
caller then does everything with h5py); damaged dense storage raises `DamagedStructure`.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Mapping
from functools import lru_cache
from typing import Any, NamedTuple

import numpy as np

from refzarr.scan.hdf5.dense_attrs import SharedInDenseStorage, dense_attribute_messages
from refzarr.scan.hdf5.ohdr import SHARED, FormatMismatch, Header, Read, Superblock, undefined

__all__ = [
    "ATTRIBUTE",
    "ATTRIBUTE_INFO",
    "ATTRIBUTE_KINDS",
    "UNREAD",
    "AttributeFields",
    "HeaderAttributes",
    "attribute_fields",
    "attribute_messages",
    "attributes_of",
    "dataspace_dims",
    "dataspace_max_dims",
    "header_attributes",
    "vector_attribute",
]

ATTRIBUTE = 0x000C
ATTRIBUTE_INFO = 0x0015
ATTRIBUTE_KINDS = frozenset({ATTRIBUTE, ATTRIBUTE_INFO})
"""The header messages that say where an object's attributes are."""

UNREAD: Any = object()
"""The value of an attribute left to h5py."""

_NULLTERM, _NULLPAD = 0, 1

# IEEE 754 layouts by size: sign bit, (bit offset, precision, exponent location, exponent
# size, mantissa location, mantissa size, exponent bias)
_IEEE = {
    2: (15, (0, 16, 10, 5, 0, 10, 15)),
    4: (31, (0, 32, 23, 8, 0, 23, 127)),
    8: (63, (0, 64, 52, 11, 0, 52, 1023)),
}


class HeaderAttributes(NamedTuple):
    """The attributes of one object: names in h5py's order, the values read (by name)."""

    names: list[str]
    values: dict[str, Any]
    """The value of each attribute read here; `UNREAD` for those left to h5py."""
    dimension_scale: bool | None = None
    """What HDF5's ``H5DSis_scale`` says of the object when its attributes settle it: False
    without a ``CLASS`` attribute, True with the one ``H5DSset_scale`` writes (the
    null-terminated 16-byte scalar string ``DIMENSION_SCALE``); None otherwise (ask HDF5:
    how it judges other ``CLASS`` values differs between its versions)."""
    texts: Mapping[str, bytes] | None = None
    """The stored bytes of the scalar null-terminated strings holding something after a NUL
    (h5py's value stops at it; netCDF-C reads them whole), by name."""


class _Type(NamedTuple):
    dtype: np.dtype[Any]
    nullterm: bool  # a null-terminated string: the bytes after the first NUL are not data


_PREFIX = struct.Struct("<BBHHH")


def header_attributes(header: Header, sb: Superblock, read: Read) -> HeaderAttributes | None:
    """The attributes of the object whose header is ``header`` (None: let h5py read them).

    ``read`` reads the file (for attributes in dense storage). Raises `FormatMismatch` when
    an attribute message is not as the specification says.
    """
    messages = attribute_messages(header, sb, read)
    if messages is None:
        return None
    return attributes_of(messages, header.attribute_order_tracked, sb)


def attributes_of(
    messages: list[tuple[bytes, int]], tracked: bool, sb: Superblock
) -> HeaderAttributes:
    """The attributes of ``messages`` (`attribute_messages`), in h5py's order: by creation
    order when ``tracked``, else by name."""
    found: list[tuple[Any, str, Any]] = []
    scale: bool | None = False
    for body, order in messages:
        raw, value = _attribute(body, sb)
        found.append((order if tracked else raw, _name(raw), value))
        if raw == b"CLASS":
            scale = True if _scale_class(body) else None
    found.sort(key=lambda item: item[0])
    names = [name for _, name, _ in found]
    if len(set(names)) != len(names):
        raise FormatMismatch("an attribute name twice")
    texts = {name: bytes(value) for _, name, value in found if isinstance(value, _CutText)}
    values = {name: UNREAD if isinstance(v, _CutText) else v for _, name, v in found}
    return HeaderAttributes(names, values, scale, texts or None)


class _CutText(bytes):
    """The stored bytes of a scalar null-terminated string holding something after a NUL:
    h5py reads it (up to the NUL), and the bytes are kept for netCDF's reading."""


_SCALE_CLASS = b"DIMENSION_SCALE\0"
"""The value ``H5DSset_scale`` gives the ``CLASS`` attribute (a null-terminated string)."""


def _scale_class(body: bytes) -> bool:
    """Whether a ``CLASS`` attribute message holds exactly what ``H5DSset_scale`` writes."""
    _, type_bytes, space_bytes, data_at, shared = attribute_fields(body)
    if shared or len(type_bytes) < 8 or type_bytes[0] & 0x0F != 3:  # a fixed-length string
        return False
    if type_bytes[1] & 0x0F != _NULLTERM or struct.unpack_from("<I", type_bytes, 4)[0] != 16:
        return False
    scalar = len(space_bytes) >= 4 and (
        (space_bytes[0] == 1 and space_bytes[1] == 0)
        or (space_bytes[0] == 2 and space_bytes[3] == 0)
    )
    return scalar and body[data_at : data_at + 16] == _SCALE_CLASS


def attribute_messages(
    header: Header, sb: Superblock, read: Read
) -> list[tuple[bytes, int]] | None:
    """(body, creation order) of every attribute message of an object, in the header or in
    dense storage; None when one is shared (stored elsewhere)."""
    messages: list[tuple[bytes, int]] = []
    dense: tuple[int, int] | None = None
    for message in header.messages:
        if message.kind == ATTRIBUTE_INFO:
            dense = _dense(message.body, sb)
        elif message.kind == ATTRIBUTE:
            if message.flags & SHARED:
                return None
            messages.append((message.body, message.order))
    if dense is None:
        return messages
    if messages:
        raise FormatMismatch("attributes both in the header and in dense storage")
    try:
        return [(m.body, m.order) for m in dense_attribute_messages(read, sb, *dense)]
    except SharedInDenseStorage:
        return None


def _name(raw: bytes) -> Any:
    """The name as h5py gives it: text, or bytes when not UTF-8."""
    try:
        return raw.decode("utf8")
    except UnicodeDecodeError:
        return raw


def _dense(body: bytes, sb: Superblock) -> tuple[int, int] | None:
    """The addresses of the fractal heap and name index an attribute info message puts the
    attributes in, or None when they are in the header."""
    if len(body) < 2 or body[0] != 0:
        raise FormatMismatch("attribute info message of an unknown version")
    o = sb.offset_size
    at = 2 + (2 if body[1] & 0x01 else 0)
    if len(body) < at + 2 * o:
        raise FormatMismatch("short attribute info message")
    heap = int.from_bytes(body[at : at + o], "little")
    index = int.from_bytes(body[at + o : at + 2 * o], "little")
    if undefined(heap, o):
        return None
    if undefined(index, o):
        raise FormatMismatch("dense attribute storage without a name index")
    return heap, index


class AttributeFields(NamedTuple):
    """The parts of one attribute message."""

    name: bytes
    type_bytes: bytes
    space_bytes: bytes
    data_at: int
    shared: bool
    """Whether its datatype or dataspace is shared (stored elsewhere)."""


def attribute_fields(body: bytes) -> AttributeFields:
    """Split an attribute message into its name, datatype, dataspace and where data starts."""
    body = bytes(body)  # the same object when bytes already
    return _remembered(body) if len(body) <= _REMEMBERED_SIZE else _split(body)


_REMEMBERED_SIZE = 1024
"""Messages of at most this many bytes are split once (`_remembered`): the 4,096 kept, with
their fields, then hold a few MiB at most (a process scanning many files keeps them)."""


def _split(body: bytes) -> AttributeFields:
    """`attribute_fields`."""
    if len(body) < 8:
        raise FormatMismatch("short attribute message")
    version, flags, name_size, type_size, space_size = _PREFIX.unpack_from(body)
    if version == 1:  # each field padded to a multiple of 8 bytes
        flags = 0
        at = 8
        type_at = at + -(-name_size // 8) * 8
        space_at = type_at + -(-type_size // 8) * 8
        data_at = space_at + -(-space_size // 8) * 8
    elif version in (2, 3):
        at = 8 if version == 2 else 9
        type_at = at + name_size
        space_at = type_at + type_size
        data_at = space_at + space_size
    else:
        raise FormatMismatch(f"attribute message version {version}")
    name = body[at : at + name_size]
    if data_at > len(body) or name_size < 1 or name[-1] != 0 or 0 in name[:-1]:
        raise FormatMismatch("attribute message fields")
    return AttributeFields(
        name[:-1],
        body[type_at : type_at + type_size],
        body[space_at : space_at + space_size],
        data_at,
        bool(flags & 0x03),
    )


_remembered = lru_cache(maxsize=4096)(_split)
"""`_split` of the latest small messages: a scan splits each message several times (for its
value, its heap descriptors, whether it is a string in the heap)."""


def vector_attribute(
    messages: list[tuple[bytes, int]], name: bytes, sb: Superblock
) -> tuple[AttributeFields, bytes, int] | None:
    """The fields, stored data and length of attribute ``name`` among ``messages``
    (`attribute_messages`) when it is a one-dimensional array (None: no such attribute).

    Raises
    ------
    FormatMismatch
        When its datatype or dataspace is shared, or it is not a vector.
    """
    wanted = name + b"\0"  # how a message holds its name
    for body, _order in messages:
        if wanted not in body:  # a byte search, not a parse, for each of thousands
            continue
        fields = attribute_fields(body)
        if fields.name != name:
            continue
        if fields.shared:
            raise FormatMismatch("shared datatype or dataspace")
        dims = dataspace_dims(fields.space_bytes, sb)
        if dims is None or len(dims) != 1:
            raise FormatMismatch(f"{name.decode()} is not a vector")
        return fields, body[fields.data_at :], dims[0]
    return None


def _attribute(body: bytes, sb: Superblock) -> tuple[bytes, Any]:
    """The raw name and the value (or `UNREAD`) of one attribute message."""
    key = (body, sb.length_size)  # all a message's meaning depends on
    found = _SCALARS.get(key)
    if found is not None:
        return found
    found = _parse_attribute(body, sb)
    if not isinstance(found[1], np.ndarray):  # immutable: numpy scalars, bytes, `UNREAD`
        if len(_SCALARS) >= _MAX_SCALARS:
            _SCALARS.clear()
        _SCALARS[key] = found
    return found


_SCALARS: dict[tuple[bytes, int], tuple[bytes, Any]] = {}
"""`_attribute` of the messages seen so far whose value is no array (the files of one
collection repeat their attributes byte for byte: units, long names, fill values)."""

_MAX_SCALARS = 4096
"""Entries `_SCALARS` holds at most (it starts again when full)."""


def _parse_attribute(body: bytes, sb: Superblock) -> tuple[bytes, Any]:
    name, type_bytes, space_bytes, data_at, shared = attribute_fields(body)
    if shared:
        return name, UNREAD
    key = (type_bytes, space_bytes)
    layout = _LAYOUTS.get(key, UNREAD)
    if layout is UNREAD:
        layout = _LAYOUTS[key] = _layout(*key, sb)
    if layout is None:
        return name, UNREAD
    return name, _value(layout, body, data_at)


class _Layout(NamedTuple):
    """How to read an attribute's value: its dtype, dimensions, count and byte size."""

    dtype: np.dtype[Any]
    dims: tuple[int, ...]
    items: int
    nbytes: int
    nullterm: bool


_LAYOUTS: dict[tuple[bytes, bytes], _Layout | None] = {}
"""Layouts by the bytes of their datatype and dataspace messages (None: left to h5py)."""


def _layout(type_bytes: bytes, space_bytes: bytes, sb: Superblock) -> _Layout | None:
    kind = _datatype(type_bytes)
    dims = dataspace_dims(space_bytes, sb)
    if kind is None or dims is None:
        return None
    count = math.prod(dims)
    return _Layout(kind.dtype, dims, count, count * kind.dtype.itemsize, kind.nullterm)


def _value(layout: _Layout, body: bytes, at: int) -> Any:
    if len(body) - at < layout.nbytes:
        return UNREAD  # h5py says what is wrong
    end = at + layout.nbytes
    if layout.nullterm and body.find(b"\0", at, end) >= 0:
        size = layout.dtype.itemsize
        if any(_cut(body[k : k + size]) for k in range(at, end, size)):
            # bytes after a NUL: HDF5 drops them (h5py reads it); netCDF-C keeps a scalar's
            return _CutText(body[at:end]) if not layout.dims else UNREAD
    if not layout.dims and layout.dtype.kind == "S":  # numpy drops trailing NULs alike
        return np.bytes_(body[at:end].rstrip(b"\0"))
    values = np.frombuffer(body, layout.dtype, layout.items, at)
    if not layout.dims:
        return values[0]
    return values.reshape(layout.dims).copy()  # writable, as h5py's


def _cut(item: bytes) -> bool:
    """Whether a null-terminated string holds something after its first NUL."""
    return bool(item.partition(b"\0")[2].strip(b"\0"))


def dataspace_dims(space: bytes, sb: Superblock) -> tuple[int, ...] | None:
    """The dimensions of a dataspace message: () for scalar, None for null or unknown."""
    if len(space) < 4:
        return None
    version, rank = space[0], space[1]
    if version == 1:
        at, scalar = 8, rank == 0
    elif version == 2:
        if space[3] not in (0, 1):  # 2: null
            return None
        at, scalar = 4, space[3] == 0
    else:
        return None
    if scalar:
        return ()
    width = sb.length_size
    if len(space) < at + rank * width:
        return None
    return tuple(
        int.from_bytes(space[at + k * width : at + (k + 1) * width], "little") for k in range(rank)
    )


def dataspace_max_dims(
    space: bytes, sb: Superblock
) -> tuple[tuple[int, ...], tuple[int | None, ...]] | None:
    """The dimensions and maximum dimensions (None: unlimited) of a simple or scalar
    dataspace message, or None for a null or unknown one, or lengths of other than 8 bytes
    (whose "unlimited" this reader does not decode)."""
    dims = dataspace_dims(space, sb)
    if dims is None or sb.length_size != 8:
        return None
    if not dims or not space[2] & 0x01:  # scalar, or no maximum dimensions stored
        return dims, dims
    at = (8 if space[0] == 1 else 4) + 8 * len(dims)
    if len(space) < at + 8 * len(dims):
        return None
    limits = struct.unpack_from(f"<{len(dims)}Q", space, at)
    if any(limit < dim for dim, limit in zip(dims, limits, strict=True)):
        return None  # HDF5 never writes this: let it say what it makes of it
    return dims, tuple(None if limit == _UNLIMITED else limit for limit in limits)


_UNLIMITED = 2**64 - 1
"""A maximum dimension of all bits set: unlimited (``H5S_UNLIMITED``)."""


def _datatype(raw: bytes) -> _Type | None:
    """The numpy dtype h5py gives a datatype message (None: not one read here)."""
    if len(raw) < 8:
        return None
    cls = raw[0] & 0x0F
    bits = raw[1] | raw[2] << 8 | raw[3] << 16
    (size,) = struct.unpack_from("<I", raw, 4)
    if cls == 0:  # fixed-point
        if len(raw) < 12 or size not in (1, 2, 4, 8):
            return None
        if struct.unpack_from("<HH", raw, 8) != (0, 8 * size):
            return None
        order = ">" if bits & 0x01 else "<"
        return _Type(np.dtype(f"{order}{'i' if bits & 0x08 else 'u'}{size}"), False)
    if cls == 1:  # floating point
        layout = _IEEE.get(size)
        if layout is None or len(raw) < 20 or bits & 0x40 or bits & 0x0E:  # VAX order, pads
            return None
        if (bits >> 4) & 0x03 != 2 or (bits >> 8) & 0xFF != layout[0]:  # implied msb; sign
            return None
        if struct.unpack_from("<HHBBBBI", raw, 8) != layout[1]:
            return None
        return _Type(np.dtype(f"{'>' if bits & 0x01 else '<'}f{size}"), False)
    if cls == 3:  # fixed-length string
        pad, cset = bits & 0x0F, (bits >> 4) & 0x0F
        if pad not in (_NULLTERM, _NULLPAD) or cset not in (0, 1) or size < 1:
            return None
        encoding = "ascii" if cset == 0 else "utf-8"
        return _Type(np.dtype(f"S{size}", metadata={"h5py_encoding": encoding}), pad == _NULLTERM)
    return None
