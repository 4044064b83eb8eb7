"""The links of a new-style HDF5 group (one with a link info message), read from the file.

Written from the HDF5 File Format Specification. A group created with the newer file format
(h5py ``libver="latest"``, ``track_order=True``, every netCDF4 group) holds a link info
message; its links are link messages, in its header while there are few (compact storage),
else in a fractal heap (`refzarr.scan.hdf5.fractal_heap`) indexed by version 2 B-trees of
their names' hashes (type 5) and, when creation order is indexed, of their creation order
(type 6) (dense storage). `group_links` lists them in h5py's order: by creation order when
the group tracks it, else by name; each link is checked to be under its name's hash, and
both indexes to list the same links (HDF5 opens a link through the name index). A group
with a symbol table (the older format) or a message this reader does not know gives
`FormatMismatch` or None (the caller asks h5py); a heap, index or link message that is not
what the group says raises `DamagedStructure`.
"""

from __future__ import annotations

import struct
from typing import NamedTuple

from numcodecs.jenkins import jenkins_lookup3

from refzarr.scan.hdf5.btree2 import btree_records
from refzarr.scan.hdf5.fractal_heap import FractalHeap
from refzarr.scan.hdf5.ohdr import (
    DamagedStructure,
    FormatMismatch,
    Header,
    Read,
    Superblock,
    undefined,
)

__all__ = ["EXTERNAL", "HARD", "LINK_KINDS", "SOFT", "Link", "group_links"]

LINK_INFO = 0x0002
LINK = 0x0006
SYMBOL_TABLE = 0x0011
LINK_KINDS = frozenset({LINK_INFO, LINK, SYMBOL_TABLE})
"""The header messages that say where a group's links are."""

HARD, SOFT, EXTERNAL = 0, 1, 64
"""Link types (the link message's type field; 65-255: other user-defined links)."""

_LINK_FLAGS = 0x1F
"""The flags a link message may have: name length size (2 bits), creation order, link type
and character set present."""
_NAME_INDEX, _ORDER_INDEX = 5, 6
"""B-tree types of a group's indexes of its links' name hashes and creation order."""
_HEAP_ID = 7
"""Bytes of a link's heap ID in those indexes' records."""
_NAME_RECORD, _ORDER_RECORD = 4 + _HEAP_ID, 8 + _HEAP_ID
"""Bytes of a record: name hash or creation order, then heap ID."""


LinkValue = int | str | bytes | tuple[str | bytes, str | bytes]
"""What a link holds (`Link.value`)."""


class Link(NamedTuple):
    """One link of a group.

    ``value``: for a hard link, the address of the object's header; for a soft link, the
    path it holds; for an external link, ``(file name, object path)``; for other
    user-defined links, their raw value.
    """

    name: str | bytes
    """As h5py gives it: text, or bytes when not UTF-8."""
    kind: int
    order: int
    """Its creation order (0 when the group does not track it)."""
    value: LinkValue


class _LinkInfo(NamedTuple):
    tracked: bool
    indexed: bool
    heap: int
    name_index: int
    order_index: int


def group_links(header: Header, read: Read, sb: Superblock) -> list[Link] | None:
    """The links of the group whose header is ``header`` (read with `LINK_KINDS` among its
    kinds), in h5py's order; None for a group with a symbol table (or no link info: not a
    group)."""
    info: _LinkInfo | None = None
    compact: list[Link] = []
    for message in header.messages:
        if message.kind == SYMBOL_TABLE:
            return None
        if message.kind == LINK_INFO:
            info = _link_info(message.body, sb)
        elif message.kind == LINK:
            compact.append(parse_link(message.body, sb))
    if info is None:
        return None
    if undefined(info.heap, sb.offset_size):
        return _ordered(compact, info.tracked)
    if compact:
        raise DamagedStructure("link messages both in the group's header and in dense storage")
    links = _dense_links(read, sb, info)
    if info.indexed:
        return _by_creation_order(read, sb, info, links)
    return _ordered(list(links.values()), info.tracked)


def parse_link(body: bytes, sb: Superblock) -> Link:
    """The link a link message holds."""
    if len(body) < 2:
        raise DamagedStructure("a link message of fewer than 2 bytes")
    if body[0] != 1:
        raise FormatMismatch(f"link message version {body[0]}")
    flags, at = body[1], 2
    if flags & ~_LINK_FLAGS:
        raise FormatMismatch(f"link message flags {flags:#x}")
    kind = _field(body, at, 1)[0] if flags & 0x08 else HARD
    at += 1 if flags & 0x08 else 0
    order = int.from_bytes(_field(body, at, 8), "little") if flags & 0x04 else 0
    at += 8 if flags & 0x04 else 0
    at += 1 if flags & 0x10 else 0  # the name's character set: h5py decodes UTF-8 either way
    width = 1 << (flags & 0x03)
    length = int.from_bytes(_field(body, at, width), "little")
    raw = _field(body, at + width, length)
    at += width + length
    if length == 0:
        raise DamagedStructure("a link message without a name")
    return Link(_name(raw), kind, order, _value(body, at, kind, sb))


def _value(body: bytes, at: int, kind: int, sb: Superblock) -> LinkValue:
    """What a link of ``kind`` holds, from ``at`` of its message."""
    if kind == HARD:
        return int.from_bytes(_field(body, at, sb.offset_size), "little")
    (length,) = struct.unpack("<H", _field(body, at, 2))
    value = _field(body, at + 2, length)
    if kind == SOFT:
        return _name(value)
    if kind == EXTERNAL:
        return _external(value)
    return value


def _external(value: bytes) -> tuple[str | bytes, str | bytes]:
    """(file name, object path) of an external link's value (version and flags 0, then two
    null-terminated strings)."""
    if not value or value[0] != 0:
        raise FormatMismatch(f"external link of version/flags {value[:1]!r}")
    parts = value[1:].split(b"\0")
    if len(parts) < 3 or parts[2:] != [b""] * (len(parts) - 2):
        raise DamagedStructure("an external link value that is not two null-terminated strings")
    return _name(parts[0]), _name(parts[1])


def _link_info(body: bytes, sb: Superblock) -> _LinkInfo:
    """The fields of a link info message."""
    if len(body) < 2 or body[0] != 0:
        raise FormatMismatch("link info message of an unknown version")
    o, flags = sb.offset_size, body[1]
    at = 2 + (8 if flags & 0x01 else 0)
    heap = int.from_bytes(_field(body, at, o), "little")
    name_index = int.from_bytes(_field(body, at + o, o), "little")
    order_index = int.from_bytes(_field(body, at + 2 * o, o), "little") if flags & 0x02 else -1
    return _LinkInfo(bool(flags & 0x01), bool(flags & 0x02), heap, name_index, order_index)


def _dense_links(read: Read, sb: Superblock, info: _LinkInfo) -> dict[bytes, Link]:
    """The links of dense storage by heap ID, in the name index's order (by hash), each
    checked to be where its name's hash says."""
    records = btree_records(read, sb, info.name_index, _NAME_INDEX, _NAME_RECORD)
    heap = FractalHeap(read, sb, info.heap)
    links = {}
    for raw in records:
        link = parse_link(heap.object(raw[4:]), sb)
        if int.from_bytes(raw[:4], "little") != jenkins_lookup3(_encoded(link.name), 0):
            raise DamagedStructure(f"link {link.name!r} listed under another name's hash")
        links[raw[4:]] = link
    return links


def _by_creation_order(
    read: Read, sb: Superblock, info: _LinkInfo, links: dict[bytes, Link]
) -> list[Link]:
    """The links of dense storage (``links``, by heap ID) as the creation order index lists
    them, which must be the links the name index lists (HDF5 finds a link by name)."""
    if undefined(info.order_index, sb.offset_size):
        raise DamagedStructure("creation order indexed without an index")
    records = btree_records(read, sb, info.order_index, _ORDER_INDEX, _ORDER_RECORD)
    if sorted(raw[8:] for raw in records) != sorted(links):
        raise DamagedStructure("the name index and the creation order index list other links")
    ordered = []
    for raw in records:
        link, order = links[raw[8:]], int.from_bytes(raw[:8], "little")
        if link.order != order:
            raise DamagedStructure(
                f"link {link.name!r} of creation order {link.order} listed as {order} by the "
                "creation order index"
            )
        ordered.append(link)
    return ordered


def _ordered(links: list[Link], tracked: bool) -> list[Link]:
    """``links`` in h5py's order: by creation order when tracked, else by name (bytes)."""
    if tracked:
        return sorted(links, key=lambda link: link.order)
    return sorted(links, key=lambda link: _encoded(link.name))


def _field(body: bytes, at: int, size: int) -> bytes:
    """``size`` bytes of a message at ``at``; DamagedStructure past its end."""
    if at + size > len(body):
        raise DamagedStructure(f"a link message of {len(body)} bytes cut short")
    return body[at : at + size]


def _name(raw: bytes) -> str | bytes:
    """Text as h5py gives it: decoded UTF-8, or the bytes when not UTF-8."""
    try:
        return raw.decode("utf8")
    except UnicodeDecodeError:
        return raw


def _encoded(name: str | bytes) -> bytes:
    return name if isinstance(name, bytes) else name.encode("utf8")
