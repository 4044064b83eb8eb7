"""Where an HDF4 object's bytes are: plain, in linked blocks, in an external file, compressed
or chunked (special elements, whose descriptor points at a header instead of the data)."""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any

from refzarr.errors import ScanError, UnsupportedFeatureError
from refzarr.scan.hdf4.dd import DDTable, Descriptor
from refzarr.scan.hdf4.source import Source

__all__ = [
    "Chunked",
    "Compressed",
    "Contiguous",
    "External",
    "Storage",
    "read_logical",
    "resolve",
]

SPECIAL_LINKED, SPECIAL_EXT, SPECIAL_COMP, SPECIAL_CHUNKED = 1, 2, 3, 5
SPECIAL_NAMES = {4: "variable-length linked blocks", 6: "buffered", 7: "compressed raster"}
DFTAG_LINKED, DFTAG_COMPRESSED, DFTAG_CHUNK, DFTAG_VH = 20, 40, 61, 1962
CODERS = {0: "none", 1: "RLE", 2: "N-bit", 3: "skipping Huffman", 4: "deflate", 5: "szip"}
MAX_LINK_TABLES = 1_000_000


@dataclass(frozen=True, slots=True)
class Contiguous:
    """Bytes in this file: one range, or several (linked blocks) read one after the other.

    ``ranges`` holds (offset, length) pairs; an offset of -1 is a block never written
    (HDF4 reads zeros there).
    """

    ranges: tuple[tuple[int, int], ...]
    length: int
    capacity: tuple[int, ...] = ()
    """Bytes each range's block holds in the file (its descriptor's length), when linked
    blocks: the last block may hold more than the element's data uses."""


@dataclass(frozen=True, slots=True)
class External:
    """Bytes at ``offset`` of another file, named as HDF4 stored it."""

    path: str
    offset: int
    length: int


@dataclass(frozen=True, slots=True)
class Compressed:
    """An element compressed whole: ``coder`` (HDF4's code) with ``params``, ``length``
    bytes once decoded, its compressed bytes in ``data``."""

    coder: int
    params: dict[str, Any]
    length: int
    data: Contiguous


@dataclass(frozen=True, slots=True)
class Chunked:
    """A chunked element: shape, chunk shape, fill bytes, the coder of its chunks (0: none)
    and the ref of its chunk table (a vdata: chunk origins and chunk object refs)."""

    shape: tuple[int, ...]
    chunks: tuple[int, ...]
    nt_size: int
    fill: bytes
    coder: int
    params: dict[str, Any]
    table_ref: int
    length: int


Storage = Contiguous | External | Compressed | Chunked


def resolve(table: DDTable, source: Source, dd: Descriptor, what: str) -> Storage:
    """Where the data of the object ``dd`` is (``what`` names it in errors)."""
    if not dd.special:
        return _plain(dd)
    header = source.read_range(dd.offset, dd.length, f"{what}: special element header")
    if len(header) < 2:
        raise ScanError(f"{source.url}: {what}: special element header of {len(header)} bytes")
    kind = int.from_bytes(header[:2], "big")
    body = header[2:]
    try:
        if kind == SPECIAL_LINKED:
            return _linked(table, source, body, what)
        if kind == SPECIAL_EXT:
            return _external(body)
        if kind == SPECIAL_COMP:
            return _compressed(table, source, body, what)
        if kind == SPECIAL_CHUNKED:
            return _chunked(body)
    except (struct.error, IndexError, ValueError) as exc:
        raise ScanError(
            f"{source.url}: {what}: damaged special element header (type {kind}): {exc}"
        ) from exc
    name = SPECIAL_NAMES.get(kind, f"unknown special element type {kind}")
    raise UnsupportedFeatureError(f"{source.url}: {what}: stored as {name}, not supported")


def _plain(dd: Descriptor) -> Contiguous:
    if dd.offset < 0 or dd.length <= 0:
        return Contiguous((), 0)
    return Contiguous(((dd.offset, dd.length),), dd.length)


def _linked(table: DDTable, source: Source, body: bytes, what: str) -> Contiguous:
    length, block_length, count, link_ref = struct.unpack_from(">iiiH", body)
    if length < 0 or block_length <= 0 or count <= 0:
        raise ValueError(f"linked blocks of length {length}, block length {block_length}")
    refs: list[int] = []
    seen: set[int] = set()
    while link_ref:
        if link_ref in seen or len(seen) > MAX_LINK_TABLES:
            raise ScanError(f"{source.url}: {what}: the linked-block tables loop (ref {link_ref})")
        seen.add(link_ref)
        link = table.find(DFTAG_LINKED, link_ref, f"{what}: linked-block table")
        raw = source.read_range(
            link.offset, 2 + 2 * count, f"{what}: linked-block table {link_ref}"
        )
        values = struct.unpack(f">{count + 1}H", raw)
        link_ref = values[0]
        refs.extend(values[1:])
    ranges: list[tuple[int, int]] = []
    capacity: list[int] = []
    total = 0
    for k, ref in enumerate(refs):
        if total >= length:
            break
        block = table.get(DFTAG_LINKED, ref) if ref else None
        size = block.length if (k == 0 and block is not None) else block_length
        size = min(size, length - total)
        if block is not None and block.length < size:
            raise ScanError(
                f"{source.url}: {what}: linked block {k} (ref {ref}) holds {block.length} "
                f"bytes, but the element's header says it holds {size} (block length "
                f"{block_length}, {length} bytes in all): the file is damaged"
            )
        ranges.append((block.offset, size) if block is not None else (-1, size))
        capacity.append(block.length if block is not None else size)
        total += size
    while ranges and ranges[-1][0] < 0:  # no block after: the element ends before
        total -= ranges.pop()[1]
        capacity.pop()
    if total < length:
        raise ScanError(
            f"{source.url}: {what}: the element's header says it holds {length} bytes, its "
            f"linked blocks hold {total}: the file is damaged"
        )
    return Contiguous(tuple(ranges), length, tuple(capacity))


def _external(body: bytes) -> External:
    length, offset, name_length = struct.unpack_from(">iii", body)
    name = body[12 : 12 + name_length].split(b"\0")[0].decode("utf-8", "surrogateescape")
    return External(name, offset, length)


def _compressed(table: DDTable, source: Source, body: bytes, what: str) -> Storage:
    _version, length, comp_ref = struct.unpack_from(">HiH", body)
    coder, params = decode_coder(body[8:])
    inner = table.get(DFTAG_COMPRESSED, comp_ref)
    if inner is None or length <= 0:  # a template never written: reads as fill values
        return Compressed(coder, params, length, Contiguous((), 0))
    data = resolve(table, source, inner, f"{what} (compressed data)")
    if not isinstance(data, Contiguous):
        raise UnsupportedFeatureError(
            f"{source.url}: {what}: compressed data stored as {type(data).__name__.lower()}"
        )
    return Compressed(coder, params, length, data)


def decode_coder(raw: bytes) -> tuple[int, dict[str, Any]]:
    """HDF4's compression header after the model type: the coder and its parameters."""
    _model, coder = struct.unpack_from(">HH", raw)
    rest = raw[4:]
    if coder == 2:
        nt, sign_ext, fill_one, start_bit, bit_len = struct.unpack_from(">iHHii", rest)
        return coder, {
            "nt": nt,
            "sign_ext": bool(sign_ext),
            "fill_one": bool(fill_one),
            "start_bit": start_bit,
            "bit_len": bit_len,
        }
    if coder == 3:
        (skip_size,) = struct.unpack_from(">I", rest)
        return coder, {"skip_size": skip_size}
    if coder == 4:
        (level,) = struct.unpack_from(">H", rest)
        return coder, {"level": level}
    if coder == 5:
        pixels, per_line, mask = struct.unpack_from(">III", rest)
        return coder, {
            "pixels": pixels,
            "pixels_per_scanline": per_line,
            "options_mask": mask,
            "bits_per_pixel": rest[12],
            "pixels_per_block": rest[13],
        }
    return coder, {}


def _chunked(body: bytes) -> Chunked:
    (header_length,) = struct.unpack_from(">i", body)
    head = body[4 : 4 + header_length]
    _version, flag, length, _chunk_size, nt_size = struct.unpack_from(">Biiii", head)
    table_tag, table_ref, _sp_tag, _sp_ref, ndims = struct.unpack_from(">HHHHi", head, 17)
    if not 0 < ndims <= 32 or table_tag != DFTAG_VH:
        raise ValueError(f"{ndims} dimensions, chunk table tag {table_tag}")
    shape, chunks = [], []
    for k in range(ndims):
        _dim_flag, dim_length, chunk_length = struct.unpack_from(">iii", head, 29 + 12 * k)
        if chunk_length <= 0 or dim_length < 0:
            raise ValueError(f"dimension {k}: length {dim_length}, chunk length {chunk_length}")
        shape.append(dim_length)
        chunks.append(chunk_length)
    at = 29 + 12 * ndims
    (fill_length,) = struct.unpack_from(">i", head, at)
    fill = bytes(head[at + 4 : at + 4 + fill_length])
    coder, params = 0, dict[str, Any]()
    if flag & 0xFF == SPECIAL_COMP:
        rest = body[4 + header_length :]
        _sp, comp_length = struct.unpack_from(">Hi", rest)
        coder, params = decode_coder(rest[6 : 6 + comp_length])
    return Chunked(tuple(shape), tuple(chunks), nt_size, fill, coder, params, table_ref, length)


def read_logical(source: Source, storage: Contiguous, start: int, length: int) -> bytes:
    """``length`` bytes from logical position ``start`` of contiguous (or linked) data."""
    out = bytearray()
    position = 0
    for offset, size in storage.ranges:
        lo, hi = max(start, position), min(start + length, position + size)
        if lo < hi:
            if offset < 0:
                out += bytes(hi - lo)
            else:
                out += source.read_range(offset + lo - position, hi - lo, "linked block")
        position += size
    return bytes(out)
