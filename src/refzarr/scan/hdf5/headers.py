"""The object headers of an open HDF5 file read from its bytes: attributes, group links,
dimension scales, maximum shapes.

The bytes come through the scan's ``read_range`` (the file object the scan opened: a plain
file locally, fsspec's otherwise), which shows what HDF5 reads: the scanner opens files
read-only, so nothing is written behind its back. Whatever is not as expected (a header this
reader does not parse, a read beyond the file's end) gives None: the caller then asks
h5py. Each object's attribute messages are read once per scan.
"""

from __future__ import annotations

import struct
from functools import partial
from math import prod
from typing import Any

import h5py

from refzarr.errors import ScanError
from refzarr.scan.hdf5.attr_messages import (
    ATTRIBUTE_KINDS,
    HeaderAttributes,
    attribute_fields,
    attribute_messages,
    attributes_of,
    dataspace_dims,
    dataspace_max_dims,
)
from refzarr.scan.hdf5.dimension_list import Collections, dimension_list
from refzarr.scan.hdf5.group_links import LINK_KINDS, Link, group_links
from refzarr.scan.hdf5.ohdr import (
    DATASPACE,
    SIGNATURE,
    BeyondEnd,
    ChecksumMismatch,
    DamagedStructure,
    FormatMismatch,
    Header,
    Read,
    Superblock,
    dataspace_body,
    find_message,
    header_address,
    read_header,
    read_superblock,
)
from refzarr.scan.hdf5.scale_users import ScaleUser, scale_users

__all__ = ["ObjectHeaders"]

_KINDS = ATTRIBUTE_KINDS | LINK_KINDS | {DATASPACE}
"""The messages read from each header: where its attributes and links are, its dataspace."""

_FALLBACK = (FormatMismatch, OSError, ValueError, IndexError, struct.error, ScanError)


class ObjectHeaders:
    """Attribute messages of the objects of one HDF5 file that h5py opened read-only.

    Parameters
    ----------
    h5
        The file, as h5py opened it (read-only, and not for SWMR reading).
    read_range
        ``read_range(offset, length)``: the file's bytes.
    size
        The file's size in bytes.
    url
        The file as errors name it (default: the name h5py opened).

    Raises
    ------
    ScanError
        From the methods that read attributes, when their dense storage (fractal heap,
        name index) is damaged.
    """

    __slots__ = (
        "_collections",
        "_h5",
        "_headers",
        "_messages",
        "_opened",
        "_read",
        "_sb",
        "_size",
        "_spaces",
        "_url",
    )

    def __init__(self, h5: h5py.File, read_range: Read, size: int, url: str | None = None) -> None:
        self._h5, self._size = h5, size
        self._url = h5.filename if url is None else url
        self._read = _checked(read_range, size)
        self._opened = False
        self._sb: Superblock | None = None
        self._messages: dict[int, tuple[list[tuple[bytes, int]], bool] | None] = {}
        """Attribute messages and whether creation order is tracked, by header address."""
        self._headers: dict[int, Header] = {}
        """The messages of each header read (`_KINDS`), by address."""
        self._spaces: dict[int, tuple[tuple[int, ...], tuple[int | None, ...]] | None] = {}
        """The dimensions and maximum dimensions of each dataspace read, by header address."""
        self._collections = Collections()
        """The global heap collections ``DIMENSION_LIST`` sequences were read from."""

    def attributes(self, oid: Any, address: int | None = None) -> HeaderAttributes | None:
        """The attributes of the object ``oid`` (a group or dataset id; ``address``: its
        header's, when known), or None: use h5py."""
        sb = self._superblock_once()
        try:
            found = None if sb is None else self._attribute_messages(_at(oid, address), sb)
            return None if found is None or sb is None else attributes_of(*found, sb)
        except DamagedStructure as exc:
            raise self._damaged(oid, address, exc) from exc
        except _FALLBACK:
            return None

    def links(self, oid: Any, address: int | None = None) -> list[Link] | None:
        """The links of the group ``oid`` (``address``: its header's, when known) in h5py's
        order (`group_links`), or None: a group with a symbol table, or a header this
        reader does not read (use h5py)."""
        sb = self._superblock_once()
        if sb is None:
            return None
        try:
            return group_links(self._header(_at(oid, address), sb), self._read, sb)
        except DamagedStructure as exc:
            raise self._damaged(oid, address, exc, "links") from exc
        except _FALLBACK:
            return None

    def scale_users(self, oid: Any, address: int | None = None) -> list[ScaleUser] | None:
        """The datasets the dimension scale ``oid`` is attached to (`scale_users`; ``address``:
        its header's, when known), or None: use h5py."""
        sb = self._superblock_once()
        try:
            found = None if sb is None else self._attribute_messages(_at(oid, address), sb)
            if found is None or sb is None:
                return None
            return scale_users(self._read, sb, found[0], partial(self._header, sb=sb))
        except DamagedStructure as exc:
            raise self._damaged(oid, address, exc) from exc
        except _FALLBACK:
            return None

    def dimension_list(self, oid: Any, address: int | None = None) -> list[list[int]] | None:
        """The header addresses of the scales attached to each axis of the dataset ``oid``
        (`dimension_list`; no axes when it has none; ``address``: its header's, when known),
        or None: use HDF5."""
        sb = self._superblock_once()
        try:
            found = None if sb is None else self._attribute_messages(_at(oid, address), sb)
            if found is None or sb is None:
                return None
            axes = dimension_list(self._read, sb, found[0], self._collections)
        except DamagedStructure as exc:
            raise self._damaged(oid, address, exc) from exc
        except _FALLBACK:
            return None
        return [] if axes is None else axes

    def max_shape(
        self, oid: Any, address: int | None, shape: tuple[int, ...] | None
    ) -> tuple[int | None, ...] | None:
        """The maximum shape of the dataset ``oid`` (None along unlimited axes; ``address``:
        its header's, when known) when its header says it for a dataspace of ``shape`` (what
        HDF5 says it is), else None: ask HDF5."""
        sb = self._superblock_once()
        if sb is None or shape is None:
            return None
        at = _at(oid, address)
        if at in self._spaces:  # asked of each dataset several times a scan
            found = self._spaces[at]
        else:
            try:
                space = dataspace_body(self._header(at, sb))
                found = None if space is None else dataspace_max_dims(space, sb)
            except DamagedStructure as exc:
                raise self._damaged(oid, address, exc) from exc
            except _FALLBACK:
                return None
            self._spaces[at] = found
        if found is None or found[0] != shape:
            return None
        return found[1]

    def attribute_data(
        self, oid: Any, address: int | None = None
    ) -> dict[bytes, tuple[int | None, bytes]] | None:
        """By name, the number of heap descriptors of each attribute of ``oid`` when its
        message says it (0: none; None: ask HDF5) and its stored bytes (what follows the
        datatype and dataspace of its message: the descriptors h5py would follow); none at
        all when a message is shared (stored in the file's shared message table), None when
        the header cannot be read here."""
        sb = self._superblock_once()
        if sb is None:
            return None
        try:
            found = self._attribute_messages(_at(oid, address), sb)
            if found is None:
                return {}
            return dict(_stored_data(body, sb) for body, _ in found[0])
        except DamagedStructure as exc:
            raise self._damaged(oid, address, exc) from exc
        except _FALLBACK:
            return None

    def vlen_strings(self, oid: Any, address: int | None = None) -> dict[bytes, tuple[int, ...]]:
        """By name, the dimensions (() when scalar) of the attributes of ``oid`` that are
        plain variable-length strings (`heap_strings` reads them); none when the header
        cannot be read here."""
        sb = self._superblock_once()
        try:
            found = None if sb is None else self._attribute_messages(_at(oid, address), sb)
        except DamagedStructure as exc:
            raise self._damaged(oid, address, exc) from exc
        except _FALLBACK:
            return {}
        if found is None or sb is None:
            return {}
        out = {}
        for body, _ in found[0]:
            fields = attribute_fields(body)
            dims = dataspace_dims(fields.space_bytes, sb)
            if not fields.shared and dims is not None and _plain_vlen_string(fields.type_bytes):
                out[fields.name] = dims
        return out

    def compact_data(self, oid: Any, address: int | None = None) -> bytes | None:
        """The raw data of the compact dataset ``oid`` (in its layout message), or None when
        it cannot be read here."""
        sb = self._superblock_once()
        try:
            body = None if sb is None else find_message(self._read, sb, _at(oid, address), 8)
        except DamagedStructure as exc:
            raise self._damaged(oid, address, exc) from exc
        except _FALLBACK:
            return None
        return None if body is None else _compact_raw(body)

    def _damaged(
        self, oid: Any, address: int | None, exc: DamagedStructure, what: str = "attributes"
    ) -> ScanError:
        """The error naming the file, the object and what is damaged in the storage of its
        ``what`` (attributes or links; HDF5 would stop there too, or worse: read on through
        it)."""
        name = h5py.h5i.get_name(oid)
        where = repr(name.decode("utf8", "replace")) if name else f"at address {_at(oid, address)}"
        if isinstance(exc, ChecksumMismatch):
            return ScanError(
                f"{self._url}: object {where}: its {exc}; the file is corrupt (checksum "
                "mismatch: rewrite it, or restore it from a good copy)"
            )
        return ScanError(
            f"{self._url}: object {where}: the {_STORAGE[what]} of its {what} is damaged: "
            f"{exc}; the file is corrupt (rewrite it, or copy the object's {what} anew)"
        )

    def _attribute_messages(
        self, address: int, sb: Superblock
    ) -> tuple[list[tuple[bytes, int]], bool] | None:
        """The attribute messages of the header at ``address`` and whether it tracks their
        creation order (None: one is shared), read once per header."""
        if address not in self._messages:
            header = self._header(address, sb)
            messages = attribute_messages(header, sb, self._read)
            found = None if messages is None else (messages, header.attribute_order_tracked)
            self._messages[address] = found
        return self._messages[address]

    def _header(self, address: int, sb: Superblock) -> Header:
        """The messages of the header at ``address`` this reader uses (`_KINDS`), read once
        per header (a scale's users are read for their dataspace, then for their attributes)."""
        header = self._headers.get(address)
        if header is None:
            header = self._headers[address] = read_header(self._read, sb, address, _KINDS)
        return header

    def superblock(self) -> Superblock | None:
        """The file's superblock, as read here (None: not found)."""
        return self._superblock_once()

    def _superblock_once(self) -> Superblock | None:
        """The superblock (looked for on first use; None when not found)."""
        if not self._opened:
            self._opened = True
            try:
                self._sb = self._superblock()
            except _FALLBACK:
                self._sb = None
        return self._sb

    def _superblock(self) -> Superblock:
        """The superblock, where HDF5 finds it: at byte 0, else after the user block."""
        at0 = self._read(0, len(SIGNATURE)) == SIGNATURE
        start = 0 if at0 else self._h5.id.get_create_plist().get_userblock()
        return read_superblock(self._read, start, self._size)


_STORAGE = {"attributes": "dense storage", "links": "storage"}
"""What errors call where an object keeps its attributes or links (a group's links may be in
its header)."""

_VLEN, _ARRAY, _COMPOUND = 9, 10, 6
"""Datatype classes whose values may hold heap descriptors."""


def _stored_data(body: bytes, sb: Superblock) -> tuple[bytes, tuple[int | None, bytes]]:
    """The name, heap descriptors (`ObjectHeaders.attribute_data`) and stored bytes of an
    attribute message."""
    fields = attribute_fields(body)
    data, kind = body[fields.data_at :], fields.type_bytes
    if fields.shared or len(kind) < 2:
        return fields.name, (None, data)
    if kind[0] & 0x0F not in (_VLEN, _ARRAY, _COMPOUND):
        return fields.name, (0, data)
    if _plain_end(kind, 0) == len(kind):  # a compound of plain members (REFERENCE_LIST)
        return fields.name, (0, data)
    sequence = kind[0] & 0x0F == _VLEN and kind[1] & 0x0F == 0
    if sequence and _plain_end(kind, 8) != len(kind):  # of a base that may hold some
        return fields.name, (None, data)
    if kind[0] & 0x0F != _VLEN or kind[1] & 0x0F not in (0, 1):  # arrays, other compounds
        return fields.name, (None, data)
    # variable-length strings, sequences of plain values (DIMENSION_LIST): one each
    dims = dataspace_dims(fields.space_bytes, sb)
    return fields.name, (None if dims is None else prod(dims), data)


_PLAIN = {0: 4, 1: 12, 2: 2, 3: 0, 4: 4, 7: 0}
"""Datatype classes whose values hold no heap descriptors, with the size of their properties:
integers, floats, times, fixed-length strings, bitfields, object references (versions 1-3;
version 4 references are HDF5 1.12's, which may point into a heap)."""


def _plain_end(kind: bytes, at: int) -> int | None:
    """Where the datatype at ``at`` of the datatype message ``kind`` ends when none of its
    values can hold heap descriptors as this reader parses it: a plain class (`_PLAIN`; of
    references, object references only), or a compound of such members; None otherwise (the
    caller then asks HDF5 what it holds)."""
    if len(kind) < at + 8:
        return None
    cls, version = kind[at] & 0x0F, kind[at] >> 4
    if not 1 <= version <= 5:  # HDF5 2.0 writes version 5
        return None
    if cls in _PLAIN:
        if cls == 7 and (version > 3 or kind[at + 1] & 0x0F != 0):  # object references only
            return None
        end = at + 8 + _PLAIN[cls]
        return end if end <= len(kind) else None
    if cls != _COMPOUND:
        return None
    (size,) = struct.unpack_from("<I", kind, at + 4)
    offset_size = 1 if size < 1 << 8 else 2 if size < 1 << 16 else 3 if size < 1 << 24 else 4
    pos = at + 8
    for _ in range(kind[at + 1] | kind[at + 2] << 8):  # the members
        name_end = kind.find(b"\0", pos)
        if name_end < 0:
            return None
        if version >= 3:  # the name as it is, then the offset in as few bytes as it takes
            pos = name_end + 1 + offset_size
        else:  # the name padded to 8 bytes, a 4-byte offset (version 1: array dimensions)
            pos += -(-(name_end + 1 - pos) // 8) * 8 + 4
            if version == 1:
                if pos + 28 > len(kind) or kind[pos] != 0:  # a member with dimensions
                    return None
                pos += 28
        member_end = _plain_end(kind, pos)
        if member_end is None:
            return None
        pos = member_end
    return pos if pos <= len(kind) else None


def _plain_vlen_string(kind: bytes) -> bool:
    """Whether a datatype message is a variable-length string as h5py and netCDF write it:
    null-terminated, ASCII or UTF-8, of one-byte characters (HDF5 stores their base type as
    an 8-bit integer)."""
    if len(kind) < 16 or kind[0] & 0x0F != _VLEN or kind[1] != 0x01 or kind[2] not in (0, 1):
        return False
    return kind[8] & 0x0F in (0, 3) and struct.unpack_from("<I", kind, 12)[0] == 1


def _compact_raw(body: bytes) -> bytes | None:
    """The raw data of a layout message of the compact class (None for any other)."""
    if len(body) >= 4 and body[0] in (3, 4) and body[1] == 0:
        size = struct.unpack_from("<H", body, 2)[0]
        return body[4 : 4 + size]
    if len(body) >= 8 and body[0] in (1, 2) and body[2] == 0:
        at = 8 + 4 * body[1]  # no address for compact data; dims include the element size
        if len(body) >= at + 4:
            size = struct.unpack_from("<I", body, at)[0]
            return body[at + 4 : at + 4 + size]
    return None


def _at(oid: Any, address: int | None) -> int:
    """The header address of ``oid``: ``address`` when known."""
    return header_address(oid) if address is None else address


def _checked(read: Read, file_size: int) -> Read:
    """``read`` that refuses ranges beyond ``file_size`` and short reads."""

    def checked(position: int, length: int) -> bytes:
        if position < 0 or length < 0 or position + length > file_size:
            raise BeyondEnd
        data = read(position, length)
        if len(data) != length:
            raise BeyondEnd
        return data

    return checked
