"""Just enough of HDF5's superblock and object headers to read an object's messages.

Written from the HDF5 File Format Specification (superblock versions 0-3, object header
versions 1 and 2 with their continuation blocks). Anything this module does not expect
raises `FormatMismatch`: the caller then leaves the file to HDF5 itself.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any, NamedTuple

import h5py
from numcodecs.jenkins import jenkins_lookup3

__all__ = [
    "CONTINUATION",
    "DATASPACE",
    "LAYOUT",
    "SHARED",
    "SIGNATURE",
    "BeyondEnd",
    "ChecksumMismatch",
    "DamagedStructure",
    "FormatMismatch",
    "Header",
    "Message",
    "Read",
    "Superblock",
    "dataspace_body",
    "find_message",
    "header_address",
    "objno_address",
    "read_header",
    "read_superblock",
    "undefined",
    "verify_checksum",
]

Read = Callable[[int, int], bytes]
"""``read(position, length)``: exactly ``length`` bytes at an absolute file position."""

SIGNATURE = b"\x89HDF\r\n\x1a\n"
DATASPACE = 0x0001
LAYOUT = 0x0008
CONTINUATION = 0x0010
BTREE_K = 0x0013
DEFAULT_ISTORE_K = 32  # the indexed storage (chunk B-tree) K when the file does not store one
MAX_BLOCKS = 1024  # header continuation blocks followed at most (a damaged chain may loop)
SHARED = 0x02
"""Message flag: the message lives elsewhere (a shared object header message)."""
_SHARED = SHARED
_LONG_BITS = 8 * struct.calcsize("L")  # objno holds two C longs


class FormatMismatch(Exception):
    """The bytes are not what this reader expects: let HDF5 itself read them."""


class BeyondEnd(FormatMismatch):
    """A read beyond the file's end, or a short one."""


class DamagedStructure(Exception):
    """A structure of the file (a heap block, a B-tree node) is not where or what the
    structures pointing to it say: the file is damaged (`ScanError` for the caller)."""


class ChecksumMismatch(DamagedStructure):
    """A checksummed metadata structure whose bytes fail their checksum."""


def verify_checksum(data: bytes | bytearray, what: str, at: int | None = None) -> None:
    """`ChecksumMismatch` naming ``what`` unless the 4 bytes of ``data`` at ``at`` (default:
    its last 4) are the Jenkins lookup3 checksum (initial value 0) of the bytes before them."""
    end = len(data) - 4 if at is None else at
    if end < 0 or end + 4 > len(data):
        raise DamagedStructure(f"{what} too short for its checksum")
    stored = int.from_bytes(data[end : end + 4], "little")
    if jenkins_lookup3(data[:end], 0) != stored:
        raise ChecksumMismatch(f"{what} fails its checksum")


class Superblock(NamedTuple):
    """Where relative addresses start, the sizes of addresses and lengths, the chunk B-tree K."""

    base: int
    offset_size: int
    length_size: int
    istore_k: int


def undefined(address: int, offset_size: int) -> bool:
    """True for HDF5's undefined address (all bits set)."""
    return address == (1 << (8 * offset_size)) - 1


def read_superblock(read: Read, position: int, file_size: int) -> Superblock:
    """The superblock at absolute ``position`` (after the user block, if any)."""
    head = read(position, min(96, file_size - position))
    if len(head) < 48 or head[:8] != SIGNATURE:
        raise FormatMismatch("no superblock signature")
    version = head[8]
    if version in (0, 1):
        osize, lsize = head[13], head[14]
        _check_sizes(osize, lsize)
        k = DEFAULT_ISTORE_K if version == 0 else struct.unpack_from("<H", head, 24)[0]
        return Superblock(position, osize, lsize, _positive(k))
    if version in (2, 3):
        osize, lsize = head[9], head[10]
        _check_sizes(osize, lsize)
        extension = _address(head, 12 + osize, osize)
        sb = Superblock(position, osize, lsize, DEFAULT_ISTORE_K)
        if undefined(extension, osize):
            return sb
        k_values = find_message(read, sb, extension, BTREE_K)
        if k_values is None:
            return sb
        if len(k_values) < 3 or k_values[0] != 0:
            raise FormatMismatch("B-tree K values message of an unknown version")
        return sb._replace(istore_k=_positive(struct.unpack_from("<H", k_values, 1)[0]))
    raise FormatMismatch(f"superblock version {version}")


def find_message(read: Read, sb: Superblock, address: int, wanted: int) -> bytes | None:
    """The body of the first message of type ``wanted`` in the object header at ``address``.

    None when the header has no such message; `FormatMismatch` when it is shared (stored
    elsewhere) or the header is not as the specification describes.
    """
    for message in read_header(read, sb, address, frozenset({wanted})).messages:
        if message.flags & _SHARED:
            raise FormatMismatch("shared message")
        return message.body
    return None


def objno_address(objno: tuple[int, int]) -> int:
    """The object header address in HDF5's ``objno`` pair (``H5G_stat_t``: two C longs)."""
    low, high = objno
    return int(low) | int(high) << _LONG_BITS


def header_address(oid: Any) -> int:
    """The address of an object's header (``H5Gget_objinfo`` gives it at once;
    ``h5o.get_info`` would also walk a dataset's chunk index)."""
    return objno_address(h5py.h5g.get_objinfo(oid).objno)


class Message(NamedTuple):
    """One message of an object header."""

    kind: int
    flags: int
    body: bytes
    order: int
    """Its creation order (version 2 headers that track it), else 0."""


class Header(NamedTuple):
    """Every message of an object header, in the order stored (continuation blocks last)."""

    messages: list[Message]
    attribute_order_tracked: bool
    """Whether the header tracks its attributes' creation order (h5py then lists them so)."""


def dataspace_body(header: Header) -> bytes | None:
    """The dataspace message of ``header`` (read with `DATASPACE` among its kinds), or None
    when it has none (a group, a named datatype).

    Raises
    ------
    FormatMismatch
        When the dataspace is shared (stored elsewhere).
    """
    for message in header.messages:
        if message.kind == DATASPACE:
            if message.flags & SHARED:
                raise FormatMismatch("shared dataspace")
            return message.body
    return None


def read_header(
    read: Read, sb: Superblock, address: int, kinds: frozenset[int] | None = None
) -> Header:
    """The messages of the object header at ``address``, continuation blocks followed:
    all of them, or those of ``kinds``.

    `FormatMismatch` when the header is not as the specification describes.
    """
    position = sb.base + address
    prefix = read(position, 16)
    if prefix[:4] == b"OHDR":
        blocks = [_v2_first_block(read, position, prefix, address)]
        version, tracked = 2, bool(prefix[5] & 0x04)
    elif prefix[0] == 1:
        (size,) = struct.unpack_from("<I", prefix, 8)
        blocks = [read(position + 16, size)]
        version, tracked = 1, False
    else:
        raise FormatMismatch("unknown object header version")
    if version == 1:
        layout, heading = _V1, 8  # 3 reserved bytes after the flags
    else:
        layout, heading = (_V2_ORDERED, 6) if tracked else (_V2, 4)
    messages: list[Message] = []
    seen = 0
    unpack = layout.unpack_from
    while blocks:
        seen += 1
        if seen > MAX_BLOCKS:
            raise FormatMismatch("too many object header continuation blocks")
        block = blocks.pop()
        at, end = 0, len(block)
        while at + heading <= end:  # a version 2 block may end in a gap shorter than that
            fields = unpack(block, at)
            kind, size = fields[0], fields[1]
            at += heading
            if at + size > end:
                raise FormatMismatch("object header message runs past its block")
            if kind == CONTINUATION:
                blocks.append(_continuation(read, sb, block[at : at + size], version))
            if kinds is None or kind in kinds:
                order = fields[3] if tracked else 0
                messages.append(Message(kind, fields[2], block[at : at + size], order))
            at += size
    return Header(messages, tracked)


_V1 = struct.Struct("<HHB")  # type, size, flags
_V2 = struct.Struct("<BHB")  # type, size, flags
_V2_ORDERED = struct.Struct("<BHBH")  # type, size, flags, creation order


def _v2_first_block(read: Read, position: int, prefix: bytes, address: int) -> bytes:
    """The messages of a version 2 header's first chunk (signature and prefix skipped), its
    checksum verified."""
    if prefix[4] != 2:
        raise FormatMismatch("unknown OHDR version")
    flags = prefix[5]
    at = 6 + (16 if flags & 0x20 else 0) + (4 if flags & 0x10 else 0)
    width = 1 << (flags & 0x03)
    field = read(position + at, width)
    size = int.from_bytes(field, "little")
    chunk = read(position, at + width + size + 4)
    verify_checksum(chunk, f"object header at address {address}")
    return chunk[at + width : -4]


def _continuation(read: Read, sb: Superblock, body: bytes, version: int) -> bytes:
    """The messages of the continuation block a continuation message points to."""
    if len(body) < sb.offset_size + sb.length_size:
        raise FormatMismatch("short continuation message")
    address = _address(body, 0, sb.offset_size)
    length = int.from_bytes(body[sb.offset_size : sb.offset_size + sb.length_size], "little")
    if undefined(address, sb.offset_size):
        raise FormatMismatch("continuation to an undefined address")
    block = read(sb.base + address, length)
    if version == 1:
        return block
    if len(block) < 8 or block[:4] != b"OCHK":
        raise FormatMismatch("no OCHK signature")
    verify_checksum(block, f"object header continuation block at address {address}")
    return block[4:-4]  # signature and checksum


def _address(data: bytes, at: int, size: int) -> int:
    if at + size > len(data):
        raise FormatMismatch("short address")
    return int.from_bytes(data[at : at + size], "little")


def _check_sizes(offset_size: int, length_size: int) -> None:
    if offset_size not in (2, 4, 8) or length_size not in (2, 4, 8):
        raise FormatMismatch(f"sizes of offsets / lengths {offset_size} / {length_size}")


def _positive(k: int) -> int:
    if k < 1:
        raise FormatMismatch("B-tree K of 0")
    return k
